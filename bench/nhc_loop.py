#!/usr/bin/env python3
"""Device classes with non-hierarchical caching on throttled loop devices
(issue 17): `ext_nhc=1` against `ext_nhc=0` (classic caching) on the same two
devices, paired runs, medians.

Two files on the repository's file system become loop devices
(`losetup --direct-io=on`); the server runs in a cgroup v1 blkio group whose
`blkio.throttle.read_iops_device` caps each device's reads (FAST_IOPS,
CAP_IOPS). The server reads with the pread pool (`ext_io=pool`), so every read
is issued by a thread of the throttled group. Per run: a fresh server on the
wiped devices, KEYS items of VALUE bytes preloaded (the first keys, the
hottest under zipf, end up on the capacity class, the last ones on fast),
WARM_S seconds of zipf gets at the heavy load (classic caching promotes the
hot items into fast; NHC settles), then RUN_S measured seconds at the heavy
load (HEAVY_THREADS x HEAVY_CONNS connections x PIPELINE) and RUN_S at the
light one (one connection, one request in flight). nhc=0 and nhc=1 alternate,
RUNS times. Skips with a message where it cannot run (not root, no losetup,
no cgroup v1 blkio). Everything it creates (loop devices, the cgroup, the
scratch directory) is removed at the end, also after a failure.

    sudo python3 bench/run.py nhc_loop          # knobs: FAST_IOPS=5000 CAP_IOPS=2500 ...
"""
import contextlib
import csv
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402
from lib.stats import delta  # noqa: E402,F401 (nhc_* use nl.delta)
from lib.throttle import BLKIO, Blkio, losetup  # noqa: E402

TAG = "nhc_loop"
K = fl.knobs(FAST_IOPS=5000, CAP_IOPS=2500, FAST_MB=384, CAP_MB=1536, KEYS=150000,
             VALUE=4000, SKEW=0.99, RUNS=3, WARM_S=30, RUN_S=10, PORT=24170, MEM=48,
             HEAVY_THREADS=2, HEAVY_CONNS=16, PIPELINE=4, SERVER_THREADS=2, IO_THREADS=64)


def skip(why):
    print(f"{TAG}: skipped: {why}")
    sys.exit(0)


def measure(srv, load, secs):
    a = srv.stats()
    r = fl.bench(srv.port, load + ["--get-ratio", "1", "-d", f"{secs}s", "--no-stats"], TAG)["runs"][0]
    b = srv.stats()
    lat = r.get("latency", {}).get("get") or r.get("latency", {}).get("all") or {}
    return {
        "ops": r["ops_per_sec"],
        "p50": lat.get("p50_us"),
        "p99": lat.get("p99_us"),
        "hit": r.get("hit_ratio"),
        "fast": delta(a, b, "flash_fast_reads") / secs,
        "cap": delta(a, b, "flash_capacity_reads") / secs,
        "dual_cap": delta(a, b, "flash_dual_capacity_reads"),
        "dual_fast": delta(a, b, "flash_dual_fast_reads"),
        "la": b.get("flash_nhc_load_admit"),
        "state": b.get("flash_nhc_state"),
        "promotions": delta(a, b, "flash_class_promotions"),
    }


SAMPLED = ("flash_nhc_state", "flash_nhc_data_admit", "flash_nhc_load_admit", "flash_fast_reads",
           "flash_capacity_reads", "flash_nhc_tune_entries", "flash_nhc_tune_exits",
           "flash_nhc_load_admit_moves", "flash_dual_fast_reads", "flash_dual_capacity_reads",
           "flash_nhc_iterations", "flash_nhc_last_iteration", "flash_fast_read_latency_us_sum",
           "flash_capacity_read_latency_us_sum", "flash_fast_device_us_sum", "flash_capacity_device_us_sum")


class Sampler(threading.Thread):
    """Polls the server's `stats` every `ms` milliseconds from its creation
    (t0) until `halt` is set; `rows` are (seconds since t0, SAMPLED)."""

    def __init__(self, srv, ms):
        super().__init__()
        self.srv, self.ms, self.rows, self.halt = srv, ms, [], threading.Event()
        self.t0 = time.monotonic()

    def run(self):
        n = 0
        while not self.halt.is_set():
            s = self.srv.stats()
            self.rows.append((time.monotonic() - self.t0, {k: s.get(k) for k in SAMPLED}))
            n += 1
            time.sleep(max(0.0, self.t0 + n * self.ms / 1000 - time.monotonic()))


def timeline(samples):
    """Sampler rows as a timeline: per sample the scheduler's outputs and
    the flash reads per second since the previous sample."""
    out = []
    for (ta, a), (tb, b) in zip(samples, samples[1:]):
        dt = tb - ta
        fast = (b["flash_fast_reads"] - a["flash_fast_reads"]) / dt
        cap = (b["flash_capacity_reads"] - a["flash_capacity_reads"]) / dt

        def lat(c, k="read_latency_us_sum"):
            # mean read latency (or time at the device) of a class over the sample (servers with the sums)
            n = b[f"flash_{c}_reads"] - a[f"flash_{c}_reads"]
            k = f"flash_{c}_{k}"
            return round((b[k] - a[k]) / n) if b.get(k) is not None and a.get(k) is not None and n > 0 else ""
        out.append({"t": round(tb, 3), "state": b["flash_nhc_state"], "data_admit": b["flash_nhc_data_admit"],
                    "load_admit": b["flash_nhc_load_admit"], "fast_per_s": round(fast),
                    "capacity_per_s": round(cap), "reads_per_s": round(fast + cap),
                    "tune_entries": b["flash_nhc_tune_entries"], "tune_exits": b["flash_nhc_tune_exits"],
                    "moves": b["flash_nhc_load_admit_moves"], "fast_lat_us": lat("fast"),
                    "capacity_lat_us": lat("capacity"), "fast_dev_us": lat("fast", "device_us_sum"),
                    "capacity_dev_us": lat("capacity", "device_us_sum")})
    return out


def iterations(samples):
    """The scheduler's finished iterations seen by the Sampler (servers that
    have `flash_nhc_last_iteration`; at 200 ms samples and 1.2 s iterations
    none is missed, a gap in `n` says one was): per iteration its number,
    the sample's time, the move (from, to), and per probed point in the
    order measured (p1..p3, up to p6) the point, its intervals' reads per second
    (settling ones first, `;`-separated) and its score."""
    out, seen = [], None
    for t, s in samples:
        n, last = s.get("flash_nhc_iterations"), s.get("flash_nhc_last_iteration")
        if n is None or not isinstance(last, str) or last == "-" or n == seen:
            continue
        seen = n
        frm, body = last.split("|", 1)
        body, to = body.rsplit(">", 1)
        row = {"n": n, "t": round(t, 3), "from": float(frm), "to": float(to)}
        for i, pt in enumerate(body.split("/")[:6]):
            la, rest = pt.split("@")
            reads, score = rest.split("=")
            row[f"p{i + 1}"], row[f"p{i + 1}_reads"], row[f"p{i + 1}_score"] = float(la), reads.replace(",", ";"), \
                float(score)
        out.append(row)
    k = max((int(f[1:]) for r in out for f in r if f[0] == "p" and f[1:].isdigit()), default=3)
    fields = ["n", "t", "from", "to"] + [f"p{i}{x}" for i in range(1, k + 1) for x in ("", "_reads", "_score")]
    return [{k: r.get(k, "") for k in fields} for r in out]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def start_server(devs, cg, nhc, d, k):
    """A fresh server on the wiped devices in the blkio group, with the
    knobs PORT, MEM, SERVER_THREADS, IO_THREADS, SHARDS and EXT (if set) of `k`; returns it and
    its command line for RESULTS.md."""
    fast, cap = devs
    ext = [f"ext_path={fast}:fast", f"ext_path={cap}:capacity", "ext_wipe", f"ext_nhc={nhc}"]
    # DEFAULTS=1 keeps the server's reader (io_uring) and promotion to RAM
    # (issue 35); else the pread pool and no promotion to RAM, as before.
    if not getattr(k, "DEFAULTS", 0):
        ext += ["ext_io=pool", f"ext_threads={k.IO_THREADS}", "ext_promote=never"]
    if getattr(k, "SHARDS", 0):
        ext.append(f"shards={k.SHARDS}")
    # EXT="a=b,c=d": more -o options for the nhc=1 server (for example
    # ext_nhc_feedback=throughput, the scheduler's older feedback).
    if nhc and getattr(k, "EXT", ""):
        ext += [x for x in k.EXT.split(",") if x]
    cmd = fl.tiercache_cmd(k.PORT, k.MEM, k.SERVER_THREADS, ext)
    return fl.Server(f"nhc{nhc}", cmd, k.PORT, d, cgroup=cg), fl.show_cmd(cmd, d)


def one_run(devs, cg, nhc, d):
    srv, shown = start_server(devs, cg, nhc, d, K)
    try:
        keys = ["--keys", K.KEYS, "--value-size", K.VALUE, "--dist", f"zipf:{K.SKEW}"]
        fl.bench(K.PORT, ["--threads", 2, "--conns", 4, "--keys", K.KEYS, "--value-size", K.VALUE,
                          "--preload", "--get-ratio", "1", "--pipeline", 16, "-d", "0s", "--no-stats"], TAG)
        heavy = keys + ["--threads", K.HEAVY_THREADS, "--conns", K.HEAVY_CONNS, "--pipeline", K.PIPELINE]
        light = keys + ["--threads", 1, "--conns", 1, "--pipeline", 1]
        fl.bench(K.PORT, heavy + ["--get-ratio", "1", "-d", f"{K.WARM_S}s", "--no-stats"], TAG)
        h = measure(srv, heavy, K.RUN_S)
        lt = measure(srv, light, K.RUN_S)
        # Load 0.5: half the fast device's IOPS offered at a fixed rate.
        half = keys + ["--threads", 2, "--conns", 8, "--mode", "latency", "--rate", int(K.FAST_IOPS / 2)]
        hf = measure(srv, half, K.RUN_S)
        return h, lt, hf, shown
    finally:
        srv.stop()


def check_root():
    """Skips (exit 0, with a message) where the devices cannot be made. Also
    makes SIGTERM and SIGINT (ignored in a background job) exit through the
    cleanup of `loop_devices`."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        skip("needs root (losetup, cgroup v1 blkio)")
    if not shutil.which("losetup"):
        skip("no losetup")
    if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.read_iops_device")):
        skip(f"no cgroup v1 blkio controller at {BLKIO}")


@contextlib.contextmanager
def loop_devices(tag, fast_mb, cap_mb, fast_iops, cap_iops):
    """Two loop devices over files in a scratch directory (FLASH_DIR, default
    target/flash-bench) and a blkio group throttling their reads; yields
    ((fast, cap), cgroup, scratch directory). Removes all of it at the end,
    also after a failure (the directory is kept with KEEP=1)."""
    d = fl.workdir(tag)
    loops, cg = [], None
    try:
        files = []
        for name, mb in (("fast.img", fast_mb), ("cap.img", cap_mb)):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.truncate(mb << 20)
            files.append(p)
        for p in files:
            loops.append(losetup(p))
        fl.log(tag, f"loop devices {loops}")
        cg = Blkio(f"nhc-bench-{os.getpid()}", [(loops[0], fast_iops), (loops[1], cap_iops)])
        yield tuple(loops), cg, d
    finally:
        for dev in loops:
            subprocess.run(["losetup", "-d", dev])
        if cg is not None:
            cg.remove()
        if os.environ.get("KEEP") is None:
            shutil.rmtree(d, ignore_errors=True)


def main():
    check_root()
    fl.build(TAG)
    with loop_devices(TAG, K.FAST_MB, K.CAP_MB, K.FAST_IOPS, K.CAP_IOPS) as (loops, cg, d):
        results = {0: [], 1: []}
        cmds = {}
        for run in range(K.RUNS):
            for nhc in (0, 1):
                h, lt, hf, cmds[nhc] = one_run(loops, cg, nhc, d)
                results[nhc].append((h, lt, hf))
                fl.log(TAG, f"run {run + 1} nhc={nhc}: heavy {h['ops']:,.0f} ops/s (fast {h['fast']:,.0f}/s, "
                       f"capacity {h['cap']:,.0f}/s, load_admit {h['la']}, state {h['state']}, "
                       f"dual reads fast/cap {h['dual_fast']}/{h['dual_cap']}); light {lt['ops']:,.0f} ops/s; "
                       f"half-load {hf['ops']:,.0f} ops/s p50 {hf['p50']} p99 {hf['p99']} us (load_admit {hf['la']})")
        report(results, cmds)


def report(results, cmds):
    def med(nhc, which, key):
        return fl.median([r[which][key] for r in results[nhc]])
    ratios = {}
    for which, name in ((0, "heavy"), (1, "light"), (2, "half")):
        pairs = [b[which]["ops"] / a[which]["ops"] for a, b in zip(results[0], results[1])]
        ratios[name] = (fl.median(pairs), pairs)
    ceiling = (K.FAST_IOPS + K.CAP_IOPS) / K.FAST_IOPS
    print(f"\n### Device classes, NHC against classic caching ({fl.now_utc()}, {fl.commit()})\n")
    print(f"- machine: {fl.machine()}")
    print(f"- devices: loop files over {fl.fs_of(fl.workdir(TAG))}, `losetup --direct-io=on`, "
          f"cgroup v1 `blkio.throttle.read_iops_device` fast {K.FAST_IOPS}, capacity {K.CAP_IOPS} reads/s")
    print(f"- server (nhc=1): `{cmds.get(1)}`")
    print(f"- load: {K.KEYS:,} keys x {K.VALUE} B, zipf {K.SKEW}, preload, {K.WARM_S} s warm-up, "
          f"heavy {K.HEAVY_THREADS}x{K.HEAVY_CONNS} conns x pipeline {K.PIPELINE}, light 1 conn x 1, "
          f"half load {K.FAST_IOPS // 2} gets/s open loop (2x8 conns), "
          f"{K.RUN_S} s each; {K.RUNS} pairs, nhc=0 and 1 alternating")
    print(f"- command: `sudo {K.shown + ' ' if K.shown else ''}python3 bench/run.py nhc_loop`\n")
    print("| load | classic ops/s | nhc ops/s | nhc/classic (paired median) | pairs | "
          "nhc fast / capacity reads/s | nhc load_admit |")
    print("| --- | ---: | ---: | ---: | --- | --- | --- |")
    for which, name in ((0, "heavy"), (1, "light"), (2, "half")):
        r, pairs = ratios[name]
        print(f"| {name} | {med(0, which, 'ops'):,.0f} | {med(1, which, 'ops'):,.0f} | {r:.2f} | "
              f"{' / '.join(f'{p:.2f}' for p in pairs)} | {med(1, which, 'fast'):,.0f} / "
              f"{med(1, which, 'cap'):,.0f} | {med(1, which, 'la')} |")
    p99 = [fl.median([r[2]["p99"] for r in results[n]]) for n in (0, 1)]
    p50 = [fl.median([r[2]["p50"] for r in results[n]]) for n in (0, 1)]
    print(f"\nHalf load (open loop): get latency p50 {p50[0]} / {p50[1]} us, p99 {p99[0]} / {p99[1]} us "
          "(classic / nhc, medians).")
    print(f"\nCeiling at the heavy load: {ceiling:.2f}x (both devices busy against the fast one alone).")


if __name__ == "__main__":
    main()
