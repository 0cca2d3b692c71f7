"""Throttled block devices: loop devices over files (direct I/O) and cgroup v1 blkio
groups limiting each device's reads per second (the nhc_* benchmarks' two classes)."""
import os
import subprocess
import time

from .util import log

BLKIO = "/sys/fs/cgroup/blkio"


class Blkio:
    """A cgroup v1 blkio group throttling reads per device."""

    def __init__(self, name, limits):
        self.path = os.path.join(BLKIO, name)
        os.makedirs(self.path, exist_ok=True)
        for dev, iops in limits:
            st = os.stat(dev).st_rdev
            with open(os.path.join(self.path, "blkio.throttle.read_iops_device"), "w") as f:
                f.write(f"{os.major(st)}:{os.minor(st)} {int(iops)}\n")

    def procs_file(self):
        return os.path.join(self.path, "cgroup.procs")

    def remove(self):
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)
        log("blkio", f"WARNING: could not remove {self.path}")


def losetup(path):
    r = subprocess.run(["losetup", "--direct-io=on", "--find", "--show", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"losetup failed: {r.stderr.strip()}")
    return r.stdout.strip()
