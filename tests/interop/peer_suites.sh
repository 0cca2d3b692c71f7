#!/usr/bin/env bash
# Other projects' own test suites, run unchanged against tiercache (about
# 20 s):
#   bash tests/interop/peer_suites.sh path-to-tiercache-binary
#
# - pymemcache's integration tests (the tests shipped inside the pymemcache
#   package, `pytest test_integration.py --server --port`): 100 pass; 3 are
#   skipped by pymemcache itself (test_tls, its issue 39, on every server).
# - gomemcache's tests (Debian's golang-github-bradfitz-gomemcache-dev, the
#   source with its tests; built offline with GOPATH): TestLocalhost runs
#   against a tiercache with a flash tier. gomemcache hard-codes
#   `localhost:11211`; the copy this script runs has that one constant
#   changed to the server's address, nothing else. TestUnixSocket starts
#   `memcached -s SOCKET` itself: a `memcached` first on PATH that runs
#   tiercache makes it start tiercache (checked: the test must have run it).
#
# No expected failures: every test that runs must pass. Passing
# /usr/bin/memcached runs both suites against memcached (a self-check).
# The last line is "peers: ..." (passed, or what failed).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${1:?usage: peer_suites.sh BIN}"
case "$BIN" in
    */*) BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")" ;;
    *) BIN="$(command -v "$BIN" || echo "$BIN")" ;;
esac
WORK="$(mktemp -d "${TMPDIR:-/tmp}/tiercache-peers.XXXXXX")"
PID=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "peers: FAILED: $*"; exit 1; }

ROOT_ARGS=()
[ "$(id -u)" -eq 0 ] && ROOT_ARGS=(-u root)
IS_MEMCACHED=0
[[ "$(basename "$BIN")" == memcached* ]] && IS_MEMCACHED=1
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
if [ "$IS_MEMCACHED" = 1 ]; then
    "$BIN" "${ROOT_ARGS[@]}" -p "$PORT" -l 127.0.0.1 -U 0 >"$WORK/server.log" 2>&1 &
else
    "$BIN" "${ROOT_ARGS[@]}" -p "$PORT" -l 127.0.0.1 -m 64 \
        -o "ext_path=$WORK/flash:256M" >"$WORK/server.log" 2>&1 &
fi
PID=$!
for _ in $(seq 1 100); do
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5).close()' "$PORT" 2>/dev/null && break
    kill -0 "$PID" 2>/dev/null || { cat "$WORK/server.log"; fail "the server exited"; }
    sleep 0.1
done

# --- pymemcache's integration tests ----------------------------------------
PM="$(python3 -c 'import os, pymemcache; print(os.path.dirname(pymemcache.__file__))')" \
    || fail "pymemcache is not installed (tests/interop/install.sh)"
python3 -m pytest --version >/dev/null 2>&1 || fail "pytest is not installed (tests/interop/install.sh)"
timeout 300 python3 -m pytest -q -p no:cacheprovider -W ignore::pytest.PytestUnknownMarkWarning \
    "$PM/test/test_integration.py" --server 127.0.0.1 --port "$PORT" >"$WORK/pymemcache.log" 2>&1
rc=$?
tail -n 3 "$WORK/pymemcache.log"
[ $rc -eq 0 ] || { cat "$WORK/pymemcache.log"; fail "pymemcache's integration tests"; }
pm_summary="$(tail -n 1 "$WORK/pymemcache.log" | sed 's/=//g; s/^ *//; s/ in [0-9.]*s.*//')"
# Only pymemcache's own skip (test_tls) is allowed.
skipped="$(grep -oE '[0-9]+ skipped' "$WORK/pymemcache.log" | cut -d' ' -f1)"
[ "${skipped:-0}" -le 3 ] || fail "pymemcache: $skipped tests skipped (3 expected: test_tls)"

# --- gomemcache's tests ------------------------------------------------------
SRC=/usr/share/gocode/src/github.com/bradfitz/gomemcache
command -v go >/dev/null && [ -d "$SRC" ] \
    || fail "go or gomemcache's source missing (tests/interop/install.sh installs golang-go and golang-github-bradfitz-gomemcache-dev)"
GOPATH_="$WORK/go"
mkdir -p "$GOPATH_/src/github.com/bradfitz" "$WORK/shim"
cp -r "$SRC" "$GOPATH_/src/github.com/bradfitz/"
TEST="$GOPATH_/src/github.com/bradfitz/gomemcache/memcache/memcache_test.go"
sed -i "s/^const testServer = \"localhost:11211\"/const testServer = \"127.0.0.1:$PORT\"/" "$TEST"
grep -q "127.0.0.1:$PORT" "$TEST" || fail "gomemcache's testServer constant not found"
if [ "$IS_MEMCACHED" = 1 ]; then
    SHIM_CMD="exec \"$BIN\" ${ROOT_ARGS[*]} -U 0 \"\$@\""
else
    SHIM_CMD="exec \"$BIN\" ${ROOT_ARGS[*]} -m 16 -o ext_path=none \"\$@\""
fi
printf '#!/bin/sh\n# Started by gomemcache'"'"'s TestUnixSocket.\ntouch "%s/shim-ran"\nexec 2>>"%s/shim.log"\n%s\n' \
    "$WORK" "$WORK" "$SHIM_CMD" >"$WORK/shim/memcached"
chmod +x "$WORK/shim/memcached"
(cd "$WORK" && PATH="$WORK/shim:$PATH" GO111MODULE=off GOPATH="$GOPATH_" GOCACHE="$WORK/gocache" \
    timeout 300 go test -v -count=1 github.com/bradfitz/gomemcache/memcache) >"$WORK/gomemcache.log" 2>&1
rc=$?
grep -E '^(--- |ok|FAIL|PASS)' "$WORK/gomemcache.log"
[ $rc -eq 0 ] || { cat "$WORK/gomemcache.log" "$WORK/shim.log" 2>/dev/null; fail "gomemcache's tests"; }
grep -q -- '--- SKIP' "$WORK/gomemcache.log" && fail "gomemcache skipped a test"
[ -e "$WORK/shim-ran" ] || fail "gomemcache's TestUnixSocket did not start the server under test"
go_summary="$(grep -c -- '--- PASS' "$WORK/gomemcache.log") passed"
echo "peers: passed (pymemcache integration: $pm_summary; gomemcache: $go_summary)"
