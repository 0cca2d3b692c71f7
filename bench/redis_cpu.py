#!/usr/bin/env python3
"""CPU time per request of tiercache's Redis port and of redis-server 7.

Starts redis-server (no persistence) and tiercache (`-t THREADS -m 1024
-o ext_path=none -o redis_port`) side by side; for each of SET, GET, INCR
and MSET, unpipelined (`-n N1`) and with `-P PIPELINE` (`-n N16`), runs
`redis-benchmark -t TEST -c CONNS` R times against each server, alternating
which goes first, and reads each server's user and system CPU time (all its
threads, /proc/PID/stat) before and after. Prints microseconds of user and
system CPU per request, medians of the rounds, and the ratio tiercache /
redis-server of their sum (median of the per-round ratios).

Unlike requests per second, this hardly depends on what else the machine
runs: it is the cost a request puts on the server, system calls included
(which callgrind's instruction counts leave out). On a machine where the
client takes one of two cores, a throughput ratio of X needs about X times
less CPU per request.

  python3 bench/redis_cpu.py --tiercache target/release/tiercache [--port 22410] [--rounds 3]
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
from lib.util import port_open  # noqa: E402

TESTS = ["set", "get", "incr", "mset"]


def cpu(pid):
    """(user, system) clock ticks of a process, all its threads."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiercache", default="target/release/tiercache")
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--port", type=int, default=22410, help="redis-server PORT, tiercache PORT+1 (RESP), PORT+2")
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--n1", type=int, default=100000, help="requests per unpipelined run")
    ap.add_argument("--n16", type=int, default=1000000, help="requests per pipelined run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bench-args", default="", help="more redis-benchmark arguments, e.g. '-r 100000'")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tc-redis-cpu-")
    rp, tp, mp = a.port, a.port + 1, a.port + 2
    procs = {"redis": subprocess.Popen([a.redis_server, "--port", str(rp), "--bind", "127.0.0.1", "--save", "",
                                        "--appendonly", "no", "--dir", tmp], stdout=subprocess.DEVNULL)}
    args = [a.tiercache, "-p", str(mp), "-l", "127.0.0.1", "-t", str(a.threads), "-m", "1024",
            "-o", "ext_path=none", "-o", "redis_port=%d" % tp]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    procs["tiercache"] = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ports = {"redis": rp, "tiercache": tp}
    tck = os.sysconf("SC_CLK_TCK")
    res = {}
    try:
        for p in ports.values():
            while not port_open(p):
                time.sleep(0.05)
        for pipe, n in ((1, a.n1), (a.pipeline, a.n16)):
            for test in TESTS:
                for rnd in range(a.rounds):
                    order = list(ports.items())
                    if rnd % 2:
                        order.reverse()
                    for name, port in order:
                        u0, s0 = cpu(procs[name].pid)
                        subprocess.run(["redis-benchmark", "-p", str(port), "-t", test, "-n", str(n), "-c",
                                        str(a.conns), "-P", str(pipe), "-q"] + a.bench_args.split(),
                                       stdout=subprocess.DEVNULL)
                        u1, s1 = cpu(procs[name].pid)
                        res.setdefault((pipe, test, name), []).append(
                            ((u1 - u0) / tck / n * 1e6, (s1 - s0) / tck / n * 1e6))
                print("-P %d %s: %s" % (pipe, test, {k[2]: v for k, v in res.items() if k[:2] == (pipe, test)}),
                      flush=True)
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)
    med = statistics.median
    print("| -P | test | redis-server user us/req | system | tiercache user us/req | system | "
          "ratio user | ratio system | ratio user + system |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for pipe in (1, a.pipeline):
        for test in TESTS:
            r, t = res[(pipe, test, "redis")], res[(pipe, test, "tiercache")]
            ru, rs = med(x[0] for x in r), med(x[1] for x in r)
            tu, ts = med(x[0] for x in t), med(x[1] for x in t)
            tot = med((y[0] + y[1]) / (x[0] + x[1]) for x, y in zip(r, t) if x[0] + x[1])
            print("| %d | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |" % (
                pipe, test.upper(), ru, rs, tu, ts, tu / ru if ru else 0, ts / rs if rs else 0, tot))
    return 0


if __name__ == "__main__":
    sys.exit(main())
