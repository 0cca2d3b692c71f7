#!/usr/bin/python3
"""pylibmc (libmemcached) with binary=True against a server: sets, gets,
add/replace/append, incr/decr, multi-get/set, gets/cas, delete, touch,
stats and flush_all, as an application uses them.

  /usr/bin/python3 pylibmc_binary_test.py HOST:PORT

Needs Debian's python3-pylibmc (tests/interop/install.sh). Prints
"pylibmc binary ok" and exits 0 when every check passed.
"""
import sys, pylibmc
mc = pylibmc.Client([sys.argv[1]], binary=True, behaviors={"cas": True})
assert mc.set("a", "1")
assert mc.get("a") == "1", mc.get("a")
assert mc.get("missing") is None
assert mc.add("a", "2") is False
assert mc.add("b", b"\x00\xffbin")
assert mc.get("b") == b"\x00\xffbin"
try:
    mc.replace("zz", "x"); raise SystemExit("replace of a missing key succeeded")
except pylibmc.NotFound:
    pass
assert mc.incr("a", 5) == 6
assert mc.decr("a", 2) == 4
assert mc.append("a", "0") and mc.get("a") == "40"
assert mc.get_multi(["a", "b", "missing"]) == {"a": "40", "b": b"\x00\xffbin"}
mc.set_multi({"m1": 1, "m2": [1, 2]})
assert mc.get_multi(["m1", "m2"]) == {"m1": 1, "m2": [1, 2]}
v, cas = mc.gets("a")
assert v == "40" and cas
assert mc.cas("a", "41", cas)
assert not mc.cas("a", "42", cas)
assert mc.delete("a") and not mc.delete("a")
assert mc.touch("b", 100)
st = mc.get_stats()
assert st and "curr_items" in st[0][1], st
mc.flush_all()
assert mc.get("b") is None
print("pylibmc binary ok", mc.get_stats()[0][1].get("version"))
