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
#   /usr/share/doc/tiercache/                README, docs, copyright, changelog
#   /usr/share/man/man1/tiercache.1.gz       the manual page
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
chmod 0755 "$STAGE"

install -D -m 0755 "$BIN" "$STAGE/usr/bin/tiercache"
# As dh_strip does: no debug sections or symbol table, no .comment/.note.
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
    "$STAGE/usr/bin/tiercache"
install -D -m 0644 "$HERE/tiercache.toml" "$STAGE/etc/tiercache/tiercache.toml"
install -D -m 0644 "$HERE/tiercache.service" "$STAGE/lib/systemd/system/tiercache.service"
DOC="$STAGE/usr/share/doc/tiercache"
install -D -m 0644 "$ROOT/README.md" "$DOC/README.md"
for f in "$ROOT"/docs/*.md; do install -m 0644 "$f" "$DOC/"; done
install -D -m 0644 /dev/null "$STAGE/usr/share/man/man1/tiercache.1.gz"
gzip -9n <"$HERE/tiercache.1" >"$STAGE/usr/share/man/man1/tiercache.1.gz"
MAINTAINER="tiercache developers <tiercache@users.noreply.github.com>"
# A native package's changelog, one entry for this version, dated by the
# last commit (reproducible) or now outside a git checkout.
DATE="$(git -C "$ROOT" log -1 --format=%cD 2>/dev/null || date -R)"
{
    printf 'tiercache (%s) unstable; urgency=medium\n\n' "$VERSION"
    printf '  * Release %s; the changes are in the git history and README.md.\n\n' "$VERSION"
    printf ' -- %s  %s\n' "$MAINTAINER" "$DATE"
} | gzip -9n >"$DOC/changelog.gz"
chmod 0644 "$DOC/changelog.gz"
# Machine-readable copyright (DEP-5); the license text is Debian's own copy.
# The Rust crates linked into the binary are under MIT or Apache-2.0
# (Cargo.lock lists them).
LICENSE="$(sed -n 's/^license = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -n 1)"
[ -f "/usr/share/common-licenses/$LICENSE" ] \
    || { echo "build.sh: no /usr/share/common-licenses/$LICENSE for the copyright file" >&2; exit 2; }
cat >"$DOC/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tiercache
Source: https://github.com/tiercache/tiercache

Files: *
Copyright: 2026 tiercache developers
License: $LICENSE
Comment: The Rust crates statically linked into /usr/bin/tiercache are each
 under the MIT or the Apache-2.0 license, as Cargo.lock in the source lists.

License: $LICENSE
 On Debian systems, the complete text of the $LICENSE license can be found
 in "/usr/share/common-licenses/$LICENSE".
COPYRIGHT
chmod 0644 "$DOC/copyright"

mkdir -p "$STAGE/DEBIAN"
install -m 0755 "$HERE/postinst" "$HERE/prerm" "$HERE/postrm" "$STAGE/DEBIAN/"
echo /etc/tiercache/tiercache.toml >"$STAGE/DEBIAN/conffiles"
# Checksums of the installed files but the conffile (dpkg tracks that one),
# for debsums and dpkg --verify.
(cd "$STAGE" && find usr lib -type f -print0 | LC_ALL=C sort -z | xargs -0 md5sum) >"$STAGE/DEBIAN/md5sums"
SIZE_KB="$(du -sk "$STAGE" | cut -f1)"
cat >"$STAGE/DEBIAN/control" <<CONTROL
Package: tiercache
Version: $VERSION
Architecture: $ARCH
Maintainer: $MAINTAINER
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
