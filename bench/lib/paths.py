"""Paths of the binaries and files the benchmarks use, each overridable by the environment variable of its name."""
import os

# The repository: this file is bench/lib/paths.py.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TIERCACHE = os.environ.get("TIERCACHE", os.path.join(TARGET, "release", "tiercache"))
BENCH = os.environ.get("BENCH", os.path.join(TARGET, "release", "tiercache-bench"))
READER = os.environ.get("READER", os.path.join(TARGET, "release", "examples", "flash_randread"))
MEMCACHED = os.environ.get("MEMCACHED", "memcached")
RESULTS = os.environ.get("RESULTS", os.path.join(ROOT, "bench", "RESULTS.md"))
