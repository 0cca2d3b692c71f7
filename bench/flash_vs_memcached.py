#!/usr/bin/env python3
"""tiercache vs memcached 1.6 extstore at the same memory budget.

Each server runs in its own memory cgroup with the same limit (LIMIT MiB, RSS
plus page cache: cgroup v1 memory.limit_in_bytes, or v2 memory.max), the same
-m (MEM MiB), 2 threads and a FLASH_SIZE flash file in the same directory.
Both get the same KEYS x VALUE-byte dataset (several times LIMIT), written
gently (one connection, PRELOAD_MBS MB/s of values, then the keys found
missing written again, up to 4 times, as clients would refill misses) so that
both servers hold the whole dataset, then zipf:SKEW reads:
  - throughput: closed loop, 2 threads x CONNS connections x PIPELINE gets in flight;
  - latency: open loop at a rate both servers sustain (LAT_FRACTION x the lower
    of the two median throughputs), latency from the intended send time.
A warm-up run per server first (not counted); then RUNS runs, alternating.

Environment: LIMIT=256 MEM=192 KEYS=300000 VALUE=4000 SKEW=0.99 FLASH_SIZE=4G
             RUNS=3 DURATION=10 CONNS=16 PIPELINE=2 PRELOAD_MBS=50 LAT_FRACTION=0.5
             MC_EXT_OPTS= TC_EXT_OPTS= RESULTS=bench/RESULTS.md
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import paths, scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench, fill_all  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.servers import Cgroup, Server, memcached_cmd, tiercache_cmd  # noqa: E402
from lib.stats import fmt_runs, med_of, median  # noqa: E402
from lib.util import fs_of, log, scratch  # noqa: E402

TAG = "flash_vs_memcached"
K = scenario.knobs(TAG)
LIMIT, MEM, KEYS, VALUE, SKEW, FLASH_SIZE = K.LIMIT, K.MEM, K.KEYS, K.VALUE, K.SKEW, K.FLASH_SIZE
RUNS, DURATION, PIPELINE, CONNS = K.RUNS, K.DURATION, K.PIPELINE, K.CONNS
PRELOAD_MBS, LAT_FRACTION = K.PRELOAD_MBS, K.LAT_FRACTION
MC_EXT = [o for o in K.MC_EXT_OPTS.split(",") if o]
TC_EXT = [o for o in K.TC_EXT_OPTS.split(",") if o]
MC_PORT, TC_PORT = 21431, 21432


def measure(srv, args):
    a = srv.stats()
    r = bench(srv.port, args, TAG)["runs"][0]
    b = srv.stats()
    d = {k: b.get(k, 0) - a.get(k, 0) for k in ("cmd_get", "get_hits", "extstore_objects_read",
                                               "flash_hits", "get_extstore")}
    lat = r["latency"]["all"]
    return {"ops": r["ops_per_sec"], "p50": lat["p50_us"], "p99": lat["p99_us"], "p999": lat["p999_us"],
            "hit_ratio": r["hit_ratio"],  # the client's (see flash_fio.py)
            "flash_reads": d["extstore_objects_read"] / r["elapsed_s"],
            "unanswered": r["unanswered"], "rss": srv.rss(), "cg": srv.cgroup.usage()}


def main():
    build(TAG)
    with scratch(TAG) as d:
        run_in(d)


def run_in(d):
    limit = LIMIT << 20
    servers = []
    try:
        mc_cg = Cgroup(f"tiercache-bench-mc-{os.getpid()}", limit)
        tc_cg = Cgroup(f"tiercache-bench-tc-{os.getpid()}", limit)
        mc_cmd = memcached_cmd(MC_PORT, MEM, 2, [f"ext_path={d}/mc.flash:{FLASH_SIZE}"] + MC_EXT)
        tc_cmd = tiercache_cmd(TC_PORT, MEM, 2, [f"ext_path={d}/tc.flash:{FLASH_SIZE}"] + TC_EXT)
        mc = Server("memcached", mc_cmd, MC_PORT, d, cgroup=mc_cg)
        servers.append(mc)
        tc = Server("tiercache", tc_cmd, TC_PORT, d, cgroup=tc_cg)
        servers.append(tc)
        both = [mc, tc]
        load = ["--keys", KEYS, "--value-size", VALUE, "--dist", f"zipf:{SKEW}", "--get-ratio", 1]
        pre = {}
        for s in both:
            log(TAG, f"{s.name}: preloading {KEYS:,} x {VALUE} B")
            secs, first, kept = fill_all(s.port, KEYS, VALUE, PRELOAD_MBS, TAG)
            st = s.stats()
            pre[s.name] = {"s": secs, "first": first, "kept": kept, "curr_items": st.get("curr_items"),
                           "rss": s.rss(), "cg": s.cgroup.usage()}
            log(TAG, f"{s.name}: preload {secs:.1f} s, kept {first:,} after one pass, {kept:,} at the end, "
                   f"curr_items {st.get('curr_items')}, "
                   f"RSS {s.rss() >> 20} MiB, cgroup {s.cgroup.usage() >> 20} MiB")
        tp_args = ["--threads", 2, "--conns", CONNS, "--pipeline", PIPELINE, "-d", f"{DURATION}s", "--no-stats"]
        for s in both:  # warm-up
            w = measure(s, load + tp_args)
            log(TAG, f"{s.name}: warm-up {w['ops']:,.0f} gets/s, hit ratio {w['hit_ratio']:.4f}")
        tp = {"memcached": [], "tiercache": []}
        for run in range(RUNS):
            for s in both:
                r = measure(s, load + tp_args)
                tp[s.name].append(r)
                log(TAG, f"run {run + 1} {s.name}: {r['ops']:,.0f} gets/s, hit ratio {r['hit_ratio']:.4f}, "
                       f"flash reads {r['flash_reads']:,.0f}/s, p50 {r['p50']:.0f} p99 {r['p99']:.0f} us (closed loop), "
                       f"RSS {r['rss'] >> 20} MiB, cgroup {r['cg'] >> 20} MiB")
        m = med_of
        rate = LAT_FRACTION * min(m("ops", tp["memcached"]), m("ops", tp["tiercache"]))
        rate = K.RATE or rate
        lat = {"memcached": [], "tiercache": []}
        lat_args = ["--threads", 2, "--conns", CONNS, "--mode", "latency", "--rate", f"{rate:.0f}",
                    "-d", f"{DURATION}s", "--no-stats"]
        for run in range(RUNS):
            for s in both:
                r = measure(s, load + lat_args)
                lat[s.name].append(r)
                log(TAG, f"latency run {run + 1} {s.name} at {rate:,.0f}/s: achieved {r['ops']:,.0f}, "
                       f"p50 {r['p50']:.0f} p99 {r['p99']:.0f} p99.9 {r['p999']:.0f} us, hit ratio {r['hit_ratio']:.4f}")
        cg = {s.name: {"peak": s.cgroup.peak(), "failcnt": s.cgroup.failcnt(), "oom": s.cgroup.oom_kills(),
                       "alive": s.alive()} for s in both}
        cg_desc = mc_cg.describe()
        tc_end = tc.stats()
    finally:
        for s in servers:
            s.stop()
        for c in ("mc_cg", "tc_cg"):
            if c in dir():
                pass
        try:
            mc_cg.remove()
            tc_cg.remove()
        except NameError:
            pass
    mt, tt = tp["memcached"], tp["tiercache"]
    ml, tl = lat["memcached"], lat["tiercache"]
    ratio = m("ops", tt) / m("ops", mt)
    p99_ok = m("p99", tl) < m("p99", ml)
    verdict = "met" if ratio >= 2 and p99_ok else "not met"
    envs = K.shown

    def row(name, t, lt):
        return (f"| {name} | {m('ops', t):,.0f} | {fmt_runs([x['ops'] for x in t])} | {m('hit_ratio', t):.4f} | "
                f"{m('flash_reads', t):,.0f} | {m('p50', lt):,.0f} | {m('p99', lt):,.0f} | {m('p999', lt):,.0f} | "
                f"{fmt_runs([x['p99'] for x in lt])} | {(cg_peak(name)) or 'n/a'} |")

    def cg_peak(name):
        p = cg[name.split()[0]]["peak"]
        return f"{p / 2**20:.0f}" if p else None

    body = f"""{header(K, f"; files on {fs_of(d)}")}
- memory budget: each server in its own memory cgroup, {cg_desc} ({LIMIT} MiB, RSS plus page cache), same `-m {MEM}`, 2 threads, a {FLASH_SIZE} flash file each
- memcached: `{' '.join(mc_cmd).replace(d, 'DIR')}`
- tiercache: `{' '.join(tc_cmd).replace(d, 'DIR').replace(paths.TIERCACHE, 'tiercache')}` (read backend {tc_end.get('flash_io_backend', 'pool')}, `ext_promote` default; flash_promoted at the end {tc_end.get('flash_promoted', 'n/a')})
- dataset: {KEYS:,} keys x {VALUE} B ({KEYS * VALUE / 2**20:,.0f} MiB, {KEYS * VALUE / limit:.1f}x the limit), written at {PRELOAD_MBS:.0f} MB/s over 1 connection (`set ... noreply`), then missing keys written again, up to 4 passes (memcached {pre['memcached']['s']:.0f} s, kept {pre['memcached']['first']:,} after the first pass and {pre['memcached']['kept']:,} at the end; tiercache {pre['tiercache']['s']:.0f} s, kept {pre['tiercache']['first']:,} and {pre['tiercache']['kept']:,})
- reads: zipf:{SKEW} gets; throughput `tiercache-bench --threads 2 --conns {CONNS} --pipeline {PIPELINE} --get-ratio 1 --dist zipf:{SKEW}` (closed loop, {2 * CONNS * PIPELINE} in flight); latency `--mode latency --rate {rate:.0f}` (open loop, {LAT_FRACTION} x the lower median throughput); {DURATION} s per run, one warm-up run each, then {RUNS} runs alternating servers, medians

| server | gets/s | runs | hit ratio | flash reads/s | p50 us | p99 us | p99.9 us | runs p99 us | cgroup peak MiB |
| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |
{row('memcached 1.6.18', mt, ml)}
{row('tiercache', tt, tl)}

Latency columns are from the open-loop runs at {rate:,.0f} gets/s (achieved: memcached {m('ops', ml):,.0f}, tiercache {m('ops', tl):,.0f}). Closed-loop service time p50 / p99: memcached {m('p50', mt):,.0f} / {m('p99', mt):,.0f} us, tiercache {m('p50', tt):,.0f} / {m('p99', tt):,.0f} us.
Throughput tiercache / memcached: **{ratio:.2f}x**; p99 tiercache / memcached: **{m('p99', tl) / max(1e-9, m('p99', ml)):.2f}** (target >= 2x and a lower p99: **{verdict}**).
cgroup limit hits (failcnt) memcached {cg['memcached']['failcnt']}, tiercache {cg['tiercache']['failcnt']}; OOM kills memcached {cg['memcached']['oom']}, tiercache {cg['tiercache']['oom']}; both alive at the end: {cg['memcached']['alive'] and cg['tiercache']['alive']}.
"""
    print(body)
    write_results("tiercache vs memcached extstore at the same memory budget", body, TAG)


if __name__ == "__main__":
    main()
