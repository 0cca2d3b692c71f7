#!/usr/bin/env python3
"""Issue 16: the small-object store in the server (`ext_small_max`).

Three servers with the same -m, loaded with the same N keys of KLEN-byte keys
and VLEN-byte values (one connection, noreply, then `mn`):

RATE (MB/s of values, 0 = as fast as one connection goes) paces the small
server's load: the store admits at the pace of its segment flushes (a
quarter of the time at most) and sends the rest to the log tier meanwhile.
DUTY=0 (`ext_small_flush_duty=0`) makes the load wait for the store instead.

- small: `-o ext_path=DIR/tc.flash:SIZE,ext_small_max=SMALL_MAX,ext_small_share=SHARE`
- log:   `-o ext_path=DIR/tc.flash:SIZE` (the log-structured tier alone)
- ram:   `-o ext_path=none` (RAM only)

Reports, for small and log: items on flash, the device share they fill, RSS,
DRAM per flash item (the store's own DRAM, inside -m, from `small_dram_bytes`;
what the server holds beyond -m, from RSS against the RAM-only server), write
amplification (`small_write_amplification`, `flash_write_amplification`),
refused sets, and every STEP-th key read back with its value checked (wrong
values must be 0). Then flash-hit throughput: `tiercache-bench` gets over
keys no longer in RAM (every key but the last ones set), small vs log, as
paired runs (RUNS), medians and the ratio.

Environment: N=6000000 KLEN=32 VLEN=100 MEM=64 SIZE=1G SMALL_MAX=512 SHARE=90
             STEP=50 RUNS=5 SECS=8 RATE=0 DUTY=3 EXTRA= PORT=21615 REST_S=7
             (EXTRA: more -o options for both flash servers, comma-separated) RESULTS=bench/RESULTS.md (RESULTS=- to skip writing)
"""
import contextlib
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario, util  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench, read_back, set_keys  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.servers import scratch_server, tiercache_cmd  # noqa: E402
from lib.stats import fmt_runs, median  # noqa: E402


TAG = "small_fit"
K = scenario.knobs(TAG)
# Keys of exactly KLEN bytes: the prefix pads the decimal number.
PREFIX = "k" * (K.KLEN - 8) + ":"


def extra():
    return [o for o in K.EXTRA.split(",") if o]


def small_cmd(d):
    return tiercache_cmd(K.PORT + 1, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}",
                                               f"ext_small_max={K.SMALL_MAX}",
                                               f"ext_small_share={K.SHARE}",
                                               f"ext_small_flush_duty={K.DUTY}"] + extra())


def log_cmd(d):
    return tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}"] + extra())


def ram_cmd(_d):
    return tiercache_cmd(K.PORT, K.MEM, 2, ["ext_path=none"])


def num(st, k):
    try:
        return float(st.get(k, 0) or 0)
    except ValueError:
        return 0.0


def load(name, srv, port, shown, rate=None):
    # The highest RSS seen while the keys go in (sampled every 0.2 s), then
    # RSS at rest: after REST_S, longer than the maintenance thread's heap
    # trim interval (5 s), so freed heap has been given back once.
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.2):
            peak[0] = max(peak[0], srv.rss() or 0)
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        t = set_keys(port, range(K.N), K.VLEN, mb_per_s=rate, prefix=PREFIX)
    finally:
        done.set()
        sampler.join()
    time.sleep(K.REST_S)
    st = srv.stats()
    rss = srv.rss()
    sample = range(0, K.N, K.STEP)
    got, bad = read_back(port, sample, K.VLEN, PREFIX)
    r = dict(name=name, shown=shown, t=t, st=st, rss=rss, peak=max(peak[0], rss), sampled=len(sample),
             got=got, bad=bad)
    util.log(TAG, f"{name}: {K.N:,} sets in {t:.1f} s; read back {got:,} of {len(sample):,}, {bad} wrong; "
                f"RSS {rss / 2**20:.1f} MiB at rest, {r['peak'] / 2**20:.1f} MiB at most while loading")
    return r


def gets(port):
    """Flash-hit gets, uniform over the keys: (ops/s, hit ratio)."""
    r = bench(port, ["--threads", 2, "--conns", 8, "--pipeline", 4, "--keys", K.N, "--key-prefix", PREFIX,
                        "--value-size", K.VLEN, "--get-ratio", 1, "--dist", "uniform", "-d", f"{K.SECS}s"],
                 TAG, timeout=K.SECS + 120)["runs"][0]
    return r["ops_per_sec"], r["hit_ratio"]


def one(name, make, port):
    with scratch_server(TAG, "tiercache", make, port) as (srv, shown):
        return load(name, srv, port, shown)


def main():
    build(TAG)
    with contextlib.ExitStack() as stack:
        srv_s, shown_s = stack.enter_context(scratch_server(TAG, "tiercache", small_cmd, K.PORT + 1))
        small = load("small", srv_s, K.PORT + 1, shown_s, float(K.RATE) or None)
        srv_l, shown_l = stack.enter_context(scratch_server(TAG, "tiercache", log_cmd, K.PORT))
        log = load("log", srv_l, K.PORT, shown_l)
        runs = {"small": [], "log": []}
        for i in range(K.RUNS):
            order = [("small", K.PORT + 1), ("log", K.PORT)]
            for name, port in order if i % 2 == 0 else order[::-1]:
                runs[name].append(gets(port))
            util.log(TAG, f"gets run {i}: small {runs['small'][-1]}, log {runs['log'][-1]}")
        hits_s = srv_s.stats()
        hits_l = srv_l.stats()
    ram = one("ram", ram_cmd, K.PORT)
    s, lg = small["st"], log["st"]
    objs = num(s, "small_objects")
    region = num(s, "small_region_bytes")
    obj_bytes = 20 + K.KLEN + K.VLEN
    fill = objs * obj_bytes / max(region, 1)
    inside = num(s, "small_dram_bytes") / max(objs, 1)
    beyond_small = (small["rss"] - ram["rss"]) / max(objs, 1)
    log_items = num(lg, "extstore_objects_used")
    beyond_log = (log["rss"] - ram["rss"]) / max(log_items, 1)
    log_index = num(lg, "flash_index_bytes_per_item")
    body = [
        header(K),
        f"- servers: small `{small['shown']}`; log `{log['shown']}`; RAM-only `{ram['shown']}`",
        "",
        f"{K.N:,} keys of {K.KLEN} B with {K.VLEN}-byte values, one connection, noreply; every "
        f"{K.STEP}th key read back with its value checked.",
        "",
        "| server | sets s | on flash | flash share filled | DRAM/flash item inside -m | beyond -m (RSS - RAM-only RSS) | "
        "write amplification | `store_no_memory` | read back | wrong |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| small store | {small['t']:.0f} | {objs:,.0f} objects | {fill:.0%} of its region | {inside:.2f} B "
        f"(`small_dram_bytes`) | {beyond_small:.2f} B | {num(s, 'small_write_amplification'):.2f} (store), "
        f"{num(s, 'flash_write_amplification'):.2f} (device) | {s.get('store_no_memory')} | "
        f"{small['got']:,} of {small['sampled']:,} | {small['bad']} |",
        f"| log tier | {log['t']:.0f} | {log_items:,.0f} items | - | {log_index:.2f} B (index entry) | "
        f"{beyond_log:.2f} B | {num(lg, 'flash_write_amplification'):.2f} | {lg.get('store_no_memory')} | "
        f"{log['got']:,} of {log['sampled']:,} | {log['bad']} |",
        "",
        f"RSS at rest ({K.REST_S} s after the load): small {small['rss'] / 2**20:.1f} MiB, log "
        f"{log['rss'] / 2**20:.1f} MiB, RAM-only {ram['rss'] / 2**20:.1f} MiB; the most seen while loading: small "
        f"{small['peak'] / 2**20:.1f} MiB, log {log['peak'] / 2**20:.1f} MiB, RAM-only {ram['peak'] / 2**20:.1f} MiB "
        f"(beyond -m at that peak: small {(small['peak'] - ram['peak']) / max(objs, 1):.2f} B per object). Small store: sets written {s.get('small_sets_written')}, moved "
        f"{s.get('small_moved')}, dropped {s.get('small_dropped')}, evicted {s.get('small_evicted')}, "
        f"invalidations {s.get('small_invalidations')}, false-positive reads {s.get('small_false_positive_reads')} "
        f"of {s.get('small_reads')} reads.",
        "",
    ]
    ops_s = median([r[0] for r in runs["small"]])
    ops_l = median([r[0] for r in runs["log"]])
    # Hits per second: a miss costs no flash read, so the servers compare
    # on what they served.
    hits_ps = median([r[0] * (r[1] or 0) for r in runs["small"]])
    hits_pl = median([r[0] * (r[1] or 0) for r in runs["log"]])
    body += [
        f"Flash-hit throughput: `tiercache-bench --threads 2 --conns 8 --pipeline 4 --keys {K.N} --get-ratio 1 "
        f"--dist uniform -d {K.SECS}s` against each server, alternating, {K.RUNS} runs each.",
        "",
        "| server | ops/s (runs) | median | hit ratio (median run) | reads from the store / the log tier |",
        "| --- | --- | ---: | ---: | --- |",
        f"| small store | {fmt_runs([r[0] for r in runs['small']])} | {ops_s:,.0f} | "
        f"{median([r[1] or 0 for r in runs['small']]):.3f} | `small_hits` {hits_s.get('small_hits')}, `small_reads` "
        f"{hits_s.get('small_reads')}, `small_false_positive_reads` {hits_s.get('small_false_positive_reads')} |",
        f"| log tier | {fmt_runs([r[0] for r in runs['log']])} | {ops_l:,.0f} | "
        f"{median([r[1] or 0 for r in runs['log']]):.3f} | `get_extstore` {hits_l.get('get_extstore')} |",
        "",
        f"Hits per second (ops/s x hit ratio), medians: small store {hits_ps:,.0f}, log tier {hits_pl:,.0f}: "
        f"**{hits_ps / max(hits_pl, 1):.2f}x** (target: at least 0.8x); requests per second "
        f"{ops_s / max(ops_l, 1):.2f}x.",
        "",
    ]
    write_results("Issue 16: the small-object store in the server (small_fit.py)", "\n".join(body), TAG)


if __name__ == "__main__":
    main()
