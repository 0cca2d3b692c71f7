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
  TIERCACHE=target/release/tiercache   the binary (built if the default is missing)
  SIZES=1,8,64,256                     value sizes in MiB
  RUNS=5 MEM=1200 ITEM=512m
"""
import os
import socket
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.util import free_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIERCACHE = os.environ.get("TIERCACHE", os.path.join(ROOT, "target/release/tiercache"))
SIZES = [int(s) for s in os.environ.get("SIZES", "1,8,64,256").split(",")]
RUNS = int(os.environ.get("RUNS", "5"))
MEM = os.environ.get("MEM", "1200")
ITEM = os.environ.get("ITEM", "512m")


def start(cmd, port):
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    sys.exit(f"{cmd[0]} did not start")


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
    if not os.path.exists(TIERCACHE):
        subprocess.check_call(["cargo", "build", "--release", "-p", "tiercache-server"], cwd=ROOT)
    root = ["-u", "root"] if os.geteuid() == 0 else []
    tp, mp = free_port(), free_port()
    tc = start([TIERCACHE, "-p", str(tp), "-l", "127.0.0.1", "-m", MEM, "-I", ITEM,
                "-o", "ext_path=none"] + root, tp)
    mc = start(["memcached", "-p", str(mp), "-l", "127.0.0.1", "-U", "0", "-m", MEM,
                "-I", ITEM] + root, mp)
    try:
        clients = {"tiercache": Client(tp), "memcached": Client(mp)}
        print(f"RUNS={RUNS} MEM={MEM} ITEM={ITEM}; seconds, medians; ratio = tiercache / memcached")
        print("| value | set tiercache | set memcached | set ratio | get tiercache | get memcached | get ratio |")
        print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for mib in SIZES:
            value = (b"%08d" % mib) * (mib << 17)
            times = {n: ([], []) for n in clients}
            for run in range(RUNS):
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
    finally:
        tc.terminate()
        mc.terminate()
        tc.wait()
        mc.wait()


if __name__ == "__main__":
    main()
