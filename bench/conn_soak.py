#!/usr/bin/env python3
"""Connection churn soak (issue 19, sections 2 and 3): CONNS client threads
open and close connections for DURATION seconds against one server, then the
same against memcached, while the server's fd count, RSS and
curr_connections are sampled every SAMPLE seconds. Each connection does one
of (weights in MIX):

  normal   set and get a few small keys, then close
  partial  part of a request (a get line without CRLF, a set whose data block
           is cut, a value without its final CRLF), then FIN, RST or
           shutdown(SHUT_WR)
  noread   pipeline 200 gets of a 100 KB value, never read, hold 1-3 s, reset
  idle     connect, hold 1-3 s, close
  longline `get ` + 1.1 MB without a newline, then close

It prints a table of the samples and whether fds and RSS stayed flat: after
the load, fds back to within FD_SLACK of the baseline, and RSS at the end of
the load within RSS_SLACK_MB of RSS at a third of it; plus how many clients
were refused or not served.

One command (builds tiercache in release mode unless TIERCACHE is set):

    python3 bench/run.py conn_soak                       # 180 s per server
    DURATION=30 python3 bench/run.py conn_soak           # shorter
    MEMCACHED_TOO=0 python3 bench/run.py conn_soak       # tiercache only
    RESULTS_SECTION=1 python3 bench/run.py conn_soak     # also append to RESULTS.md

Knobs (environment): DURATION, CONNS, SAMPLE, MAXCONNS, THREADS, MEMORY_MB,
PORT, MEMCACHED_TOO, FD_SLACK, RSS_SLACK_MB, TIERCACHE, MEMCACHED, SEED, MIX
(`kind:weight,...`).
"""
import datetime
import os
import random
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import paths, scenario  # noqa: E402
from lib.util import ask  # noqa: E402

ROOT = paths.ROOT
K = scenario.knobs("conn_soak")
DURATION, CONNS, SAMPLE, MAXCONNS, THREADS, MEMORY_MB = K.DURATION, K.CONNS, K.SAMPLE, K.MAXCONNS, K.THREADS, K.MEMORY_MB
PORT, MEMCACHED_TOO, FD_SLACK, RSS_SLACK_MB, SEED = K.PORT, K.MEMCACHED_TOO, K.FD_SLACK, K.RSS_SLACK_MB, K.SEED
TIERCACHE = paths.TIERCACHE
MEMCACHED = shutil.which(paths.MEMCACHED) or paths.MEMCACHED
MIX = [(k, int(w)) for k, w in (kw.split(":") for kw in K.MIX.split(","))]
BIG = 100 * 1024
PARTIAL = [b"get abc", b"set k 0 0 100\r\n" + b"x" * 40, b"set k 0 0 5\r\nhello"]


def log(*a):
    print("[conn_soak]", *a, file=sys.stderr, flush=True)


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def request(port, data, until=b"\r\n"):
    return ask(port, data, until, timeout=3.0)


def stat(port, name):
    try:
        out = request(port, b"stats\r\n", b"END\r\n").decode()
    except OSError:
        return None
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] == name:
            return int(p[2])
    return None


def wait_listening(port, proc):
    t = time.time()
    while time.time() - t < 20:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            if request(port, b"version\r\n").startswith(b"VERSION"):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start")


class Counts:
    def __init__(self):
        self.lock = threading.Lock()
        self.c = {}

    def add(self, k, n=1):
        with self.lock:
            self.c[k] = self.c.get(k, 0) + n


def linger0(s):
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def one_connection(port, rng, counts):
    kind = rng.choices([k for k, _ in MIX], [w for _, w in MIX])[0]
    counts.add(kind)
    if kind == "noread":
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.settimeout(3)
    else:
        s = socket.socket()
        s.settimeout(3)
    try:
        s.connect(("127.0.0.1", port))
    except OSError:
        counts.add("connect_failed")
        s.close()
        return
    try:
        if kind == "normal":
            k = f"k{rng.randrange(1000)}".encode()
            s.sendall(b"set " + k + b" 0 0 5\r\nhello\r\nget " + k + b"\r\n")
            got = b""
            while not got.endswith(b"END\r\n"):
                r = s.recv(4096)
                if not r:
                    break
                got += r
            if b"VALUE" in got:
                counts.add("served")
            elif b"Too many" in got:
                counts.add("refused")
            else:
                counts.add("not_served")
            s.close()
        elif kind == "partial":
            s.sendall(rng.choice(PARTIAL))
            how = rng.randrange(3)
            if how == 0:
                s.close()
            elif how == 1:
                linger0(s)
                s.close()
            else:
                s.shutdown(socket.SHUT_WR)
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
                s.close()
        elif kind == "noread":
            s.setblocking(False)
            try:
                s.send(b"get big\r\n" * 200)
            except OSError:
                pass
            time.sleep(rng.uniform(1, 3))
            linger0(s)
            s.close()
        elif kind == "idle":
            time.sleep(rng.uniform(1, 3))
            s.close()
        elif kind == "longline":
            s.settimeout(1)
            try:
                s.sendall(b"get " + b"a" * (1100 * 1024))
            except OSError:
                pass
            linger0(s)
            s.close()
    except OSError:
        counts.add("client_error")
        try:
            s.close()
        except OSError:
            pass


def churn(port, stop, seed, counts):
    rng = random.Random(seed)
    while not stop.is_set():
        one_connection(port, rng, counts)
        time.sleep(rng.uniform(0, 0.2))


def soak(name, cmd, port):
    log(f"{name}: {' '.join(cmd)}")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, proc)
        value = b"v" * BIG
        assert request(port, b"set big 0 0 %d\r\n" % BIG + value + b"\r\n") == b"STORED\r\n"
        time.sleep(0.5)
        pid = proc.pid
        base = (fds(pid), rss_mb(pid))
        samples = [(0.0, base[0], base[1], stat(port, "curr_connections"))]
        stop = threading.Event()
        counts = Counts()
        threads = [threading.Thread(target=churn, args=(port, stop, SEED * 100000 + i, counts),
                                    daemon=True) for i in range(CONNS)]
        t0 = time.time()
        for t in threads:
            t.start()
        while time.time() - t0 < DURATION:
            time.sleep(min(SAMPLE, max(0.0, DURATION - (time.time() - t0))))
            samples.append((time.time() - t0, fds(pid), rss_mb(pid), stat(port, "curr_connections")))
        stop.set()
        for t in threads:
            t.join(10)
        time.sleep(3)
        after = (time.time() - t0, fds(pid), rss_mb(pid), stat(port, "curr_connections"))
        served_after = request(port, b"version\r\n").startswith(b"VERSION")
        return dict(name=name, base=base, samples=samples, after=after, counts=counts.c,
                    served_after=served_after, alive=proc.poll() is None)
    finally:
        proc.kill()
        proc.wait()


def verdict(r):
    loaded = r["samples"][1:] or r["samples"]
    third = loaded[max(0, len(loaded) // 3 - 1)]
    last = loaded[-1]
    fd_flat = r["after"][1] <= r["base"][0] + FD_SLACK
    rss_flat = last[2] <= third[2] + RSS_SLACK_MB
    return fd_flat, rss_flat, third, last


def report(results, cmdline):
    lines = []
    for r in results:
        fd_flat, rss_flat, third, last = verdict(r)
        c = r["counts"]
        lines.append(f"**{r['name']}**: baseline {r['base'][0]} fds, {r['base'][1]:.1f} MiB RSS")
        lines.append("")
        lines.append("| t (s) | fds | RSS (MiB) | curr_connections |")
        lines.append("|---:|---:|---:|---:|")
        for t, f, m, cc in r["samples"]:
            lines.append(f"| {t:.0f} | {f} | {m:.1f} | {cc} |")
        t, f, m, cc = r["after"]
        lines.append(f"| {t:.0f} (3 s after the load) | {f} | {m:.1f} | {cc} |")
        lines.append("")
        lines.append(
            f"fds after the load {'flat' if fd_flat else 'NOT flat'} "
            f"({r['base'][0]} -> {r['after'][1]}), RSS during the load "
            f"{'flat' if rss_flat else 'NOT flat'} ({third[2]:.1f} MiB at {third[0]:.0f} s, "
            f"{last[2]:.1f} MiB at {last[0]:.0f} s); connections: "
            + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
            + f"; a new client served after the load: {'yes' if r['served_after'] else 'NO'}"
        )
        lines.append("")
    text = "\n".join(lines)
    print(text)
    if os.environ.get("RESULTS_SECTION"):
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
        head = (f"\n## Connection churn soak (fds and RSS)\n\n"
                f"{datetime.date.today()}, {rev}, {os.cpu_count()} CPUs. Command: `{cmdline}`\n\n")
        with open(os.path.join(ROOT, "bench", "RESULTS.md"), "a") as f:
            f.write(head + text + "\n")


def main():
    if "TIERCACHE" not in os.environ:
        log("building tiercache (release)")
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tiercache-server"],
                       cwd=ROOT, check=True)
    # CONNS clients and the servers' fds fit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < CONNS * 2 + 100:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, CONNS * 2 + 100), hard))
    threading.stack_size(256 * 1024)
    common = ["-p", str(PORT), "-l", "127.0.0.1", "-t", str(THREADS), "-m", str(MEMORY_MB),
              "-c", str(MAXCONNS)]
    root = ["-u", "root"] if os.geteuid() == 0 else []
    results = [soak("tiercache", [TIERCACHE] + common + root + ["-o", "ext_path=none"], PORT)]
    if MEMCACHED_TOO and os.path.exists(MEMCACHED):
        mc = [MEMCACHED, "-p", str(PORT + 1)] + common[2:] + ["-U", "0"]
        if os.geteuid() == 0:
            mc += ["-u", "nobody"]
        results.append(soak("memcached " + subprocess.run([MEMCACHED, "-V"], capture_output=True,
                                                            text=True).stdout.strip(), mc, PORT + 1))
    report(results, (K.shown + " " if K.shown else "") + "python3 bench/run.py conn_soak")
    ok = all(verdict(r)[0] and verdict(r)[1] and r["served_after"] and r["alive"]
             for r in results if r["name"] == "tiercache")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
