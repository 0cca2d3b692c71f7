#!/usr/bin/env python3
"""`watch` kinds beyond fetchers/mutations/evictions, tiercache and Debian's
memcached 1.6.18 side by side, each check run against both and compared:

  - the reply to `watch rawcmds`, `sysevents`, `proxyreqs`, `proxyevents`,
    `proxyuser`, `rawcmds fetchers` (OK) and `deletions` (ERROR: it came
    after 1.6.18);
  - watchers of rawcmds and of the proxy's kinds get no line while another
    client sets, gets and deletes (memcached 1.6.18 has no call site for
    raw commands, and Debian's build has no proxy);
  - `watch sysevents` right after start: the first `type=lru_crawler`
    line (memcached: its autocrawl, a second after start; tiercache: its
    expiry sweep, once a second) has the same field names in the same
    order;
  - connevents at a stop (SIGTERM): tiercache closes the client still open
    with `reason=shutdown`, its line of the same field names, in the same
    order, as memcached's `conn_close` for a client that quit. memcached's
    own watcher sees no line at a stop (it exits before its logger writes
    them): printed, not compared.

  python3 watch_test.py --tiercache BIN [--memcached /usr/bin/memcached]

Costs about 8 s (three server starts for each of the two, a wait for the
first sysevent, and a stop). Exits 0 when every check passed; the last line is "watch: N checks
passed" or "watch: FAILED ...".
"""
import os
import shutil
import signal
import socket
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from access_test import Server, binaries, finish  # noqa: E402  (the suite's one copy)
from twemproxy_test import free_port  # noqa: E402


def start(binary, tmp):
    """`binary` on a free port of 127.0.0.1, listening."""
    port = free_port()
    srv = Server(binary, ["-p", str(port), "-l", "127.0.0.1"], tmp, port)
    srv.port = port
    return srv


def connect(srv):
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def read_for(s, seconds, until=None):
    """What `s` sends within `seconds` (or until `until(data)` holds, or its
    end of stream)."""
    data = b""
    deadline = time.time() + seconds
    while time.time() < deadline and not (until and until(data)):
        s.settimeout(max(0.01, min(0.1, deadline - time.time())))
        try:
            got = s.recv(65536)
        except socket.timeout:
            continue
        except ConnectionError:
            break
        if not got:
            break
        data += got
    return data


def watcher(server, kinds):
    """A watcher of `kinds`, and its first reply line."""
    s = connect(server)
    s.sendall(f"watch {kinds}\r\n".encode())
    first = read_for(s, 3, lambda d: b"\r\n" in d)
    return s, first.split(b"\r\n")[0].decode()


def names(line):
    return [f.split("=", 1)[0] for f in line.split(" ") if "=" in f]


def lines_of(data):
    return [l for l in data.decode().splitlines() if l.startswith("ts=")]


def replies_and_silence(binary, tmp):
    r = {}
    srv = start(binary, tmp)
    try:
        for kinds in ["rawcmds", "sysevents", "proxyreqs", "proxyevents", "proxyuser",
                      "rawcmds fetchers", "deletions"]:
            s, first = watcher(srv, kinds)
            r[f"reply {kinds}"] = first
            s.close()
        quiet = {k: watcher(srv, k)[0]
                 for k in ["rawcmds", "proxyreqs", "proxyevents", "proxyuser"]}
        c = connect(srv)
        c.sendall(b"set a 0 0 1\r\nx\r\nget a\r\ndelete a\r\nget a\r\nversion\r\n")
        read_for(c, 2, lambda d: b"VERSION" in d)
        c.close()
        for k, s in quiet.items():
            r[f"lines of {k}"] = len(lines_of(read_for(s, 0.5)))
            s.close()
    finally:
        srv.stop()
    return r


def sysevents(binary, tmp):
    srv = start(binary, tmp)
    try:
        s, first = watcher(srv, "sysevents")
        data = read_for(s, 5, lambda d: b"type=lru_crawler" in d and d.endswith(b"\n"))
        crawl = [l for l in lines_of(data) if " type=lru_crawler " in l]
        return {"sysevents OK": first,
                "lru_crawler fields": names(crawl[0]) if crawl else None}
    finally:
        srv.stop()


def connevents_at_a_stop(binary, tmp):
    srv = start(binary, tmp)
    try:
        w, first = watcher(srv, "connevents")
        quits = connect(srv)
        quits_port = quits.getsockname()[1]
        quits.sendall(b"quit\r\n")
        read_for(quits, 1)
        quits.close()
        open_client = connect(srv)
        open_client.sendall(b"version\r\n")
        read_for(open_client, 1, lambda d: b"\r\n" in d)
        port = open_client.getsockname()[1]
        # (memcached may log the start-up probe's close late: not this one)
        def closes(data, port):
            return [l for l in lines_of(data)
                    if " type=conn_close " in l and f" rport={port} " in l]

        normal = closes(read_for(w, 1, lambda d: closes(d, quits_port)), quits_port)
        srv.proc.send_signal(signal.SIGTERM)
        at_stop = closes(read_for(w, 5), port)
        srv.proc.wait(timeout=10)
        open_client.close()
        return normal, at_stop
    finally:
        srv.stop()


def main():
    a = binaries()
    tmp = tempfile.mkdtemp(prefix="tiercache-watch-")
    passed, failed = 0, []

    def check(name, ok, detail):
        nonlocal passed
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}")
        if ok:
            passed += 1
        else:
            failed.append(name)

    try:
        results = {}
        for name, binary in [("memcached", a.memcached), ("tiercache", a.tiercache)]:
            results[name] = {**replies_and_silence(binary, tmp), **sysevents(binary, tmp)}
        mc, tc = results["memcached"], results["tiercache"]
        want = {f"reply {k}": "OK" for k in ["rawcmds", "sysevents", "proxyreqs",
                                             "proxyevents", "proxyuser", "rawcmds fetchers"]}
        want["reply deletions"] = "ERROR"
        want.update({f"lines of {k}": 0
                     for k in ["rawcmds", "proxyreqs", "proxyevents", "proxyuser"]})
        want["sysevents OK"] = "OK"
        for k in sorted(mc):
            ok = tc.get(k) == mc[k] and mc[k] is not None and want.get(k, mc[k]) == mc[k]
            check(k, ok, f"tiercache {tc.get(k)!r}, memcached {mc[k]!r}")

        mc_normal, mc_stop = connevents_at_a_stop(a.memcached, tmp)
        tc_normal, tc_stop = connevents_at_a_stop(a.tiercache, tmp)
        print(f"  info memcached's watcher at SIGTERM: {mc_stop!r}")
        check("conn_close normal fields",
              len(mc_normal) == 1 and len(tc_normal) == 1
              and names(tc_normal[0]) == names(mc_normal[0])
              and " reason=normal " in tc_normal[0],
              f"tiercache {tc_normal!r}, memcached {mc_normal!r}")
        check("conn_close at SIGTERM",
              len(tc_stop) == 1 and len(mc_normal) == 1
              and names(tc_stop[0]) == names(mc_normal[0])
              and " reason=shutdown " in tc_stop[0],
              f"tiercache {tc_stop!r}")
        return finish("watch", passed, failed)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
