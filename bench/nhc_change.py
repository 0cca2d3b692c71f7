#!/usr/bin/env python3
"""The working set changes at t = CHANGE_AT s on throttled loop devices
(issue 17, the seed's dynamic test): `ext_nhc=1` against `ext_nhc=0`, with
the scheduler's state, data_admit, load_admit and the flash reads per class
sampled from `stats` every SAMPLE_MS ms.

Devices as the nhc_loop scenario (bench/lib/classes.py: loop files, `losetup --direct-io=on`, cgroup v1
blkio read caps FAST_IOPS and CAP_IOPS). Per run: a fresh server on the wiped
devices; KEYS items of set B (prefix `b:`) preloaded, then KEYS of set A
(`a:`), so that A is the newer and B sits on the capacity class; WARM_S
seconds of zipf gets of A at the heavy load (2x16 connections x pipeline 4,
closed loop); then sampling starts (t = 0): A until CHANGE_AT, B from then
until CHANGE_AT + AFTER_S. nhc=0 and nhc=1 alternate, RUNS times.

Writes one CSV per run (t, state, data_admit, load_admit, fast_per_s,
capacity_per_s, reads_per_s; reads are flash reads, both classes), for nhc=1
one of the scheduler's iterations (`-iterations.csv`: each iteration's probed
points in the order measured, their intervals' reads per second and scores,
and the move; bench/lib/classes.py `iterations`) and, per
pair, a CSV for bench/nhc_plot.py (t, data_admit, load_admit of the nhc run,
nhc_reads_per_s, classic_reads_per_s) into OUT_DIR (default bench/plots),
plots the first pair into OUT_DIR/nhc-loop-change.svg (PLOT= to change),
and prints per nhc run: the time from the change to state 1 (classic) and to
the load_admit it settles on (within 0.1 of the median of its last 10 s),
and the throughputs before the change and in the last 10 s.

SHARDS=8 (`-o shards=8`, against 4 by default at -m 48; 16 needs -m 51): each
shard keeps at most 8192 capacity copies of promoted items, and with 4 shards
(32,768, fewer than the 40,960 records of the fast class) the copies of the
first working set filled the table; a full table refuses promotions, nothing
is written to the fast class, so nothing is reclaimed and the copies stay
valid: classic caching never brought the new working set into the fast class
(fast reads 0 for the 50 s after the change). With 8 shards (65,536) the
table cannot fill with valid copies. SHARDS=0 keeps the server's default.

    sudo python3 bench/run.py nhc_change        # knobs: RUNS=3 CHANGE_AT=10 AFTER_S=50 SAMPLE_MS=200 ...
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import classes, paths, scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.stats import median  # noqa: E402
from lib.util import commit, log, machine, now_utc  # noqa: E402

TAG = "nhc_change"
K = scenario.knobs(TAG)
K.OUT_DIR = K.OUT_DIR or os.path.join(paths.ROOT, "bench", "plots")


def heavy(prefix, secs, seed):
    # A seed per run: with one seed a run replays the previous one's gets (bench/RESULTS.md, "Issue 35,
    # third session").
    return ["--seed", seed, "--keys", K.KEYS, "--key-prefix", prefix, "--value-size", K.VALUE, "--dist", f"zipf:{K.SKEW}",
            "--get-ratio", "1", "--no-stats", "--threads", K.HEAVY_THREADS, "--conns", K.HEAVY_CONNS,
            "--pipeline", K.PIPELINE, "-d", f"{secs}s"]


def one_run(devs, cg, nhc, d):
    srv, shown = classes.start_server(devs, cg, nhc, d, K)
    sampler = None
    try:
        for prefix in ("b:", "a:"):
            classes.preload(K.PORT, K.KEYS, K.VALUE, TAG, prefix)
        classes.bench(K.PORT, heavy("a:", K.WARM_S, 2), TAG)
        sampler = classes.Sampler(srv, K.SAMPLE_MS)
        sampler.start()
        classes.bench(K.PORT, heavy("a:", K.CHANGE_AT, 3), TAG)
        change = time.monotonic() - sampler.t0
        classes.bench(K.PORT, heavy("b:", K.AFTER_S, 4), TAG)
        sampler.finish()
        return classes.timeline(sampler.rows), change, shown, classes.iterations(sampler.rows)
    finally:
        if sampler is not None:
            sampler.finish()
        srv.stop()


def mean(xs):
    xs = list(xs)
    return sum(xs) / max(len(xs), 1)


def summary(rows, change):
    """Times from the change to state 1 and to the settled load_admit, and
    throughputs (flash reads/s) before the change and at the end."""
    end = rows[-1]["t"]
    before = [r for r in rows if change - 5 <= r["t"] < change]
    last = [r for r in rows if r["t"] >= end - 10]
    after = [r for r in rows if r["t"] > change]
    out = {"before": mean(r["reads_per_s"] for r in before), "last": mean(r["reads_per_s"] for r in last),
           "state_at_change": before[-1]["state"] if before else None,
           "la_before": before[-1]["load_admit"] if before else None}
    s1 = next((r["t"] for r in after if r["state"] == 1), None)
    out["to_classic"] = None if s1 is None else s1 - change
    settled = median([r["load_admit"] for r in last])
    out["settled_la"] = settled
    # the first time after the return to state 1 that load_admit is within 0.1 of where it settles
    best = next((r["t"] for r in after if (s1 is None or r["t"] > s1) and r["state"] == 2
                 and abs(r["load_admit"] - settled) <= 0.1), None)
    out["to_best"] = None if best is None else best - change
    out["tune_again"] = next((r["t"] - change for r in after if (s1 is None or r["t"] > s1) and r["state"] == 2),
                             None)
    return out


def main():
    classes.check_root(TAG)
    build(TAG)
    os.makedirs(K.OUT_DIR, exist_ok=True)
    with classes.loop_devices(TAG, K.FAST_MB, K.CAP_MB, K.FAST_IOPS, K.CAP_IOPS) as (loops, cg, d):
        runs = {0: [], 1: []}
        cmds = {}
        loadavg = []
        for run in range(K.RUNS):
            for nhc in (0, 1):
                loadavg.append(os.getloadavg()[0])
                rows, change, cmds[nhc], its = one_run(loops, cg, nhc, d)
                loadavg.append(os.getloadavg()[0])
                classes.write_csv(os.path.join(K.OUT_DIR, f"nhc-loop-change-{run + 1}-nhc{nhc}.csv"), rows)
                if its:
                    # the change at t = CHANGE_AT, as in the pair's CSV
                    for r in its:
                        r["t"] = round(r["t"] - change + K.CHANGE_AT, 3)
                    classes.write_csv(os.path.join(K.OUT_DIR, f"nhc-loop-change-{run + 1}-nhc{nhc}-iterations.csv"), its)
                s = summary(rows, change)
                runs[nhc].append((rows, change, s))
                log(TAG, f"run {run + 1} nhc={nhc}: change at {change:.2f} s; {s}")
            # the pair, aligned by sample index, for nhc_plot.py
            (rn, ch, _), (rc, _, _) = runs[1][-1], runs[0][-1]
            merged = [{"t": round(a["t"] - ch + K.CHANGE_AT, 3), "data_admit": a["data_admit"],
                       "load_admit": a["load_admit"], "nhc_reads_per_s": a["reads_per_s"],
                       "classic_reads_per_s": b["reads_per_s"]} for a, b in zip(rn, rc)]
            path = os.path.join(K.OUT_DIR, f"nhc-loop-change-{run + 1}.csv")
            classes.write_csv(path, merged)
            if run == 0:
                subprocess.run([sys.executable, os.path.join(paths.ROOT, "bench", "nhc_plot.py"), path,
                                os.path.join(K.OUT_DIR, K.PLOT),
                                f"working set changed at {K.CHANGE_AT:g} s, loop devices fast {K.FAST_IOPS} / "
                                f"capacity {K.CAP_IOPS} reads/s (pair 1)", str(K.CHANGE_AT)], check=True)
        report(runs, cmds, loadavg)


def report(runs, cmds, loadavg):
    print(f"\n### Working-set change on loop devices ({now_utc()}, {commit()})\n")
    print(f"- machine: {machine()}; load average {min(loadavg):.1f}-{max(loadavg):.1f}")
    print(f"- devices: fast {K.FAST_MB} MiB at {K.FAST_IOPS}, capacity {K.CAP_MB} MiB at {K.CAP_IOPS} reads/s")
    print(f"- server (nhc=1): `{cmds.get(1)}`")
    print(f"- command: `sudo {K.shown + ' ' if K.shown else ''}python3 bench/run.py nhc_change`\n")
    print("| pair | nhc state / load_admit at the change | to state 1 | tuning again | to settled load_admit "
          "(settled) | nhc reads/s before / last 10 s | classic reads/s before / last 10 s | last 10 s nhc/classic |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- | ---: |")

    def f(x):
        return "never" if x is None else f"{x:.1f} s"
    for i, ((_, _, n), (_, _, c)) in enumerate(zip(runs[1], runs[0])):
        print(f"| {i + 1} | {n['state_at_change']} / {n['la_before']} | {f(n['to_classic'])} | {f(n['tune_again'])} | "
              f"{f(n['to_best'])} ({n['settled_la']}) | {n['before']:,.0f} / {n['last']:,.0f} | "
              f"{c['before']:,.0f} / {c['last']:,.0f} | {n['last'] / max(c['last'], 1):.2f} |")


if __name__ == "__main__":
    main()
