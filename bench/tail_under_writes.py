#!/usr/bin/env python3
"""Issue 31, the operator's question: what happens to RAM hits while new keys
stream in? memcached, memcached with extstore, tiercache RAM-only and
tiercache at its defaults (a flash file), side by side on the same machine.

Each run starts a fresh server (`-m MEM -t 2`), preloads PREFILL keys of
VLEN bytes (more than RAM holds), sets HOT keys and reads each once, then
for SECS seconds runs at once, open loop (tiercache-bench --mode latency):
- a writer: sets of new keys at WRATE per second;
- a reader: gets of the HOT keys at RRATE per second (each hot key is read
  RRATE/HOT times a second: it must stay in RAM).
Reported, medians of RUNS runs (servers alternating within each run): the
reader's and the writer's p50/p99/p99.9, the share of hot-key gets that hit,
the items the server held at the end (`curr_items`: what the memory holds
while new keys stream in),
and for tiercache the longest segment evacuation (`segment_evacuate_max_us`)
and the longest maintenance hold of a shard's lock on the CPU
(`shard_lock_hold_cpu_max_us`: the engine's own share, without the time a
descheduled holder waited), and the longest hold of any shard's lock
(`shard_lock_hold_max_us`, the
bound on what a request waits behind), both over the timed phase only
(`stats reset` after the preload).

Environment: RUNS=3 MEM=64 HOT=2000 SECS=8 RRATE=20000 PORT=21740
             SIZES=100,4096 WRATES=5000,20000,50000
             SERVERS=memcached,memcached-extstore,tiercache-ram,tiercache
             PREFILL_BYTES=200000000 (cold data preloaded, in bytes of values)
             RESULTS=bench/RESULTS.md (RESULTS=- to only print)
             BASE=path/to/an/older/tiercache: adds the servers
             tiercache-ram-base and tiercache-base (the same two settings run
             by that binary), for a paired before/after in the same run
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402

TAG = "tail_under_writes"
K = fl.knobs(RUNS=3, MEM=64, HOT=2000, SECS=8, RRATE=20000, PORT=21740, SIZES="100,4096",
             WRATES="5000,20000,50000",
             SERVERS="memcached,memcached-extstore,tiercache-ram,tiercache",
             PREFILL_BYTES=200_000_000, BASE="")


def plain(cmd):
    """A command without an empty `-o` (the server's defaults)."""
    return cmd[:-2] if cmd[-2:] == ["-o", ""] else cmd


def command(server):
    """The server command for a scratch directory `d`, by name."""
    def make(d):
        if server == "memcached":
            return plain(fl.memcached_cmd(K.PORT, K.MEM, 2, []))
        if server == "memcached-extstore":
            return fl.memcached_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/mc.flash:2G"])
        base = server.endswith("-base")
        if server.removesuffix("-base") == "tiercache-ram":
            cmd = fl.tiercache_cmd(K.PORT, K.MEM, 2, ["ext_path=none"])
        else:
            # The defaults: the flash file tiercache makes in its working directory.
            cmd = plain(fl.tiercache_cmd(K.PORT, K.MEM, 2, []))
        return [K.BASE] + cmd[1:] if base else cmd
    return make


def load(args, out):
    """tiercache-bench open loop for SECS seconds, JSON to `out`."""
    return [fl.BENCH, "-s", f"127.0.0.1:{K.PORT}", "-q", "--no-stats", "--json", out,
            "--mode", "latency", "-d", f"{K.SECS}s", "--threads", "1", "--conns", "4"] + \
        [str(a) for a in args]


def one(server, vlen, wrate):
    with fl.scratch_server(TAG, server, command(server), K.PORT) as (srv, cmd):
        prefill = max(K.PREFILL_BYTES // vlen, 1)
        fl.bench(K.PORT, ["--key-prefix", "cold:", "--keys", prefill, "--value-size", vlen,
                          "--preload", "--get-ratio", 1, "-d", "0s", "-t", 2, "-c", 4, "-p", 32],
                 TAG, timeout=600)
        fl.bench(K.PORT, ["--key-prefix", "hot:", "--keys", K.HOT, "--value-size", vlen,
                          "--preload", "--get-ratio", 1, "-d", "0s", "-t", 1, "-c", 1], TAG)
        fl.read_once(K.PORT, K.HOT, prefix="hot:")
        srv.reset_stats()
        d = fl.workdir(TAG)
        wj, rj = os.path.join(d, "w.json"), os.path.join(d, "r.json")
        writer = subprocess.Popen(load(["--key-prefix", "new:", "--keys", 10**9, "--value-size",
                                        vlen, "--get-ratio", 0, "--rate", wrate], wj),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        reader = subprocess.run(load(["--key-prefix", "hot:", "--keys", K.HOT, "--value-size",
                                      vlen, "--get-ratio", 1, "--rate", K.RRATE], rj),
                                capture_output=True, text=True)
        writer.wait(timeout=K.SECS * 3 + 60)
        if reader.returncode or writer.returncode:
            raise RuntimeError(f"tiercache-bench failed: {reader.stderr[-1000:]}")
        st = srv.stats()
        with open(rj) as f:
            hit_ratio = json.load(f)["runs"][0]["hit_ratio"]
        out = {"reader": fl.latency_of(rj, "get_hit"), "writer": fl.latency_of(wj, "set"),
               "hot_hits": hit_ratio,
               "evac_max_us": st.get("segment_evacuate_max_us"),
               "lock_max_us": st.get("shard_lock_hold_max_us"),
               "cpu_max_us": st.get("shard_lock_hold_cpu_max_us"),
               "items": st.get("curr_items"), "cmd": cmd}
        fl.log(TAG, f"{server} {vlen} B, {wrate:,} sets/s: hits p99 {out['reader']['p99']:,.0f} us "
                    f"p99.9 {out['reader']['p999']:,.0f} us, sets p99 {out['writer']['p99']:,.0f} us, "
                    f"hot hits {out['hot_hits']:.4f}, evacuation max {out['evac_max_us']} us, "
                    f"lock hold max {out['lock_max_us']} us, items held {out['items']}")
        return out


def table(runs, servers, vlen, wrate):
    m = fl.median
    rows = []
    for s in servers:
        rs = runs[(s, vlen, wrate)]
        ev = m([r["evac_max_us"] for r in rs])
        lk = m([r["lock_max_us"] for r in rs])
        cpu = m([r.get("cpu_max_us") for r in rs])
        items = m([r.get("items") for r in rs])
        rows.append(
            f"| {s} | " + " | ".join(f"{m([r['reader'][q] for r in rs]):,.0f}" for q in ("p50", "p99", "p999"))
            + " | " + " | ".join(f"{m([r['writer'][q] for r in rs]):,.0f}" for q in ("p50", "p99", "p999"))
            + f" | {100 * m([r['hot_hits'] for r in rs]):.2f}% | {'' if ev is None else f'{ev:,.0f}'}"
            + f" | {'' if cpu is None else f'{cpu:,.0f}'} | {'' if lk is None else f'{lk:,.0f}'}"
            + f" | {'' if items is None else f'{items:,.0f}'}"
            + f" | {fl.fmt_runs([r['reader']['p99'] for r in rs])} |")
    return rows


def ratio(runs, a, b, vlen, wrate, q):
    """Median over runs of a's reader quantile / b's, paired by run."""
    ra, rb = runs.get((a, vlen, wrate)), runs.get((b, vlen, wrate))
    if not ra or not rb:
        return None
    return fl.median([x["reader"][q] / max(1, y["reader"][q]) for x, y in zip(ra, rb)])


def main():
    fl.build(TAG)
    servers = K.SERVERS.split(",")
    if K.BASE:
        servers += [s + "-base" for s in servers if s.startswith("tiercache")]
    sizes = [int(s) for s in K.SIZES.split(",")]
    wrates = [int(w) for w in K.WRATES.split(",")]
    runs = {}
    for i in range(K.RUNS):
        for vlen in sizes:
            for wrate in wrates:
                for s in servers if i % 2 == 0 else servers[::-1]:
                    runs.setdefault((s, vlen, wrate), []).append(one(s, vlen, wrate))
    parts = []
    for vlen in sizes:
        for wrate in wrates:
            pairs = [("tiercache-ram", "memcached"), ("tiercache", "memcached-extstore"),
                     ("tiercache-ram-base", "memcached"), ("tiercache-base", "memcached-extstore"),
                     ("tiercache-ram", "tiercache-ram-base"), ("tiercache", "tiercache-base")]
            said = []
            for a, b in pairs:
                p99, p999 = (ratio(runs, a, b, vlen, wrate, q) for q in ("p99", "p999"))
                if p99 is not None:
                    said.append(f"{a} / {b}: p99 **{p99:.2f}x**, p99.9 {p999:.2f}x")
            parts.append(f"""#### {vlen}-byte values, {wrate:,} new keys/s beside {K.RRATE:,} hot gets/s

| server | hits p50 | p99 | p99.9 | sets p50 | p99 | p99.9 | hot-key hits | longest evacuation (us) | longest maintenance hold on CPU (us) | longest lock hold (us) | items held after | runs' hit p99 |
| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |
{chr(10).join(table(runs, servers, vlen, wrate))}

Paired per run, medians of the ratios of the hits' latency: {'; '.join(said) or 'n/a'}.
""")
    cmds = "\n".join(f"  - {s}: `{runs[(s, sizes[0], wrates[0])][0]['cmd']}`" for s in servers)
    shown = f"{K.shown} " if K.shown else ""
    body = f"""- command: `{shown}python3 bench/run.py tail_under_writes`
- date: {fl.now_utc()}; commit {fl.commit()}; machine: {fl.machine()}
- servers, a fresh one per run, in a scratch directory:
{cmds}
- per run: {K.PREFILL_BYTES / 1e6:,.0f} MB of cold values preloaded, {K.HOT:,} hot keys set and
  read once, then {K.SECS} s of sets of new keys beside gets of the hot keys at {K.RRATE:,}/s, both
  open loop (`tiercache-bench --mode latency`, 4 connections each); latency in microseconds,
  medians of {K.RUNS} runs, servers alternating.

{chr(10).join(parts)}"""
    fl.write_results("RAM-hit tails under writes: the operator's benchmark (tail_under_writes.py)",
                     body, TAG)


if __name__ == "__main__":
    main()
