#!/usr/bin/env python3
"""The fast class's hit ratio under classic caching for given sizes of the
fast device (issue 17): which FAST_MB gives the HIT that bench/nhc_loads.py
is asked for. Per size in SIZES (MiB): devices as bench/nhc_loop.py (loop
files, cgroup v1 blkio read caps FAST_IOPS and CAP_IOPS), a fresh classic
server (`ext_nhc=0`, the server's default shards, as nhc_loads.py runs it),
KEYS items preloaded, WARM_S seconds of the heavy closed loop (2x16
connections x pipeline 4, zipf SKEW), then RUN_S seconds measured: the share
of flash reads served by the fast class (fast reads / all flash reads from
`stats` deltas), as nhc_loads.py reports it in its `hit` column, and again
over RUN_S seconds of open loop at half the closed loop's rate (Load 0.5).

    sudo SIZES=96,112,128 python3 bench/run.py nhc_hit
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402
import nhc_loop as nl  # noqa: E402

TAG = "nhc_hit"
K = fl.knobs(FAST_IOPS=5000, CAP_IOPS=2500, SIZES="96,112,128", CAP_MB=1536, KEYS=150000, VALUE=4000,
             SKEW=0.99, WARM_S=40, RUN_S=10, PORT=24185, MEM=48, HEAVY_THREADS=2, HEAVY_CONNS=16, PIPELINE=4,
             SERVER_THREADS=2, IO_THREADS=64)


def keys_args():
    return ["--keys", K.KEYS, "--value-size", K.VALUE, "--dist", f"zipf:{K.SKEW}", "--get-ratio", "1",
            "--no-stats"]


def hit(a, b):
    fast, cap = nl.delta(a, b, "flash_fast_reads"), nl.delta(a, b, "flash_capacity_reads")
    return fast / max(fast + cap, 1), (fast + cap) / K.RUN_S


def main():
    nl.check_root()
    fl.build(TAG)
    out = []
    for mb in [int(x) for x in K.SIZES.split(",")]:
        with nl.loop_devices(TAG, mb, K.CAP_MB, K.FAST_IOPS, K.CAP_IOPS) as (loops, cg, d):
            srv, shown = nl.start_server(loops, cg, 0, d, K)
            try:
                fl.bench(K.PORT, ["--threads", 2, "--conns", 4, "--keys", K.KEYS, "--value-size", K.VALUE,
                                  "--preload", "--get-ratio", "1", "--pipeline", 16, "-d", "0s", "--no-stats"], TAG)
                heavy = keys_args() + ["--threads", K.HEAVY_THREADS, "--conns", K.HEAVY_CONNS,
                                       "--pipeline", K.PIPELINE]
                fl.bench(K.PORT, heavy + ["-d", f"{K.WARM_S}s"], TAG)
                a = srv.stats()
                r = fl.bench(K.PORT, heavy + ["-d", f"{K.RUN_S}s"], TAG)["runs"][0]
                b = srv.stats()
                closed, reads = hit(a, b)
                rate = int(r["ops_per_sec"] / 2)
                fl.bench(K.PORT, keys_args() + ["--threads", 2, "--conns", 16, "--mode", "latency",
                                                "--rate", rate, "-d", f"{K.RUN_S}s"], TAG)
                c = srv.stats()
                half, _ = hit(b, c)
            finally:
                srv.stop()
        out.append((mb, closed, reads, r["ops_per_sec"], half))
        fl.log(TAG, f"fast {mb} MiB: hit {closed:.3f} closed loop ({reads:,.0f} flash reads/s, "
                    f"{r['ops_per_sec']:,.0f} gets/s), {half:.3f} at Load 0.5")
    print(f"\n### Fast hit ratio by fast device size ({fl.now_utc()}, {fl.commit()})\n")
    print(f"- server: `{shown}`; devices fast at {K.FAST_IOPS}, capacity {K.CAP_MB} MiB at {K.CAP_IOPS} reads/s")
    print(f"- command: `sudo {K.shown + ' ' if K.shown else ''}python3 bench/run.py nhc_hit`\n")
    print("| fast MiB | hit, closed loop | flash reads/s | gets/s | hit, Load 0.5 |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for mb, closed, reads, ops, half in out:
        print(f"| {mb} | {closed:.3f} | {reads:,.0f} | {ops:,.0f} | {half:.3f} |")


if __name__ == "__main__":
    main()
