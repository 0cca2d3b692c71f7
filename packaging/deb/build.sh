#!/usr/bin/env bash
# Builds the Debian package with Debian's own dpkg-deb (no extra tool):
#
#   bash packaging/deb/build.sh [path-to-tiercache-binary] [output-dir]
#
# Without a binary it runs `cargo build --release -p tiercache-server`.
# Writes OUT/tiercache_VERSION_ARCH.deb (OUT defaults to target/deb) and
# prints its path. The package installs:
#   /usr/bin/tiercache                       the server
#   /etc/tiercache/tiercache.toml            its configuration (a conffile)
#   /lib/systemd/system/tiercache.service    a hardened unit (User=tiercache)
#   /usr/share/doc/tiercache/                README, docs, copyright
# and creates the system user `tiercache` (postinst). State (the flash file
# and the shutdown snapshot) lives in /var/lib/tiercache (StateDirectory).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="${1:-}"
OUT="${2:-${CARGO_TARGET_DIR:-$ROOT/target}/deb}"
if [ -z "$BIN" ]; then
    (cd "$ROOT" && cargo build --release -q -p tiercache-server)
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/tiercache"
fi
[ -x "$BIN" ] || { echo "build.sh: not an executable: $BIN" >&2; exit 2; }
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
ARCH="$(dpkg --print-architecture)"
STAGE="$(mktemp -d "${TMPDIR:-/tmp}/tiercache-deb.XXXXXX")"
trap 'rm -rf "$STAGE"' EXIT

install -D -m 0755 "$BIN" "$STAGE/usr/bin/tiercache"
strip --strip-debug "$STAGE/usr/bin/tiercache" 2>/dev/null || true
install -D -m 0644 "$HERE/tiercache.toml" "$STAGE/etc/tiercache/tiercache.toml"
install -D -m 0644 "$HERE/tiercache.service" "$STAGE/lib/systemd/system/tiercache.service"
DOC="$STAGE/usr/share/doc/tiercache"
install -D -m 0644 "$ROOT/README.md" "$DOC/README.md"
for f in "$ROOT"/docs/*.md; do install -m 0644 "$f" "$DOC/"; done
LICENSE="$(sed -n 's/^license = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
printf 'tiercache %s\nLicense: %s\n' "$VERSION" "$LICENSE" >"$DOC/copyright"

mkdir -p "$STAGE/DEBIAN"
install -m 0755 "$HERE/postinst" "$HERE/prerm" "$HERE/postrm" "$STAGE/DEBIAN/"
echo /etc/tiercache/tiercache.toml >"$STAGE/DEBIAN/conffiles"
SIZE_KB="$(du -sk "$STAGE" | cut -f1)"
cat >"$STAGE/DEBIAN/control" <<CONTROL
Package: tiercache
Version: $VERSION
Architecture: $ARCH
Maintainer: tiercache developers <tiercache@localhost>
Installed-Size: $SIZE_KB
Depends: libc6 (>= 2.31), adduser
Section: net
Priority: optional
Homepage: https://github.com/tiercache/tiercache
Description: memcached-compatible cache server with a flash tier
 tiercache speaks memcached's text and meta protocols and keeps hot items
 in DRAM and the rest on flash (a file or an NVMe device, read with
 O_DIRECT and io_uring), so one machine caches many times more per GiB of
 DRAM. Deleted and overwritten values never come back after a crash, and a
 graceful restart keeps the cache.
CONTROL

mkdir -p "$OUT"
DEB="$OUT/tiercache_${VERSION}_${ARCH}.deb"
dpkg-deb --root-owner-group --build "$STAGE" "$DEB" >/dev/null
echo "$DEB"
