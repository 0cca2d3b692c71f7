#!/usr/bin/env python3
"""Round trips through the pymemcache client against a running server.

Usage: python3 pymemcache_test.py --host 127.0.0.1 --port PORT

The server should be empty (the test flushes it first).  Every check is a
plain assert with a message; the first failure stops the run.  On success it
prints `pymemcache: N checks passed`.
"""

import argparse
import sys
import traceback

from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheError

LARGEST_VALUE = 1_000_000           # fits a 1 MiB item with room for the header
TOO_LARGE_VALUE = 1024 * 1024 + 1   # over the default 1 MiB item size limit
BINARY = b"\r\n\x00binary\r\nEND\r\n\x00\xff\xfe\r\n"


class Checks:
    """Counts assertions so the summary can say how many ran."""

    def __init__(self):
        self.count = 0

    def equal(self, actual, expected, what):
        """Assert actual == expected, naming the check in the message."""
        self.count += 1
        assert actual == expected, f"{what}: expected {expected!r}, got {actual!r}"

    def true(self, condition, what):
        """Assert a condition, naming the check in the message."""
        self.count += 1
        assert condition, what


def short(value):
    """A short description of a possibly huge value for messages."""
    if isinstance(value, bytes) and len(value) > 60:
        return f"<{len(value)} bytes starting {value[:20]!r}>"
    return repr(value)


def check_set_get(c, client):
    """set/get of plain, empty, binary and very large values."""
    c.equal(client.set("k", b"hello"), True, "set k")
    c.equal(client.get("k"), b"hello", "get k")
    c.equal(client.set("k", b"world", expire=0), True, "overwrite k")
    c.equal(client.get("k"), b"world", "get overwritten k")
    c.equal(client.get("missing"), None, "get missing key")
    c.equal(client.set("empty", b""), True, "set 0-byte value")
    c.equal(client.get("empty"), b"", "get 0-byte value")
    c.equal(client.set("bin", BINARY), True, "set binary value")
    c.equal(client.get("bin"), BINARY, "binary value with \\r\\n and \\x00 round-trips")
    c.equal(client.set("flags", b"f", flags=12345), True, "set with flags")
    c.equal(client.raw_command(b"get flags", b"END\r\n"),
            b"VALUE flags 12345 1\r\nf\r\n", "flags are stored")
    large = bytes(range(256)) * (LARGEST_VALUE // 256) + b"x" * (LARGEST_VALUE % 256)
    c.equal(len(large), LARGEST_VALUE, "large test value size")
    c.equal(client.set("large", large), True, "set 1,000,000-byte value")
    got = client.get("large")
    c.true(got == large, f"1,000,000-byte value round-trips (got {short(got)})")


def check_get_many(c, client):
    """get_many of 100 keys, some missing."""
    items = {f"many:{i}": f"value-{i}".encode() for i in range(100)}
    c.equal(client.set_many(items), [], "set_many of 100 keys reports no failures")
    keys = list(items) + ["many:missing"]
    got = client.get_many(keys)
    c.equal(len(got), 100, "get_many returns the 100 stored keys only")
    c.equal(got, items, "get_many values")


def check_cas(c, client):
    """gets/cas: success, conflict and missing key."""
    client.set("c", b"v1")
    value, token = client.gets("c")
    c.equal(value, b"v1", "gets value")
    c.true(token is not None and token.isdigit(), f"gets returns a cas token ({token!r})")
    c.equal(client.cas("c", b"v2", token), True, "cas with the current token stores")
    c.equal(client.get("c"), b"v2", "value after successful cas")
    c.equal(client.cas("c", b"v3", token), False, "cas with a stale token is refused (EXISTS)")
    c.equal(client.get("c"), b"v2", "value unchanged after failed cas")
    _, token2 = client.gets("c")
    c.true(token2 != token, "cas token changes when the item changes")
    c.equal(client.cas("nokey", b"x", token2), None, "cas on a missing key (NOT_FOUND)")
    c.equal(client.gets("nokey"), (None, None), "gets on a missing key")


def check_incr_decr(c, client):
    """incr/decr including wrap-around and the floor at 0."""
    client.set("n", b"10")
    c.equal(client.incr("n", 5), 15, "incr")
    c.equal(client.decr("n", 3), 12, "decr")
    c.equal(client.decr("n", 100), 0, "decr floors at 0")
    c.equal(client.incr("n", 2**64 - 1), 2**64 - 1, "incr to 2^64-1")
    c.equal(client.incr("n", 1), 0, "incr wraps at 2^64")
    c.equal(client.incr("nokey", 1), None, "incr on a missing key")
    c.equal(client.decr("nokey", 1), None, "decr on a missing key")
    client.set("text", b"abc")
    try:
        client.incr("text", 1)
        raised = False
    except MemcacheError:
        raised = True
    c.true(raised, "incr on a non-numeric value raises")


def check_storage_modes(c, client):
    """add/replace/append/prepend."""
    c.equal(client.add("a", b"1"), True, "add a new key")
    c.equal(client.add("a", b"2"), False, "add an existing key is refused")
    c.equal(client.replace("a", b"3"), True, "replace an existing key")
    c.equal(client.replace("nokey", b"3"), False, "replace a missing key is refused")
    c.equal(client.append("a", b"_end"), True, "append")
    c.equal(client.prepend("a", b"start_"), True, "prepend")
    c.equal(client.get("a"), b"start_3_end", "value after append/prepend")
    c.equal(client.append("nokey", b"x"), False, "append to a missing key is refused")
    c.equal(client.prepend("nokey", b"x"), False, "prepend to a missing key is refused")
    c.equal(client.get("nokey"), None, "failed append/prepend create nothing")


def check_delete_touch(c, client):
    """delete and touch."""
    client.set("d", b"x")
    c.equal(client.delete("d"), True, "delete an existing key")
    c.equal(client.get("d"), None, "deleted key is gone")
    c.equal(client.delete("d"), False, "delete a missing key")
    client.set("t", b"x", expire=0)
    c.equal(client.touch("t", 100), True, "touch an existing key")
    c.equal(client.touch("nokey", 100), False, "touch a missing key")
    c.equal(client.get("t"), b"x", "touched key still readable")
    c.equal(client.touch("t", -1), True, "touch with a negative exptime")
    c.equal(client.get("t"), None, "touch with a negative exptime expires the key")


def expect_server_error(c, what, call):
    """Run call() and check that the server rejected it with an error."""
    try:
        call()
        raised = None
    except MemcacheError as exc:
        raised = exc
    c.true(raised is not None, f"{what} raises a server error")
    c.true("too large" in str(raised), f"{what}: error mentions 'too large' ({raised!r})")


def check_too_large(c, client):
    """Values over the item size limit are rejected; the connection survives.

    memcached semantics (tiercache matches them byte for byte): a too-large
    add/replace/append/prepend/cas leaves the old value intact, while a
    too-large *set* also removes the old value ("stale data must not persist").
    """
    huge = b"z" * TOO_LARGE_VALUE
    client.set("keep", b"old")
    expect_server_error(c, "too-large replace", lambda: client.replace("keep", huge))
    c.equal(client.get("keep"), b"old", "old value intact after a too-large replace")
    expect_server_error(c, "too-large append", lambda: client.append("keep", huge))
    c.equal(client.get("keep"), b"old", "old value intact after a too-large append")
    expect_server_error(c, "too-large prepend", lambda: client.prepend("keep", huge))
    expect_server_error(c, "too-large add", lambda: client.add("other", huge))
    c.equal(client.get("other"), None, "too-large add stores nothing")
    _, token = client.gets("keep")
    expect_server_error(c, "too-large cas", lambda: client.cas("keep", huge, token))
    c.equal(client.get("keep"), b"old", "old value intact after a too-large cas")
    expect_server_error(c, "too-large set", lambda: client.set("keep", huge))
    c.equal(client.get("keep"), None, "a too-large set removes the old value")
    c.equal(client.set("keep", b"new"), True, "connection usable after a too-large value")
    c.equal(client.get("keep"), b"new", "value stored after a too-large value")


CHECKS = [check_set_get, check_get_many, check_cas, check_incr_decr,
          check_storage_modes, check_delete_touch, check_too_large]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()

    client = Client((args.host, args.port), default_noreply=False,
                    connect_timeout=5, timeout=10)
    c = Checks()
    try:
        client.flush_all(noreply=False)
        for check in CHECKS:
            check(c, client)
    except AssertionError as exc:
        print(f"pymemcache: FAILED after {c.count} checks: {exc}")
        return 1
    except Exception:  # noqa: BLE001 - report unexpected client errors too
        traceback.print_exc()
        print(f"pymemcache: ERROR after {c.count} checks")
        return 1
    finally:
        client.close()
    print(f"pymemcache: {c.count} checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
