#!/usr/bin/env python3
"""Issue 32: the small-object store as a new user meets it, against the log
tier alone, paired.

For each key count in NS and each run, two servers in turn, each fresh:

- log:   `tiercache -m MEM -t 2 -o ext_path=DIR/tc.flash:SIZE` (plus BASE)
- small: the same with `SMALL` added (default `ext_small_max=512`)

Each is loaded with `tiercache-bench --preload -t 2 -c 4 -p 32 -k N
--value-size VLEN` (keys key:0 .. key:N-1, every key set once, as fast as the
server takes them), then measured for SECS of uniform gets over the same keys
(`--get-ratio 1`). Reported: sets/s of the load (N over the preload's wall
time), the hit ratio of the gets, gets/s, and the store's and the log tier's
counters after the run. Medians over RUNS and the small/log ratios.

Environment: NS=1000000,4000000,12000000 VLEN=100 MEM=48 SIZE=2G RUNS=3
             SECS=5 SMALL=ext_small_max=512 BASE= PORT=21660 ONLY=
             (ONLY=small or ONLY=log runs one side only, for a quick look)
             RESULTS=bench/RESULTS.md (RESULTS=- to skip writing)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench  # noqa: E402
from lib.report import write_results  # noqa: E402
from lib.servers import scratch_server, tiercache_cmd  # noqa: E402
from lib.stats import fmt_runs, median  # noqa: E402
from lib.util import commit, log, machine, now_utc  # noqa: E402

TAG = "small_default"
K = scenario.knobs(TAG)

STATS = ["small_objects_admitted", "small_deferred", "small_invalidate_waits",
         "small_invalidate_jobs", "small_change_checks", "small_objects",
         "small_log_objects", "small_dram_bytes", "small_dram_filter_bytes", "small_dram_log_bytes",
         "small_dram_bytes_per_object", "small_write_amplification", "extstore_objects_evicted",
         "extstore_objects_used", "flash_write_amplification", "curr_items", "evictions",
         # Where a key goes missing (each key is set once): the log tier's
         # index evicting an entry, the store dropping or evicting an object,
         # an item leaving RAM refused by the write budget, the log tier's
         # page evictions.
         "index_evictions", "index_entries", "index_bytes", "small_dropped", "small_evicted",
         "small_moved", "small_readmitted", "small_sets_written", "flash_admission_refused",
         "extstore_page_evictions", "extstore_compact_lost", "evicted_unfetched",
         # The store's device time in segment flushes (against the load's wall time).
         "small_flush_us", "small_flush_waits", "small_log_segments_written",
         # The memory pool's charge (index, store, flash write buffers) and the RSS.
         "hash_bytes", "segments_allocated", "rss_kb"]


def rss_kb(pid):
    """The server's resident set (VmRSS, KiB): what `-m` must bound."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return "-"


def opts(d, small):
    o = [f"ext_path={d}/tc.flash:{K.SIZE}"] + [x for x in K.BASE.split(",") if x]
    if small:
        o += [x for x in K.SMALL.split(",") if x]
    return o


def one(n, small, port):
    name = "small" if small else "log"
    make = lambda d: tiercache_cmd(port, K.MEM, 2, opts(d, small))  # noqa: E731
    with scratch_server(TAG, name, make, port) as (srv, shown):
        t = time.monotonic()
        bench(port, ["--preload", "-t", 2, "-c", 4, "-p", 32, "-k", n,
                        "--value-size", K.VLEN, "--get-ratio", 1, "-d", "1ms", "--no-stats"],
                 tag=TAG, timeout=3600)
        load_s = time.monotonic() - t
        # Let the stores' queues settle before the gets.
        time.sleep(1)
        out = bench(port, ["-t", 2, "-c", 4, "-p", 32, "-k", n, "--value-size", K.VLEN,
                              "--get-ratio", 1, "-d", f"{K.SECS}s", "--no-stats"],
                       tag=TAG, timeout=600)
        st = srv.stats()
        st["rss_kb"] = rss_kb(srv.proc.pid)
        run = out["runs"][0] if "runs" in out else out
        return {"cmd": shown, "load_s": load_s, "sets": n / load_s,
                "hit": run.get("hit_ratio", 0.0), "ops": run.get("ops_per_sec", 0.0),
                "stats": {k: st.get(k, "-") for k in STATS}}


def main():
    build(TAG)
    lines, notes = [], []
    for n in [int(x) for x in K.NS.split(",")]:
        res = {"log": [], "small": []}
        for r in range(K.RUNS):
            # Paired: alternate which goes first.
            order = [False, True] if r % 2 == 0 else [True, False]
            if K.ONLY:
                # A look at one side only (ONLY=small or ONLY=log): no ratio.
                order = [K.ONLY == "small"]
            for small in order:
                x = one(n, small, K.PORT + int(small))
                name = "small" if small else "log"
                res[name].append(x)
                log(TAG, f"N={n} run {r} {name}: load {x['load_s']:.1f} s, "
                            f"{x['sets']:,.0f} sets/s, hit {x['hit']:.3f}, {x['ops']:,.0f} gets/s "
                            f"{x['stats']}")
        if K.ONLY:
            continue
        med = {k: {f: median([x[f] for x in v]) for f in ("sets", "hit", "ops")}
               for k, v in res.items()}
        lines.append(f"| {n:,} | {fmt_runs([x['sets'] for x in res['log']])} | "
                     f"{fmt_runs([x['sets'] for x in res['small']])} | "
                     f"{med['small']['sets'] / med['log']['sets']:.2f}x | "
                     f"{fmt_runs([x['hit'] for x in res['log']], '{:.3f}')} | "
                     f"{fmt_runs([x['hit'] for x in res['small']], '{:.3f}')} |")
        for name in ("small", "log"):
            st = res[name][-1]["stats"]
            notes.append(f"- {n:,} keys, {name}'s last run: "
                         + ", ".join(f"`{k}` {v}" for k, v in st.items() if v != "-"))
        cmds = (res["log"][0]["cmd"], res["small"][0]["cmd"])
        print("\n".join(lines[-1:] + notes[-2:]), flush=True)
    if K.ONLY:
        return
    body = [f"- command: `NS={K.NS} RUNS={K.RUNS} SECS={K.SECS} SMALL={K.SMALL} BASE={K.BASE} "
            f"python3 bench/run.py {TAG}` ({now_utc()}, commit {commit()}; {machine()})",
            f"- servers: log `{cmds[0]}`; small `{cmds[1]}`",
            f"- load: `tiercache-bench --preload -t 2 -c 4 -p 32 -k N --value-size {K.VLEN}`, "
            f"then {K.SECS} s of uniform gets (`--get-ratio 1`, same options)",
            "",
            "| keys | log: sets/s (runs) | small: sets/s (runs) | sets small/log (medians) "
            "| log: hit ratio (runs) | small: hit ratio (runs) |",
            "| ---: | --- | --- | ---: | --- | --- |"] + lines + [""] + notes
    print("\n".join(body))
    write_results("Issue 32: the small store against the log tier alone (small_default.py)",
                     "\n".join(body), TAG)


if __name__ == "__main__":
    main()
