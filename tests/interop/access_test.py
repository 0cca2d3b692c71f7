#!/usr/bin/env python3
"""TLS (-Z), ASCII auth (-Y) and the unix socket (-s/-a) with real tools,
tiercache and Debian's memcached 1.6.18 side by side, each check run
against both and the results compared:

  - `openssl s_client` on a -Z listener gets `VERSION 1.6.18`;
  - pymemcache with an ssl context: set, get, get_many, a 200 KB value;
  - a `-l notls:ADDR:PORT` listener serves clear text next to the TLS one;
  - clear text on the TLS port gets no reply;
  - -Y over TLS: unauthenticated before, pymemcache's auth `set`, then
    served; a wrong password is refused;
  - -s PATH -a 660: the socket's mode, no TCP port, pymemcache over it.

  python3 access_test.py --tiercache BIN [--memcached /usr/bin/memcached]

Costs about 5 s (certificate generation and six server starts). Exits 0
when every check passed; the last line is "access: N checks passed" or
"access: FAILED ...".
"""
import argparse
import os
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile
import time

from pymemcache.client.base import Client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from twemproxy_test import free_port  # noqa: E402  (the suite's one copy)

ROOT = os.getuid() == 0


class Server:
    """A server process (tiercache or memcached) with the given flags."""

    def __init__(self, binary, args, tmp, wait_for):
        self.is_memcached = os.path.basename(binary).startswith("memcached")
        full = [binary] + args + (["-u", "root"] if ROOT else [])
        if self.is_memcached:
            full += ["-U", "0"]
        else:
            full += ["-o", "ext_path=none"]
        self.log = open(os.path.join(tmp, f"server-{time.time_ns()}.log"), "w")
        self.proc = subprocess.Popen(full, stdout=self.log, stderr=self.log)
        deadline = time.time() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{full} exited with {self.proc.returncode}")
            try:
                if isinstance(wait_for, str):
                    s = socket.socket(socket.AF_UNIX)
                    s.settimeout(0.5)
                    s.connect(wait_for)
                    s.close()
                else:
                    socket.create_connection(("127.0.0.1", wait_for), timeout=0.5).close()
                return
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"{full} did not listen")
                time.sleep(0.05)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def binaries():
    """The flags of a side-by-side test: --tiercache BIN [--memcached BIN]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiercache", required=True)
    ap.add_argument("--memcached", default="/usr/bin/memcached")
    return ap.parse_args()


def finish(part, passed, failed):
    """The summary line of `part` ("PART: N checks passed" or "PART:
    FAILED ..."), and the exit code."""
    if failed:
        print(f"{part}: FAILED {', '.join(failed)} ({passed} passed)")
        return 1
    print(f"{part}: {passed} checks passed")
    return 0


def message(e):
    """A pymemcache error's server message (bytes) as text."""
    m = e.args[0] if e.args else e
    return m.decode() if isinstance(m, bytes) else str(m)


def s_client(port, ca):
    """`openssl s_client` sends `version` and `quit` (-quiet ignores the end
    of its input; the server closing ends it); returns its output."""
    r = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-quiet",
         "-CAfile", ca, "-verify_return_error"],
        input=b"version\r\nquit\r\n", capture_output=True, timeout=20,
    )
    return r.stdout.decode(errors="replace")


def clear_on_tls_port(port):
    """Clear text to a TLS port: what comes back before it closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    s.sendall(b"version\r\n")
    got = b""
    try:
        while True:
            d = s.recv(4096)
            if not d:
                break
            got += d
    except OSError:
        pass
    s.close()
    return b"VERSION" in got


def tls_checks(binary, tmp, cert, key):
    """What a client sees of a -Z server with a notls listener and of a
    -Z -Y one."""
    out = {}
    port, plain = free_port(), free_port()
    srv = Server(binary, ["-p", str(port), "-l", f"127.0.0.1,notls:127.0.0.1:{plain}",
                          "-Z", "-o", f"ssl_chain_cert={cert},ssl_key={key}"], tmp, port)
    try:
        out["s_client"] = s_client(port, cert).strip()
        ctx = ssl.create_default_context(cafile=cert)
        c = Client(("127.0.0.1", port), tls_context=ctx, timeout=5)
        big = b"v" * 200_000
        out["set"] = c.set("k1", b"one", noreply=False)
        out["set_big"] = c.set("big", big, noreply=False)
        out["get"] = c.get("k1")
        out["get_big_ok"] = c.get("big") == big
        out["get_many"] = sorted(c.get_many(["k1", "nope", "big"]).keys())
        out["notls_get"] = Client(("127.0.0.1", plain), timeout=5).get("k1")
        out["clear_on_tls_port_served"] = clear_on_tls_port(port)
        c.close()
    finally:
        srv.stop()
    auth = os.path.join(tmp, "auth")
    with open(auth, "w") as f:
        f.write("alice:secret\n")
    port = free_port()
    srv = Server(binary, ["-p", str(port), "-l", "127.0.0.1", "-Z", "-Y", auth,
                          "-o", f"ssl_chain_cert={cert},ssl_key={key}"], tmp, port)
    try:
        ctx = ssl.create_default_context(cafile=cert)
        c = Client(("127.0.0.1", port), tls_context=ctx, timeout=5)
        try:
            c.get("k1")
            out["before_auth"] = "served"
        except Exception as e:  # pymemcache raises MemcacheClientError
            out["before_auth"] = message(e)
        c.close()
        bad = Client(("127.0.0.1", port), tls_context=ctx, timeout=5)
        try:
            bad.set("auth", "alice wrong", noreply=False)
            out["wrong_password"] = "accepted"
        except Exception as e:
            out["wrong_password"] = message(e)
        bad.close()
        c = Client(("127.0.0.1", port), tls_context=ctx, timeout=5)
        out["auth"] = c.set("auth", "alice secret", noreply=False)
        out["after_auth"] = (c.set("k2", b"two", noreply=False), c.get("k2"))
        c.close()
    finally:
        srv.stop()
    return out


def unix_checks(binary, tmp):
    """A -s server given a TCP port too (-s disables TCP, as in memcached)."""
    path = os.path.join(tmp, f"{os.path.basename(binary)}.sock")
    port = free_port()
    srv = Server(binary, ["-s", path, "-a", "660", "-p", str(port)], tmp, path)
    out = {}
    try:
        out["unix_mode"] = oct(stat.S_IMODE(os.stat(path).st_mode))
        out["unix_is_socket"] = stat.S_ISSOCK(os.stat(path).st_mode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            out["unix_tcp_port_open"] = True
        except OSError:
            out["unix_tcp_port_open"] = False
        c = Client(path, timeout=5)
        out["unix_set"] = c.set("u", b"unix", noreply=False)
        out["unix_get"] = c.get("u")
        out["unix_get_many"] = c.get_many(["u", "none"])
        c.close()
    finally:
        srv.stop()
    return out


def main():
    a = binaries()
    tmp = tempfile.mkdtemp(prefix="tiercache-access-")
    passed = 0
    try:
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
            check=True, capture_output=True, timeout=30)
        results = {}
        for name, binary in [("memcached", a.memcached), ("tiercache", a.tiercache)]:
            results[name] = {**tls_checks(binary, tmp, cert, key), **unix_checks(binary, tmp)}
        mc, tc = results["memcached"], results["tiercache"]
        # What each check must show, besides being the same for both.
        want = {
            "s_client": "VERSION 1.6.18",
            "get": b"one",
            "get_big_ok": True,
            "get_many": ["big", "k1"],
            "notls_get": b"one",
            "clear_on_tls_port_served": False,
            "before_auth": "unauthenticated",
            "wrong_password": "authentication failure",
            "auth": True,
            "after_auth": (True, b"two"),
            "unix_mode": "0o660",
            "unix_is_socket": True,
            "unix_tcp_port_open": False,
            "unix_get": b"unix",
            "unix_get_many": {"u": b"unix"},
        }
        failed = []
        for k in sorted(mc):
            ok = tc.get(k) == mc[k]
            if k in want:
                ok = ok and tc.get(k) == want[k]
            print(f"  {'ok  ' if ok else 'FAIL'} {k}: tiercache {tc.get(k)!r}, memcached {mc[k]!r}")
            if ok:
                passed += 1
            else:
                failed.append(k)
        return finish("access", passed, failed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
