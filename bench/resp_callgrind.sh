#!/bin/bash
# Instructions per pipelined RESP request (SET, GET, INCR, MSET of 10 keys),
# counted by callgrind over all the server's threads: stable on a noisy
# machine, where redis-benchmark's requests per second are not.
#
#   bash bench/resp_callgrind.sh BIN [N]
#
# BIN runs `-t 2 -m 1024 -o ext_path=none -o redis_port` under
# `valgrind --tool=callgrind --separate-threads=yes`; after a warm-up, for
# each test the counters are zeroed, `redis-benchmark -t TEST -n N -c 4
# -P 16` runs, and the counters are dumped; Ir / N is printed (all threads,
# and the busiest two, the workers). N defaults to 20000.
#
# BIN may be redis-server instead (its name ends in redis-server): it runs
# without persistence (`--save '' --appendonly no`), under the same
# counting and the same redis-benchmark commands, for the ratio of the two
# servers' instructions per request.
#
# valgrind 3.19 crashes in rustix's vDSO set-up (rustix::time::clock_gettime,
# the shard lock's CPU clock): build BIN with rustix's libc backend,
#   RUSTFLAGS=--cfg=rustix_use_libc CARGO_TARGET_DIR=target/cg \
#       cargo build --release -p tiercache-server
set -e
BIN=$1; N=${2:-20000}
[ -x "$BIN" ] || { echo "usage: $0 BIN [N]" >&2; exit 2; }
OUT=$(mktemp -d /tmp/resp-cg.XXXXXX)
PORT=$((20000 + RANDOM % 20000)); MPORT=$((PORT + 1))
USER_ARGS=(); [ "$(id -u)" = 0 ] && USER_ARGS=(-u root)
case "$BIN" in
*redis-server) ARGS=(--port $PORT --bind 127.0.0.1 --save '' --appendonly no) ;;
*) ARGS=("${USER_ARGS[@]}" -p $MPORT -l 127.0.0.1 -t 2 -m 1024 -o ext_path=none -o redis_port=$PORT) ;;
esac
valgrind --tool=callgrind --separate-threads=yes --compress-strings=no \
    --callgrind-out-file="$OUT/cg.%p" "$BIN" "${ARGS[@]}" >"$OUT/server.log" 2>&1 &
VP=$!
for _ in $(seq 300); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.2; done
redis-benchmark -p $PORT -t set,get,incr,mset -n 2000 -c 4 -P 16 -q >/dev/null
for t in set get incr mset; do
    callgrind_control -z $VP >/dev/null
    redis-benchmark -p $PORT -t $t -n "$N" -c 4 -P 16 -q >/dev/null
    callgrind_control -d $t $VP >/dev/null
done
kill $VP; wait $VP || true
python3 - "$OUT" "$N" <<'PY'
import collections, glob, sys
out, n = sys.argv[1], int(sys.argv[2])
by = collections.defaultdict(list)
for f in glob.glob(f"{out}/cg.*-*"):
    test = None
    for line in open(f):
        if line.startswith("desc: Trigger: dump "):
            test = line.split()[-1]
        if line.startswith(("summary:", "totals:")):
            if test:
                by[test].append(int(line.split()[1]))
            break
for t in ["set", "get", "incr", "mset"]:
    irs = sorted(by[t], reverse=True)
    print(f"{t}: {sum(irs) / n:.0f} instructions per request (workers {sum(irs[:2]) / n:.0f})")
PY
echo "callgrind files: $OUT"
