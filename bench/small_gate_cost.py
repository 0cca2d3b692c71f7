#!/usr/bin/env python3
"""What the small-object store's gate costs the set path (issue 16): user-space
instructions per `set` of the server's worker thread, counted by callgrind,
with the store on and off, and the share of the gate's functions in them.

Each run starts `tiercache -t 1 -m 32 -o ext_path=DIR/tc.flash:512m,...`
under `valgrind --tool=callgrind --separate-threads=yes`, stores PRELOAD
distinct keys (pipelined, 100-byte values: RAM overflows and the small items
leave it for the store, or for the log tier with the store off), zeroes the
counters (`callgrind_control -z`), sends N sets of further new keys, one per
round trip (each change goes through the gate; the items they push out of
RAM keep the store's buffer and flush queue filling), dumps the counters
and reads the busiest thread's dump (the worker's): its total divided by N,
and the inclusive cost of `SmallStore::may_contain`, `SmallStore::invalidate`
and `SmallStore::insert` (`callgrind_annotate --inclusive=yes`).

  BINS=name=path[,name=path...] python3 bench/run.py small_gate_cost

Environment: BINS (required), N=20000 measured sets, PRELOAD=300000,
MODES (default "on,off"), KEEP=DIR (keep the worker's dumps there). Prints a markdown table. Needs valgrind.
"""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import sla_cost
from sla_cost import recv_until

K = sla_cost.scenario.knobs("small_gate_cost")
N, PRELOAD = K.N, K.PRELOAD
VALUE = b"v" * 100
MODES = {
    "on": "ext_small_max=512,ext_small_share=90",
    "off": "ext_small_max=0",
}
FUNCS = ["SmallStore::may_contain", "SmallStore::invalidate", "SmallStore::insert"]


def start(binary, work, mode):
    opts = f"ext_path={work}/tc.flash:512m,{MODES[mode]}"
    return sla_cost.start(binary, work, ("-m", "32", "-o", opts))


def set_cmd(i):
    return b"set key:%012d 0 0 %d\r\n%s\r\n" % (i, len(VALUE), VALUE)


def stats(s):
    s.sendall(b"stats\r\n")
    out = recv_until(s, 1, b"END\r\n").decode()
    return dict(re.findall(r"STAT (\S+) (\S+)", out))


def inclusive(dump):
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", dump],
                         check=True, capture_output=True, text=True).stdout
    got = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(?:\S+:)?(.*)", line)
        if not m:
            continue
        for f in FUNCS:
            if f in m.group(2) and f not in got:
                got[f] = int(m.group(1).replace(",", ""))
    return got


def measure(binary, mode):
    work = tempfile.mkdtemp(prefix="small_gate_cost.", dir=K.TMPDIR)
    p, port = start(binary, work, mode)
    try:
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for i in range(0, PRELOAD, 100):
            s.sendall(b"".join(set_cmd(j) for j in range(i, min(i + 100, PRELOAD))))
            recv_until(s, min(100, PRELOAD - i), b"STORED\r\n")
        subprocess.run(["callgrind_control", "-z", str(p.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        for i in range(PRELOAD, PRELOAD + N):
            s.sendall(set_cmd(i))
            recv_until(s, 1, b"STORED\r\n")
        subprocess.run(["callgrind_control", "-d", str(p.pid)], check=True,
                       stdout=subprocess.DEVNULL)
        st = stats(s)
        s.close()
        total, dump = sla_cost.worker_dump(work, p.pid)
        if K.KEEP:
            shutil.copy(dump, f"{K.KEEP}/cg.{mode}.{os.path.basename(binary)}")
        return total, inclusive(dump), st
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    bins = [b.split("=", 1) for b in K.BINS.split(",") if b]
    if not bins:
        sys.exit("set BINS=name=path[,name=path...]")
    modes = K.MODES.split(",")
    print(f"instructions per set, worker thread (callgrind, N={N}, PRELOAD={PRELOAD})\n")
    print("| build | store | per set | may_contain | invalidate | insert | small_objects | demoted |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, path in bins:
        for mode in modes:
            total, inc, st = measure(path, mode)
            cells = [f"{inc.get(f, 0) / N:,.0f} ({100 * inc.get(f, 0) / total:.1f}%)" for f in FUNCS]
            print(f"| {name} | {mode} | {total / N:,.0f} | {' | '.join(cells)} "
                  f"| {st.get('small_objects', '-')} | {st.get('small_objects_admitted', '-')} |",
                  flush=True)


if __name__ == "__main__":
    main()
