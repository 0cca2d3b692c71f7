#!/bin/bash
# Shard-lock holds by cause under writes (bench/RESULTS.md, "Shard-lock holds by cause"):
#   bash bench/lock_holds.sh [BIN_DIR [PORT]]   (RATE=5000 sets/s of new keys by default; SECS=8)
# tiercache -m 64 -t 2 RAM-only, 1,000,000 x 100 B preloaded, 2,000 hot keys; stats reset;
# then SECS (8) s of RATE sets/s of new keys beside 20,000 gets/s of the hot keys (open loop);
# prints the hot gets' latency line and, per cause, the holds, those over 256 us and the
# longest (wall clock), and for maintenance the longest on the CPU and those over 256 us
# there (what the engine itself spent: the wall clock adds a descheduled holder's wait).
# Beside the load, `cpu_noise` repeats one fixed ~30 us unit of work every 0.5 ms, timed on its own CPU
# clock: its units over 256 us are what the machine alone (interrupts and softirqs charged to
# the running thread, reclaim, the hypervisor) puts on a hold that did no more work.
# BIN_DIR defaults to target/release (built if missing). OPTS=ext_path=none by default
# (RAM-only); OPTS= runs the defaults, a flash file in the current directory.
B="${1:-$(cd "$(dirname "$0")/.." && pwd)/target/release}"; PORT="${2:-21760}"
[ -x "$B/tiercache" ] && [ -x "$B/tiercache-bench" ] && [ -x "$B/cpu_noise" ] || (cd "$(dirname "$0")/.." && cargo build --release -q -p tiercache-server -p tiercache-bench)
ROOT=(); [ "$(id -u)" -eq 0 ] && ROOT=(-u root)
OPTS="${OPTS-ext_path=none}"
"$B/tiercache" "${ROOT[@]}" -p $PORT -m 64 -t 2 ${OPTS:+-o "$OPTS"} >/dev/null 2>&1 & P=$!; sleep 1
$B/tiercache-bench -s 127.0.0.1:$PORT -q --no-stats --key-prefix cold: --keys 1000000 --value-size 100 --preload --get-ratio 1 -d 0s -t 2 -c 4 -p 32 >/dev/null 2>&1
$B/tiercache-bench -s 127.0.0.1:$PORT -q --no-stats --key-prefix hot: --keys 2000 --value-size 100 --preload --get-ratio 1 -d 0s -t 1 -c 1 >/dev/null 2>&1
python3 -c "
import socket;s=socket.create_connection(('127.0.0.1',$PORT));s.sendall(b'stats reset\r\n');s.recv(100)"
("$B/cpu_noise" --secs ${SECS:-8} --unit-us 30 --gap-us 500 | grep " cpu:" &)
($B/tiercache-bench -s 127.0.0.1:$PORT -q --no-stats --mode latency -d ${SECS:-8}s --threads 1 --conns 4 --key-prefix new: --keys 1000000000 --value-size 100 --get-ratio 0 --rate ${RATE:-5000} >/dev/null 2>&1 &)
$B/tiercache-bench -s 127.0.0.1:$PORT -q --no-stats --mode latency -d ${SECS:-8}s --threads 1 --conns 4 --key-prefix hot: --keys 2000 --value-size 100 --get-ratio 1 --rate 20000 2>&1 | grep -E "get_hit"
sleep 1
python3 - $PORT <<'PY'
import socket, sys
s=socket.create_connection(('127.0.0.1',int(sys.argv[1])))
s.sendall(b'stats locks\r\n'); b=b''
while not b.endswith(b'END\r\n'): b+=s.recv(65536)
st={}
for l in b.decode().split('\r\n'):
    p=l.split()
    if len(p)==3: st[p[1]]=int(p[2])
for c in ['command','evacuation','sweep','resize','reclaim','small','flush']:
    n=st.get(f'shard_lock_holds_{c}',0)
    over=sum(v for k,v in st.items() if k.startswith(f'shard_lock_hold_{c}_le_') and (k.endswith('inf') or int(k.rsplit('_',1)[1])>=512))
    cpu = st.get(f'shard_lock_hold_{c}_cpu_max_us')
    on_cpu = '' if cpu is None else f"; on the CPU: max {cpu} us, {st.get(f'shard_lock_holds_{c}_cpu_over_256us')} over 256 us"
    print(f"{c}: {n} holds, {over} over 256 us, max {st.get(f'shard_lock_hold_{c}_max_us')} us{on_cpu}")
PY
kill $P; wait $P 2>/dev/null
