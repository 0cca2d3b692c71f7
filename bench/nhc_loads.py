#!/usr/bin/env python3
"""Device classes with non-hierarchical caching at calibrated loads and a
chosen flash hit ratio (issue 17): `ext_nhc=1` against `ext_nhc=0` (classic
caching) on the same two throttled loop devices, paired runs, medians.

Devices as bench/nhc_loop.py (loop files, `losetup --direct-io=on`, a cgroup
v1 blkio group capping each device's reads at FAST_IOPS and CAP_IOPS).

- Hit ratio (HIT, 0.95 or 0.80): the share of flash reads whose item is on
  the fast class under classic caching, set by the size of the fast device
  (FAST_MB; by default 256 MiB for 0.95 and 160 MiB for 0.80 with the
  default 150,000 keys of 4000 B, zipf 0.99; bench/nhc_hit.py measures it
  per size). Each classic run reports the
  measured share (fast reads / all flash reads, `hit` in the table).
- Load 1.0 is measured: the first classic run's closed-loop throughput under
  the heavy load (2x16 connections x pipeline 4) after WARM_S seconds of
  warm-up, where the fast device is saturated (LOAD1=ops/s skips that and
  uses the figure given). Each run then offers LOADS (default 2.0, 1.5, 1.0,
  0.5) times it as gets per second in open loop (tiercache-bench
  `--mode latency --rate R`, 2x16 connections), from the highest load down,
  each for SETTLE_S seconds (the scheduler settles) and RUN_S measured
  seconds. Throughput is the replies the client received per second in the
  measured seconds (the bench's per-second timeline); the server's flash
  reads per class come from `stats` deltas over the same seconds.

TRACE_DIR=DIR writes each run's `stats` every 200 ms (bench/nhc_loop.py's
Sampler: state, load_admit, flash reads per class, tune entries and exits)
as DIR/nhc-loads-HHMMSS-nhcN.csv.

Per run: a fresh server on the wiped devices, KEYS items preloaded, the
warm-up, the heavy closed loop (RUN_S), then the loads. nhc=0 and nhc=1
alternate, RUNS times (classic first, so that its first run calibrates).
Skips with a message where it cannot run (not root, no losetup, no cgroup v1
blkio); everything it creates is removed at the end, also after a failure.

    sudo python3 bench/run.py nhc_loads                # 95% hits, fast 5000 / capacity 2500 IOPS
    sudo HIT=0.80 python3 bench/run.py nhc_loads       # 80% hits
    sudo FAST_IOPS=10000 CAP_IOPS=5000 python3 bench/run.py nhc_loads
    sudo DEFAULTS=1 FAST_IOPS=10000 CAP_IOPS=5000 python3 bench/run.py nhc_loads   # io_uring, promotion on
"""
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402
import nhc_loop as nl  # noqa: E402

TAG = "nhc_loads"
K = fl.knobs(FAST_IOPS=5000, CAP_IOPS=2500, HIT=0.95, FAST_MB=0, CAP_MB=1536, KEYS=150000,
             VALUE=4000, SKEW=0.99, RUNS=3, WARM_S=40, SETTLE_S=5, RUN_S=10, LOADS="2.0,1.5,1.0,0.5",
             LOAD1=0.0, PORT=24180, MEM=48, HEAVY_THREADS=2, HEAVY_CONNS=16, PIPELINE=4,
             OPEN_THREADS=2, OPEN_CONNS=16, SERVER_THREADS=2, IO_THREADS=64, TRACE_DIR="", EXT="",
             DEFAULTS=0, DIST="")
# measured with bench/nhc_hit.py on 2026-11-25 (0.955 and 0.794; before c157b4e a full copy
# table filtered promotions and 160 MiB gave 0.95, 80 MiB 0.70)
FAST_MB_FOR_HIT = {0.95: 256, 0.80: 160}


def fast_mb():
    if K.FAST_MB:
        return K.FAST_MB
    if K.HIT not in FAST_MB_FOR_HIT:
        nl.skip(f"no default FAST_MB for HIT={K.HIT}: set FAST_MB")
    return FAST_MB_FOR_HIT[K.HIT]


def keys_args():
    # DIST (uniform or zipf:S) overrides SKEW.
    return ["--keys", K.KEYS, "--value-size", K.VALUE, "--dist", K.DIST or f"zipf:{K.SKEW}", "--get-ratio", "1",
            "--no-stats"]


def heavy_args():
    return keys_args() + ["--threads", K.HEAVY_THREADS, "--conns", K.HEAVY_CONNS, "--pipeline", K.PIPELINE]


def flash_figures(a, b, secs):
    fast = nl.delta(a, b, "flash_fast_reads") / secs
    cap = nl.delta(a, b, "flash_capacity_reads") / secs
    return {"fast": fast, "cap": cap, "hit": fast / max(fast + cap, 1e-9), "la": b.get("flash_nhc_load_admit"),
            "state": b.get("flash_nhc_state"), "dual_cap": nl.delta(a, b, "flash_dual_capacity_reads")}


def closed(srv, secs):
    a = srv.stats()
    r = fl.bench(srv.port, heavy_args() + ["-d", f"{secs}s"], TAG)["runs"][0]
    b = srv.stats()
    return dict(flash_figures(a, b, secs), ops=r["ops_per_sec"])


def open_loop(srv, rate):
    """RATE gets/s for SETTLE_S + RUN_S seconds; figures of the last RUN_S."""
    snaps = {}

    def at(name, when):
        time.sleep(max(0.0, when - time.monotonic()))
        snaps[name] = (time.monotonic(), srv.stats())

    t0 = time.monotonic()
    ts = [threading.Thread(target=at, args=("a", t0 + K.SETTLE_S)),
          threading.Thread(target=at, args=("b", t0 + K.SETTLE_S + K.RUN_S))]
    for t in ts:
        t.start()
    try:
        r = fl.bench(srv.port, keys_args() + ["--threads", K.OPEN_THREADS, "--conns", K.OPEN_CONNS,
                                              "--mode", "latency", "--rate", int(rate),
                                              "-d", f"{K.SETTLE_S + K.RUN_S}s", "--interval", "1s",
                                              "--drain-timeout", "1s"], TAG)["runs"][0]
    finally:
        for t in ts:
            t.join()
    pts = [p for p in r["timeline"] if K.SETTLE_S < p["t_s"] <= K.SETTLE_S + K.RUN_S + 1e-6]
    ops = sum(p["ops_per_sec"] for p in pts) / max(len(pts), 1)
    (ta, a), (tb, b) = snaps["a"], snaps["b"]
    return dict(flash_figures(a, b, tb - ta), ops=ops, offered=rate,
                p50=fl.median([p["p50_us"] for p in pts]), p99=fl.median([p["p99_us"] for p in pts]),
                unanswered=r.get("unanswered", 0))


def one_run(devs, cg, nhc, d, load1):
    srv, shown = nl.start_server(devs, cg, nhc, d, K)
    sampler = nl.Sampler(srv, 200) if K.TRACE_DIR else None
    try:
        if sampler:
            sampler.start()
        fl.bench(K.PORT, ["--threads", 2, "--conns", 4, "--keys", K.KEYS, "--value-size", K.VALUE,
                          "--preload", "--get-ratio", "1", "--pipeline", 16, "-d", "0s", "--no-stats"], TAG)
        fl.bench(K.PORT, heavy_args() + ["-d", f"{K.WARM_S}s"], TAG)
        heavy = closed(srv, K.RUN_S)
        if load1 is None:
            load1 = heavy["ops"]
            fl.log(TAG, f"Load 1.0 = {load1:,.0f} gets/s (classic, closed loop; fast {heavy['fast']:,.0f} "
                        f"reads/s, hit {heavy['hit']:.3f})")
        loads = {}
        for load in [float(x) for x in K.LOADS.split(",")]:
            loads[load] = open_loop(srv, load * load1)
            time.sleep(1)
        return heavy, loads, load1, shown
    finally:
        if sampler:
            sampler.halt.set()
            sampler.join()
            os.makedirs(K.TRACE_DIR, exist_ok=True)
            stamp = time.strftime('%H%M%S')
            nl.write_csv(os.path.join(K.TRACE_DIR, f"nhc-loads-{stamp}-nhc{nhc}.csv"), nl.timeline(sampler.rows))
            its = nl.iterations(sampler.rows)
            if its:
                nl.write_csv(os.path.join(K.TRACE_DIR, f"nhc-loads-{stamp}-nhc{nhc}-iterations.csv"), its)
        srv.stop()


def main():
    nl.check_root()
    fl.build(TAG)
    fmb = fast_mb()
    load1 = K.LOAD1 or None
    with nl.loop_devices(TAG, fmb, K.CAP_MB, K.FAST_IOPS, K.CAP_IOPS) as (loops, cg, d):
        results = {0: [], 1: []}
        cmds = {}
        loads_at = []
        for run in range(K.RUNS):
            for nhc in (0, 1):
                la1 = os.getloadavg()[0]
                heavy, loads, load1, cmds[nhc] = one_run(loops, cg, nhc, d, load1)
                loads_at.append((la1, os.getloadavg()[0]))
                results[nhc].append((heavy, loads))
                fl.log(TAG, f"run {run + 1} nhc={nhc}: heavy {heavy['ops']:,.0f} ops/s (fast {heavy['fast']:,.0f}, "
                            f"cap {heavy['cap']:,.0f}, hit {heavy['hit']:.3f}, la {heavy['la']}); " +
                       "; ".join(f"L{k}: {v['ops']:,.0f}/{v['offered']:,.0f} (fast {v['fast']:,.0f}, cap "
                                 f"{v['cap']:,.0f}, la {v['la']}, state {v['state']})" for k, v in loads.items()))
        report(results, cmds, fmb, load1, loads_at)


def report(results, cmds, fmb, load1, loads_at):
    def med(xs):
        return fl.median(xs)
    ceiling = (K.FAST_IOPS + K.CAP_IOPS) / K.FAST_IOPS
    hit = med([h["hit"] for h, _ in results[0]])
    print(f"\n### NHC at calibrated loads, {K.HIT:.0%} hits ({fl.now_utc()}, {fl.commit()})\n")
    print(f"- machine: {fl.machine()}; load average {min(a for a, _ in loads_at):.1f}-"
          f"{max(max(a, b) for a, b in loads_at):.1f} during the runs")
    print(f"- devices: loop files, fast {fmb} MiB at {K.FAST_IOPS}, capacity {K.CAP_MB} MiB at "
          f"{K.CAP_IOPS} reads/s (cgroup v1 blkio); classic fast hit ratio {hit:.3f} (median)")
    print(f"- server (nhc=1): `{cmds.get(1)}`")
    print(f"- Load 1.0 = {load1:,.0f} gets/s (classic, closed loop {K.HEAVY_THREADS}x{K.HEAVY_CONNS} x pipeline "
          f"{K.PIPELINE}); loads open loop {K.OPEN_THREADS}x{K.OPEN_CONNS} conns, {K.SETTLE_S} s settling + "
          f"{K.RUN_S} s measured each, highest first, after {K.WARM_S} s warm-up; {K.RUNS} pairs")
    print(f"- command: `sudo {K.shown + ' ' if K.shown else ''}python3 bench/run.py nhc_loads`\n")
    print("| load | offered gets/s | classic gets/s | nhc gets/s | nhc/classic (paired median) | pairs | "
          "classic fast / capacity reads/s (hit) | nhc fast / capacity reads/s | nhc load_admit, state |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- |")
    rows = [("closed loop", lambda r: r[0])] + [
        (f"{k}", (lambda k: lambda r: r[1][k])(k)) for k in results[0][0][1]]
    for name, get in rows:
        c = [get(r) for r in results[0]]
        n = [get(r) for r in results[1]]
        pairs = [b["ops"] / a["ops"] for a, b in zip(c, n)]
        off = f"{c[0]['offered']:,.0f}" if "offered" in c[0] else "-"
        print(f"| {name} | {off} | {med([x['ops'] for x in c]):,.0f} | {med([x['ops'] for x in n]):,.0f} | "
              f"{med(pairs):.2f} | {' / '.join(f'{p:.2f}' for p in pairs)} | "
              f"{med([x['fast'] for x in c]):,.0f} / {med([x['cap'] for x in c]):,.0f} "
              f"({med([x['hit'] for x in c]):.2f}) | "
              f"{med([x['fast'] for x in n]):,.0f} / {med([x['cap'] for x in n]):,.0f} | "
              f"{', '.join(str(x['la']) for x in n)}; {', '.join(str(x['state']) for x in n)} |")
    for k in results[0][0][1]:
        p = [[r[1][k] for r in results[n]] for n in (0, 1)]
        print(f"\nLoad {k}: get latency p50 {med([x['p50'] for x in p[0]]):,.0f} / "
              f"{med([x['p50'] for x in p[1]]):,.0f} us, p99 {med([x['p99'] for x in p[0]]):,.0f} / "
              f"{med([x['p99'] for x in p[1]]):,.0f} us (classic / nhc, medians of per-second figures)", end="")
    print(f"\n\nCeiling: {ceiling:.2f}x (both devices busy against the fast one alone).")


if __name__ == "__main__":
    main()
