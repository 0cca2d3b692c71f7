"""Device classes on throttled loop devices (the nhc_* scenarios, issue 17): the
devices and their blkio group, the server on them, a `stats` sampler and its
CSVs, and one measured phase of gets with the flash reads per class."""
import contextlib
import csv
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

from . import servers, stats
from .load import bench
from .throttle import BLKIO, Blkio, losetup
from .util import log, scratch, show_cmd

delta = stats.delta


def skip(tag, why):
    print(f"{tag}: skipped: {why}")
    sys.exit(0)


def check_root(tag):
    """Skips (exit 0, with a message) where the devices cannot be made. Also
    makes SIGTERM and SIGINT (ignored in a background job) exit through the
    cleanup of `loop_devices`."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if os.geteuid() != 0:
        skip(tag, "needs root (losetup, cgroup v1 blkio)")
    if not shutil.which("losetup"):
        skip(tag, "no losetup")
    if not os.path.exists(os.path.join(BLKIO, "blkio.throttle.read_iops_device")):
        skip(tag, f"no cgroup v1 blkio controller at {BLKIO}")


@contextlib.contextmanager
def loop_devices(tag, fast_mb, cap_mb, fast_iops, cap_iops):
    """Two loop devices over files in a scratch directory (FLASH_DIR, default
    target/flash-bench) and a blkio group throttling their reads; yields
    ((fast, cap), cgroup, scratch directory). Removes all of it at the end,
    also after a failure (the directory is kept with KEEP=1)."""
    loops, cg = [], None
    with scratch(tag) as d, contextlib.ExitStack() as undo:
        undo.callback(lambda: [subprocess.run(["losetup", "-d", dev]) for dev in loops])
        undo.callback(lambda: cg is not None and cg.remove())
        files = []
        for name, mb in (("fast.img", fast_mb), ("cap.img", cap_mb)):
            p = os.path.join(d, name)
            with open(p, "wb") as f:
                f.truncate(mb << 20)
            files.append(p)
        for p in files:
            loops.append(losetup(p))
        log(tag, f"loop devices {loops}")
        cg = Blkio(f"nhc-bench-{os.getpid()}", [(loops[0], fast_iops), (loops[1], cap_iops)])
        yield tuple(loops), cg, d


def start_server(devs, cg, nhc, d, k, **how):
    """A fresh server (server_cmd) on the wiped devices in the blkio group;
    returns it and its command line for RESULTS.md."""
    cmd = server_cmd(devs, nhc, k, **how)
    return servers.Server(f"nhc{nhc}", cmd, k.PORT, d, cgroup=cg), show_cmd(cmd, d)


def server_cmd(devs, nhc, k, pool=True, ext_to="nhc"):
    """The server's command line on the devices (fast, capacity) with the knobs
    PORT, MEM, SERVER_THREADS and, where the scenario has them, IO_THREADS,
    SHARDS, DEFAULTS and EXT of `k`. `pool`: the pread pool and no promotion to
    RAM (unless DEFAULTS=1), else the server's reader and promotion; `ext_to`:
    EXT's -o options go to the nhc=1 server ("nhc") or to both ("both")."""
    fast, cap = devs
    # ext_max_write_wait=0: the preload (sets as fast as they go) lands whole, as it did before
    # the 10 ms bound of 7814f52; with the bound ~45% of the 150,000 keys were evicted unwritten
    # and the measured gets were ~45% misses (issue 35, 2026-12-07). The phases measured are gets.
    ext = [f"ext_path={fast}:fast", f"ext_path={cap}:capacity", "ext_wipe", f"ext_nhc={nhc}",
           "ext_max_write_wait=0"]
    if pool and not getattr(k, "DEFAULTS", 0):
        ext += ["ext_io=pool", f"ext_threads={k.IO_THREADS}", "ext_promote=never"]
    if getattr(k, "SHARDS", 0):
        ext.append(f"shards={k.SHARDS}")
    if nhc or ext_to == "both":
        ext += [x for x in getattr(k, "EXT", "").split(",") if x]
    return servers.tiercache_cmd(k.PORT, k.MEM, k.SERVER_THREADS, ext)


def preload(port, keys, vlen, tag, prefix=None):
    """KEYS items of VLEN bytes set once (2x4 connections x pipeline 16)."""
    bench(port, ["--threads", 2, "--conns", 4, "--keys", keys] + (["--key-prefix", prefix] if prefix else [])
          + ["--value-size", vlen, "--preload", "--get-ratio", "1", "--pipeline", 16, "-d", "0s", "--no-stats"], tag)


def flash_figures(a, b, secs):
    """Flash reads per second per class, the fast share, the scheduler's state
    and copies between the `stats` A and B."""
    fast = delta(a, b, "flash_fast_reads") / secs
    cap = delta(a, b, "flash_capacity_reads") / secs
    return {"fast": fast, "cap": cap, "hit": fast / max(fast + cap, 1e-9), "la": b.get("flash_nhc_load_admit"),
            "state": b.get("flash_nhc_state"), "dual_cap": delta(a, b, "flash_dual_capacity_reads"),
            "dual_fast": delta(a, b, "flash_dual_fast_reads"), "promotions": delta(a, b, "flash_class_promotions"),
            "copies": b.get("flash_class_copies_made", 0), "copies_dropped": b.get("flash_class_copies_dropped", 0),
            "copies_refused": b.get("flash_class_copies_refused", 0),
            "flash_hits": delta(a, b, "flash_hits") / secs, "get_hits": delta(a, b, "get_hits") / secs,
            "misses": delta(a, b, "get_misses") / secs,
            "buffer": delta(a, b, "flash_buffer_reads") / secs,
            "buffer_fast": delta(a, b, "flash_fast_buffer_reads") / secs,
            "buffer_cap": delta(a, b, "flash_capacity_buffer_reads") / secs,
            "buffer_open": delta(a, b, "flash_buffer_reads_open") / secs,
            "promoted": delta(a, b, "flash_class_promotions") / secs,
            "promotions_refused": delta(a, b, "flash_class_promotions_refused") / secs}


def measure(srv, load, secs, tag):
    """SECS seconds of the tiercache-bench arguments LOAD; its gets/s and
    latency, and the flash figures over the same seconds."""
    a = srv.stats()
    r = bench(srv.port, load + ["-d", f"{secs}s", "--no-stats"], tag)["runs"][0]
    b = srv.stats()
    lat = r.get("latency", {}).get("get") or r.get("latency", {}).get("all") or {}
    return dict(flash_figures(a, b, secs), ops=r["ops_per_sec"], p50=lat.get("p50_us"), p99=lat.get("p99_us"))


def settled(srv, load, rate, settle_s, secs, tag):
    """RATE gets/s in open loop for SETTLE_S + SECS seconds; the figures of the
    last SECS: replies per second and p50/p99 as medians of the per-second
    timeline, the flash figures from `stats` taken at those instants."""
    snaps = {}

    def at(name, when):
        time.sleep(max(0.0, when - time.monotonic()))
        snaps[name] = (time.monotonic(), srv.stats())

    t0 = time.monotonic()
    ts = [threading.Thread(target=at, args=("a", t0 + settle_s)),
          threading.Thread(target=at, args=("b", t0 + settle_s + secs))]
    for t in ts:
        t.start()
    try:
        r = bench(srv.port, load + ["--mode", "latency", "--rate", int(rate), "-d", f"{settle_s + secs}s",
                                    "--interval", "1s", "--drain-timeout", "1s", "--no-stats"], tag)["runs"][0]
    finally:
        for t in ts:
            t.join()
    pts = [p for p in r["timeline"] if settle_s < p["t_s"] <= settle_s + secs + 1e-6]
    (ta, a), (tb, b) = snaps["a"], snaps["b"]
    return dict(flash_figures(a, b, tb - ta), ops=sum(p["ops_per_sec"] for p in pts) / max(len(pts), 1),
                p50=stats.median([p["p50_us"] for p in pts]), p99=stats.median([p["p99_us"] for p in pts]),
                unanswered=r.get("unanswered", 0))


SAMPLED = ("flash_nhc_state", "flash_nhc_data_admit", "flash_nhc_load_admit", "flash_fast_reads",
           "flash_capacity_reads", "flash_nhc_tune_entries", "flash_nhc_tune_exits",
           "flash_nhc_load_admit_moves", "flash_dual_fast_reads", "flash_dual_capacity_reads",
           "flash_nhc_iterations", "flash_nhc_last_iteration", "flash_fast_read_latency_us_sum",
           "flash_capacity_read_latency_us_sum", "flash_fast_device_us_sum", "flash_capacity_device_us_sum",
           "flash_nhc_limit_fast", "flash_nhc_limit_capacity", "flash_nhc_fast_floor_us",
           "flash_nhc_capacity_floor_us", "flash_nhc_copies_pay", "flash_class_copies_made", "flash_hits",
           "flash_buffer_reads", "flash_fast_buffer_reads", "flash_capacity_buffer_reads", "flash_buffer_reads_open",
           "flash_class_promotions", "flash_class_promotions_refused", "flash_class_moves", "get_hits")


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

    def finish(self):
        if self.is_alive():
            self.halt.set()
            self.join()


@contextlib.contextmanager
def traced(srv, trace_dir, name, nhc):
    """With TRACE_DIR set: the server's `stats` every 200 ms while the block
    runs, written as DIR/NAME-HHMMSS-nhcN.csv (and -iterations.csv)."""
    sampler = Sampler(srv, 200) if trace_dir else None
    if sampler:
        sampler.start()
    try:
        yield
    finally:
        if sampler:
            sampler.finish()
            os.makedirs(trace_dir, exist_ok=True)
            base = os.path.join(trace_dir, f"{name}-{time.strftime('%H%M%S')}-nhc{nhc}")
            write_csv(base + ".csv", timeline(sampler.rows))
            its = iterations(sampler.rows)
            if its:
                write_csv(base + "-iterations.csv", its)


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
                    "capacity_dev_us": lat("capacity", "device_us_sum"),
                    # the balance's learned limits and floors, copies (servers that show them)
                    "limit_fast": b.get("flash_nhc_limit_fast", ""), "limit_cap": b.get("flash_nhc_limit_capacity", ""),
                    "floor_fast_us": b.get("flash_nhc_fast_floor_us", ""),
                    "floor_cap_us": b.get("flash_nhc_capacity_floor_us", ""),
                    "copies_pay": b.get("flash_nhc_copies_pay", ""), "copies": b.get("flash_class_copies_made", ""),
                    # per second: flash hits, those from write buffers (per class, open ones), promotions, moves
                    **{f"{k}_per_s": rate(a, b, f"flash_{k}", dt) for k in (
                        "hits", "buffer_reads", "fast_buffer_reads", "capacity_buffer_reads", "buffer_reads_open",
                        "class_promotions", "class_promotions_refused", "class_moves")},
                    "get_hits_per_s": rate(a, b, "get_hits", dt)})
    return out


def rate(a, b, k, dt):
    """B's counter K less A's, per second ("" where the server has none)."""
    return round((b[k] - a[k]) / dt) if isinstance(b.get(k), (int, float)) and isinstance(a.get(k), (int, float)) \
        else ""


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
