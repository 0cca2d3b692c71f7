#!/usr/bin/env python3
"""TLS throughput, tiercache -Z against memcached -Z with the same
certificate, the same thread count and the same client, side by side.

The client: P processes, one TLS connection each (Python's ssl, OpenSSL),
each sending batches of B pipelined requests (90% `get` of one of K keys
with V-byte values, 10% `set ... noreply`) and reading the batch's replies
before the next (it counts `END\\r\\n`). Both servers run at once and are
measured in turn, R paired rounds alternating which goes first; each
figure is a round's requests per second, the result the medians and the
median of the per-round ratios. With --plain the same runs are made
without TLS too, for the cost of TLS on each server.

  python3 bench/run.py tls_compare -- --tiercache target/release/tiercache \\
      [--memcached /usr/bin/memcached] [--threads 2] [--procs 4] \\
      [--seconds 5] [--rounds 5] [--batch 64] [--plain]

The client is Python: on a small machine it takes a share of the CPU the
servers would otherwise have, which narrows differences between servers;
the ratio is what this measures, not either server's peak.
"""
import argparse
import multiprocessing as mp
import os
import random
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib.util import free_port  # noqa: E402

KEYS = 10_000
VALUE = 100


def connect(port, cafile):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if cafile:
        ctx = ssl.create_default_context(cafile=cafile)
        s = ctx.wrap_socket(s, server_hostname="localhost")
    return s


def read_ends(s, want, tail=b""):
    """Reads until `want` replies ending in END have come; returns the rest."""
    got = 0
    while got < want:
        d = s.recv(1 << 16)
        if not d:
            raise RuntimeError("server closed the connection")
        buf = tail + d
        got += buf.count(b"END\r\n")
        tail = buf[-4:]
        # An END split across reads is counted once: drop counted bytes.
        if buf.endswith(b"END\r\n"):
            tail = b""
    return tail


def worker(port, cafile, seconds, batch, seed, out):
    rnd = random.Random(seed)
    s = connect(port, cafile)
    value = b"v" * VALUE
    ops = 0
    deadline = time.time() + seconds
    while time.time() < deadline:
        req = []
        gets = 0
        for _ in range(batch):
            k = rnd.randrange(KEYS)
            if rnd.random() < 0.9:
                req.append(b"get k%d\r\n" % k)
                gets += 1
            else:
                req.append(b"set k%d 0 0 %d noreply\r\n%s\r\n" % (k, VALUE, value))
        s.sendall(b"".join(req))
        read_ends(s, gets)
        ops += batch
    s.close()
    out.put(ops)


def load(port, cafile):
    """Sets every key, 100 per write: memcached 1.6.18 with TLS stops
    reading a connection whose one write is more than one TLS record (16
    KiB; seen here at 130 such sets), so every write here stays under it."""
    s = connect(port, cafile)
    value = b"v" * VALUE
    for start in range(0, KEYS, 100):
        req = b"".join(
            b"set k%d 0 0 %d noreply\r\n%s\r\n" % (k, VALUE, value)
            for k in range(start, min(start + 100, KEYS))
        )
        s.sendall(req + b"get k0\r\n")
        read_ends(s, 1)
    s.close()


def run(port, cafile, a):
    q = mp.Queue()
    ps = [mp.Process(target=worker, args=(port, cafile, a.seconds, a.batch, i, q))
          for i in range(a.procs)]
    t0 = time.time()
    for p in ps:
        p.start()
    total = sum(q.get() for _ in ps)
    for p in ps:
        p.join()
    return total / (time.time() - t0)


def start(binary, args, port, tmp):
    full = [binary, "-p", str(port), "-l", "127.0.0.1", "-t", str(ARGS.threads),
            "-m", "256"] + args + (["-u", "root"] if os.getuid() == 0 else [])
    full += ["-U", "0"] if os.path.basename(binary).startswith("memcached") else ["-o", "ext_path=none"]
    log = open(os.path.join(tmp, f"{os.path.basename(binary)}-{port}.log"), "w")
    p = subprocess.Popen(full, stdout=log, stderr=log)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return p
        except OSError:
            time.sleep(0.05)
    p.kill()
    raise SystemExit(f"{full} did not start")


def cipher(port, cafile):
    s = connect(port, cafile)
    c = (s.version(), s.cipher()[0])
    s.close()
    return c


def compare(a, tmp, tls):
    cert = os.path.join(tmp, "cert.pem") if tls else None
    key = os.path.join(tmp, "key.pem")
    extra = ["-Z", "-o", f"ssl_chain_cert={cert},ssl_key={key}"] if tls else []
    servers = {}
    procs = []
    try:
        for name, binary in [("memcached", a.memcached), ("tiercache", a.tiercache)]:
            port = free_port()
            procs.append(start(binary, extra, port, tmp))
            load(port, cert)
            servers[name] = port
        if tls:
            for name, port in servers.items():
                print(f"  {name}: {' '.join(cipher(port, cert))}")
        rounds = {"memcached": [], "tiercache": []}
        for r in range(a.rounds):
            order = ["memcached", "tiercache"] if r % 2 == 0 else ["tiercache", "memcached"]
            for name in order:
                rounds[name].append(run(servers[name], cert, a))
            print(f"  round {r + 1}: memcached {rounds['memcached'][-1]:,.0f}/s, "
                  f"tiercache {rounds['tiercache'][-1]:,.0f}/s")
        ratios = [t / m for t, m in zip(rounds["tiercache"], rounds["memcached"])]
        med = {k: statistics.median(v) for k, v in rounds.items()}
        print(f"{'TLS' if tls else 'plain'}: memcached {med['memcached']:,.0f} req/s, "
              f"tiercache {med['tiercache']:,.0f} req/s (medians of {a.rounds}); "
              f"ratio tiercache/memcached {statistics.median(ratios):.2f} "
              f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})")
        return med
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiercache", required=True)
    ap.add_argument("--memcached", default="/usr/bin/memcached")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=5)
    # 64 requests are about 1.5 KB: under one TLS record (see `load`).
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--plain", action="store_true")
    ARGS = a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tiercache-tlsbench-")
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
             "-keyout", os.path.join(tmp, "key.pem"), "-out", os.path.join(tmp, "cert.pem"),
             "-days", "2", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
            check=True, capture_output=True)
        print(f"-t {a.threads}, {a.procs} client processes, batches of {a.batch} "
              f"(90% get / 10% set noreply, {KEYS} keys, {VALUE} B values), "
              f"{a.seconds:g} s per run, {a.rounds} paired rounds, {os.cpu_count()} CPUs")
        tls = compare(a, tmp, True)
        if a.plain:
            plain = compare(a, tmp, False)
            for k in tls:
                print(f"TLS cost, {k}: {tls[k] / plain[k]:.2f} of its plain throughput")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


ARGS = None

if __name__ == "__main__":
    sys.exit(main())
