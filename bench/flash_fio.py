#!/usr/bin/env python3
"""Flash-hit throughput against the device's own limit, in one run.

Alternates, RUNS times: fio 4 KiB random reads (io_uring, O_DIRECT, iodepth QD)
on a file in the same file system as tiercache's flash file, and tiercache
serving gets of VALUE-byte values (one 4 KiB block per record) from a dataset
many times -m, so that nearly every get is a flash read, with QD gets in
flight from the client (CLIENT_THREADS x CLIENT_CONNS connections x PIPELINE;
the server reads the flash records of pipelined gets ahead). Part of those
are always on the network or in the client, so the server's own device queue
depth (`extstore_io_queue`) is sampled during the run and reported: it stays
below fio's iodepth (about half of QD at QD 32 and 64). ext_threads=QD
sizes the pread pool if that backend is used; EXT_OPTS adds options such as
ext_io=pool or ext_promote=never. Reports medians and tiercache's flash
reads/s / fio IOPS.

Three more measurements per run put the ratio in context:
- tiercache's read path alone (crates/engine/examples/flash_randread.rs: the
  server's io_uring reader, SERVER_THREADS rings, QD reads in flight in all)
  on fio's file, with no network: how close the reader itself comes to fio;
- fio again while one CPU spins: on a virtual machine the device's emulation
  may share the host CPUs with the guest's, so a guest that keeps CPUs busy
  (as a server and its load generator do) gets fewer IOPS from its disk;
- fio again while tiercache serves gets of RAM_KEYS keys that are in RAM
  (written last) at the rate it just served flash hits, open loop: the same
  network and client work beside the device, without flash reads of
  tiercache's own; what the device gives while the machine does that work.

Environment (all optional):
  QD=64 RUNS=3 DURATION=10  queue depth, runs, seconds per run
  KEYS=200000 VALUE=4000    dataset (KEYS x VALUE bytes; -m is MEM MiB)
  RAM_KEYS=2000             keys for the RAM-hit load beside fio
  MEM=64 SERVER_THREADS=2 FLASH_SIZE=2G
  CLIENT_THREADS=2 PIPELINE=16 CLIENT_CONNS=QD/(CLIENT_THREADS x PIPELINE)
  EXT_OPTS=  extra -o options for tiercache (comma-separated)
  RESULTS=bench/RESULTS.md ("-" for nowhere)
"""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import paths, scenario  # noqa: E402
from lib.build import build, build_reader  # noqa: E402
from lib.devices import beside, fio, flash_server, need_fio, reader, spinning_cpu  # noqa: E402
from lib.load import bench  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.stats import fmt_runs, med_of, median  # noqa: E402
from lib.util import cpu_delta, fs_of, log, machine, scratch, size_bytes  # noqa: E402

TAG = "flash_fio"
K = scenario.knobs(TAG)
QD, RUNS, DURATION, KEYS, VALUE, MEM = K.QD, K.RUNS, K.DURATION, K.KEYS, K.VALUE, K.MEM
CT, PIPELINE = K.CLIENT_THREADS, K.PIPELINE
FLASH_SIZE, SERVER_THREADS = K.FLASH_SIZE, K.SERVER_THREADS
CC = K.CLIENT_CONNS or max(1, QD // (CT * PIPELINE))
PORT = K.PORT


class QueueSampler:
    """Samples the server's reads in flight (`extstore_io_queue`) every 50 ms
    while a run lasts; `mean()` afterwards."""

    def __init__(self, srv):
        self.srv, self.samples, self.stop = srv, [], threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        while not self.stop.wait(0.05):
            try:
                self.samples.append(self.srv.stats().get("extstore_io_queue", 0))
            except OSError:
                return

    def mean(self):
        self.stop.set()
        self.t.join()
        return sum(self.samples) / max(1, len(self.samples))


def cpu_line(tc_runs):
    groups = sorted({g for t in tc_runs for g in t["cpu"]})
    parts = []
    total = 0.0
    for g in groups:
        u = median([t["cpu"].get(g, (0, 0))[0] for t in tc_runs])
        s = median([t["cpu"].get(g, (0, 0))[1] for t in tc_runs])
        total += u + s
        if u + s >= 0.1:
            parts.append(f"{g} threads {u:.1f} + {s:.1f} us")
    return ", ".join(parts) + f"; {total:.1f} us in all"


def main():
    build(TAG)
    build_reader(TAG)
    need_fio(TAG)
    with scratch(TAG) as d:
        run_in(d)


def run_in(d):
    load = ["--threads", CT, "--conns", CC, "--keys", KEYS, "--value-size", VALUE]
    # written last, so in RAM: the load beside fio in the third context row
    ram_load = ["--threads", CT, "--conns", 16, "--keys", K.RAM_KEYS, "--key-prefix", "ram:", "--value-size", VALUE]
    srv, tc_cmd, fio_file = flash_server(TAG, d, K, SERVER_THREADS, load, ram_load, "1s")
    try:
        fio_runs, tc_runs, reader_runs, busy_runs, loaded_runs = [], [], [], [], []
        for run in range(RUNS):
            f = fio(fio_file, FLASH_SIZE, QD, DURATION)
            fio_runs.append(f)
            log(TAG, f"run {run + 1}: fio {f['iops']:,.0f} IOPS (p50 {f['p50_us']:.0f} us, p99 {f['p99_us']:.0f} us)")
            rd = reader(fio_file, size_bytes(FLASH_SIZE), SERVER_THREADS, QD, DURATION)
            reader_runs.append(rd)
            with spinning_cpu():
                fb = fio(fio_file, FLASH_SIZE, QD, DURATION)
            busy_runs.append(fb)
            log(TAG, f"run {run + 1}: reader alone {rd['iops']:,.0f} reads/s (errors {rd['errors']}, "
                   f"short {rd['short']}); fio with one CPU spinning {fb['iops']:,.0f} IOPS")
            a = srv.stats()
            ca = srv.thread_cpu()
            q = QueueSampler(srv)
            r = bench(PORT, load + ["--get-ratio", "1", "--pipeline", PIPELINE,
                                       "-d", f"{DURATION}s", "--no-stats"], TAG)["runs"][0]
            qd_mean = q.mean()
            b = srv.stats()
            cpu = cpu_delta(ca, srv.thread_cpu())
            dt = r["elapsed_s"]
            delta = {k: b.get(k, 0) - a.get(k, 0) for k in
                     ("cmd_get", "get_hits", "get_misses", "flash_hits", "extstore_objects_read",
                      "flash_read_errors", "flash_verify_failures")}
            t = {
                "gets": r["gets_per_sec"],
                "flash_reads": delta["extstore_objects_read"] / dt,
                "flash_hit_frac": delta["flash_hits"] / max(1, delta["get_hits"]),
                "hit_ratio": r["hit_ratio"],  # the client's: the server's cmd_get also counts a get's first, RAM-only pass
                "errors": delta["flash_read_errors"] + delta["flash_verify_failures"],
                "p50": r["latency"]["all"]["p50_us"], "p99": r["latency"]["all"]["p99_us"],
                "qd": qd_mean,
                "cpu": {k: (u * 1e6 / max(1, r["gets"]), s_ * 1e6 / max(1, r["gets"]))
                        for k, (u, s_) in cpu.items()},
            }
            tc_runs.append(t)
            log(TAG, f"run {run + 1}: tiercache {t['gets']:,.0f} gets/s, {t['flash_reads']:,.0f} flash reads/s "
                   f"(flash hits {t['flash_hit_frac']:.1%} of hits, hit ratio {t['hit_ratio']:.4f}, "
                   f"ratio to fio {t['flash_reads'] / f['iops']:.2f}, device queue depth {qd_mean:.1f})")
            a = srv.stats()
            lf, lr = beside(
                lambda: bench(PORT, ram_load + ["--mode", "latency", "--rate", f"{t['gets']:.0f}", "--get-ratio", 1,
                                                   "-d", f"{DURATION + 3}s", "--no-stats"], TAG)["runs"][0],
                lambda: fio(fio_file, FLASH_SIZE, QD, DURATION))
            b = srv.stats()
            lf["ram_gets"] = lr["ops_per_sec"]
            lf["ram_flash_frac"] = (b.get("flash_hits", 0) - a.get("flash_hits", 0)) / max(
                1, b.get("get_hits", 0) - a.get("get_hits", 0))
            loaded_runs.append(lf)
            log(TAG, f"run {run + 1}: fio while tiercache serves {lr['ops_per_sec']:,.0f} RAM-hit gets/s "
                   f"(flash {lf['ram_flash_frac']:.1%} of those hits): {lf['iops']:,.0f} IOPS")
        end = srv.stats()
    finally:
        srv.stop()
    m = med_of
    fio_iops = m("iops", fio_runs)
    ratios = [t["flash_reads"] / f["iops"] for t, f in zip(tc_runs, fio_runs)]
    ratio = median(ratios)
    reader_ratio = median([r["iops"] / f["iops"] for r, f in zip(reader_runs, fio_runs)])
    busy_ratio = median([b["iops"] / f["iops"] for b, f in zip(busy_runs, fio_runs)])
    loaded_ratio = median([x["iops"] / f["iops"] for x, f in zip(loaded_runs, fio_runs)])
    vs_loaded = median([t["flash_reads"] / x["iops"] for t, x in zip(tc_runs, loaded_runs)])
    verdict = "met" if ratio >= 0.8 else "not met"
    body = f"""{header(K, f"; files on {fs_of(d)} (a virtual disk: O_DIRECT bypasses the guest's page cache, not the host's)")}
- device: `{fio_runs[0]['cmd'].replace(fio_file, 'DIR/fio.dat')}`
- tiercache: `{' '.join(tc_cmd).replace(d, 'DIR').replace(paths.TIERCACHE, 'tiercache')}`, {KEYS:,} keys x {VALUE} B values preloaded ({KEYS * VALUE / 2**20:,.0f} MiB, {KEYS * VALUE / 2**20 / MEM:.0f}x -m), {end.get('extstore_objects_used', 0):,} on flash; read backend (`stats` flash_io_backend): {end.get('flash_io_backend', 'pool (no such stat)')}
- load: tiercache-bench `--threads {CT} --conns {CC} --pipeline {PIPELINE} --get-ratio 1 --keys {KEYS} --value-size {VALUE}` (uniform keys, {CT * CC * PIPELINE} gets in flight), {DURATION} s per run; the server's device queue depth (`extstore_io_queue` sampled every 50 ms) averaged {median([t['qd'] for t in tc_runs]):.1f} (median of the runs' means); fio and tiercache alternate, {RUNS} runs each, medians

| | fio 4 KiB randread QD{QD} | tiercache gets | tiercache flash reads |
| --- | ---: | ---: | ---: |
| per second (median) | {fio_iops:,.0f} | {m('gets', tc_runs):,.0f} | {m('flash_reads', tc_runs):,.0f} |
| runs | {fmt_runs([f['iops'] for f in fio_runs])} | {fmt_runs([t['gets'] for t in tc_runs])} | {fmt_runs([t['flash_reads'] for t in tc_runs])} |
| p50 / p99 us (median) | {m('p50_us', fio_runs):,.0f} / {m('p99_us', fio_runs):,.0f} | {m('p50', tc_runs):,.0f} / {m('p99', tc_runs):,.0f} (closed loop, service time) | |

CPU per request (medians): fio {m('cpu_us_per_io', fio_runs):.1f} us per read (user + system, from its JSON); tiercache, per get, user + system: {cpu_line(tc_runs)}.

Flash reads / fio IOPS per run: {fmt_runs(ratios, '{:.2f}')}; median **{ratio:.2f}** (target >= 0.8: **{verdict}**).

Context, same runs (medians; ratios to fio alone in the same run):
- tiercache's read path alone, no network (`{reader_runs[0]['cmd'].replace(fio_file, 'DIR/fio.dat').replace(paths.READER, 'flash_randread')}`): {m('iops', reader_runs):,.0f} reads/s ({fmt_runs([r['iops'] for r in reader_runs])}), **{reader_ratio:.2f}** x fio; errors + short reads {sum(r['errors'] + r['short'] for r in reader_runs)}
- fio while one CPU spins (`sh -c 'while :; do :; done'`): {m('iops', busy_runs):,.0f} IOPS ({fmt_runs([b['iops'] for b in busy_runs])}), **{busy_ratio:.2f}** x fio alone
- fio while tiercache serves RAM hits ({K.RAM_KEYS:,} other keys, `--key-prefix ram:`, open loop) at the rate it served flash hits in that run ({fmt_runs([x['ram_gets'] for x in loaded_runs])} gets/s; flash hits {m('ram_flash_frac', loaded_runs):.1%} of those hits): {m('iops', loaded_runs):,.0f} IOPS ({fmt_runs([x['iops'] for x in loaded_runs])}), **{loaded_ratio:.2f}** x fio alone; tiercache's flash reads / this: **{vs_loaded:.2f}**

Flash hits were {median([t['flash_hit_frac'] for t in tc_runs]):.1%} of get hits, get hit ratio {median([t['hit_ratio'] for t in tc_runs]):.4f}, read errors + verify failures {sum(t['errors'] for t in tc_runs)}.
"""
    print(body)
    write_results("Flash-hit throughput vs fio (4 KiB random reads)", body, TAG)


if __name__ == "__main__":
    main()
