#!/usr/bin/env python3
"""Large items (-I above the segment size) against memcached, side by side.

Starts tiercache (RAM only, `-o ext_path=none`) and Debian's memcached with
the same -m and -I, then for each value size, RUNS times alternating the two
servers: one `set` of a value of that size and one `get` of it, each timed
from the first byte sent to the last byte read, over loopback from this
client (the same client for both). Reports the medians and the ratio
tiercache / memcached (below 1: tiercache is faster). The client's own cost
(Python reading the reply) is in both.

Environment (all optional):
  TIERCACHE=target/release/tiercache   the binary (built with tiercache-bench unless TIERCACHE and BENCH are set)
  SIZES=1,8,64,256                     value sizes in MiB
  RUNS=5 MEM=1200 ITEM=512m
"""
import contextlib
import os
import socket
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import paths, scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.servers import scratch_server  # noqa: E402
from lib.util import free_port  # noqa: E402

TAG = "large_items"
K = scenario.knobs(TAG)
SIZES = [int(s) for s in K.SIZES.split(",")]


class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.s.makefile("rb", buffering=1 << 20)

    def set(self, key, value):
        t = time.perf_counter()
        self.s.sendall(b"set %s 0 0 %d\r\n" % (key, len(value)))
        self.s.sendall(value)
        self.s.sendall(b"\r\n")
        r = self.f.readline()
        dt = time.perf_counter() - t
        if r != b"STORED\r\n":
            sys.exit(f"set of {len(value)} bytes: {r!r}")
        return dt

    def get(self, key, value):
        t = time.perf_counter()
        self.s.sendall(b"get %s\r\n" % key)
        head = self.f.readline()
        n = int(head.split()[3])
        data = self.f.read(n + 2)
        end = self.f.readline()
        dt = time.perf_counter() - t
        if data[:-2] != value or end != b"END\r\n":
            sys.exit(f"get of {len(value)} bytes: wrong reply")
        return dt


def main():
    build(TAG)
    tp, mp = free_port(), free_port()
    root = ["-u", "root"] if os.geteuid() == 0 else []
    with contextlib.ExitStack() as stack:
        # the same -m and -I, each server's default threads
        for name, port, cmd in (("tiercache", tp, [paths.TIERCACHE, "-o", "ext_path=none"]),
                                ("memcached", mp, [paths.MEMCACHED, "-U", "0"])):
            cmd += ["-p", str(port), "-l", "127.0.0.1", "-m", K.MEM, "-I", K.ITEM] + root
            stack.enter_context(scratch_server(TAG, name, lambda _d, c=cmd: c, port))
        clients = {"tiercache": Client(tp), "memcached": Client(mp)}
        print(f"RUNS={K.RUNS} MEM={K.MEM} ITEM={K.ITEM}; seconds, medians; ratio = tiercache / memcached")
        print("| value | set tiercache | set memcached | set ratio | get tiercache | get memcached | get ratio |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mib in SIZES:
            value = (b"%08d" % mib) * (mib << 17)
            times = {n: ([], []) for n in clients}
            for run in range(K.RUNS):
                order = list(clients) if run % 2 == 0 else list(clients)[::-1]
                for name in order:
                    c = clients[name]
                    key = b"v%d" % mib
                    times[name][0].append(c.set(key, value))
                    times[name][1].append(c.get(key, value))
            med = {n: (statistics.median(s), statistics.median(g)) for n, (s, g) in times.items()}
            t, m = med["tiercache"], med["memcached"]
            print(f"| {mib} MiB | {t[0]:.4f} | {m[0]:.4f} | {t[0] / m[0]:.2f} "
                  f"| {t[1]:.4f} | {m[1]:.4f} | {t[1] / m[1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
