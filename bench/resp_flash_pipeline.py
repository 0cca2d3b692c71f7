#!/usr/bin/env python3
"""Pipelined RESP GETs of keys on flash, two tiercache builds paired.

Starts BEFORE and AFTER side by side (each `-t THREADS -m MB`, a flash
file of its own in DIR, `-o redis_port`), loads both with KEYS keys of
1000 bytes (`redis-benchmark -t set -r KEYS -d 1000 -P 16`, three passes:
most keys end on flash), then runs R paired rounds, alternating which goes
first, of `redis-benchmark -t get -r KEYS -n N -c CONNS -P PIPELINE`:
requests per second, p99, and the flash reads read ahead in the round
(`stats` flash_reads_ahead on the memcached port). Ratios are medians of
the per-round after/before ratios.

  python3 bench/resp_flash_pipeline.py --before OLD_BIN --after NEW_BIN \\
      --dir /work/some-dir [--port 22420] [--rounds 5]
"""
import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.util import port_open  # noqa: E402


def stat(port, name):
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"stats\r\n")
        buf = b""
        while not buf.endswith(b"END\r\n"):
            buf += s.recv(65536)
    for line in buf.decode().splitlines():
        w = line.split()
        if len(w) == 3 and w[1] == name:
            return int(w[2])
    return 0


def bench(port, args):
    cmd = ["redis-benchmark", "-p", str(port), "--csv"] + args
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1200).stdout
    for line in out.splitlines():
        f = [x.strip('"') for x in line.split('","')]
        if len(f) >= 7 and f[0] != "test":
            return float(f[1]), float(f[6])
    return 0.0, 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--dir", required=True, help="flash files go here")
    ap.add_argument("--port", type=int, default=22420, help="PORT..PORT+3 are used")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mb", type=int, default=32)
    ap.add_argument("--keys", type=int, default=200000)
    ap.add_argument("--requests", type=int, default=100000)
    ap.add_argument("--conns", type=int, default=4)
    ap.add_argument("--pipeline", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    servers = {}
    for i, (name, binary) in enumerate((("before", a.before), ("after", a.after))):
        rport, mport = a.port + 2 * i, a.port + 2 * i + 1
        path = os.path.join(a.dir, "tc-ahead-%s.flash" % name)
        args = [binary, "-p", str(mport), "-l", "127.0.0.1", "-t", str(a.threads), "-m", str(a.mb),
                "-o", "redis_port=%d" % rport, "-o", "ext_path=%s:2G" % path]
        if os.geteuid() == 0:
            args += ["-u", "root"]
        servers[name] = (subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                         rport, mport, path)
    runs = {"before": [], "after": []}
    try:
        for name, (_, rport, _, _) in servers.items():
            while not port_open(rport):
                time.sleep(0.05)
            t0 = time.time()
            bench(rport, ["-t", "set", "-n", str(3 * a.keys), "-r", str(a.keys), "-d", "1000", "-c", "50",
                          "-P", "16"])
            print("%s loaded in %.0f s" % (name, time.time() - t0), flush=True)
        for r in range(a.rounds):
            order = list(servers.items())
            if r % 2:
                order.reverse()
            for name, (_, rport, mport, _) in order:
                ahead0 = stat(mport, "flash_reads_ahead")
                hits0 = stat(mport, "get_extstore")
                rps, p99 = bench(rport, ["-t", "get", "-n", str(a.requests), "-r", str(a.keys), "-c",
                                         str(a.conns), "-P", str(a.pipeline)])
                runs[name].append((rps, p99, stat(mport, "flash_reads_ahead") - ahead0,
                                   stat(mport, "get_extstore") - hits0))
            print("round %d: before %s | after %s" % (r + 1, runs["before"][-1], runs["after"][-1]), flush=True)
    finally:
        for p, _, _, path in servers.values():
            p.terminate()
            p.wait(timeout=30)
            for f in (path, path + ".snapshot"):
                try:
                    os.unlink(f)
                except OSError:
                    pass
    b, f = runs["before"], runs["after"]
    print("| build | GET req/s | p99 ms | flash reads ahead per round | flash hits (get_extstore) per round |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, rs in (("before", b), ("after", f)):
        print("| %s | %.0f | %.2f | %.0f | %.0f |" % (name, statistics.median(x[0] for x in rs),
                                                     statistics.median(x[1] for x in rs),
                                                     statistics.median(x[2] for x in rs),
                                                     statistics.median(x[3] for x in rs)))
    print("after/before, medians of the rounds' ratios: req/s %.2f, p99 %.2f" % (
        statistics.median(y[0] / x[0] for x, y in zip(b, f) if x[0]),
        statistics.median(y[1] / x[1] for x, y in zip(b, f) if x[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
