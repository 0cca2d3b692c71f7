#!/usr/bin/env bash
# The Debian package, installed here as an operator would (about 30 s):
#   bash tests/interop/package_test.sh path-to-tiercache-binary
# Builds the .deb (packaging/deb/build.sh); lintian finds no error, warning
# or pedantic tag but the informational ones explained below; installs it
# with dpkg -i with no warning (adduser's included), checks that the unit
# is enabled although systemd does not run here (an image built so starts
# it at boot), that dpkg --verify and man find their files, the unit with
# `systemd-analyze verify` and its sandbox with `systemd-analyze security`
# (exposure at most 2.0; systemd is not PID 1 here, so the sandbox itself
# is not run), starts the binary the way the unit
# does (as the tiercache user, from /var/lib/tiercache, with the packaged
# config; the port moved to a free one), stores a value, stops it with
# SIGTERM (the shutdown snapshot), starts it again and reads the value
# back, then purges the package and checks that the user and the state are
# gone. Needs root and dpkg; skips with a message otherwise. The last line
# is "package: ..." (passed, skipped, or what failed).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${1:?usage: package_test.sh BIN}"

if [ "$(id -u)" -ne 0 ] || ! command -v dpkg >/dev/null; then
    echo "package: skipped (needs root and dpkg)"
    exit 0
fi
if dpkg -s tiercache >/dev/null 2>&1; then
    echo "package: FAILED: a tiercache package is installed already; not touching it"
    exit 1
fi
OUT="$(mktemp -d "${TMPDIR:-/tmp}/tiercache-pkg.XXXXXX")"
PID=""
fail() { echo "package: FAILED: $*"; exit 1; }
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    dpkg --purge tiercache >/dev/null 2>&1
    rm -rf "$OUT"
}
trap cleanup EXIT

DEB="$(bash "$ROOT/packaging/deb/build.sh" "$BIN" "$OUT")" || fail "build.sh"
if command -v lintian >/dev/null; then
    # Informational tags left, each for a reason:
    #   hardening-no-fortify-functions: a Rust binary has no glibc
    #     _FORTIFY_SOURCE calls to check; bounds are checked by the language.
    #   spelling-error-in-binary: byte runs in compressed or binary tables.
    #   package-supports-alternative-init-but-no-init.d-script: the unit is
    #     the supported way; without systemd, run the binary (as the README).
    lintian -I --pedantic --tag-display-limit 0 "$DEB" 2>&1 \
        | grep -E '^[EWIPX]: ' \
        | grep -vE ': (hardening-no-fortify-functions|spelling-error-in-binary|package-supports-alternative-init-but-no-init.d-script)( |$)' \
        >"$OUT/lintian.log"
    [ -s "$OUT/lintian.log" ] && { cat "$OUT/lintian.log"; fail "lintian tags"; }
else
    echo "package: lintian absent (tests/interop/install.sh installs it): not checked"
fi
dpkg -i "$DEB" >"$OUT/dpkg.log" 2>&1 || { cat "$OUT/dpkg.log"; fail "dpkg -i"; }
grep -iE 'warn|error' "$OUT/dpkg.log" && fail "dpkg -i warns"
dpkg --verify tiercache || fail "dpkg --verify"
man -w tiercache >/dev/null 2>&1 || [ -f /usr/share/man/man1/tiercache.1.gz ] || fail "no manual page"
[ -L /etc/systemd/system/multi-user.target.wants/tiercache.service ] \
    || fail "the unit is not enabled after install (no multi-user.target.wants link)"
id tiercache >/dev/null 2>&1 || fail "no tiercache user after install"
[ -x /usr/bin/tiercache ] && [ -f /etc/tiercache/tiercache.toml ] || fail "files missing"
UNIT=/lib/systemd/system/tiercache.service
if command -v systemd-analyze >/dev/null; then
    systemd-analyze verify "$UNIT" >"$OUT/verify.log" 2>&1 || { cat "$OUT/verify.log"; fail "systemd-analyze verify"; }
    [ -s "$OUT/verify.log" ] && { cat "$OUT/verify.log"; fail "systemd-analyze verify warns"; }
    # --offline needs systemd 252 (Debian 12).
    if systemd-analyze security --help 2>/dev/null | grep -q -- --offline; then
        systemd-analyze security --offline=true --threshold=20 "$UNIT" >"$OUT/security.log" 2>&1 \
            || { grep -E 'Overall|✗' "$OUT/security.log"; fail "systemd-analyze security: exposure over 2.0"; }
    fi
fi

# The unit's command line, its user and working directory; a free port.
EXEC="$(sed -n 's/^ExecStart=//p' "$UNIT")"
USER_="$(sed -n 's/^User=//p' "$UNIT")"
WD="$(sed -n 's/^WorkingDirectory=//p' "$UNIT")"
PORT="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
start() {
    (cd "$WD" && exec runuser -u "$USER_" -- $EXEC -p "$PORT") >>"$OUT/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 1 100); do
        python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5).close()' "$PORT" 2>/dev/null && return 0
        kill -0 "$PID" 2>/dev/null || { cat "$OUT/server.log"; fail "the server exited"; }
        sleep 0.1
    done
    fail "the server did not listen"
}
ask() {  # ask REQUEST: the reply up to END/VERSION/STORED
    python3 - "$PORT" "$1" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode())
buf = b""
while not any(buf.endswith(t) for t in (b"END\r\n", b"STORED\r\n", b"\r\n" if buf.startswith(b"VERSION") else b"\0")):
    c = s.recv(65536)
    if not c:
        break
    buf += c
print(buf.decode(errors="replace"), end="")
PY
}
start
[ "$(ask 'version\r\n')" = $'VERSION 1.6.18\r' ] || [[ "$(ask 'version\r\n')" == VERSION* ]] || fail "no VERSION reply"
[ "$(ask 'set pkg 5 0 7\r\npackage\r\n')" = $'STORED\r' ] || fail "set"
[ "$(stat -c %U "$WD/tiercache.flash" 2>/dev/null)" = "$USER_" ] || fail "the flash file is not in $WD owned by $USER_"
kill -TERM "$PID"; wait "$PID"; PID=""
ls "$WD"/*.snapshot >/dev/null 2>&1 || fail "no shutdown snapshot in $WD"
start
got="$(ask 'get pkg\r\n')"
[ "$got" = $'VALUE pkg 5 7\r\npackage\r\nEND\r' ] || fail "after a restart: $got"
kill -TERM "$PID"; wait "$PID"; PID=""
dpkg --purge tiercache >"$OUT/purge.log" 2>&1 || { cat "$OUT/purge.log"; fail "dpkg --purge"; }
id tiercache >/dev/null 2>&1 && fail "the tiercache user is still there after purge"
[ -e /etc/systemd/system/multi-user.target.wants/tiercache.service ] && fail "the unit is still enabled after purge"
[ -e "$WD" ] && fail "$WD is still there after purge"
echo "package: passed (lintian, dpkg -i without warnings, enabled without systemd, dpkg --verify, systemd-analyze verify and security, started as the unit does, restart kept the value, purge)"
