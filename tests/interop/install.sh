#!/usr/bin/env bash
# Idempotent installer for the interop suite's dependencies (Debian 12, run as root).
#   - apt: memcached (reference server; ships memcached-tool),
#     libmemcached-tools (memccapable, memcdump),
#     nutcracker (twemproxy, for the scale-out test),
#     prometheus (promtool, for the metrics endpoint test),
#     openssl (s_client and test certificates, access_test.py),
#     lintian (the Debian package's check, package_test.sh),
#     golang-go and golang-github-bradfitz-gomemcache-dev (gomemcache's own
#     tests, with its source, peer_suites.sh)
#   - PyPI: pymemcache (client round-trip test; its own integration tests
#     ship inside it), pytest (to run those, peer_suites.sh)
#   - apt: python3-pylibmc (binary protocol test, crates/server/tests/binary.rs)
#   - apt: redis-server, redis-tools (reference server, redis-cli and
#     redis-benchmark for the RESP front end, redis_differential.py)
#   - PyPI: redis (redis-py, the RESP client smoke test)
#   - npm: redis 4 (node-redis), where node and npm are installed
# Each piece is installed only when missing, so re-running is cheap.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
fi

apt_install() {
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends "$@"
}

need_apt=()
command -v memcached >/dev/null 2>&1 || need_apt+=(memcached)
command -v memccapable >/dev/null 2>&1 || need_apt+=(libmemcached-tools)
# twemproxy, for the scale-out test (twemproxy_test.py).
[ -x /usr/sbin/nutcracker ] || command -v nutcracker >/dev/null 2>&1 || need_apt+=(nutcracker)
# openssl (s_client, and certificates for the TLS test, access_test.py).
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
# promtool (Debian's prometheus package), for the metrics endpoint test.
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
# lintian, for the Debian package's check (package_test.sh).
command -v lintian >/dev/null 2>&1 || need_apt+=(lintian)
# Go and gomemcache's source with its tests (peer_suites.sh), from Debian:
# built offline with GOPATH, no module proxy needed.
command -v go >/dev/null 2>&1 || need_apt+=(golang-go)
[ -d /usr/share/gocode/src/github.com/bradfitz/gomemcache ] || need_apt+=(golang-github-bradfitz-gomemcache-dev)
# redis-server 7 and redis-cli/redis-benchmark, for the RESP front end.
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || need_apt+=(redis-tools)

if [ "${#need_apt[@]}" -gt 0 ]; then
    echo "install.sh: apt-get install ${need_apt[*]}"
    apt_install "${need_apt[@]}"
    # The Debian package starts a system memcached on 11211; the suite does not
    # need it (it starts its own servers on free ports).
    if command -v systemctl >/dev/null 2>&1; then
        $SUDO systemctl stop memcached >/dev/null 2>&1 || true
        $SUDO systemctl stop nutcracker >/dev/null 2>&1 || true
        $SUDO systemctl stop prometheus prometheus-node-exporter >/dev/null 2>&1 || true
        $SUDO systemctl stop redis-server >/dev/null 2>&1 || true
    fi
fi

# pip_install PACKAGE DEBIAN_PACKAGE: PACKAGE from PyPI, for the
# python3 on PATH. Debian's own python3 refuses pip installs (PEP 668) unless
# told otherwise; Debian's package when PyPI cannot be used at all.
pip_install() {
    echo "install.sh: pip install $1"
    if ! python3 -m pip --version >/dev/null 2>&1; then
        apt_install python3-pip
    fi
    python3 -m pip install --quiet "$1" \
        || python3 -m pip install --quiet --break-system-packages "$1" \
        || apt_install "$2"
}

python3 -c 'import pymemcache' >/dev/null 2>&1 || pip_install pymemcache python3-pymemcache
# pytest, to run pymemcache's own integration tests (peer_suites.sh).
python3 -m pytest --version >/dev/null 2>&1 || pip_install pytest python3-pytest
# redis-py, for the RESP front end's client smoke test.
python3 -c 'import redis' >/dev/null 2>&1 || pip_install redis python3-redis

# node-redis (npm `redis` 4), the second client library of the RESP test
# (redis_node_test.js), in a cache directory outside the repository; only
# where node and npm are installed.
NODE_DIR="${TIERCACHE_NODE_DIR:-$HOME/.cache/tiercache-interop/node}"
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 \
    && [ ! -d "$NODE_DIR/node_modules/redis" ]; then
    echo "install.sh: npm install redis@4 (in $NODE_DIR)"
    mkdir -p "$NODE_DIR"
    (cd "$NODE_DIR" && npm install --silent --no-audit --no-fund redis@4) \
        || echo "install.sh: npm install redis failed; the RESP test skips node-redis"
fi

# pylibmc, for the binary protocol test (Debian's build, for Debian's python3).
if ! /usr/bin/python3 -c 'import pylibmc' >/dev/null 2>&1; then
    echo "install.sh: apt-get install python3-pylibmc"
    apt_install python3-pylibmc
fi

echo "install.sh: ok (memcached: $(command -v memcached), memccapable: $(command -v memccapable), pymemcache: $(python3 -c 'import pymemcache; print(pymemcache.__version__)'))"
