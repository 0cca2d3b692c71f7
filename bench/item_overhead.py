#!/usr/bin/env python3
"""DRAM overhead per item, measured from RSS: start a server, store N items with
fixed-size keys and values, and compute (RSS after - RSS before - N*(key+value)) / N.
Runs tiercache and memcached with the same -m and the same items.
Usage: python3 bench/run.py item_overhead -- [tiercache-binary] [N] [-m MB]  (default -m 200)"""
import socket, subprocess, sys, time, os

def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

def fill(port, n, klen, vlen):
    s = socket.create_connection(("127.0.0.1", port))
    val = b"v" * vlen
    batch = []
    for i in range(n):
        key = (b"k%0*d" % (klen - 1, i))
        batch.append(b"set %s 0 0 %d noreply\r\n%s\r\n" % (key, vlen, val))
        if len(batch) == 1000:
            s.sendall(b"".join(batch)); batch = []
    s.sendall(b"".join(batch) + b"mn\r\n")
    buf = b""
    while not buf.endswith(b"MN\r\n"):
        buf += s.recv(65536)
    s.sendall(b"stats\r\n"); time.sleep(0.3)
    stats = s.recv(1 << 16).decode()
    return int([l for l in stats.split("\r\n") if l.startswith("STAT curr_items")][0].split()[2])

def measure(cmd, port, n, klen, vlen):
    p = subprocess.Popen(cmd + ["-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    before = rss_kb(p.pid)
    items = fill(port, n, klen, vlen)
    time.sleep(0.5)
    after = rss_kb(p.pid)
    p.terminate(); p.wait()
    return items, (after - before) * 1024 / items - (klen + vlen)

args = sys.argv[1:]
mb = "200"
if "-m" in args:
    i = args.index("-m")
    mb = args[i + 1]
    del args[i:i + 2]
tc = args[0] if len(args) > 0 else "target/release/tiercache"
n = int(args[1]) if len(args) > 1 else 1_000_000
klen, vlen = 16, 32
mem = ["-m", mb, "-t", "2", "-l", "127.0.0.1"]
mc = ["memcached", "-U", "0"] + (["-u", "root"] if os.geteuid() == 0 else []) + mem
# The RAM tier alone: no flash file.
for name, cmd, port in [("tiercache", [tc] + mem + (["-u", "root"] if os.geteuid() == 0 else []) + ["-o", "ext_path=none"], 23411), ("memcached", mc, 23412)]:
    items, per = measure(cmd, port, n, klen, vlen)
    print(f"{name}: {items} items of {klen} B key + {vlen} B value: {per:.1f} bytes of DRAM overhead per item (RSS)")
