#!/usr/bin/env python3
"""Non-hierarchical caching at the server's defaults in closed loop (issue 35):
`ext_nhc=1` against `ext_nhc=0` (classic caching) on the same two throttled
loop devices, paired runs alternating, medians of the per-pair ratios.

Unlike bench/nhc_loop.py and bench/nhc_loads.py the server keeps its defaults:
the io_uring reader and promotion to RAM on (`ext_io` and `ext_promote` not
set; EXT="a=b,c=d" adds -o options to both servers). The blkio throttle holds
the io_uring reader to its limit (bench/throttle_check.py).

Devices as bench/nhc_loop.py (loop files, `losetup --direct-io=on`, a cgroup
v1 blkio group capping each device's reads at FAST_IOPS and CAP_IOPS). Per
run: a fresh server on the wiped devices, KEYS items of VALUE bytes
preloaded, WARM_S seconds of gets (DIST: `zipf:0.99` or `uniform`) at the
heavy closed loop (THREADS x CONNS connections x PIPELINE in flight), RUN_S
measured seconds of it, then, with LIGHT_S > 0, LIGHT_WARM_S seconds and
LIGHT_S measured seconds of one connection with one get in flight (the fast
device far from its limit).
Flash reads per class come from `stats` deltas over the measured seconds.
Everything it creates is removed at the end, also after a failure.

    sudo python3 bench/run.py nhc_closed                         # zipf 0.99, fast 256 MiB
    sudo DIST=uniform FAST_MB=1024 python3 bench/run.py nhc_closed  # everything fits on fast
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashlib as fl  # noqa: E402
import nhc_loop as nl  # noqa: E402

TAG = "nhc_closed"
K = fl.knobs(FAST_IOPS=10000, CAP_IOPS=5000, FAST_MB=256, CAP_MB=1536, KEYS=150000, VALUE=4000,
             DIST="zipf:0.99", RUNS=3, WARM_S=15, RUN_S=15, LIGHT_S=0, LIGHT_WARM_S=0, PORT=24735, MEM=64, THREADS=2,
             CONNS=4, PIPELINE=16, SERVER_THREADS=2, EXT="", TRACE_DIR="")


def start_server(devs, cg, nhc, d):
    fast, cap = devs
    ext = [f"ext_path={fast}:fast", f"ext_path={cap}:capacity", "ext_wipe", f"ext_nhc={nhc}"]
    ext += [x for x in K.EXT.split(",") if x]
    cmd = fl.tiercache_cmd(K.PORT, K.MEM, K.SERVER_THREADS, ext)
    return fl.Server(f"nhc{nhc}", cmd, K.PORT, d, cgroup=cg), fl.show_cmd(cmd, d)


def measure(srv, load, secs):
    a = srv.stats()
    r = fl.bench(srv.port, load + ["-d", f"{secs}s", "--no-stats"], TAG)["runs"][0]
    b = srv.stats()
    lat = r.get("latency", {}).get("get") or r.get("latency", {}).get("all") or {}
    fast = nl.delta(a, b, "flash_fast_reads") / secs
    cap = nl.delta(a, b, "flash_capacity_reads") / secs
    return {"ops": r["ops_per_sec"], "p50": lat.get("p50_us"), "p99": lat.get("p99_us"), "fast": fast,
            "cap": cap, "hit": fast / max(fast + cap, 1e-9), "la": b.get("flash_nhc_load_admit"),
            "state": b.get("flash_nhc_state"), "copies": b.get("flash_class_copies_made", 0),
            "copies_dropped": b.get("flash_class_copies_dropped", 0),
            "dual_cap": nl.delta(a, b, "flash_dual_capacity_reads")}


def one_run(devs, cg, nhc, d):
    srv, shown = start_server(devs, cg, nhc, d)
    sampler = nl.Sampler(srv, 200) if K.TRACE_DIR else None
    try:
        if sampler:
            sampler.start()
        keys = ["--keys", K.KEYS, "--value-size", K.VALUE, "--dist", K.DIST, "--get-ratio", "1"]
        fl.bench(K.PORT, ["--threads", 2, "--conns", 4, "--keys", K.KEYS, "--value-size", K.VALUE,
                          "--preload", "--get-ratio", "1", "--pipeline", 16, "-d", "0s", "--no-stats"], TAG)
        heavy = keys + ["--threads", K.THREADS, "--conns", K.CONNS, "--pipeline", K.PIPELINE]
        fl.bench(K.PORT, heavy + ["-d", f"{K.WARM_S}s", "--no-stats"], TAG)
        h = measure(srv, heavy, K.RUN_S)
        light = keys + ["--threads", 1, "--conns", 1, "--pipeline", 1]
        if K.LIGHT_S and K.LIGHT_WARM_S:
            fl.bench(K.PORT, light + ["-d", f"{K.LIGHT_WARM_S}s", "--no-stats"], TAG)
        lt = measure(srv, light, K.LIGHT_S) if K.LIGHT_S else None
        return h, lt, shown
    finally:
        if sampler:
            sampler.halt.set()
            sampler.join()
            os.makedirs(K.TRACE_DIR, exist_ok=True)
            import time
            nl.write_csv(os.path.join(K.TRACE_DIR, f"nhc-closed-{time.strftime('%H%M%S')}-nhc{nhc}.csv"),
                         nl.timeline(sampler.rows))
        srv.stop()


def main():
    nl.check_root()
    fl.build(TAG)
    with nl.loop_devices(TAG, K.FAST_MB, K.CAP_MB, K.FAST_IOPS, K.CAP_IOPS) as (loops, cg, d):
        res = {0: [], 1: []}
        cmds = {}
        for run in range(K.RUNS):
            for nhc in (0, 1):
                h, lt, cmds[nhc] = one_run(loops, cg, nhc, d)
                res[nhc].append((h, lt))
                fl.log(TAG, f"run {run + 1} nhc={nhc}: heavy {h['ops']:,.0f} gets/s (fast {h['fast']:,.0f}/s, "
                       f"capacity {h['cap']:,.0f}/s, load_admit {h['la']}, state {h['state']}, copies made "
                       f"{h['copies']}, dropped {h['copies_dropped']})" +
                       (f"; light {lt['ops']:,.0f} gets/s p50 {lt['p50']} p99 {lt['p99']} us "
                        f"(load_admit {lt['la']}, state {lt['state']})" if lt else ""))
        report(res, cmds)


def report(res, cmds):
    med = fl.median
    print(f"\n### NHC in closed loop at the defaults ({fl.now_utc()}, {fl.commit()})\n")
    print(f"- machine: {fl.machine()}")
    print(f"- devices: loop files, fast {K.FAST_MB} MiB at {K.FAST_IOPS}, capacity {K.CAP_MB} MiB at "
          f"{K.CAP_IOPS} reads/s (cgroup v1 blkio)")
    print(f"- server (nhc=1): `{cmds.get(1)}`")
    print(f"- load: {K.KEYS:,} keys x {K.VALUE} B, {K.DIST}, preload, {K.WARM_S} s warm-up, "
          f"{K.THREADS}x{K.CONNS} conns x pipeline {K.PIPELINE} for {K.RUN_S} s"
          + (f", then 1 conn x 1 for {K.LIGHT_WARM_S} + {K.LIGHT_S} s measured" if K.LIGHT_S else "")
          + f"; {K.RUNS} pairs")
    print(f"- command: `sudo {K.shown + ' ' if K.shown else ''}python3 bench/run.py nhc_closed`\n")
    print("| load | classic gets/s | nhc gets/s | nhc/classic (paired median) | pairs | classic fast / capacity "
          "reads/s (hit) | nhc fast / capacity reads/s | nhc load_admit, state | copies made |")
    print("| --- | ---: | ---: | ---: | --- | --- | --- | --- | --- |")
    for i, name in ((0, "closed loop"), (1, "light")):
        if res[0][0][i] is None:
            continue
        c = [r[i] for r in res[0]]
        n = [r[i] for r in res[1]]
        pairs = [b["ops"] / a["ops"] for a, b in zip(c, n)]
        print(f"| {name} | {med([x['ops'] for x in c]):,.0f} | {med([x['ops'] for x in n]):,.0f} | "
              f"{med(pairs):.2f} | {' / '.join(f'{p:.2f}' for p in pairs)} | "
              f"{med([x['fast'] for x in c]):,.0f} / {med([x['cap'] for x in c]):,.0f} "
              f"({med([x['hit'] for x in c]):.2f}) | "
              f"{med([x['fast'] for x in n]):,.0f} / {med([x['cap'] for x in n]):,.0f} | "
              f"{', '.join(str(x['la']) for x in n)}; {', '.join(str(x['state']) for x in n)} | "
              f"{', '.join(str(x['copies']) for x in n)} |")


if __name__ == "__main__":
    main()
