#!/usr/bin/env python3
"""Cost of crash safety: the same tiercache binary with `-o ext_crash_safe=1`
(a change to a key with a record on flash waits for its tombstone to be written
to the crash journal: a 4 KiB O_DIRECT write plus fdatasync, grouped across
requests) and with `ext_crash_safe=0` (nothing waits), side by side.

A fresh tiercache (-m MEM, a FLASH_SIZE flash file) gets KEYS keys of VALUE
bytes preloaded (most of them end up on flash), then sets-only overwrites
(pipeline 8) until the flash file has wrapped (page reclaims under way), then
WARMUP seconds of the workload itself (not counted), then DURATION seconds
measured. Workloads: sets only with uniform keys at pipeline 8 and at pipeline 1
(each connection waits for each reply), 90:10 get:set with zipf:0.99 keys at
pipeline 8 (closed loop, ops/s), and sets only at a fixed RATE (open loop,
p50/p99/p99.9 of the sets). RUNS runs each, safe and unsafe alternating (the
order swapped every run), a fresh server per run, medians and safe/unsafe
ratios. The journal figures are `stats` deltas over the measured window.

Environment: MEM=64 FLASH_SIZE=1G KEYS=400000 VALUE=1000 WARMUP=5 DURATION=10
             RATE=10000 RUNS=3 RESULTS=bench/RESULTS.md
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

TAG = "crash_cost"
K = scenario.knobs(TAG)
FILL_MAX_S = 120  # give up if the flash file has not wrapped by then
MODES = [("safe", 1), ("unsafe", 0)]
LOAD = ["--threads", 2, "--conns", 4, "--keys", K.KEYS, "--value-size", K.VALUE, "--no-stats"]
SETS = ["--get-ratio", 0, "--dist", "uniform"]
# (name, bench arguments, open loop)
WORKLOADS = [
    ("sets only, uniform keys, pipeline 8", SETS + ["--pipeline", 8], False),
    ("sets only, uniform keys, pipeline 1", SETS + ["--pipeline", 1], False),
    ("90:10 get:set, zipf:0.99 keys, pipeline 8", ["--get-ratio", 0.9, "--dist", "zipf:0.99", "--pipeline", 8],
     False),
    (f"sets only, uniform keys, open loop at {K.RATE:,}/s", SETS + ["--mode", "latency", "--rate", K.RATE], True),
]
KEYS_STATS = ("cmd_set", "flash_journal_commits", "flash_journal_tombstones", "flash_journal_wrap_floor_raises",
              "extstore_page_reclaims", "flash_write_errors")


def healthy(srv, stats, r=None):
    """Raises (with the tail of the server's log) on anything amiss."""
    bad = []
    if not srv.alive():
        bad.append(f"server exited ({srv.proc.returncode})")
    if stats.get("flash_journal_failed"):
        bad.append("flash_journal_failed 1")
    if stats.get("flash_write_errors"):
        bad.append(f"flash_write_errors {stats['flash_write_errors']}")
    if r is not None and (r["errors"] or r["unanswered"]):
        bad.append(f"client saw {r['errors']} errors, {r['unanswered']} unanswered")
    if bad:
        raise RuntimeError("; ".join(bad) + f"\nlog {srv.log_path}:\n" + open(srv.log_path).read()[-3000:])


def fill(srv):
    """Sets-only overwrites at pipeline 8 until the flash file has wrapped, so
    that the measured sets overwrite keys on a full device."""
    t0 = time.monotonic()
    while srv.stats().get("extstore_page_reclaims", 0) == 0:
        if time.monotonic() - t0 > FILL_MAX_S:
            raise RuntimeError(f"no page reclaim after {FILL_MAX_S} s of overwrites")
        bench(K.PORT, LOAD + SETS + ["--pipeline", 8, "-d", "2s"], TAG, timeout=60)
    return time.monotonic() - t0


def one(safe, args, open_loop):
    make = lambda d: tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.FLASH_SIZE}",  # noqa: E731
                                                     f"ext_crash_safe={safe}"])
    with scratch_server(TAG, "tiercache", make, K.PORT) as (srv, shown):
        bench(K.PORT, LOAD + ["--pipeline", 8, "--preload", "--get-ratio", 1, "-d", "0s"], TAG, timeout=300)
        filled = fill(srv)
        bench(K.PORT, LOAD + args + ["-d", f"{K.WARMUP}s"], TAG, timeout=K.WARMUP + 60)
        a, t0 = srv.stats(), time.monotonic()
        r = bench(K.PORT, LOAD + args + ["-d", f"{K.DURATION}s"], TAG, timeout=K.DURATION + 60)["runs"][0]
        b, window = srv.stats(), time.monotonic() - t0
        healthy(srv, b, r)
        d = {k: b.get(k, 0) - a.get(k, 0) for k in KEYS_STATS}
        lat = r["latency"].get("set") or r["latency"]["all"]
        return {"ops": r["ops_per_sec"], "hit_ratio": r["hit_ratio"],  # the client's (see flash_fio.py)
                "p50": lat["p50_us"], "p99": lat["p99_us"], "p999": lat["p999_us"],
                "commits_s": d["flash_journal_commits"] / window,
                "tomb_s": d["flash_journal_tombstones"] / window,
                "tomb_per_commit": d["flash_journal_tombstones"] / max(1, d["flash_journal_commits"]),
                "tomb_per_set": d["flash_journal_tombstones"] / max(1, d["cmd_set"]),
                "raises": d["flash_journal_wrap_floor_raises"], "reclaims": d["extstore_page_reclaims"],
                # segments are numbered from 1 as they are opened, so about
                # segments_written - floor of them are above the floor: what a
                # crash at this moment would recover, of the sealed ones
                "above_floor": min(1.0, max(0, b.get("flash_segments_written", 0) - b.get("flash_journal_floor", 0))
                                   / max(1, b.get("extstore_pages_used", 1))),
                "on_flash": b.get("extstore_objects_used", 0) / max(1, b.get("curr_items", 1)),
                "fill_s": filled, "open_loop": open_loop, "cmd": shown}


def describe(mode, x):
    if x["open_loop"]:
        head = f"{x['ops']:,.0f} sets/s, set p50 {x['p50']:.0f} p99 {x['p99']:.0f} p99.9 {x['p999']:.0f} us"
    else:
        head = f"{x['ops']:,.0f} ops/s" + (f", hit ratio {x['hit_ratio']:.4f}" if x["hit_ratio"] is not None else "")
    return (f"{mode}: {head}; journal {x['commits_s']:,.0f} commits/s, {x['tomb_s']:,.0f} tombstones/s "
            f"({x['tomb_per_commit']:.1f} per commit, {x['tomb_per_set']:.2f} per set), "
            f"{x['raises']} wrap floor raises, {x['reclaims']} page reclaims, "
            f"{x['above_floor']:.0%} of sealed segments above the floor; "
            f"{x['on_flash']:.0%} of items on flash; wrapped after {x['fill_s']:.0f} s of fill")


def table(name, res):
    """A markdown table: safe, unsafe and safe / unsafe, with the runs of one column."""
    m = lambda k, mode: median([x[k] for x in res[mode]])  # noqa: E731
    if res["safe"][0]["open_loop"]:
        cols = [("p50", "set p50 us"), ("p99", "set p99 us"), ("p999", "set p99.9 us"), ("ops", "achieved sets/s")]
        runs = 1
    else:
        cols = [("ops", "ops/s")] + ([("hit_ratio", "hit ratio")] if res["safe"][0]["hit_ratio"] is not None else [])
        runs = 0
    f = lambda k: "{:.4f}" if k == "hit_ratio" else "{:,.0f}"  # noqa: E731
    out = [f"{name}:", "", "| | " + " | ".join(c[1] for c in cols) + f" | runs ({cols[runs][1]}) |",
           "| --- | " + " | ".join("---:" for _ in cols) + " | --- |"]
    for mode, _ in MODES:
        out.append(f"| {mode} | " + " | ".join(f(k).format(m(k, mode)) for k, _ in cols) + " | "
                   + fmt_runs([x[cols[runs][0]] for x in res[mode]], f(cols[runs][0])) + " |")
    out.append("| **safe / unsafe** | " + " | ".join(f"**{m(k, 'safe') / m(k, 'unsafe'):.2f}**" for k, _ in cols)
               + " | |")
    return "\n".join(out)


def main():
    build(TAG)
    results = {w[0]: {mode: [] for mode, _ in MODES} for w in WORKLOADS}
    for run in range(K.RUNS):
        order = MODES if run % 2 == 0 else MODES[::-1]
        for name, args, open_loop in WORKLOADS:
            for mode, safe in order:
                log(TAG, f"run {run + 1}/{K.RUNS}, {name}, ext_crash_safe={safe}")
                x = one(safe, args, open_loop)
                results[name][mode].append(x)
                log(TAG, describe(mode, x))
    m = lambda k, xs: median([x[k] for x in xs])  # noqa: E731
    tables = "\n\n".join(table(name, results[name]) for name, _, _ in WORKLOADS)
    journal = []
    for name, _, _ in WORKLOADS:
        s, u = results[name]["safe"], results[name]["unsafe"]
        journal.append(f"| {name} | {m('commits_s', s):,.0f} | {m('tomb_s', s):,.0f} | {m('tomb_per_commit', s):.1f} | "
                       f"{m('tomb_per_set', s):.2f} | {fmt_runs([x['raises'] for x in s])} | "
                       f"{m('reclaims', s):,.0f} | {m('above_floor', s):.0%} | {m('commits_s', u):,.0f} |")
    journal = "\n".join(journal)
    envs = " ".join(([f"CARGO_TARGET_DIR={os.environ['CARGO_TARGET_DIR']}"] if "CARGO_TARGET_DIR" in os.environ
                     else []) + ([K.shown] if K.shown else []))
    first = results[WORKLOADS[0][0]]["safe"][0]
    on_flash = m("on_flash", [x for w in results.values() for xs in w.values() for x in xs])
    body = f"""- command: `{(envs + ' ') if envs else ''}python3 bench/run.py crash_cost`
- date: {now_utc()}; commit {commit()}; machine: {machine()}; the 2 CPUs are shared with other work and noisy: read the medians and ratios, not single runs
- server: `{first['cmd']}`, and the same with `ext_crash_safe=0`; the same binary, a fresh server and flash file per run
- load: {K.KEYS:,} keys of {K.VALUE} B preloaded (`tiercache-bench --threads 2 --conns 4`; {on_flash:.0%} of the items on flash, median), sets-only overwrites at pipeline 8 until the flash file wrapped (page reclaims under way), {K.WARMUP} s of the workload (not counted), {K.DURATION} s measured; {K.RUNS} runs per workload and setting, safe and unsafe alternating (order swapped each run), medians; ratio = median safe / median unsafe

{tables}

Journal, safe runs (`stats` deltas over the measured window; medians): "tombstones per set" is the share of sets whose key had a record on flash and so waited for the journal; "sealed segments above the floor" is (flash_segments_written - flash_journal_floor) / extstore_pages_used at the end of the window (segments are numbered from 1 as they are opened), about the share of the flash tier a crash at that moment would recover.

| workload | commits/s | tombstones/s | tombstones per commit | tombstones per set | wrap floor raises (runs) | page reclaims | sealed segments above the floor at the end | unsafe runs: commits/s |
| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | ---: |
{journal}
"""
    print(body)
    write_results("Cost of crash safety", body, TAG)


if __name__ == "__main__":
    main()
