#!/bin/bash
# flush_all's lock holds (bench/RESULTS.md, "flush_all in slices"):
#   bash bench/flush_hold.sh [BIN ...]   (KEYS=6000000 PORT=21770 ROUNDS=3)
# For each round and each tiercache binary (default target/release/tiercache, built if
# missing): -m 1024 -t 2 with a 4 GiB flash file in a scratch directory, KEYS x 100 B
# preloaded (most on flash), then flush_all: prints how long flush_all took to answer,
# the flush holds (count, longest on the wall clock and on the CPU, those over 256 us on
# the CPU) and the index's memory before and after.
ROOT_DIR="$(cd "$(dirname "$0")/.." && pwd)"
BINS=(); for b in "$@"; do BINS+=("$(realpath "$b")"); done
[ ${#BINS[@]} -eq 0 ] && BINS=("$ROOT_DIR/target/release/tiercache")
LOAD="$ROOT_DIR/target/release/tiercache-bench"
[ -x "${BINS[0]}" ] && [ -x "$LOAD" ] || (cd "$ROOT_DIR" && cargo build --release -q -p tiercache-server -p tiercache-bench)
PORT="${PORT:-21770}"; KEYS="${KEYS:-6000000}"
U=(); [ "$(id -u)" -eq 0 ] && U=(-u root)
for round in $(seq "${ROUNDS:-3}"); do
  for bin in "${BINS[@]}"; do
    d=$(mktemp -d); cd "$d" || exit 1
    "$bin" "${U[@]}" -p "$PORT" -l 127.0.0.1 -t 2 -m 1024 -o "ext_path=$d/flash:4G" >/dev/null 2>&1 & P=$!; sleep 1
    "$LOAD" -s 127.0.0.1:$PORT -q --no-stats -k "$KEYS" --value-size 100 --preload -p 32 -d 0s >/dev/null 2>&1
    python3 - "$PORT" "$bin" "$round" <<'PY'
import socket, sys, time
port, binary, rnd = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def stats(sub=b''):
    s = socket.create_connection(('127.0.0.1', port)); s.sendall(b'stats ' + sub + b'\r\n'); b = b''
    while not b.endswith(b'END\r\n'): b += s.recv(65536)
    return {l.split()[1]: l.split()[2] for l in b.decode().splitlines() if l.startswith('STAT ')}
before = stats()
s = socket.create_connection(('127.0.0.1', port)); t = time.time(); s.sendall(b'flush_all\r\n')
assert s.recv(100) == b'OK\r\n'; answered = (time.time() - t) * 1000
time.sleep(3)
after, locks = stats(), stats(b'locks')
print(f"round {rnd} {binary}: {before['curr_items']} items, flush_all answered in {answered:.1f} ms; "
      f"flush holds {locks.get('shard_lock_holds_flush')}, longest {locks.get('shard_lock_hold_flush_max_us')} us wall, "
      f"{locks.get('shard_lock_hold_flush_cpu_max_us')} us on the CPU, {locks.get('shard_lock_holds_flush_cpu_over_256us')} over 256 us there; "
      f"index {int(before['hash_bytes']) >> 20} -> {int(after['hash_bytes']) >> 20} MiB, items after {after['curr_items']}")
PY
    kill $P; wait $P 2>/dev/null; cd /; rm -rf "$d"
  done
done
