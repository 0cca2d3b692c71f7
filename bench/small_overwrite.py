#!/usr/bin/env python3
"""The cost of overwriting small keys the small-object store holds.

A delete or overwrite of a key the store may hold rewrites the key's 4 KiB
set durably before the reply (docs/SMALL.md, "Never stale, never
resurrected"), under the shard's lock. This measures what that costs a
memcached user whose sets mostly replace keys that already exist.

Two servers with the same -m and device, each filled with N keys of
KLEN-byte keys and VLEN-byte values (most of them leave RAM):

- small: `-o ext_path=DIR/tc.flash:SIZE,ext_small_max=SMALL_MAX,ext_small_share=SHARE`
- log:   `-o ext_path=DIR/tc.flash:SIZE` (the log-structured tier alone)

Then RUNS paired runs of SECS seconds each of `tiercache-bench` sets over the
same N keys (uniform, GET_RATIO of gets; 0 = only sets), alternating which
server goes first. Reports ops/s (medians, ratio small/log), and per set
during the runs: store invalidations (`small_invalidations`), set writes
(`small_sets_written`) and device bytes (`extstore_bytes_written` plus the store's
`small_log_bytes_written` and `small_set_bytes_written`).

Environment: N=1000000 KLEN=32 VLEN=100 MEM=64 SIZE=512M SMALL_MAX=512 SHARE=90
             GET_RATIO=0 RUNS=3 SECS=8 DUTY=0 PORT=21715 RESULTS=bench/RESULTS.md (- to print)

DUTY is the small server's `ext_small_flush_duty`: 0 (the default here) makes the
fill wait for the store, so that it holds most keys when the overwrites start;
with the server's default (3) it admits what its flush pace allows and the
log tier takes the rest.
"""
import contextlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench, set_keys  # noqa: E402
from lib.report import write_results  # noqa: E402
from lib.servers import scratch_server, tiercache_cmd  # noqa: E402
from lib.stats import fmt_runs, median  # noqa: E402
from lib.util import commit, log, machine, now_utc  # noqa: E402

TAG = "small_overwrite"
K = scenario.knobs(TAG)
PREFIX = "k" * (K.KLEN - 8) + ":"
COUNTED = ("cmd_set", "small_invalidations", "small_sets_written", "extstore_bytes_written",
           "small_log_bytes_written", "small_set_bytes_written", "small_objects", "small_flush_waits")


def small_cmd(d):
    return tiercache_cmd(K.PORT + 1, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}",
                                               f"ext_small_max={K.SMALL_MAX}",
                                               f"ext_small_share={K.SHARE}",
                                               f"ext_small_flush_duty={K.DUTY}"])


def log_cmd(d):
    return tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}"])


def overwrite(port):
    r = bench(port, ["--threads", 2, "--conns", 8, "--pipeline", 4, "--keys", K.N,
                        "--key-prefix", PREFIX, "--value-size", K.VLEN,
                        "--get-ratio", K.GET_RATIO, "--dist", "uniform", "-d", f"{K.SECS}s"],
                 TAG, timeout=K.SECS + 120)["runs"][0]
    return r["ops_per_sec"]


def main():
    build(TAG)
    servers = {}
    with contextlib.ExitStack() as stack:
        for name, make, port in (("small", small_cmd, K.PORT + 1), ("log", log_cmd, K.PORT)):
            srv, shown = stack.enter_context(scratch_server(TAG, "tiercache", make, port))
            t = set_keys(port, range(K.N), K.VLEN, prefix=PREFIX)
            log(TAG, f"{name}: {K.N:,} sets in {t:.1f} s")
            servers[name] = (srv, shown, port)
        before = {n: s.stats() for n, (s, _, _) in servers.items()}
        runs = {"small": [], "log": []}
        for i in range(K.RUNS):
            order = ["small", "log"] if i % 2 == 0 else ["log", "small"]
            for n in order:
                runs[n].append(overwrite(servers[n][2]))
            log(TAG, f"run {i}: small {runs['small'][-1]:,.0f} ops/s, log {runs['log'][-1]:,.0f}")
        after = {n: s.stats() for n, (s, _, _) in servers.items()}
        shown = {n: servers[n][1] for n in servers}
    d = {n: {k: float(after[n].get(k, 0) or 0) - float(before[n].get(k, 0) or 0) for k in COUNTED}
         for n in servers}
    med = {n: median(runs[n]) for n in runs}
    for n in d:
        d[n]["device"] = sum(d[n][k] for k in ("extstore_bytes_written", "small_log_bytes_written",
                                              "small_set_bytes_written"))
    per = lambda n, k: d[n][k] / max(d[n]["cmd_set"], 1)  # noqa: E731
    body = (
        f"`N={K.N} GET_RATIO={K.GET_RATIO} DUTY={K.DUTY} RUNS={K.RUNS} SECS={K.SECS} python3 bench/run.py small_overwrite` "
        f"({now_utc()}, commit {commit()}; {machine()})\n\n"
        f"- small: `{shown['small']}`\n- log: `{shown['log']}`\n\n"
        "| server | ops/s (median; runs) | store invalidations per set | set writes per set | "
        "device bytes per set | small objects |\n| --- | --- | --- | --- | --- | --- |\n"
        f"| small | {med['small']:,.0f} ({fmt_runs(runs['small'])}) | {per('small', 'small_invalidations'):.2f} | "
        f"{per('small', 'small_sets_written'):.2f} | {per('small', 'device'):,.0f} | "
        f"{before['small'].get('small_objects')} at the start, {after['small'].get('small_objects')} at the end |\n"
        f"| log | {med['log']:,.0f} ({fmt_runs(runs['log'])}) | - | - | "
        f"{per('log', 'device'):,.0f} | - |\n\n"
        f"Overwrite throughput, small store / log tier: **{med['small'] / max(med['log'], 1):.2f}x** "
        f"(paired medians of {K.RUNS}). Changes that waited for a flush under way: "
        f"{d['small']['small_flush_waits']:.0f}.\n")
    write_results("Overwrites of small keys the store holds (small_overwrite.py)", body, TAG)


if __name__ == "__main__":
    main()
