#!/usr/bin/env python3
"""What recording each request's latency costs (the SLA view, issue 18):
user-space instructions per request of the server's worker thread, counted
by callgrind, for two builds (BEFORE and AFTER), on these workloads:

  get       one `get` per round trip (hits, 32-byte values)
  get x16   16 pipelined gets per round trip (the least work per request,
            so the largest share for a fixed per-request cost)
  set       one `set` per round trip

Each build runs `-t 1 -o ext_path=none` under `valgrind --tool=callgrind
--separate-threads=yes`; 1000 keys are stored, the counters are zeroed
(`callgrind_control -z`), N requests are sent, the counters are dumped
(`callgrind_control -d`), and the busiest thread's instructions (the
worker's) are divided by N. Callgrind counts instructions deterministically,
so one run per build and workload is enough; it does not count what the
kernel does, vDSO clock reads included (see crates/server/examples/
sla_record_cost.rs for the clock read's time).

  BEFORE=path/to/tiercache AFTER=path/to/tiercache python3 bench/run.py sla_cost

  mg        one `mg key v` per round trip
  touch     one `touch` per round trip
  incr      one `incr` per round trip (of a 1-digit counter)
  md+set    an `md` and the `set` that restores the key, per round trip
  multiget  one `get` naming 100 keys per round trip (counted per command)

valgrind 3.19 crashes in rustix's vDSO set-up (the shard lock's CPU clock,
rustix::time::clock_gettime, since 35252a2): build both binaries with rustix's
libc backend, as bench/resp_callgrind.sh says:

  RUSTFLAGS=--cfg=rustix_use_libc CARGO_TARGET_DIR=target/cg \
      cargo build --release -p tiercache-server

Environment: BEFORE, AFTER (binaries, required), N=20000 requests per run,
WORKLOADS (comma-separated names; default "get,get x16,set").
Prints a markdown table; writes nothing else. Needs valgrind.
"""

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402

K = scenario.knobs("sla_cost")
N = K.N
KEYS = 1000


def start(binary, work, server_args=("-m", "64", "-o", "ext_path=none")):
    """The server under callgrind (one worker thread) and its port."""
    args = ["valgrind", "--tool=callgrind", "--separate-threads=yes",
            f"--callgrind-out-file={work}/cg.%p", binary, "-p", "0",
            "-l", "127.0.0.1", "-t", "1", *server_args]
    if os.geteuid() == 0:
        args += ["-u", "root"]
    log = open(f"{work}/server.log", "w+")
    p = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 120
    while time.time() < deadline:
        log.seek(0)
        m = re.search(r"listening addr=127\.0\.0\.1:(\d+)", log.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.2)
    p.kill()
    log.seek(0)
    sys.exit(f"server did not start:\n{log.read()}")


def recv_until(s, count, marker):
    buf = b""
    while buf.count(marker) < count:
        chunk = s.recv(1 << 16)
        if not chunk:
            sys.exit("server closed the connection")
        buf += chunk
    return buf


def workload(s, name):
    if name == "get":
        for i in range(N):
            s.sendall(b"get key:%d\r\n" % (i % KEYS))
            recv_until(s, 1, b"END\r\n")
    elif name == "get x16":
        for i in range(0, N, 16):
            s.sendall(b"".join(b"get key:%d\r\n" % ((i + j) % KEYS) for j in range(16)))
            recv_until(s, 16, b"END\r\n")
    elif name == "set":
        for i in range(N):
            s.sendall(b"set key:%d 0 0 32\r\n%s\r\n" % (i % KEYS, b"v" * 32))
            recv_until(s, 1, b"STORED\r\n")
    elif name == "mg":
        for i in range(N):
            s.sendall(b"mg key:%d v\r\n" % (i % KEYS))
            recv_until(s, 1, b"v\r\n")
    elif name == "touch":
        for i in range(N):
            s.sendall(b"touch key:%d 0\r\n" % (i % KEYS))
            recv_until(s, 1, b"TOUCHED\r\n")
    elif name == "incr":
        for i in range(N):
            s.sendall(b"incr num:%d 1\r\n" % (i % KEYS))
            recv_until(s, 1, b"\r\n")
    elif name == "multiget":
        for i in range(N):
            s.sendall(b"get " + b" ".join(b"key:%d" % ((i * 100 + j) % KEYS) for j in range(100)) + b"\r\n")
            recv_until(s, 1, b"END\r\n")
    elif name == "md+set":
        # A pair per request: the delete, then the set that restores it.
        for i in range(N):
            s.sendall(b"md key:%d\r\nset key:%d 0 0 32\r\n%s\r\n" % (i % KEYS, i % KEYS, b"v" * 32))
            recv_until(s, 1, b"STORED\r\n")


def worker_dump(work, pid):
    """The busiest thread's callgrind dump (the worker's): (instructions, path)."""
    per_thread = []
    for f in glob.glob(f"{work}/cg.{pid}.1-*"):
        with open(f) as fh:
            m = re.search(r"^(?:summary|totals): (\d+)", fh.read(), re.M)
            if m:
                per_thread.append((int(m.group(1)), f))
    if not per_thread:
        sys.exit(f"no callgrind dump in {work}: {os.listdir(work)}")
    return max(per_thread)


def measure(binary, name):
    work = tempfile.mkdtemp(prefix="sla_cost.")
    p, port = start(binary, work)
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(KEYS):
            s.sendall(b"set key:%d 0 0 32\r\n%s\r\n" % (i, b"v" * 32))
            recv_until(s, 1, b"STORED\r\n")
            s.sendall(b"set num:%d 0 0 1\r\n1\r\n" % i)
            recv_until(s, 1, b"STORED\r\n")
        subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        workload(s, name)
        subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        s.close()
        return worker_dump(work, p.pid)[0] / N
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    before, after = K.BEFORE, K.AFTER
    if not (before and after):
        sys.exit("set BEFORE= and AFTER= to two tiercache binaries")
    print(f"instructions per request, worker thread (callgrind, N={N})\n")
    print("| workload | before | after | after - before |")
    print("| --- | ---: | ---: | ---: |")
    names = K.WORKLOADS.split(",")
    for name in names:
        b, a = measure(before, name), measure(after, name)
        print(f"| {name} | {b:,.0f} | {a:,.0f} | {a - b:+,.0f} |", flush=True)


if __name__ == "__main__":
    main()
