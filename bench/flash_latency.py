#!/usr/bin/env python3
"""Flash-hit latency at half of the device's IOPS, open loop.

1. fio 4 KiB random reads (io_uring, O_DIRECT, iodepth QD) on a file in the
   same file system, CAL_RUNS times: the device's IOPS (median).
2. RATE = FRACTION (0.5) x that. Then, alternating RUNS times: tiercache-bench
   in latency mode (open loop, latency from the intended send time) at RATE
   gets/s of VALUE-byte values that are on flash, and fio at the same rate
   (--rate_iops, Poisson arrivals) for the device's own latency at that load.
3. Two controls per rate and run, with the same server and client: gets of
   keys in RAM at the same rate (the machine's floor), and the same RAM gets
   while fio reads the device at the same rate beside them (no flash read of
   tiercache's own): what the device's reads alone do to a RAM-only server's
   tail on this machine.

Environment: QD=32 CLIENT_CONNS=QD/2 (x 2 threads) FRACTION=0.5
             EXTRA_FRACTIONS=0.25,0.1 (lower rates, for context) RUNS=3 CAL_RUNS=3 DURATION=10 KEYS=200000
             VALUE=4000 MEM=64 FLASH_SIZE=2G EXT_OPTS= RATE= (fixed rate instead
             of FRACTION x fio) RESULTS=bench/RESULTS.md
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import devices, paths, scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.devices import flash_server, fio, need_fio  # noqa: E402
from lib.load import bench  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.stats import fmt_runs, med_of, median  # noqa: E402
from lib.util import cpu_ticks, fs_of, log, machine, scratch, steal_share  # noqa: E402

TAG = "flash_latency"
K = scenario.knobs(TAG)
QD, FRACTION, RUNS, CAL_RUNS, DURATION = K.QD, K.FRACTION, K.RUNS, K.CAL_RUNS, K.DURATION
KEYS, VALUE, MEM, FLASH_SIZE, PORT, RAM_KEYS = K.KEYS, K.VALUE, K.MEM, K.FLASH_SIZE, K.PORT, K.RAM_KEYS
CT = 2
# one request per connection waits for flash at a time: QD connections for QD reads in flight
CC = K.CLIENT_CONNS or max(1, QD // CT)


def one(srv, load, rate):
    a = srv.stats()
    ta = cpu_ticks()
    r = bench(PORT, [str(x) for x in load] + ["--mode", "latency", "--rate", f"{rate:.0f}", "--get-ratio", 1,
                               "-d", f"{DURATION}s", "--no-stats"], TAG)["runs"][0]
    steal = steal_share(ta, cpu_ticks())
    b = srv.stats()
    g = r["latency"].get("get_hit") or r["latency"]["all"]
    delta = {k: b.get(k, 0) - a.get(k, 0) for k in ("cmd_get", "get_hits", "flash_hits")}
    return {"achieved": r["ops_per_sec"], "p50": g["p50_us"], "p99": g["p99_us"],
            "p999": g["p999_us"], "max": g["max_us"],
            "flash_frac": delta["flash_hits"] / max(1, delta["get_hits"]),
            "hit_ratio": r["hit_ratio"],  # the client's (see flash_fio.py)
            "lag_p99": (r.get("send_lag") or {}).get("p99_us") or 0,
            "steal": steal,
            "unanswered": r["unanswered"]}


def main():
    build(TAG)
    need_fio(TAG)
    with scratch(TAG) as d:
        run_in(d)


def run_in(d):
    load = ["--threads", CT, "--conns", CC, "--keys", KEYS, "--value-size", VALUE]
    # control: a small set of keys written last, so in RAM: the machine's latency floor
    ram_load = ["--threads", CT, "--conns", CC, "--keys", RAM_KEYS, "--key-prefix", "ram:", "--value-size", VALUE]
    srv, tc_cmd, fio_file = flash_server(TAG, d, K, 2, load, ram_load)
    try:
        cal = []
        for i in range(CAL_RUNS):
            cal.append(fio(fio_file, FLASH_SIZE, QD, max(5, DURATION // 2)))
            log(TAG, f"device: fio QD{QD} {cal[-1]['iops']:,.0f} IOPS")
        dev_iops = median([c["iops"] for c in cal])
        fracs = [FRACTION] + [float(x) for x in K.EXTRA_FRACTIONS.split(",") if x]
        rates = [K.RATE] if K.RATE else [f * dev_iops for f in fracs]
        log(TAG, f"device {dev_iops:,.0f} IOPS (median); rates {', '.join(f'{r:,.0f}' for r in rates)}/s")
        backend = srv.stats().get("flash_io_backend", "pool (no such stat)")
        tcs = {r: [] for r in rates}
        rams = {r: [] for r in rates}
        fios = {r: [] for r in rates}
        beside = {r: [] for r in rates}
        beside_dev = {r: [] for r in rates}
        for run in range(RUNS):
            for rate in rates:
                t = one(srv, load, rate)
                tcs[rate].append(t)
                f = fio(fio_file, FLASH_SIZE, QD, DURATION, rate_iops=rate)
                fios[rate].append(f)
                c = one(srv, ram_load, rate)
                rams[rate].append(c)
                b, bf = devices.beside(lambda: fio(fio_file, FLASH_SIZE, QD, DURATION + 3, rate_iops=rate),
                                  lambda: one(srv, ram_load, rate))
                beside[rate].append(b)
                beside_dev[rate].append(bf)
                log(TAG, f"run {run + 1} at {rate:,.0f}/s: tiercache {t['achieved']:,.0f}/s p50 {t['p50']:.0f} "
                       f"p99 {t['p99']:.0f} p99.9 {t['p999']:.0f} us (flash {t['flash_frac']:.1%} of hits, hit "
                       f"ratio {t['hit_ratio']:.4f}); fio at the same rate p50 {f['p50_us']:.0f} p99 {f['p99_us']:.0f} us; "
                       f"RAM hits p50 {c['p50']:.0f} p99 {c['p99']:.0f} us; RAM hits while fio reads at the same rate "
                       f"p50 {b['p50']:.0f} p99 {b['p99']:.0f} us (fio's p99 then {bf['p99_us']:.0f} us)")
    finally:
        srv.stop()
    m = med_of
    rate = rates[0]
    p99 = m("p99", tcs[rate])
    verdict = "met" if p99 < 1000 else "not met"
    envs = K.shown
    rows = []
    for r in rates:
        t, f = tcs[r], fios[r]
        frac = f"{r / dev_iops:.2f} x device" if not K.RATE else "fixed"
        rows.append(f"| {r:,.0f} ({frac}) | tiercache get | {m('achieved', t):,.0f} | {m('p50', t):,.0f} | "
                    f"{m('p99', t):,.0f} | {m('p999', t):,.0f} | {fmt_runs([x['p99'] for x in t])} | "
                    f"{m('lag_p99', t):,.0f} | {m('steal', t):.1%} |")
        c = rams[r]
        rows.append(f"| | tiercache get, RAM hits (control) | {m('achieved', c):,.0f} | {m('p50', c):,.0f} | "
                    f"{m('p99', c):,.0f} | {m('p999', c):,.0f} | {fmt_runs([x['p99'] for x in c])} | "
                    f"{m('lag_p99', c):,.0f} | {m('steal', c):.1%} |")
        b = beside[r]
        rows.append(f"| | tiercache get, RAM hits, while fio reads at this rate (control) | {m('achieved', b):,.0f} | "
                    f"{m('p50', b):,.0f} | {m('p99', b):,.0f} | {m('p999', b):,.0f} | "
                    f"{fmt_runs([x['p99'] for x in b])} | {m('lag_p99', b):,.0f} | {m('steal', b):.1%} |")
        rows.append(f"| | fio (device) | {m('iops', f):,.0f} | {m('p50_us', f):,.0f} | {m('p99_us', f):,.0f} | n/a | "
                    f"{fmt_runs([x['p99_us'] for x in f])} | | |")
    table = "\n".join(rows)
    all_t = [x for r in rates for x in tcs[r]]
    body = f"""{header(K, f"; files on {fs_of(d)}")}
- device IOPS: fio 4 KiB randread, io_uring, O_DIRECT, QD{QD}: {fmt_runs([c['iops'] for c in cal])} (median {dev_iops:,.0f}); target rate = {FRACTION} x that = **{rate:,.0f} gets/s**, lower rates for context
- tiercache: `{' '.join(tc_cmd).replace(d, 'DIR').replace(paths.TIERCACHE, 'tiercache')}`, {KEYS:,} keys x {VALUE} B preloaded ({KEYS * VALUE / 2**20 / MEM:.0f}x -m); read backend {backend}
- load: `tiercache-bench --mode latency --rate R --threads {CT} --conns {CC} --get-ratio 1 --keys {KEYS} --value-size {VALUE}` (open loop, uniform keys, latency from the intended send time), {DURATION} s per run; a control run at the same rate on {RAM_KEYS:,} other keys (`--key-prefix ram:`, written last, so RAM hits) gives this machine's latency floor for the same server and client, and the same RAM run while fio reads the device at the same rate in parallel shows what the device's reads alone do to it; the device's own latency at the same rate from `fio ... --iodepth={QD} --rate_iops=R --rate_process=poisson`; {RUNS} runs, tiercache (flash), fio and tiercache (RAM) alternating, medians

| rate /s | what | achieved /s | p50 us | p99 us | p99.9 us | runs p99 us | client send lag p99 us | CPU stolen by the host |
| --- | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: |
{table}

Flash-hit p99 at {FRACTION} of the device's IOPS: **{p99:,.0f} us** (target < 1 ms: **{verdict}**). RAM-hit control p99 at that rate: {m('p99', rams[rate]):,.0f} us; the same RAM hits while fio reads the device at that rate beside them: {m('p99', beside[rate]):,.0f} us (fio's own p99 then {m('p99_us', beside_dev[rate]):,.0f} us, alone {m('p99_us', fios[rate]):,.0f} us).
The client's send lag is how late the load generator sent its requests (it is part of the latency, as it must be in an open loop); "CPU stolen" is /proc/stat's steal share during the run: time the hypervisor ran something else, such as this virtual disk's emulation, on the machine's CPUs. Flash hits were {m('flash_frac', all_t):.1%} of get hits (get hit ratio {m('hit_ratio', all_t):.4f}); unanswered {sum(t['unanswered'] for t in all_t)}.
"""
    print(body)
    write_results("Flash-hit latency at half of the device's IOPS", body, TAG)


if __name__ == "__main__":
    main()
