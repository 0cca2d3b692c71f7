"""Load generation: tiercache-bench runs and their latencies, and plain-socket set/get fills."""
import json
import os
import socket
import subprocess
import tempfile
import time

from . import paths
from .util import log


def bench(port, args, tag="bench", timeout=None):
    """Runs tiercache-bench against 127.0.0.1:port; returns its JSON output."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [paths.BENCH, "-s", f"127.0.0.1:{port}", "-q", "--json", path] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"tiercache-bench failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    for line in r.stderr.splitlines():
        if "WARNING" in line:
            log(tag, line.strip())
    with open(path) as f:
        out = json.load(f)
    os.unlink(path)
    return out


def latency_bench_cmd(port, secs, vlen, args, out):
    """tiercache-bench in open-loop latency mode (one thread, 4 connections)
    for `secs` seconds, JSON to `out`; `args` add the keys, mix and rate."""
    return [paths.BENCH, "-s", f"127.0.0.1:{port}", "-q", "--no-stats", "--json", out,
            "--mode", "latency", "-d", f"{secs}s", "--threads", "1", "--conns", "4",
            "--value-size", str(vlen)] + [str(a) for a in args]


def latency_of(path, kind):
    """ops/s and p50/p99/p99.9/max µs of one kind ("get_hit", "set"...) from
    a tiercache-bench JSON result (all requests if it has no such kind)."""
    import json
    with open(path) as f:
        r = json.load(f)["runs"][0]
    g = r["latency"].get(kind) or r["latency"]["all"]
    return {"ops": r["ops_per_sec"], "p50": g["p50_us"], "p99": g["p99_us"],
            "p999": g["p999_us"], "max": g["max_us"]}


def value_of(vlen):
    """The vlen-byte value set_keys writes."""
    return ((b"%d" % vlen) * (vlen // len(b"%d" % vlen) + 1))[:vlen]


def set_keys(port, keys, vlen, mb_per_s=None, prefix="key:"):
    """Sets `keys` (integers) to vlen-byte values over one connection with
    noreply, at most mb_per_s MB/s of values, then waits for the server with
    `mn`. Returns the seconds taken."""
    s = socket.create_connection(("127.0.0.1", port))
    val = value_of(vlen)
    t0 = time.monotonic()
    sent = 0
    batch = []
    for i, k in enumerate(keys):
        batch.append(b"set %s%d 0 0 %d noreply\r\n%s\r\n" % (prefix.encode(), k, vlen, val))
        if len(batch) == 64 or i == len(keys) - 1:
            s.sendall(b"".join(batch))
            sent += len(batch) * vlen
            batch = []
            if mb_per_s:
                ahead = sent / (mb_per_s * 1e6) - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    s.sendall(b"mn\r\n")
    buf = b""
    s.settimeout(300)
    while not buf.endswith(b"MN\r\n"):
        c = s.recv(65536)
        if not c:
            raise RuntimeError("connection closed during set_keys")
        buf += c
    s.close()
    return time.monotonic() - t0


def get_values(port, keys, batch=100, prefix="key:"):
    """Reads `keys` (integers) with multigets; yields (key, value) for those
    that are there."""
    keys = list(keys)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(300)
    f = s.makefile("rb", buffering=1 << 20)
    for lo in range(0, len(keys), batch):
        s.sendall(("get " + " ".join(f"{prefix}{k}" for k in keys[lo:lo + batch]) + "\r\n").encode())
        while True:
            line = f.readline()
            if line == b"END\r\n":
                break
            if not line.startswith(b"VALUE "):
                raise RuntimeError(f"unexpected reply {line[:80]!r}")
            p = line.split()
            ln = int(p[3])
            data = f.read(ln + 2)
            if len(data) == ln + 2:
                yield int(p[1][len(prefix):]), data[:ln]
    s.close()


def read_once(port, n, prefix="key:"):
    """Reads keys 0..n-1 once, as a client warming them would (a hit each
    on the server), and fails unless all n are there. get_values is a
    generator: called without taking its values it sends nothing, which
    is how tail_under_writes.py, small_latency.py and small_change_latency.py
    read their hot keys "once" until 2026-11-29 (they were only set)."""
    got = sum(1 for _ in get_values(port, range(n), prefix=prefix))
    if got != n:
        raise RuntimeError(f"{n - got} of {n} {prefix} keys missing before the measurement")


def read_back(port, keys, vlen, prefix="key:"):
    """Reads `keys` (integers) written by set_keys with vlen-byte values;
    returns (how many are there, how many of those have a wrong value)."""
    want = value_of(vlen)
    got = bad = 0
    for _k, v in get_values(port, keys, prefix=prefix):
        got += 1
        bad += v != want
    return got, bad


def missing_keys(port, n, vlen, batch=100, prefix="key:"):
    """Reads key 0..n-1 with multigets; returns the keys that are not there
    with a vlen-byte value."""
    found = {k for k, v in get_values(port, range(n), batch, prefix) if len(v) == vlen}
    return [k for k in range(n) if k not in found]


def fill_all(port, n, vlen, mb_per_s, tag, rounds=4):
    """Writes keys 0..n-1 at mb_per_s, then re-writes the missing ones (as a
    client would after misses) up to `rounds` times. Returns (seconds, kept
    after the first pass, kept at the end)."""
    t = set_keys(port, range(n), vlen, mb_per_s)
    time.sleep(1)
    miss = missing_keys(port, n, vlen)
    first = n - len(miss)
    for r in range(rounds):
        if not miss:
            break
        log(tag, f"port {port}: {len(miss):,} keys missing after pass {r + 1}; writing them again")
        t += set_keys(port, miss, vlen, mb_per_s)
        time.sleep(1)
        miss = missing_keys(port, n, vlen)
    return t, first, n - len(miss)
