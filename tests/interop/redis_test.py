#!/usr/bin/env python3
"""tiercache's Redis (RESP) port against a real redis-server 7.0.

1. Differential: the same byte sequences (every command tiercache serves,
   their options and errors, inline and malformed requests) sent to a fresh
   redis-server and a fresh tiercache, one step at a time, replies compared
   byte for byte. Steps marked ``shape`` compare only the reply's type
   (their values legitimately differ: times, ids, cursors, server figures);
   DELIBERATE lists the replies that differ on purpose (docs/REDIS.md).
2. Clients: redis-py (RESP2 and RESP3), node-redis, redis-cli and redis-benchmark do
   set/get/mget/incr/expire/hash/pipeline against tiercache.

Usage: python3 redis_test.py --tiercache PATH [--redis-server PATH] [-v]
Last line: "redis: N steps compared, M mismatches; clients ok|FAILED".
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

END = b"*2\r\n$4\r\nECHO\r\n$9\r\n__end__!!\r\n"
END_REPLY = b"$9\r\n__end__!!\r\n"


def cmd(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


# Each step: (bytes, mode) with mode "exact", "shape" (first byte only) or
# "close" (the server answers and closes: read to EOF).
def steps():
    S = []

    def x(*a):
        S.append((cmd(*a), "exact"))

    def shape(*a):
        S.append((cmd(*a), "shape"))

    # connection and server
    x("PING"); x("PING", "hi"); x("PING", "a", "b"); x("ECHO", "hello")
    x("SELECT", "0"); x("SELECT", "1"); x("SELECT", "x")
    x("FLUSHALL"); x("FLUSHDB", "SYNC"); x("FLUSHALL", "ASYNC"); x("FLUSHALL", "NOW")
    x("DBSIZE")
    shape("TIME"); shape("INFO"); shape("INFO", "keyspace"); shape("CLIENT", "ID")
    x("CLIENT", "SETNAME", "app1"); x("CLIENT", "GETNAME"); x("CLIENT", "SETNAME", "a b")
    x("CLIENT", "NOPE"); shape("CLIENT", "LIST"); shape("CLIENT", "INFO")
    x("CLIENT", "KILL", "1.2.3.4:5"); x("CLIENT", "KILL", "ID", "99999")
    x("CONFIG", "GET", "maxmemory-policy"); x("CONFIG", "GET", "databases")
    x("CONFIG", "SET", "nosuch", "1"); shape("CONFIG", "GET", "maxmemory")
    x("COMMAND", "INFO", "nosuchcmd"); shape("COMMAND", "COUNT")
    x("AUTH", "pw")
    x("HELLO", "4"); x("HELLO", "x")
    x("NOSUCH"); x("NOSUCH", "a", "b"); x("get"); x("GET", "a", "b")
    # strings
    x("GET", "s"); x("SET", "s", "v"); x("GET", "s"); x("SET", "s", "w", "NX")
    x("SET", "s", "w", "XX"); x("SET", "s2", "w", "XX"); x("SET", "s", "x", "GET")
    x("SET", "s3", "x", "NX", "GET"); x("SET", "s", "v", "NX", "XX")
    x("SET", "s", "v", "EX", "0"); x("SET", "s", "v", "PX", "-1"); x("SET", "s", "v", "EX", "abc")
    x("SET", "s", "v", "EX", "10", "PX", "100"); x("SET", "s", "v", "KEEPTTL", "EX", "5")
    x("SET", "s", "v", "BOGUS"); x("SET", "s", "v", "EX")
    x("SET", "t", "v", "EX", "100"); x("TTL", "t"); x("SET", "t", "w", "KEEPTTL"); x("TTL", "t")
    x("SET", "t", "w"); x("TTL", "t")
    x("SET", "t", "v", "EXAT", "4102444800"); x("EXPIRETIME", "t")
    x("SET", "t", "v", "PXAT", "4102444800000"); x("PEXPIRETIME", "t")
    x("SET", "past", "v", "EXAT", "1000"); x("EXISTS", "past")
    x("SETNX", "n1", "a"); x("SETNX", "n1", "b"); x("GET", "n1")
    x("SETEX", "e1", "100", "v"); x("TTL", "e1"); x("SETEX", "e1", "0", "v"); x("SETEX", "e1", "x", "v")
    x("PSETEX", "e2", "100000", "v"); x("TTL", "e2"); x("PSETEX", "e2", "0", "v")
    x("GETSET", "g1", "a"); x("GETSET", "g1", "b"); x("GETDEL", "g1"); x("GETDEL", "g1")
    x("SET", "gx", "v"); x("GETEX", "gx", "EX", "100"); x("TTL", "gx"); x("GETEX", "gx", "PERSIST")
    x("TTL", "gx"); x("GETEX", "gx", "BAD"); x("GETEX", "nokey")
    x("MSET", "m1", "a", "m2", "b"); x("MGET", "m1", "m2", "m3"); x("MSET", "m1")
    x("MSETNX", "m1", "x", "m9", "y"); x("MSETNX", "m8", "x", "m9", "y"); x("MGET", "m8", "m9")
    x("APPEND", "ap", "abc"); x("APPEND", "ap", "def"); x("STRLEN", "ap"); x("STRLEN", "nokey")
    for r in [("0", "2"), ("-3", "-1"), ("2", "100"), ("5", "1"), ("-100", "2"), ("-1", "-3"), ("x", "1")]:
        x("GETRANGE", "ap", *r)
    x("GETRANGE", "nokey", "0", "1"); x("SUBSTR", "ap", "1", "2")
    x("SETRANGE", "sr", "3", "ab"); x("GET", "sr"); x("SETRANGE", "sr", "0", "XY"); x("GET", "sr")
    x("SETRANGE", "sr", "-1", "a"); x("SETRANGE", "none", "5", ""); x("EXISTS", "none")
    x("INCR", "c"); x("INCRBY", "c", "10"); x("DECR", "c"); x("DECRBY", "c", "5"); x("INCRBY", "c", "x")
    x("INCRBY", "c", "1.5"); x("SET", "c", " 1"); x("INCR", "c"); x("SET", "c", "007"); x("INCR", "c")
    x("SET", "c", "9223372036854775807"); x("INCR", "c"); x("SET", "c", "-9223372036854775808")
    x("DECR", "c"); x("DECRBY", "c", "-9223372036854775808")
    # The digits written in place (same length) or as a new item (length
    # changes both ways), the expiry kept; GET/STRLEN show no padding.
    x("SET", "ci", "8", "EX", "1000"); x("INCR", "ci"); x("GET", "ci"); x("INCR", "ci"); x("GET", "ci")
    x("STRLEN", "ci"); x("TTL", "ci"); x("DECR", "ci"); x("GET", "ci"); x("STRLEN", "ci")
    x("SET", "cn", "-1"); x("INCR", "cn"); x("GET", "cn"); x("DECRBY", "cn", "10"); x("INCR", "cn")
    x("GET", "cn"); x("INCRBY", "cn", "-9223372036854775799"); x("INCRBY", "cn", "-1"); x("GET", "cn")
    x("INCRBY", "cnew", "-42"); x("GET", "cnew"); x("TTL", "cnew"); x("APPEND", "cnew", "0")
    x("INCR", "cnew"); x("GET", "cnew")
    x("INCRBYFLOAT", "f", "10.5"); x("INCRBYFLOAT", "f", "0.1"); x("INCRBYFLOAT", "f", "-5")
    x("INCRBYFLOAT", "f", "abc"); x("INCRBYFLOAT", "f", "1e3"); x("SET", "f", "3.0"); x("INCRBYFLOAT", "f", "0")
    x("SET", "f", "x"); x("INCRBYFLOAT", "f", "1")
    # keys
    x("DEL", "m1", "m2", "zz"); x("UNLINK", "m8", "m9"); x("EXISTS", "ap", "ap", "zz"); x("TOUCH", "ap", "zz")
    x("TYPE", "ap"); x("TYPE", "zz")
    x("SET", "k", "v"); x("EXPIRE", "k", "100"); x("TTL", "k"); x("EXPIRE", "k", "50", "GT"); x("EXPIRE", "k", "200", "GT")
    x("TTL", "k"); x("EXPIRE", "k", "300", "LT"); x("EXPIRE", "k", "10", "LT"); x("TTL", "k")
    x("EXPIRE", "k", "10", "NX"); x("EXPIRE", "k", "20", "XX"); x("TTL", "k")
    x("EXPIRE", "k", "1", "NX", "XX"); x("EXPIRE", "k", "1", "GT", "LT"); x("EXPIRE", "k", "1", "FOO")
    x("EXPIRE", "k", "x"); x("EXPIRE", "zz", "10"); x("PERSIST", "k"); x("PERSIST", "k"); x("TTL", "k")
    x("EXPIRE", "k", "10", "XX"); x("EXPIRE", "k", "10", "GT"); x("EXPIRE", "k", "10", "LT"); x("TTL", "k")
    x("PEXPIRE", "k", "100000"); x("TTL", "k"); x("EXPIREAT", "k", "4102444800"); x("EXPIRETIME", "k")
    x("PEXPIREAT", "k", "4102444800000"); x("PEXPIRETIME", "k"); x("PERSIST", "k"); x("EXPIRETIME", "k")
    x("TTL", "zz"); x("PTTL", "zz"); x("PTTL", "k"); x("EXPIRETIME", "zz")
    x("EXPIRE", "k", "-5"); x("EXISTS", "k"); x("EXPIRE", "k", "9223372036854775807")
    # hashes
    x("HSET", "h", "a", "1", "b", "2"); x("HSET", "h", "a", "3", "c", "4"); x("HSET", "h", "a")
    x("HGET", "h", "a"); x("HGET", "h", "zz"); x("HGET", "nokey", "a"); x("HMGET", "h", "a", "zz", "c")
    x("HGETALL", "h"); x("HKEYS", "h"); x("HVALS", "h"); x("HLEN", "h"); x("HEXISTS", "h", "b"); x("HEXISTS", "h", "z")
    x("HSETNX", "h", "a", "9"); x("HSETNX", "h", "d", "9"); x("HMSET", "h", "e", "5")
    x("HINCRBY", "h", "e", "10"); x("HINCRBY", "h", "new", "-3"); x("HINCRBY", "h", "e", "x")
    x("HSET", "h", "s", "str"); x("HINCRBY", "h", "s", "1")
    x("HDEL", "h", "a", "zz"); x("HGETALL", "h"); x("TYPE", "h")
    x("GET", "h"); x("APPEND", "h", "x"); x("INCR", "h"); x("SET", "h2", "x"); x("HSET", "h2", "a", "b")
    x("HGETALL", "h2"); x("HLEN", "nokey"); x("HGETALL", "nokey")
    x("HDEL", "h", "b", "c", "d", "e", "new", "s"); x("EXISTS", "h")
    x("SET", "h", "v", "GET"); x("HSET", "hh", "f", "v"); x("SET", "hh", "v", "GET"); x("SET", "hh", "v"); x("TYPE", "hh")
    # transactions
    x("MULTI"); x("SET", "tx", "1"); x("INCR", "tx"); x("GET", "tx"); x("EXEC")
    x("EXEC"); x("DISCARD"); x("MULTI"); x("MULTI"); x("DISCARD")
    x("MULTI"); x("SET", "tx", "1"); x("NOSUCH"); x("EXEC")
    x("MULTI"); x("SET", "tx"); x("EXEC")
    x("MULTI"); x("SET", "tx", "9"); x("INCR", "tx"); x("HSET", "tx", "a", "b"); x("EXEC")
    # Keys of several shards in one transaction (EXEC holds them all).
    x("MULTI"); x("SET", "tx1", "1"); x("SET", "tx2", "2"); x("SET", "tx3", "3"); x("INCR", "tx4")
    x("MGET", "tx1", "tx2", "tx3", "tx4"); x("DEL", "tx1", "tx2"); x("EXEC")
    # inline and protocol
    S.append((b"SET inl \"a b\\x41\"\r\nGET inl\r\n", "exact"))
    S.append((b"PING\n", "exact"))
    S.append((b"\r\n\r\nPING\r\n", "exact"))
    S.append((b"ECHO 'it\\'s'\r\n", "exact"))
    S.append((b"*0\r\n*1\r\n$4\r\nPING\r\n", "exact"))
    # RESP3
    S.append((cmd("HELLO", "3"), "shape"))
    x("GET", "zz"); x("HGETALL", "hh2"); x("HSET", "h3", "a", "1"); x("HGETALL", "h3"); x("MGET", "zz", "n1")
    x("INCRBYFLOAT", "f3", "1.5"); x("CONFIG", "GET", "databases"); x("SET", "zz", "v", "XX")
    S.append((cmd("HELLO", "2"), "shape"))
    x("RESET"); x("GET", "zz"); x("QUIT")
    return S


# Protocol errors (each on its own connection: the server closes it).
BAD = [
    b"*1\r\n$536870913\r\n",
    b"*1\r\n$-3\r\n",
    b"*2000000\r\n",
    b"*abc\r\n",
    b"*1\r\n+PING\r\n",
    b"SET \"unbalanced\r\n",
    b"SET 'a'b\r\n",
]

# Replies that differ from redis-server on purpose (docs/REDIS.md).
DELIBERATE = {
    # One database: SELECT of any other is refused.
    cmd("SELECT", "1"): b"-ERR DB index is out of range\r\n",
    # A cache evicts instead of refusing writes.
    cmd("CONFIG", "GET", "maxmemory-policy"): b"*2\r\n$16\r\nmaxmemory-policy\r\n$11\r\nallkeys-lru\r\n",
    cmd("CONFIG", "GET", "databases"): b"*2\r\n$9\r\ndatabases\r\n$1\r\n1\r\n",
    # The same in RESP3 (after HELLO 3).
    b"RESP3" + cmd("CONFIG", "GET", "databases"): b"%1\r\n$9\r\ndatabases\r\n$1\r\n1\r\n",
    # INCRBYFLOAT in 64-bit doubles (Redis: 80-bit long doubles).
    cmd("INCRBYFLOAT", "f", "1e3"): b"$6\r\n1005.6\r\n",
    # Over 1M arguments is refused at once (Redis 7 waits for them).
    b"*2000000\r\n": b"-ERR Protocol error: invalid multibulk length\r\n",
}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc):
    for _ in range(200):
        if proc.poll() is not None:
            raise RuntimeError("server exited")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("server did not start on %d" % port)


def read_until(sock, end, timeout=5.0):
    sock.settimeout(timeout)
    got = b""
    while not got.endswith(end):
        try:
            b = sock.recv(65536)
        except socket.timeout:
            return got + b"<timeout>"
        if not b:
            return got + b"<closed>"
        got += b
    return got[: -len(end)]


def read_all(sock, timeout=3.0):
    sock.settimeout(timeout)
    got = b""
    while True:
        try:
            b = sock.recv(65536)
        except (socket.timeout, ConnectionResetError):
            return got + b"<timeout>"
        if not b:
            return got
        got += b


def run_steps(port):
    s = socket.create_connection(("127.0.0.1", port))
    out = []
    for data, mode in steps():
        if data == cmd("QUIT"):
            s.sendall(data)
            out.append(read_all(s))
            continue
        s.sendall(data + END)
        out.append(read_until(s, END_REPLY))
    s.close()
    return out


def run_bad(port):
    out = []
    for b in BAD:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b)
        out.append(read_all(s))
        s.close()
    return out


def differential(tc_port, redis_port, verbose):
    want, got = run_steps(redis_port), run_steps(tc_port)
    bad_want, bad_got = run_bad(redis_port), run_bad(tc_port)
    compared, mismatches = 0, 0
    pairs = [(d, m, w, g) for (d, m), w, g in zip(steps(), want, got)]
    pairs += [(d, "exact", w, g) for d, w, g in zip(BAD, bad_want, bad_got)]
    for data, mode, w, g in pairs:
        compared += 1
        same = w == g if mode == "exact" else w[:1] == g[:1]
        if not same and g in (DELIBERATE.get(data), DELIBERATE.get(b"RESP3" + data)):
            same = True
        if not same:
            mismatches += 1
            print("MISMATCH %r\n   redis:     %r\n   tiercache: %r" % (data[:120], w[:300], g[:300]))
        elif verbose:
            print("ok %r -> %r" % (data[:60], g[:60]))
    return compared, mismatches


def clients(tc_port):
    """redis-py (RESP2 and RESP3), redis-cli, redis-benchmark: True if all work."""
    ok = True
    try:
        import redis
        for proto in (2, 3):
            r = redis.Redis(port=tc_port, protocol=proto, decode_responses=True)
            assert r.ping()
            assert r.set("py:a", "1") and r.get("py:a") == "1"
            assert r.mget("py:a", "py:none") == ["1", None]
            assert r.incr("py:n") >= 1
            assert r.expire("py:a", 100) and 99 <= r.ttl("py:a") <= 100
            r.delete("py:h")
            assert r.hset("py:h", mapping={"f": "v", "g": "w"}) == 2
            assert r.hgetall("py:h") == {"f": "v", "g": "w"}
            p = r.pipeline(transaction=False)
            for i in range(100):
                p.set("py:p%d" % i, i)
            p.get("py:p42")
            assert p.execute()[-1] == "42"
            p = r.pipeline(transaction=True)
            p.set("py:t", "1").incr("py:t")
            assert p.execute() == [True, 2]
            # redis-py's default pipeline is a transaction: over many keys
            # (many shards) too.
            p = r.pipeline()
            for i in range(50):
                p.set("py:tx%d" % i, i)
            p.mget(["py:tx%d" % i for i in range(50)])
            assert p.execute()[-1] == [str(i) for i in range(50)]
            r.close()
        print("redis-py: ok (RESP2 and RESP3)")
    except Exception as e:  # noqa: BLE001 - report any client failure
        ok = False
        print("redis-py: FAILED: %r" % (e,))
    cli = shutil.which("redis-cli")
    if cli:
        def rc(*a):
            return subprocess.run([cli, "-p", str(tc_port)] + list(a), capture_output=True,
                                  text=True, timeout=20).stdout.strip()
        r1, r2, r3 = rc("set", "cli:a", "x"), rc("get", "cli:a"), rc("hset", "cli:h", "f", "v")
        r4 = rc("--no-raw", "mget", "cli:a", "cli:zz")
        if (r1, r2, r3) == ("OK", "x", "1") and "(nil)" in r4:
            print("redis-cli: ok")
        else:
            ok = False
            print("redis-cli: FAILED %r" % ((r1, r2, r3, r4),))
    node_dir = os.environ.get("TIERCACHE_NODE_DIR",
                              os.path.expanduser("~/.cache/tiercache-interop/node"))
    if shutil.which("node") and os.path.isdir(os.path.join(node_dir, "node_modules", "redis")):
        env = dict(os.environ, NODE_PATH=os.path.join(node_dir, "node_modules"))
        p = subprocess.run(["node", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "redis_node_test.js"), str(tc_port)],
                           capture_output=True, text=True, timeout=60, env=env)
        print((p.stdout + p.stderr).strip())
        ok &= p.returncode == 0
    else:
        print("node-redis: skipped (no node, or install.sh did not install it)")
    bench = shutil.which("redis-benchmark")
    if bench:
        p = subprocess.run([bench, "-p", str(tc_port), "-t", "set,get,incr,mset", "-n", "5000",
                            "-c", "10", "-P", "4", "-q"], capture_output=True, text=True, timeout=120)
        lines = [l for l in p.stdout.replace("\r", "\n").splitlines() if "requests per second" in l]
        if p.returncode == 0 and len(lines) == 4:
            print("redis-benchmark: ok (%s)" % "; ".join(l.strip() for l in lines))
        else:
            ok = False
            print("redis-benchmark: FAILED rc=%d %r" % (p.returncode, p.stdout[-500:]))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tiercache", required=True)
    ap.add_argument("--redis-server", default=shutil.which("redis-server") or "redis-server")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tc-redis-")
    procs = []
    try:
        rport, tport, mport = free_port(), free_port(), free_port()
        rs = subprocess.Popen([a.redis_server, "--port", str(rport), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no", "--dir", tmp],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(rs)
        args = [a.tiercache, "-p", str(mport), "-l", "127.0.0.1", "-o", "redis_port=%d" % tport,
                "-o", "ext_path=none"]
        if os.geteuid() == 0:
            args += ["-u", "root"]
        tc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(tc)
        wait_port(rport, rs)
        wait_port(tport, tc)
        compared, mismatches = differential(tport, rport, a.v)
        cl = clients(tport)
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print("redis: %d steps compared, %d mismatches; clients %s"
          % (compared, mismatches, "ok" if cl else "FAILED"))
    sys.exit(0 if mismatches == 0 and cl else 1)


if __name__ == "__main__":
    main()
