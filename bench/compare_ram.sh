#!/usr/bin/env bash
# RAM tier vs memcached: starts Debian's memcached and tiercache with the same
# flags (-p PORT -l 127.0.0.1 -t 2 -m 1024), runs the same workloads against
# each with tiercache-bench (RUNS runs, alternating servers), takes medians,
# and prints a markdown table of ratios (tiercache / memcached). The table is
# also written to bench/RESULTS.md under "## RAM tier vs memcached".
#
# If tiercache cannot be built or started, the memcached half still runs and
# the tiercache columns say n/a.
#
# Environment (all optional):
#   DURATION=5s        measured time per throughput run
#   SWEEP_DURATION=3s  measured time per rate in the latency sweep
#   RUNS=3             runs per workload and server (median is reported)
#   RATES=10000,25000,50000,75000,100000   latency sweep rates (ops/s)
#   THREADS=2 CONNS=4  bench threads and connections per thread
#   KEYS=100000        keyspace (preloaded before every run)
#   SERVER_THREADS=2 SERVER_MEM=1024       -t and -m for both servers
#   MC_PORT=21311 TC_PORT=21312
#   MEMCACHED=memcached                    memcached binary
#   TIERCACHE=<target>/release/tiercache   tiercache binary (built if absent)
#   ONLY=name1,name2   run only these workloads (names as in the table)
#   MEMCACHED_ONLY=1   do not build or start tiercache (baseline only)
#   NO_SWEEP=1         skip the latency sweep
#   RESULTS=bench/RESULTS.md  where to write the section ("-" for nowhere)
#   PLOTS=bench/plots  where the sweep overlay plots go
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CMDLINE="bench/compare_ram.sh${*:+ $*}"
ENVLINE=""
for v in DURATION SWEEP_DURATION RUNS RATES THREADS CONNS KEYS SERVER_THREADS SERVER_MEM ONLY NO_SWEEP MEMCACHED_ONLY; do
    if [[ -n "${!v:-}" ]]; then ENVLINE+="$v=${!v} "; fi
done
DURATION="${DURATION:-5s}"
SWEEP_DURATION="${SWEEP_DURATION:-3s}"
RUNS="${RUNS:-3}"
RATES="${RATES:-10000,25000,50000,75000,100000}"
THREADS="${THREADS:-2}"
CONNS="${CONNS:-4}"
KEYS="${KEYS:-100000}"
SERVER_THREADS="${SERVER_THREADS:-2}"
SERVER_MEM="${SERVER_MEM:-1024}"
MC_PORT="${MC_PORT:-21311}"
TC_PORT="${TC_PORT:-21312}"
MEMCACHED="${MEMCACHED:-memcached}"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}"
TIERCACHE="${TIERCACHE:-$TARGET_DIR/release/tiercache}"
RESULTS="${RESULTS:-$ROOT/bench/RESULTS.md}"
PLOTS="${PLOTS:-$ROOT/bench/plots}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/compare_ram.XXXXXX")"

log() { echo "[compare_ram] $*" >&2; }
die() { log "$*"; exit 1; }

command -v jq >/dev/null || die "jq is needed (apt-get install jq)"
command -v "$MEMCACHED" >/dev/null || die "memcached not found (apt-get install memcached)"

PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port pid
    for _ in $(seq 1 100); do
        port_open "$1" && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# --- build ------------------------------------------------------------------
log "building tiercache-bench (release)"
(cd "$ROOT" && cargo build --release -q -p tiercache-bench) || die "tiercache-bench does not build"
BENCH="$TARGET_DIR/release/tiercache-bench"

TC_NOTE=""
if [[ -n "${MEMCACHED_ONLY:-}" ]]; then
    TC_NOTE="MEMCACHED_ONLY is set"
elif (cd "$ROOT" && cargo build --release -q -p tiercache-server) >"$WORK/tc-build.log" 2>&1; then
    log "built tiercache-server"
else
    TC_NOTE="tiercache-server did not build (cargo build --release -p tiercache-server): $(grep -m1 -E '^error' "$WORK/tc-build.log" || tail -n1 "$WORK/tc-build.log")"
    log "$TC_NOTE"
fi

# --- servers ----------------------------------------------------------------
ROOTFLAG=()
if [[ "$(id -u)" == 0 ]]; then ROOTFLAG=(-u root); fi
SFLAGS=(-l 127.0.0.1 -t "$SERVER_THREADS" -m "$SERVER_MEM")

port_open "$MC_PORT" && die "port $MC_PORT is in use (set MC_PORT)"
"$MEMCACHED" -p "$MC_PORT" "${SFLAGS[@]}" "${ROOTFLAG[@]}" >"$WORK/memcached.log" 2>&1 &
MC_PID=$!
PIDS+=("$MC_PID")
wait_port "$MC_PORT" "$MC_PID" || die "memcached did not start: $(cat "$WORK/memcached.log")"
MC_VERSION="$("$MEMCACHED" -V 2>/dev/null | head -n1)"
log "memcached ($MC_VERSION) on port $MC_PORT"

SERVERS=(memcached)
if [[ -z "$TC_NOTE" ]]; then
    if [[ ! -x "$TIERCACHE" ]]; then
        TC_NOTE="tiercache binary $TIERCACHE does not exist"
    elif port_open "$TC_PORT"; then
        TC_NOTE="port $TC_PORT is in use (set TC_PORT)"
    else
        "$TIERCACHE" -p "$TC_PORT" "${SFLAGS[@]}" "${ROOTFLAG[@]}" -o ext_path=none >"$WORK/tiercache.log" 2>&1 &
        TC_PID=$!
        PIDS+=("$TC_PID")
        if wait_port "$TC_PORT" "$TC_PID"; then
            SERVERS+=(tiercache)
            log "tiercache on port $TC_PORT"
        else
            TC_NOTE="tiercache did not start: $(tail -n3 "$WORK/tiercache.log" | tr '\n' ' ')"
        fi
    fi
fi
[[ -n "$TC_NOTE" ]] && log "NOTE: $TC_NOTE; running the memcached half only"

port_of() { if [[ "$1" == memcached ]]; then echo "$MC_PORT"; else echo "$TC_PORT"; fi; }

# --- workloads --------------------------------------------------------------
# name | metric (ops_per_sec or keys_per_sec) | bench arguments
WORKLOADS=(
    "get 32B|ops_per_sec|--get-ratio 1 --value-size 32"
    "get 1KiB|ops_per_sec|--get-ratio 1 --value-size 1024"
    "90:10 get:set 32B|ops_per_sec|--get-ratio 0.9 --value-size 32"
    "90:10 get:set 1KiB|ops_per_sec|--get-ratio 0.9 --value-size 1024"
    "70:30 get:set 32B|ops_per_sec|--get-ratio 0.7 --value-size 32"
    "70:30 get:set 1KiB|ops_per_sec|--get-ratio 0.7 --value-size 1024"
    "multiget 10 32B|keys_per_sec|--get-ratio 1 --multiget 10 --value-size 32"
    "multiget 100 32B|keys_per_sec|--get-ratio 1 --multiget 100 --value-size 32"
    "multiget 10 1KiB|keys_per_sec|--get-ratio 1 --multiget 10 --value-size 1024"
    "pipelined get x16 32B|ops_per_sec|--get-ratio 1 --pipeline 16 --value-size 32"
    "pipelined get x16 1KiB|ops_per_sec|--get-ratio 1 --pipeline 16 --value-size 1024"
    "pipelined 90:10 x16 32B|ops_per_sec|--get-ratio 0.9 --pipeline 16 --value-size 32"
)
COMMON=(--threads "$THREADS" --conns "$CONNS" --keys "$KEYS" --preload --quiet)

slug() { echo "$1" | tr -c 'A-Za-z0-9\n' '_'; }

selected() {
    [[ -z "${ONLY:-}" ]] && return 0
    local IFS=','
    for o in $ONLY; do [[ "$o" == "$1" ]] && return 0; done
    return 1
}

run_bench() { # server out.json args...
    local server="$1" out="$2"
    shift 2
    if ! "$BENCH" --server "127.0.0.1:$(port_of "$server")" --json "$out" "$@" \
        >"${out%.json}.txt" 2>&1; then
        log "run failed ($server): $(tail -n2 "${out%.json}.txt" | tr '\n' ' ')"
        rm -f "$out"
    fi
}

median() { # numbers on stdin -> median (empty if none)
    sort -g | awk '{a[NR]=$1} END {if (NR==0) exit; if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}

for run in $(seq 1 "$RUNS"); do
    # alternate which server goes first, to cancel drift
    order=("${SERVERS[@]}")
    if ((run % 2 == 0)) && ((${#SERVERS[@]} == 2)); then order=(tiercache memcached); fi
    for w in "${WORKLOADS[@]}"; do
        IFS='|' read -r name metric args <<<"$w"
        selected "$name" || continue
        for s in "${order[@]}"; do
            log "run $run/$RUNS: $name on $s"
            # shellcheck disable=SC2086
            run_bench "$s" "$WORK/$(slug "$name").$s.$run.json" "${COMMON[@]}" --duration "$DURATION" $args
        done
    done
    if [[ -z "${NO_SWEEP:-}" ]]; then
        for s in "${order[@]}"; do
            log "run $run/$RUNS: latency sweep on $s"
            run_bench "$s" "$WORK/sweep.$s.$run.json" "${COMMON[@]}" --get-ratio 0.9 \
                --value-size 32 --mode latency --sweep "$RATES" --duration "$SWEEP_DURATION" \
                --name "sweep-$s" --plot-dir "$WORK/plots"
        done
    fi
done

# --- tables -----------------------------------------------------------------
fmt_int() { if [[ -z "$1" ]]; then echo "n/a"; else printf "%.0f" "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; fi; }
fmt_ratio() { if [[ -z "$1" ]]; then echo "n/a"; else printf "%.3f" "$1"; fi; }
fmt_us() { if [[ -z "$1" ]]; then echo "n/a"; else printf "%.1f" "$1"; fi; }
ratio() { if [[ -z "$1" || -z "$2" ]]; then echo "n/a"; else awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.2f", a / b }'; fi; }

collect() { # jq-filter files...
    local f="$1"
    shift
    for j in "$@"; do
        if [[ -f "$j" ]]; then jq -r "$f // empty" "$j" || true; fi
    done | median
}

paired() { # slug metric -> "median of the per-run ratios (runs tiercache was ahead / pairs)"
    local sl="$1" metric="$2" run m t
    local -a rs=()
    for run in $(seq 1 "$RUNS"); do
        m="$WORK/$sl.memcached.$run.json"
        t="$WORK/$sl.tiercache.$run.json"
        [[ -f "$m" && -f "$t" ]] || continue
        rs+=("$(jq -rn --slurpfile m "$m" --slurpfile t "$t" \
            "(\$m[0].runs[0].$metric) as \$b | if \$b > 0 then (\$t[0].runs[0].$metric) / \$b else empty end")")
    done
    if ((${#rs[@]} == 0)); then echo "n/a"; return; fi
    local med ahead
    med="$(printf '%s\n' "${rs[@]}" | median)"
    ahead="$(printf '%s\n' "${rs[@]}" | awk '$1 > 1 { n++ } END { print n + 0 }')"
    printf "%.2f (%s/%s)" "$med" "$ahead" "${#rs[@]}"
}

TABLE="$WORK/table.md"
{
    echo "| workload | metric | memcached | tiercache | tiercache / memcached | paired: median of run ratios (tc ahead) | server CPU us/request mc / tc | hit ratio mc / tc |"
    echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
    for w in "${WORKLOADS[@]}"; do
        IFS='|' read -r name metric args <<<"$w"
        selected "$name" || continue
        sl="$(slug "$name")"
        shopt -s nullglob
        mc_files=("$WORK/$sl.memcached."*.json)
        tc_files=("$WORK/$sl.tiercache."*.json)
        shopt -u nullglob
        mc="$(collect ".runs[0].$metric" "${mc_files[@]}")"
        tc="$(collect ".runs[0].$metric" "${tc_files[@]}")"
        mh="$(fmt_ratio "$(collect ".runs[0].hit_ratio" "${mc_files[@]}")")"
        th="$(fmt_ratio "$(collect ".runs[0].hit_ratio" "${tc_files[@]}")")"
        # server CPU (rusage from its stats) per request: less noisy than ops/s on a shared machine
        cpu_f='.runs[0] | if .server.cpu_utilisation and .ops_per_sec > 0 then .server.cpu_utilisation * 1e6 / .ops_per_sec else null end'
        mcpu="$(fmt_us "$(collect "$cpu_f" "${mc_files[@]}")")"
        tcpu="$(fmt_us "$(collect "$cpu_f" "${tc_files[@]}")")"
        unit="ops/s"
        [[ "$metric" == keys_per_sec ]] && unit="keys/s"
        echo "| $name | $unit | $(fmt_int "$mc") | $(fmt_int "$tc") | $(ratio "$tc" "$mc") | $(paired "$sl" "$metric") | $mcpu / $tcpu | $mh / $th |"
    done
    if [[ -z "${NO_SWEEP:-}" ]]; then
        echo
        echo "Latency sweep (open loop, 90:10 get:set, 32 B values; latency from the intended send time, medians of $RUNS runs):"
        echo
        echo "| target ops/s | achieved mc | achieved tc | p50 us mc | p50 us tc | p99 us mc | p99 us tc | p99.9 us mc | p99.9 us tc | p99 tc / mc |"
        echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
        IFS=',' read -r -a rates <<<"$RATES"
        shopt -s nullglob
        mcs=("$WORK/sweep.memcached."*.json)
        tcs=("$WORK/sweep.tiercache."*.json)
        shopt -u nullglob
        for i in "${!rates[@]}"; do
            sel=".runs[$i]"
            a_mc="$(collect "$sel.ops_per_sec" "${mcs[@]}")"
            a_tc="$(collect "$sel.ops_per_sec" "${tcs[@]}")"
            p50m="$(collect "$sel.latency.all.p50_us" "${mcs[@]}")"
            p50t="$(collect "$sel.latency.all.p50_us" "${tcs[@]}")"
            p99m="$(collect "$sel.latency.all.p99_us" "${mcs[@]}")"
            p99t="$(collect "$sel.latency.all.p99_us" "${tcs[@]}")"
            p999m="$(collect "$sel.latency.all.p999_us" "${mcs[@]}")"
            p999t="$(collect "$sel.latency.all.p999_us" "${tcs[@]}")"
            echo "| $(fmt_int "${rates[$i]}") | $(fmt_int "$a_mc") | $(fmt_int "$a_tc") | $(fmt_us "$p50m") | $(fmt_us "$p50t") | $(fmt_us "$p99m") | $(fmt_us "$p99t") | $(fmt_us "$p999m") | $(fmt_us "$p999t") | $(ratio "$p99t" "$p99m") |"
        done
    fi
} >"$TABLE"

CPU_MODEL="$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
SECTION="$WORK/section.md"
{
    echo "## RAM tier vs memcached"
    echo
    echo "- command: \`${ENVLINE}${CMDLINE}\`"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- commit: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)$(cd "$ROOT" && git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "- machine: $(nproc) CPUs, ${CPU_MODEL:-unknown CPU}, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, $(uname -sr)"
    if ((${#SERVERS[@]} == 2)); then
        echo "- servers: $MC_VERSION and tiercache ($("$TIERCACHE" -V 2>/dev/null | head -n1 || echo "version unknown")), both \`-l 127.0.0.1 -t $SERVER_THREADS -m $SERVER_MEM\`, on the same machine as the load generator"
    else
        echo "- servers: $MC_VERSION, \`-l 127.0.0.1 -t $SERVER_THREADS -m $SERVER_MEM\`, on the same machine as the load generator"
    fi
    echo "- load: tiercache-bench, $THREADS threads x $CONNS connections, $KEYS keys preloaded before every run, uniform keys, classic protocol; $DURATION per run, $RUNS runs per server alternating, medians; ratios above 1 favour tiercache; the paired column is the median of each run's tiercache / memcached ratio (the two runs of a pair are back to back, so they share the machine's load); server CPU per request is the server's own rusage (from its \`stats\`) over the run divided by the requests completed"
    [[ -n "$TC_NOTE" ]] && echo "- **tiercache not measured**: $TC_NOTE"
    echo
    cat "$TABLE"
    echo
} >"$SECTION"

echo
cat "$SECTION"

if [[ "$RESULTS" != "-" ]]; then
    touch "$RESULTS"
    if ! grep -q '^# ' "$RESULTS"; then
        { echo "# Benchmark results"; echo; cat "$RESULTS"; } >"$RESULTS.tmp" && mv "$RESULTS.tmp" "$RESULTS"
    fi
    # replace the section if present (up to the next "## " heading), else append
    awk -v section="$SECTION" '
        BEGIN { while ((getline l < section) > 0) body = body l "\n" }
        /^## RAM tier vs memcached[[:space:]]*$/ { printf "%s", body; skip = 1; done = 1; next }
        skip && /^## / { skip = 0 }
        !skip { print }
        END { if (!done) { print ""; printf "%s", body } }
    ' "$RESULTS" | cat -s >"$RESULTS.tmp" && mv "$RESULTS.tmp" "$RESULTS"
    log "wrote $RESULTS"
fi
if [[ -z "${NO_SWEEP:-}" ]]; then
    # both servers' last sweeps on the same axes
    shopt -s nullglob
    last=("$WORK"/sweep.*."$RUNS".json)
    shopt -u nullglob
    if ((${#last[@]} > 0)); then
        mkdir -p "$PLOTS"
        "$BENCH" --overlay "${last[@]}" --plot-dir "$PLOTS" --name ram-vs-memcached \
            || log "overlay plot failed"
    fi
fi
log "raw results (JSON, text, plots) in $WORK"
