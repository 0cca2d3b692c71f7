"""Building the release binaries (or taking TIERCACHE=/BENCH=/READER= paths)."""
import os
import subprocess

from . import paths
from .util import log


def build(tag):
    if "TIERCACHE" in os.environ and "BENCH" in os.environ:
        return
    log(tag, "building tiercache and tiercache-bench (release)")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tiercache-server",
                    "-p", "tiercache-bench"], cwd=paths.ROOT, check=True)


def build_reader(tag):
    """The flash read path alone (crates/engine/examples/flash_randread.rs)."""
    if "READER" in os.environ:
        return
    log(tag, "building flash_randread (release)")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tiercache-engine",
                    "--example", "flash_randread"], cwd=paths.ROOT, check=True)
