#!/usr/bin/env bash
# Flash reader backends: tiercache with -o ext_io=pool vs -o ext_io=uring on
# the same O_DIRECT flash file, flash-hit throughput. Each run starts a fresh
# server (-m SERVER_MEM, far below the dataset, so gets hit flash), preloads
# KEYS values of VALUE bytes, and runs a get-only uniform load for DURATION
# with tiercache-bench; backends alternate, RUNS runs each, medians.
# Prints, per queue depth (connections x pipeline): ops/s, server CPU per
# get (the process's own rusage over the run / gets) and the uring/pool ratios.
#
# Environment (all optional):
#   RUNS=3 DURATION=10s KEYS=250000 VALUE=3000 SERVER_MEM=64 SERVER_THREADS=2
#   DEPTHS="8x8 4x1"   connections x pipeline per load (one bench thread)
#   FLASH_DIR=/tmp      where the flash file goes (must support O_DIRECT)
#   PORT=21320
#   TIERCACHE, BENCH    binaries (default: <target>/release/...)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RUNS="${RUNS:-3}"
DURATION="${DURATION:-10s}"
KEYS="${KEYS:-250000}"
VALUE="${VALUE:-3000}"
SERVER_MEM="${SERVER_MEM:-64}"
SERVER_THREADS="${SERVER_THREADS:-2}"
DEPTHS="${DEPTHS:-8x8 4x1}"
FLASH_DIR="${FLASH_DIR:-/tmp}"
PORT="${PORT:-21320}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TIERCACHE="${TIERCACHE:-$TARGET_DIR/release/tiercache}"
BENCH="${BENCH:-$TARGET_DIR/release/tiercache-bench}"
WORK="$(mktemp -d "$FLASH_DIR/compare_io.XXXXXX")"

log() { echo "[compare_io] $*" >&2; }
command -v jq >/dev/null || { log "jq is needed (apt-get install jq)"; exit 1; }
if [[ ! -x "$TIERCACHE" || ! -x "$BENCH" ]]; then
    (cd "$ROOT" && cargo build --release -p tiercache-server -p tiercache-bench)
fi

PID=""
cleanup() {
    if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

stat_of() { # stat name from the server's `stats`
    exec 3<>"/dev/tcp/127.0.0.1/$PORT"
    printf 'stats\r\nquit\r\n' >&3
    tr -d '\r' <&3 | awk -v n="$1" '$1 == "STAT" && $2 == n { print $3 }'
    exec 3<&-
}

median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

declare -A OPS CPU
for depth in $DEPTHS; do
    conns="${depth%x*}"
    pipe="${depth#*x}"
    for run in $(seq 1 "$RUNS"); do
        for io in pool uring; do
            rm -f "$WORK/flash"
            "$TIERCACHE" -p "$PORT" -l 127.0.0.1 -m "$SERVER_MEM" -t "$SERVER_THREADS" \
                $([[ "$(id -u)" == 0 ]] && echo -u root) \
                -o "ext_path=$WORK/flash:2G" -o "ext_io=$io" >"$WORK/server.log" 2>&1 &
            PID=$!
            for _ in $(seq 100); do
                (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
                sleep 0.1
            done
            backend="$(stat_of flash_io_backend)"
            [[ "$backend" == "$io" ]] || { log "asked ext_io=$io, server uses '$backend'"; cat "$WORK/server.log" >&2; exit 1; }
            "$BENCH" -s "127.0.0.1:$PORT" -t 1 -c "$conns" -p "$pipe" -k "$KEYS" \
                --value-size "$VALUE" --get-ratio 1 --preload --duration "$DURATION" \
                --json "$WORK/out.json" -q >"$WORK/bench.log" 2>&1 || { cat "$WORK/bench.log" >&2; exit 1; }
            ops="$(jq '.runs[0].ops_per_sec' "$WORK/out.json")"
            cpu="$(jq '.runs[0].server.cpu_utilisation' "$WORK/out.json")"
            hits="$(jq '.runs[0].hit_ratio' "$WORK/out.json")"
            flash="$(stat_of flash_hits)"
            gets="$(stat_of get_hits)"
            us="$(awk -v c="$cpu" -v o="$ops" 'BEGIN { printf "%.2f", c / o * 1e6 }')"
            log "depth $depth run $run $io: $(printf %.0f "$ops") ops/s, ${us} us CPU/get, hit ratio $hits, flash hits $flash of $gets"
            OPS[$depth,$io]+="$ops "
            CPU[$depth,$io]+="$us "
            kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
        done
    done
done

echo "| in flight (conns x pipeline) | pool ops/s | uring ops/s | uring/pool ops | pool CPU us/get | uring CPU us/get | uring/pool CPU |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for depth in $DEPTHS; do
    po="$(tr ' ' '\n' <<<"${OPS[$depth,pool]}" | grep . | median)"
    uo="$(tr ' ' '\n' <<<"${OPS[$depth,uring]}" | grep . | median)"
    pc="$(tr ' ' '\n' <<<"${CPU[$depth,pool]}" | grep . | median)"
    uc="$(tr ' ' '\n' <<<"${CPU[$depth,uring]}" | grep . | median)"
    awk -v d="$depth" -v po="$po" -v uo="$uo" -v pc="$pc" -v uc="$uc" 'BEGIN {
        printf "| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n", d, po, uo, uo / po, pc, uc, uc / pc }'
done
