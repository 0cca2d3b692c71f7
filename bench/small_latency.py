#!/usr/bin/env python3
"""Issue 16: what the small-object store's segment flushes cost the requests
around them, with the flush's set I/O on the request thread under the
shard's lock (`ext_small_background=0`) and on a background thread
(`ext_small_background=1`, the default), side by side.

The same with the store off (`ext_small_max=0`) is the baseline. Each run
starts a fresh server
`tiercache -m MEM -t 2 -o ext_path=DIR/tc.flash:SIZE,ext_small_max=512,ext_small_share=90,ext_small_background=B`,
fills the store with PREFILL small keys (`w:N`, VLEN bytes) so that its
log has wrapped (every flush then moves objects into sets), sets HOT keys
(`hot:N`) and reads them once (RAM holds them), and then, for SECS seconds, runs at
once:
- a writer: `tiercache-bench` sets of new `w:` keys at WRATE per second
  (open loop), which leave RAM for the store;
- a reader: `tiercache-bench` gets of the HOT keys at RRATE per second (open
  loop), RAM hits on the same shards (`get_extstore` in the window says how
  many were not).
Reported per mode (medians of RUNS runs, alternating modes): the reader's
and the writer's p50/p99/p99.9 latency, the store's admissions, set writes
and flushes in the window, and the items deferred to the log tier.

Environment: RUNS=3 MEM=64 SIZE=512M HOT=2000 VLEN=100 PREFILL=3000000
             WRATE=20000 RRATE=20000 SECS=10 PORT=21630
             RESULTS=bench/RESULTS.md (RESULTS=- to only print)
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402

TAG = "small_latency"
K = fl.knobs(RUNS=3, MEM=64, SIZE="512M", HOT=2000, VLEN=100, PREFILL=3_000_000,
             WRATE=20000, RRATE=20000, SECS=10, PORT=21630)
DELTAS = ("small_objects_admitted", "small_sets_written", "small_log_segments_written",
          "small_deferred", "small_flush_waits", "small_flush_us", "small_flush_locked_us", "get_hits", "get_extstore", "small_hits")


# The modes compared: the store off (the log-structured tier takes every
# item leaving RAM), flushes on the request thread, flushes in the background.
MODES = {"off": ["ext_small_max=0"],
         "inline": ["ext_small_max=512", "ext_small_share=90", "ext_small_background=0"],
         "background": ["ext_small_max=512", "ext_small_share=90", "ext_small_background=1"]}


# What the table of counts shows (small_flush_locked_max_us: the longest
# hold since the start, prefill included).
COUNTS = DELTAS[:8] + ("small_flush_locked_max_us", "get_extstore")


def server_cmd(mode):
    def make(d):
        return fl.tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}"] + MODES[mode])
    return make


def bench_cmd(args, out):
    return fl.latency_bench_cmd(K.PORT, K.SECS, K.VLEN, args, out)


def one(mode):
    with fl.scratch_server(TAG, mode, server_cmd(mode), K.PORT) as (srv, cmd):
        t = fl.set_keys(K.PORT, range(K.PREFILL), K.VLEN, prefix="w:")
        fl.log(TAG, f"{mode}: prefill of {K.PREFILL:,} keys took {t:.1f} s")
        # The hot keys last, read once: RAM holds them (and keeps them, hit).
        fl.set_keys(K.PORT, range(K.HOT), K.VLEN, prefix="hot:")
        fl.read_once(K.PORT, K.HOT, prefix="hot:")
        a, ca = srv.stats(), srv.thread_cpu()
        d = fl.workdir(TAG)
        wj, rj = os.path.join(d, "w.json"), os.path.join(d, "r.json")
        # New keys only: the writer's keys start past the prefill.
        writer = subprocess.Popen(bench_cmd(["--key-prefix", f"w:{K.PREFILL}", "--keys", 10**9,
                                             "--get-ratio", 0, "--rate", K.WRATE], wj),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        reader = subprocess.run(bench_cmd(["--key-prefix", "hot:", "--keys", K.HOT,
                                           "--get-ratio", 1, "--rate", K.RRATE], rj),
                                capture_output=True, text=True)
        writer.wait(timeout=K.SECS * 3 + 60)
        if reader.returncode or writer.returncode:
            raise RuntimeError(f"tiercache-bench failed: {reader.stderr[-1000:]}")
        b, cb = srv.stats(), srv.thread_cpu()
        out = {k: b.get(k, 0) - a.get(k, 0) for k in DELTAS}
        out["small_flush_locked_max_us"] = b.get("small_flush_locked_max_us", 0)
        cpu = {n: sum(cb[n]) - sum(ca.get(n, (0, 0))) for n in cb}
        fl.log(TAG, f"{mode}: CPU s by thread " + ", ".join(f"{n} {c:.2f}" for n, c in sorted(cpu.items()) if c > 0.01)
               + "; " + ", ".join(f"{k} {out[k]:,}" for k in DELTAS))
        out["reader"] = fl.latency_of(rj, "get_hit")
        out["writer"] = fl.latency_of(wj, "set")
        out["cmd"] = cmd
        return out


def main():
    fl.build(TAG)
    runs = {m: [] for m in MODES}
    order = list(MODES)
    for i in range(K.RUNS):
        for mode in order if i % 2 == 0 else order[::-1]:
            r = one(mode)
            runs[mode].append(r)
            fl.log(TAG, f"run {i + 1} {mode}: reader p99 {r['reader']['p99']:.0f} us "
                        f"p99.9 {r['reader']['p999']:.0f} us, writer p99 {r['writer']['p99']:.0f} us; "
                        f"admitted {r['small_objects_admitted']:,}, sets written {r['small_sets_written']:,}, "
                        f"deferred {r['small_deferred']:,}")
    m = fl.median
    rows = []
    for mode in MODES:
        rs = runs[mode]
        for who in ("reader", "writer"):
            rows.append(
                f"| {mode} | {who} ({'RAM-hit gets' if who == 'reader' else 'sets of new small keys'}) | "
                f"{m([r[who]['ops'] for r in rs]):,.0f} | {m([r[who]['p50'] for r in rs]):,.0f} | "
                f"{m([r[who]['p99'] for r in rs]):,.0f} | {m([r[who]['p999'] for r in rs]):,.0f} | "
                f"{m([r[who]['max'] for r in rs]):,.0f} | {fl.fmt_runs([r[who]['p99'] for r in rs])} |")
    counts = []
    for mode in MODES:
        rs = runs[mode]
        counts.append(f"| {mode} | " + " | ".join(f"{m([r[k] for r in rs]):,.0f}" for k in COUNTS) + " |")

    def ratio(a, b, who, q="p99"):
        return m([runs[a][i][who][q] / max(1, runs[b][i][who][q]) for i in range(K.RUNS)])
    body = f"""- command: `RUNS={K.RUNS} SECS={K.SECS} WRATE={K.WRATE} RRATE={K.RRATE} python3 bench/run.py small_latency`
- date: {fl.now_utc()}; commit {fl.commit()}; machine: {fl.machine()}
- server: `{runs['background'][0]['cmd']}` (and the same with `ext_small_background=0`, and with
  `ext_small_max=0`: the store off), a fresh one per run, {K.HOT:,} hot keys
  and {K.PREFILL:,} small keys set first ({K.VLEN}-byte values), then for {K.SECS} s at once: sets of new
  small keys at {K.WRATE:,}/s and gets of the hot keys at {K.RRATE:,}/s (open loop, 4 connections each);
  runs alternate the two modes.

Latency in microseconds, medians of {K.RUNS} runs:

| mode | requests | achieved /s | p50 | p99 | p99.9 | max | runs p99 |
| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |
{chr(10).join(rows)}

In the measured window (medians; `small_flush_locked_us`: flush work done holding a shard's
lock, all of it on the request thread, the plan and the commit in the background;
`small_flush_locked_max_us`: the longest single hold since the start; `get_extstore`: gets not
served from RAM):

| mode | {' | '.join(COUNTS)} |
| --- | {' | '.join('---:' for _ in COUNTS)} |
{chr(10).join(counts)}

Paired per run, medians of the ratios of p99: RAM hits, flushes on the request thread /
in the background **{ratio('inline', 'background', 'reader'):.2f}x** (p99.9
{ratio('inline', 'background', 'reader', 'p999'):.2f}x), in the background / the store off
**{ratio('background', 'off', 'reader'):.2f}x**; sets, inline / background
{ratio('inline', 'background', 'writer'):.2f}x, background / off {ratio('background', 'off', 'writer'):.2f}x.
"""
    fl.write_results("Issue 16: what the store's flushes cost the requests around them (small_latency.py)",
                     body, TAG)


if __name__ == "__main__":
    main()
