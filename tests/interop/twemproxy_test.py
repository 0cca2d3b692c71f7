#!/usr/bin/env python3
"""Scale-out behind twemproxy (Debian's nutcracker): two tiercache servers in
one ketama pool with auto_eject_hosts, the way memcached fleets run.

Checks, through the proxy:
  - sets and gets of N keys, each read back with its value;
  - the keys are spread over both servers (asked directly), each key on
    exactly one of them, and the proxy's multiget returns them all;
  - deletes and incr through the proxy;
  - one server killed: after the failure limit the proxy ejects it, and
    every set and get of new keys succeeds on the server left; keys that
    lived on the survivor are still served with their values.

  python3 twemproxy_test.py --tiercache BIN [--nutcracker nutcracker]

Costs about 10 s (the proxy's retry timeout dominates). Exits 0 when every
check passed; the last line is "twemproxy: N checks passed" or a failure.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

N = 300


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, what):
    for _ in range(200):
        if proc.poll() is not None:
            raise SystemExit(f"twemproxy: {what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"twemproxy: {what} did not listen on {port}")


class Conn:
    """A text-protocol connection: one request, its whole reply."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            c = self.s.recv(65536)
            if not c:
                raise ConnectionError("closed")
            self.buf += c
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            c = self.s.recv(65536)
            if not c:
                raise ConnectionError("closed")
            self.buf += c
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def cmd(self, req):
        self.s.sendall(req)
        return self.line()

    def get(self, *keys):
        """{key: value} of a (multi)get."""
        self.s.sendall(b"get " + b" ".join(keys) + b"\r\n")
        got = {}
        while True:
            line = self.line()
            if line == b"END":
                return got
            parts = line.split()
            if parts[0] != b"VALUE":
                raise AssertionError(f"unexpected reply {line!r}")
            got[parts[1]] = self.exact(int(parts[3]) + 2)[:-2]

    def close(self):
        self.s.close()


def key(i):
    return b"user:%05d" % i


def value(i):
    return b"v%05d-" % i * 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiercache", required=True)
    ap.add_argument("--nutcracker", default=shutil.which("nutcracker") or "/usr/sbin/nutcracker")
    a = ap.parse_args()
    if not os.path.exists(a.nutcracker):
        print("twemproxy: nutcracker not installed (tests/interop/install.sh installs it)")
        return 1
    work = tempfile.mkdtemp(prefix="tc-twemproxy-")
    procs = []
    checks = 0
    try:
        ports = [free_port(), free_port()]
        servers = []
        for p in ports:
            cmd = [a.tiercache, "-p", str(p), "-l", "127.0.0.1", "-t", "2", "-m", "64",
                   "-o", f"ext_path={work}/flash-{p}:128M"]
            if os.geteuid() == 0:
                cmd += ["-u", "root"]
            srv = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(f"{work}/tc-{p}.log", "w"))
            procs.append(srv)
            servers.append(srv)
            wait_port(p, srv, f"tiercache on {p}")
        proxy_port = free_port()
        conf = f"""pool:
  listen: 127.0.0.1:{proxy_port}
  hash: fnv1a_64
  distribution: ketama
  timeout: 500
  auto_eject_hosts: true
  server_retry_timeout: 30000
  server_failure_limit: 1
  servers:
   - 127.0.0.1:{ports[0]}:1 tc0
   - 127.0.0.1:{ports[1]}:1 tc1
"""
        with open(f"{work}/nutcracker.yml", "w") as f:
            f.write(conf)
        proxy = subprocess.Popen([a.nutcracker, "-c", f"{work}/nutcracker.yml", "-s", str(free_port()),
                                  "-o", f"{work}/nutcracker.log"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proxy)
        wait_port(proxy_port, proxy, "nutcracker")

        c = Conn(proxy_port)
        for i in range(N):
            v = value(i)
            r = c.cmd(b"set %s 0 0 %d\r\n%s\r\n" % (key(i), len(v), v))
            assert r == b"STORED", f"set {key(i)}: {r!r}"
        for i in range(N):
            got = c.get(key(i))
            assert got == {key(i): value(i)}, f"get {key(i)}: {got!r}"
        checks += 2

        direct = [Conn(p) for p in ports]
        where = {}
        for i in range(N):
            on = [j for j, d in enumerate(direct) if d.get(key(i)).get(key(i)) == value(i)]
            assert len(on) == 1, f"{key(i)} on servers {on}"
            where[i] = on[0]
        counts = [sum(1 for s in where.values() if s == j) for j in range(2)]
        assert min(counts) >= N // 5, f"keys per server {counts}: ketama did not spread them"
        checks += 1

        for lo in range(0, N, 50):
            ks = [key(i) for i in range(lo, lo + 50)]
            got = c.get(*ks)
            assert got == {key(i): value(i) for i in range(lo, lo + 50)}, f"multiget from {lo}"
        checks += 1

        assert c.cmd(b"delete %s\r\n" % key(0)) == b"DELETED"
        assert c.get(key(0)) == {}
        assert c.cmd(b"set ctr 0 0 1\r\n5\r\n") == b"STORED"
        assert c.cmd(b"incr ctr 10\r\n") == b"15"
        checks += 1

        # One server dies: the proxy ejects it after its failure limit.
        dead = 1
        servers[dead].send_signal(signal.SIGKILL)
        servers[dead].wait()
        direct[dead].close()
        lost = [i for i in range(1, N) if where[i] == dead]
        for i in lost[:5]:
            try:
                c.get(key(i))
            except (ConnectionError, AssertionError, socket.timeout):
                c = Conn(proxy_port)
        deadline = time.monotonic() + 10
        ok = False
        while time.monotonic() < deadline and not ok:
            try:
                ok = all(c.cmd(b"set new:%d 0 0 1\r\nx\r\n" % j) == b"STORED" for j in range(100))
            except (ConnectionError, socket.timeout):
                c = Conn(proxy_port)
            if not ok:
                time.sleep(0.2)
        assert ok, "the proxy did not eject the dead server within 10 s"
        got = c.get(*[b"new:%d" % j for j in range(100)])
        assert len(got) == 100, f"{len(got)} of 100 new keys read back after the ejection"
        checks += 1
        kept = [i for i in range(1, N) if where[i] != dead]
        for lo in range(0, len(kept), 50):
            ks = [key(i) for i in kept[lo:lo + 50]]
            got = c.get(*ks)
            assert got == {key(i): value(i) for i in kept[lo:lo + 50]}, "a survivor's key changed"
        checks += 1
        print(f"twemproxy: keys per server {counts}; after killing one, {len(kept)} survivor keys "
              f"served, 100 new keys set and read back")
        print(f"twemproxy: {checks} checks passed")
        return 0
    except AssertionError as e:
        print(f"twemproxy: FAILED: {e}")
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
