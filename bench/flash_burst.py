#!/usr/bin/env python3
"""The burst test of issue 4: write ITEMS items of VALUE bytes in one burst
(tiercache-bench preload: 8 connections, 32 sets in flight each) into a server
with -m MEM and a FLASH_SIZE flash file, then read every key back (multigets
of 100 keys) and count how many are still there with the right length.
memcached 1.6.18 (`-m 64 -o ext_path=FILE:4G`) and tiercache get the same
burst, one after the other, RUNS times each.

Environment: ITEMS=300000 VALUE=4000 MEM=64 FLASH_SIZE=4G RUNS=3
             MC_EXT_OPTS= TC_EXT_OPTS=ext_avg_item_size=VALUE (extra -o options) RESULTS=bench/RESULTS.md
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench, missing_keys  # noqa: E402
from lib.report import write_results  # noqa: E402
from lib.servers import memcached_cmd, scratch_server, tiercache_cmd  # noqa: E402
from lib.stats import fmt_runs, median  # noqa: E402
from lib.util import commit, log, machine, now_utc  # noqa: E402

TAG = "flash_burst"
K = scenario.knobs(TAG)
ITEMS, VALUE, MEM, FLASH_SIZE, RUNS = K.ITEMS, K.VALUE, K.MEM, K.FLASH_SIZE, K.RUNS
MC_EXT = [o for o in K.MC_EXT_OPTS.split(",") if o]
# -m covers tiercache's index, which is sized for a full device of items of
# ext_avg_item_size (default 1 KiB: 32 MiB for 4G, too much for -m 64); size it
# for the burst's 4000-byte items, as an operator would
TC_EXT = [o for o in (K.TC_EXT_OPTS if "TC_EXT_OPTS" in os.environ else f"ext_avg_item_size={VALUE}").split(",")
          if o]


def one(name, cmd_fn, port):
    with scratch_server(TAG, name, cmd_fn, port) as (srv, shown):
        t0 = time.monotonic()
        pre = bench(port, ["--threads", 2, "--conns", 4, "--keys", ITEMS, "--value-size", VALUE,
                              "--preload", "--pipeline", 32, "--get-ratio", 1, "-d", "0s",
                              "--no-stats", "--drain-timeout", "120s"], TAG)["preload"]
        burst_s = time.monotonic() - t0
        time.sleep(2)  # let write buffers drain
        st = srv.stats()
        kept = ITEMS - len(missing_keys(port, ITEMS, VALUE))
        res = {"kept": kept, "burst_s": pre["elapsed_s"], "wall_s": burst_s,
               "set_errors": pre["errors"], "sets": pre["sets"],
               "curr_items": st.get("curr_items"), "evictions": st.get("evictions"),
               "on_flash": st.get("extstore_objects_used"),
               "backpressure": st.get("flash_backpressure"),
               "written": st.get("extstore_objects_written"), "total_items": st.get("total_items"),
               "cmd": shown}
        log(TAG, f"{name}: kept {kept:,} of {ITEMS:,} ({kept / ITEMS:.1%}), burst {res['burst_s']:.1f} s, "
               f"set errors {res['set_errors']}, evictions {res['evictions']}, on flash {res['on_flash']}")
        return res


def main():
    build(TAG)
    mc = lambda d: memcached_cmd(21511, MEM, 2, [f"ext_path={d}/mc.flash:{FLASH_SIZE}"] + MC_EXT)  # noqa: E731
    tc = lambda d: tiercache_cmd(21512, MEM, 2, [f"ext_path={d}/tc.flash:{FLASH_SIZE}"] + TC_EXT)  # noqa: E731
    mcs, tcs = [], []
    for _ in range(RUNS):
        mcs.append(one("memcached", mc, 21511))
        tcs.append(one("tiercache", tc, 21512))
    fits = "all" if ITEMS * (VALUE + 64) < fl_size(FLASH_SIZE) else "not all"
    m = lambda k, xs: median([x[k] for x in xs])  # noqa: E731
    tc_kept = m("kept", tcs)
    verdict = "met" if tc_kept == ITEMS else "not met"
    envs = K.shown
    body = f"""- command: `{(envs + ' ') if envs else ''}python3 bench/run.py flash_burst`
- date: {now_utc()}; commit {commit()}; machine: {machine()}
- burst: {ITEMS:,} items of {VALUE} B (`key:0` .. `key:{ITEMS - 1}`, {ITEMS * VALUE / 1e9:.2f} GB, {fits} of it fits on the {FLASH_SIZE} flash file) written by `tiercache-bench --threads 2 --conns 4 --pipeline 32 --preload` (64 sets in flight), then every key read back with 100-key multigets; {RUNS} runs per server, alternating, medians
- memcached: `{mcs[0]['cmd']}`
- tiercache: `{tcs[0]['cmd']}`

| server | items kept (median) | kept | runs (kept) | burst time s (median) | set errors | on flash after burst |
| --- | ---: | ---: | --- | ---: | ---: | ---: |
| memcached 1.6.18 | {m('kept', mcs):,.0f} | {m('kept', mcs) / ITEMS:.1%} | {fmt_runs([x['kept'] for x in mcs])} | {m('burst_s', mcs):.1f} | {fmt_runs([x['set_errors'] for x in mcs])} | {fmt_runs([x['on_flash'] for x in mcs])} |
| tiercache | {tc_kept:,.0f} | {tc_kept / ITEMS:.1%} | {fmt_runs([x['kept'] for x in tcs])} | {m('burst_s', tcs):.1f} | {fmt_runs([x['set_errors'] for x in tcs])} | {fmt_runs([x['on_flash'] for x in tcs])} |

tiercache keeps every item that fits: **{verdict}** (flash_backpressure after the burst: {fmt_runs([x['backpressure'] for x in tcs])}; tiercache `stats` after the burst: evictions {fmt_runs([x['evictions'] for x in tcs])}, extstore_objects_written {fmt_runs([x['written'] for x in tcs])}, extstore_objects_used {fmt_runs([x['on_flash'] for x in tcs])}, so written − used = {fmt_runs([(x['written'] or 0) - (x['on_flash'] or 0) for x in tcs])} flash items dropped without a reclaim or an eviction). Burst time ratio tiercache / memcached: {m('burst_s', tcs) / m('burst_s', mcs):.2f}.
"""
    print(body)
    write_results("Burst of writes larger than RAM: items kept", body, TAG)


def fl_size(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


if __name__ == "__main__":
    main()
