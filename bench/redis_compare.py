#!/usr/bin/env python3
"""tiercache's Redis port against redis-server 7, with redis-benchmark.

Starts redis-server (no persistence) and tiercache (`-t THREADS`, RAM only,
`-o redis_port`) side by side and runs, for each of unpipelined and `-P
PIPELINE`, `redis-benchmark -t set,get,incr,mset -n N -c CONNS -q` against
each server, R paired rounds alternating which goes first. Prints each
round's requests per second, the medians, and the median of the per-round
ratios (tiercache / redis) per test; with --results appends a table to
bench/RESULTS.md.

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
    cmd = ["redis-benchmark", "-p", str(port), "-t", "set,get,incr,mset", "-n", str(n),
           "-c", str(conns), "-P", str(pipeline), "-q"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    got = {}
    for line in out.replace("\r", "\n").splitlines():
        if "requests per second" in line:
            name, rest = line.split(":", 1)
            got[name.strip()] = float(rest.split()[0])
    return got


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
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tc-redis-bench-")
    rport, tport, mport = free_port(), free_port(), free_port()
    procs = [subprocess.Popen([a.redis_server, "--port", str(rport), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", tmp],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    args = [a.tiercache, "-p", str(mport), "-l", "127.0.0.1", "-t", str(a.threads), "-m", "1024",
            "-o", "redis_port=%d" % tport, "-o", "ext_path=none"]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    procs.append(subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    rows = []
    try:
        wait_port(rport)
        wait_port(tport)
        for pipeline in (1, a.pipeline):
            n = a.requests * (3 if pipeline > 1 else 1)
            runs = {"redis": [], "tiercache": []}
            for r in range(a.rounds):
                order = [("redis", rport), ("tiercache", tport)]
                if r % 2:
                    order.reverse()
                for name, port in order:
                    runs[name].append(bench(port, n, a.conns, pipeline))
                print("P=%d round %d: redis %s | tiercache %s" % (pipeline, r + 1, runs["redis"][-1],
                                                                   runs["tiercache"][-1]), flush=True)
            for t in TESTS:
                rs = [x.get(t, 0.0) for x in runs["redis"]]
                ts = [x.get(t, 0.0) for x in runs["tiercache"]]
                ratio = statistics.median([b / a if a else 0.0 for a, b in zip(rs, ts)])
                rows.append((pipeline, t, statistics.median(rs), statistics.median(ts), ratio))
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    lines = ["| -P | test | redis-server 7 req/s | tiercache -t %d req/s | ratio (median of rounds) |" % a.threads,
             "| --- | --- | --- | --- | --- |"]
    for p, t, r, tc, ratio in rows:
        lines.append("| %d | %s | %.0f | %.0f | %.2f |" % (p, t, r, tc, ratio))
    table = "\n".join(lines)
    print(table)
    if a.results:
        with open(a.results, "a") as f:
            f.write("\n" + table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
