#!/usr/bin/env python3
"""The fast class's hit ratio under classic caching for given sizes of the
fast device (issue 17): which FAST_MB gives the HIT that the scenario nhc_loads
is asked for. Per size in SIZES (MiB): devices as bench/lib/classes.py (loop
files, cgroup v1 blkio read caps FAST_IOPS and CAP_IOPS), a fresh classic
server (`ext_nhc=0`, the server's default shards, as nhc_loads runs it),
KEYS items preloaded, WARM_S seconds of the heavy closed loop (2x16
connections x pipeline 4, zipf SKEW), then RUN_S seconds measured: the share
of flash reads served by the fast class (fast reads / all flash reads from
`stats` deltas), as nhc_loads reports it in its `hit` column, and again
over RUN_S seconds of open loop at half the closed loop's rate (Load 0.5).

    sudo SIZES=96,112,128 python3 bench/run.py nhc_hit
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import classes, scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.util import commit, log, now_utc  # noqa: E402

TAG = "nhc_hit"
K = scenario.knobs(TAG)


def main():
    classes.check_root(TAG)
    build(TAG)
    out = []
    keys = ["--keys", K.KEYS, "--value-size", K.VALUE, "--dist", f"zipf:{K.SKEW}", "--get-ratio", "1"]
    heavy = keys + ["--threads", K.HEAVY_THREADS, "--conns", K.HEAVY_CONNS, "--pipeline", K.PIPELINE]
    for mb in [int(x) for x in K.SIZES.split(",")]:
        with classes.loop_devices(TAG, mb, K.CAP_MB, K.FAST_IOPS, K.CAP_IOPS) as (loops, cg, d):
            srv, shown = classes.start_server(loops, cg, 0, d, K)
            try:
                classes.preload(K.PORT, K.KEYS, K.VALUE, TAG)
                # A fresh seed per run: with one seed the measured runs replayed the warm-up's
                # gets, whose capacity items it had promoted (bench/RESULTS.md, "Issue 35, third
                # session": 256 MiB measured 0.955 so, 0.86 with fresh gets).
                classes.bench(K.PORT, heavy + ["--seed", 2, "-d", f"{K.WARM_S}s", "--no-stats"], TAG)
                closed = classes.measure(srv, heavy + ["--seed", 3], K.RUN_S, TAG)
                half = classes.measure(srv, keys + ["--seed", 4, "--threads", 2, "--conns", 16, "--mode", "latency",
                                                    "--rate", int(closed["ops"] / 2)], K.RUN_S, TAG)
            finally:
                srv.stop()
        reads = closed["fast"] + closed["cap"]
        out.append((mb, closed["hit"], reads, closed["ops"], half["hit"]))
        log(TAG, f"fast {mb} MiB: hit {closed['hit']:.3f} closed loop ({reads:,.0f} flash reads/s, "
                 f"{closed['ops']:,.0f} gets/s), {half['hit']:.3f} at Load 0.5")
    print(f"\n### Fast hit ratio by fast device size ({now_utc()}, {commit()})\n")
    print(f"- server: `{shown}`; devices fast at {K.FAST_IOPS}, capacity {K.CAP_MB} MiB at {K.CAP_IOPS} reads/s")
    print(f"- command: `sudo {K.shown + ' ' if K.shown else ''}python3 bench/run.py nhc_hit`\n")
    print("| fast MiB | hit, closed loop | flash reads/s | gets/s | hit, Load 0.5 |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for mb, closed, reads, ops, half in out:
        print(f"| {mb} | {closed:.3f} | {reads:,.0f} | {ops:,.0f} | {half:.3f} |")


if __name__ == "__main__":
    main()
