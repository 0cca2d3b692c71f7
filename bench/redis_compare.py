#!/usr/bin/env python3
"""tiercache's Redis port against redis-server 7, with redis-benchmark.

Starts redis-server (no persistence) and tiercache (`-t THREADS`, RAM only,
`-o redis_port`) side by side and runs, for each of unpipelined and `-P
PIPELINE`, `redis-benchmark -t set,get,incr,mset -n N -c CONNS --csv` against
each server, R paired rounds alternating which goes first. Prints each
round's requests per second and p99 latency, the medians, and the median of
the per-round ratios (tiercache / redis) per test; with --results appends a
table to bench/RESULTS.md.

With --flash DIR, instead: tiercache gets `-m FLASH_MB` and a flash file in
DIR, both servers are loaded with --flash-keys keys of 1000 bytes (`SET -r
KEYS -d 1000 -P 16`, about 10x `-m` by default), then R paired rounds of
unpipelined `GET -r KEYS` (random keys, most of tiercache's on flash) give
requests per second and p99; RSS of both after the load is printed.

  python3 bench/run.py redis_compare -- --tiercache target/release/tiercache \\
      [--threads 2] [--requests 100000] [--conns 50] [--pipeline 16] \\
      [--rounds 3] [--results bench/RESULTS.md]

redis-benchmark runs on the same machine and takes a share of its CPU: on
a small machine the figures are the servers' share of it, the ratio is what
this measures.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.util import free_port, port_open  # noqa: E402

TESTS = ["SET", "GET", "INCR", "MSET (10 keys)"]


def wait_port(port):
    for _ in range(200):
        if port_open(port):
            return
        time.sleep(0.05)
    raise RuntimeError("no server on %d" % port)


def bench(port, n, conns, pipeline):
    """requests per second per test of one redis-benchmark run."""
    return run_csv(["-t", "set,get,incr,mset", "-n", str(n), "-c", str(conns), "-P", str(pipeline)], port)


def run_csv(args, port):
    """{test: (requests per second, p99 ms)} of one redis-benchmark --csv run."""
    cmd = ["redis-benchmark", "-p", str(port), "--csv"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200).stdout
    got = {}
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split('","')]
        if len(f) >= 7 and f[0] != "test":
            got[f[0]] = (float(f[1]), float(f[6]))
    return got


def cpu_s(pid):
    """User + system CPU seconds of a process, all its threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def medians(runs, tests):
    """Rows (test, redis rps, tiercache rps, ratio, redis p99, tiercache p99, p99 ratio)."""
    rows = []
    for t in tests:
        rs = [x.get(t, (0.0, 0.0)) for x in runs["redis"]]
        ts = [x.get(t, (0.0, 0.0)) for x in runs["tiercache"]]
        ratio = statistics.median([b[0] / a[0] if a[0] else 0.0 for a, b in zip(rs, ts)])
        pratio = statistics.median([b[1] / a[1] if a[1] else 0.0 for a, b in zip(rs, ts)])
        rows.append((t, statistics.median(r[0] for r in rs), statistics.median(x[0] for x in ts), ratio,
                     statistics.median(r[1] for r in rs), statistics.median(x[1] for x in ts), pratio))
    return rows


def paired(rounds, ports, f, label, pids=None, cpu=None):
    """R rounds of f(port) on each server, alternating which goes first.
    With pids and cpu ({name: []}), each run's server CPU seconds are
    appended to cpu[name]."""
    runs = {"redis": [], "tiercache": []}
    for r in range(rounds):
        order = list(ports.items())
        if r % 2:
            order.reverse()
        for name, port in order:
            c0 = cpu_s(pids[name]) if pids else 0.0
            runs[name].append(f(port))
            if pids:
                cpu[name].append(cpu_s(pids[name]) - c0)
        print("%s round %d: redis %s | tiercache %s" % (label, r + 1, runs["redis"][-1],
                                                         runs["tiercache"][-1]), flush=True)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiercache", default="target/release/tiercache")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--results")
    ap.add_argument("--port", type=int, help="redis-server on PORT, tiercache's RESP on PORT+1 "
                    "(memcached on PORT+2); default: free ports")
    ap.add_argument("--flash", metavar="DIR", help="the flash case, flash file in DIR")
    ap.add_argument("--flash-mb", type=int, default=32, help="tiercache -m in the flash case")
    ap.add_argument("--flash-keys", type=int, default=320000)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tc-redis-bench-")
    if a.port:
        rport, tport, mport = a.port, a.port + 1, a.port + 2
    else:
        rport, tport, mport = free_port(), free_port(), free_port()
    procs = [subprocess.Popen([a.redis_server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", tmp],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    mem, ext = "1024", "none"
    if a.flash:
        mem, ext = str(a.flash_mb), "%s/tc-bench-flash:2G" % a.flash
    args = [a.tiercache, "-p", str(mport), "-l", "127.0.0.1", "-t", str(a.threads), "-m", mem,
            "-o", "redis_port=%d" % tport, "-o", "ext_path=" + ext]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    ports = {"redis": rport, "tiercache": tport}
    lines = []
    try:
        wait_port(rport)
        wait_port(tport)
        if a.flash:
            k = str(a.flash_keys)
            for name, port in ports.items():
                t0 = time.time()
                run_csv(["-t", "set", "-n", str(a.flash_keys * 3), "-r", k, "-d", "1000", "-c", "50",
                         "-P", "16"], port)
                print("%s loaded in %.0f s" % (name, time.time() - t0), flush=True)
            rss = [rss_mb(p.pid) for p in procs]
            runs = paired(a.rounds, ports,
                          lambda port: run_csv(["-t", "get", "-n", str(a.requests), "-r", k, "-c",
                                                str(a.conns)], port), "flash GET")
            lines += ["| test | redis-server 7 req/s | tiercache -t %d -m %s req/s | ratio | redis p99 ms | "
                      "tiercache p99 ms | p99 ratio |" % (a.threads, mem),
                      "| --- | --- | --- | --- | --- | --- | --- |"]
            for t, r, tc, ratio, rp, tp, pr in medians(runs, ["GET"]):
                lines.append("| GET random of %s keys (1000 B), -c %d | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |"
                             % (k, a.conns, r, tc, ratio, rp, tp, pr))
            lines.append("")
            lines.append("RSS after the load: redis-server %.0f MB, tiercache %.0f MB." % (rss[0], rss[1]))
        else:
            lines += ["| -P | test | redis-server 7 req/s | tiercache -t %d req/s | ratio | redis p99 ms | "
                      "tiercache p99 ms | p99 ratio |" % a.threads,
                      "| --- | --- | --- | --- | --- | --- | --- | --- |"]
            pids = {"redis": procs[0].pid, "tiercache": procs[1].pid}
            cpu_lines = []
            for pipeline in (1, a.pipeline):
                n = a.requests * (3 if pipeline > 1 else 1)
                cpu = {"redis": [], "tiercache": []}
                runs = paired(a.rounds, ports, lambda port: bench(port, n, a.conns, pipeline), "P=%d" % pipeline,
                              pids, cpu)
                for t, r, tc, ratio, rp, tp, pr in medians(runs, TESTS):
                    lines.append("| %d | %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |"
                                 % (pipeline, t, r, tc, ratio, rp, tp, pr))
                # Server CPU (user + system, all threads) per request over
                # the four tests of a run.
                per = {k: [c / (4 * n) * 1e6 for c in v] for k, v in cpu.items()}
                cr = statistics.median([t / r if r else 0.0 for r, t in zip(per["redis"], per["tiercache"])])
                cpu_lines.append("| %d | %.2f | %.2f | %.2f |" % (pipeline, statistics.median(per["redis"]),
                                                                statistics.median(per["tiercache"]), cr))
            lines += ["", "Server CPU (user + system, all threads) per request, the four tests together:", "",
                      "| -P | redis-server us/request | tiercache us/request | ratio |",
                      "| --- | --- | --- | --- |"] + cpu_lines
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
        if a.flash:
            # The flash file, and the snapshot a graceful stop writes beside it.
            for f in ("tc-bench-flash", "tc-bench-flash.snapshot"):
                try:
                    os.unlink("%s/%s" % (a.flash, f))
                except OSError:
                    pass
    table = "\n".join(lines)
    print(table)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
