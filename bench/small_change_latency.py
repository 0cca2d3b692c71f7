#!/usr/bin/env python3
"""Issue 16: what overwrites of keys the small-object store holds cost the
RAM hits around them, two builds side by side (BEFORE and AFTER binaries).

Until ad1d73f a change of a key the store held rewrote the key's 4 KiB set
durably on the request thread, holding the shard's lock (a read, a rebuild,
an O_DSYNC write); since, the change waits for an invalidation job on the
store's flusher thread (docs/SMALL.md, "Changes") and the shard's lock is
free meanwhile. This measures the requests of other clients on the same
shards while overwrites run.

Each run starts a fresh server
`tiercache -m MEM -t 2 -o ext_path=DIR/tc.flash:SIZE,ext_small_max=512,ext_small_share=90,ext_small_flush_duty=0`
(the binary under test), sets PREFILL keys (`w:N`, VLEN bytes; with a flush
duty of 0 the sets wait for the store, so most of them end there), stops it
gracefully (the store is kept) and starts it again with
`ext_small_flush_duty=DUTY` (3, the server's default: admissions that would
wait for a flush go to the log tier instead of holding the shard's lock),
sets HOT keys (`hot:N`) and reads them once (RAM holds them), then for SECS
seconds runs at once:
- a writer: `tiercache-bench` sets of the prefilled keys (uniform) at WRATE
  per second, open loop: overwrites of keys the store holds;
- a reader: `tiercache-bench` gets of the HOT keys at RRATE per second, open
  loop: RAM hits.
Reported per build (medians of RUNS runs, alternating which goes first): the
reader's p50/p99/p99.9, the writer's throughput and p50/p99, and per set the
store's set writes and invalidations.

Environment: BEFORE=path AFTER=path (tiercache binaries; AFTER defaults to
             target/release/tiercache) RUNS=3 MEM=64 SIZE=512M PREFILL=1000000
             HOT=2000 VLEN=100 WRATE=1000 RRATE=10000 SECS=10 DUTY=3 PORT=21640
             RESULTS=bench/RESULTS.md (RESULTS=- to only print)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402

TAG = "small_change_latency"
K = fl.knobs(RUNS=3, MEM=64, SIZE="512M", PREFILL=1_000_000, HOT=2000, VLEN=100,
             WRATE=1000, RRATE=10000, SECS=10, DUTY=3, PORT=21640)
DELTAS = ("cmd_set", "small_sets_written", "small_invalidations", "small_invalidate_jobs",
          "small_invalidate_keys", "small_flush_locked_us", "small_deferred", "get_hits")
OPTS = ["ext_small_max=512", "ext_small_share=90"]


def server_cmd(binary, duty):
    def make(d):
        cmd = fl.tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}"] + OPTS
                               + [f"ext_small_flush_duty={duty}"])
        return [binary] + cmd[1:]
    return make


def bench_cmd(args, out):
    return fl.latency_bench_cmd(K.PORT, K.SECS, K.VLEN, args, out)


def one(name, binary):
    with fl.scratch_server(TAG, name, server_cmd(binary, 0), K.PORT) as (first, _):
        t = fl.set_keys(K.PORT, range(K.PREFILL), K.VLEN, prefix="w:")
        fl.log(TAG, f"{name}: prefill of {K.PREFILL:,} keys took {t:.1f} s")
        # The fill waited for the store (duty 0); the measured server runs
        # with DUTY, after a graceful restart that keeps the store.
        first.stop()
        cmd = server_cmd(binary, K.DUTY)(first.cwd)
        srv = fl.Server(name + "-measured", cmd, K.PORT, first.cwd)
        try:
            return measure(name, srv, fl.show_cmd(cmd, first.cwd))
        finally:
            srv.stop()


def measure(name, srv, cmd):
    """The load on a started server; its figures."""
    fl.set_keys(K.PORT, range(K.HOT), K.VLEN, prefix="hot:")
    fl.read_once(K.PORT, K.HOT, prefix="hot:")
    a = srv.stats()
    fl.log(TAG, f"{name}: {a.get('small_objects', 0):,} objects in the store after the restart")
    d = fl.workdir(TAG)
    wj, rj = os.path.join(d, "w.json"), os.path.join(d, "r.json")
    writer = subprocess.Popen(bench_cmd(["--key-prefix", "w:", "--keys", K.PREFILL,
                                         "--dist", "uniform", "--get-ratio", 0,
                                         "--rate", K.WRATE], wj),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = subprocess.run(bench_cmd(["--key-prefix", "hot:", "--keys", K.HOT,
                                       "--get-ratio", 1, "--rate", K.RRATE], rj),
                            capture_output=True, text=True)
    writer.wait(timeout=K.SECS * 3 + 60)
    if reader.returncode or writer.returncode:
        raise RuntimeError(f"tiercache-bench failed: {reader.stderr[-1000:]}")
    b = srv.stats()
    out = {k: float(b.get(k, 0) or 0) - float(a.get(k, 0) or 0) for k in DELTAS}
    out["reader"] = fl.latency_of(rj, "get_hit")
    out["writer"] = fl.latency_of(wj, "set")
    out["cmd"] = cmd
    return out


def main():
    fl.build(TAG)
    builds = {"before": os.environ.get("BEFORE"), "after": os.environ.get("AFTER", fl.TIERCACHE)}
    if not builds["before"]:
        sys.exit("set BEFORE=path/to/an/older/tiercache (the build to compare with)")
    runs = {n: [] for n in builds}
    order = list(builds)
    for i in range(K.RUNS):
        for n in order if i % 2 == 0 else order[::-1]:
            r = one(n, builds[n])
            runs[n].append(r)
            fl.log(TAG, f"run {i + 1} {n}: reader p99 {r['reader']['p99']:.0f} us p99.9 "
                        f"{r['reader']['p999']:.0f} us; writer {r['writer']['ops']:,.0f}/s p99 "
                        f"{r['writer']['p99']:.0f} us; " + ", ".join(f"{k} {r[k]:,.0f}" for k in DELTAS))
    m = fl.median
    rows = []
    for n in builds:
        rs = runs[n]
        per = lambda k: m([r[k] / max(r["cmd_set"], 1) for r in rs])  # noqa: E731
        rows.append(
            f"| {n} | {m([r['reader']['p50'] for r in rs]):,.0f} | {m([r['reader']['p99'] for r in rs]):,.0f} "
            f"({fl.fmt_runs([r['reader']['p99'] for r in rs])}) | {m([r['reader']['p999'] for r in rs]):,.0f} | "
            f"{m([r['writer']['ops'] for r in rs]):,.0f} | {m([r['writer']['p50'] for r in rs]):,.0f} | "
            f"{m([r['writer']['p99'] for r in rs]):,.0f} | {per('small_sets_written'):.2f} | "
            f"{per('small_invalidations'):.2f} | {m([r['small_flush_locked_us'] for r in rs]) / 1000:,.0f} |")

    def ratio(who, q):
        return m([runs["before"][i][who][q] / max(1, runs["after"][i][who][q]) for i in range(K.RUNS)])
    body = f"""- command: `BEFORE=... RUNS={K.RUNS} SECS={K.SECS} WRATE={K.WRATE} RRATE={K.RRATE} PREFILL={K.PREFILL} DUTY={K.DUTY} python3 bench/run.py small_change_latency`
- date: {fl.now_utc()}; commit {fl.commit()}; machine: {fl.machine()}
- server: `{runs['after'][0]['cmd']}` with each build, after {K.PREFILL:,} keys were set
  ({K.VLEN}-byte values) into the same server with `ext_small_flush_duty=0` and a graceful
  restart (most keys in the store); {K.HOT:,} hot keys in RAM, then for {K.SECS} s at once:
  overwrites of the prefilled keys (uniform) at {K.WRATE:,}/s and gets of the hot keys at
  {K.RRATE:,}/s (open loop, 4 connections each)

| build | RAM-hit p50 µs | RAM-hit p99 µs (runs) | RAM-hit p99.9 µs | overwrites/s | overwrite p50 µs | overwrite p99 µs | set writes per overwrite | invalidations per overwrite | flush work under the lock, ms |
| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
{chr(10).join(rows)}

RAM-hit p99 before / after: **{ratio('reader', 'p99'):.2f}x**, p99.9 {ratio('reader', 'p999'):.2f}x;
overwrite p99 before / after {ratio('writer', 'p99'):.2f}x (paired medians of {K.RUNS}).
"""
    fl.write_results("Issue 16: overwrites of store-held keys and the RAM hits beside them (small_change_latency.py)",
                     body, TAG)


if __name__ == "__main__":
    main()
