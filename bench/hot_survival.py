#!/usr/bin/env python3
"""Hot keys through a stream of one-time keys, in the simulator (issue 31:
"hot items survive any stream of new keys ... show it with the simulator").

A trace of REQUESTS requests of 100-byte objects: every EVERY-th request
reads one of HOT hot keys in turn (each hot key is read once per
HOT x EVERY requests), every other request is a key never seen before.
`tiercache-sim` replays it with each of POLICIES (the policy code the
server uses, SIZE objects, --ignore-obj-size) and with ENGINE_POLICIES
through the server's engine (`tiercache:POLICY`, ENGINE_SIZE of RAM), in
windows of WINDOW requests. In every window after the first, the one-time
keys all miss; the hot misses are the window's misses minus its one-time
keys: 0 for a policy that keeps hot items through the stream.

Environment: HOT=2000 EVERY=2 REQUESTS=2000000 SIZE=10000 ENGINE_SIZE=16MiB
             POLICIES=s3fifo,2q,midlru,lru,fifo,clock,sieve
             ENGINE_POLICIES=s3fifo,2q,midlru WINDOW=400000
             RESULTS=bench/RESULTS.md (RESULTS=- to only print)
"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import paths, scenario  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.util import log  # noqa: E402

TAG = "hot_survival"
K = scenario.knobs(TAG)


def trace(path):
    hot, every, n = int(K.HOT), int(K.EVERY), int(K.REQUESTS)
    one_time = [0] * ((n + int(K.WINDOW) - 1) // int(K.WINDOW))
    with open(path, "w") as f:
        h = new = 0
        for i in range(n):
            if i % every == 0:
                f.write(f"hot{h % hot},100\n")
                h += 1
            else:
                f.write(f"new{new},100\n")
                new += 1
                one_time[i // int(K.WINDOW)] += 1
    return one_time


def replay(path, policies, size, extra):
    cmd = [os.path.join(paths.ROOT, "target/release/tiercache-sim"), "--trace", path,
           "--format", "csv", "--policy", policies, "--size", size,
           "--window", str(K.WINDOW)] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows, policy = {}, None
    for line in out.splitlines():
        m = re.match(r"^(\S+)\s+\S+\s+\d+\s+(\d+)\s", line)
        if m and not line.startswith(" "):
            policy = m.group(1)
            rows[policy] = {"misses": int(m.group(2)), "windows": []}
            continue
        w = re.match(r"^\s+window from request\s+\d+ .*?\d+ req\s+(\d+) miss", line)
        if w and policy:
            rows[policy]["windows"].append(int(w.group(1)))
    return rows


def main():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tiercache-sim"],
                   cwd=paths.ROOT, check=True)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "hot.csv")
        log(TAG, f"writing the trace ({K.REQUESTS} requests)")
        one_time = trace(path)
        log(TAG, "replaying")
        rows = replay(path, K.POLICIES, str(K.SIZE), ["--ignore-obj-size"])
        engine = ",".join(f"tiercache:{p}" for p in K.ENGINE_POLICIES.split(",") if p)
        if engine:
            rows.update(replay(path, engine, K.ENGINE_SIZE, []))
    lines = ["| policy | cache | misses | hot misses in the first window | hot misses after it |",
             "| --- | --- | ---: | ---: | ---: |"]
    for policy, r in rows.items():
        hot = [m - o for m, o in zip(r["windows"], one_time)]
        size = K.ENGINE_SIZE if policy.startswith("tiercache:") else f"{K.SIZE} objects"
        lines.append(f"| {policy} | {size} | {r['misses']:,} | {hot[0]:,} | {sum(hot[1:]):,} |")
    body = f"""{header(K)}
- trace: {K.REQUESTS} requests of 100 B objects; every {K.EVERY}nd request reads one of {K.HOT} hot keys in
  turn (each read once per {int(K.HOT) * int(K.EVERY):,} requests), the others are keys never seen before
  ({sum(one_time):,} of them, {sum(one_time) // int(K.SIZE)}x the cache); windows of {K.WINDOW} requests.

{chr(10).join(lines)}
"""
    write_results("Hot keys through a stream of one-time keys (hot_survival.py)", body, TAG)


if __name__ == "__main__":
    main()
