"""The device side: fio, the engine's raw reader, a spinning CPU, running a load beside another."""
import contextlib
import json
import shutil
import subprocess
import threading
import time

from . import paths
from .util import log


def need_fio(tag):
    if shutil.which("fio"):
        return
    log(tag, "fio not found: apt-get install -y fio")
    subprocess.run(["apt-get", "install", "-y", "-q", "fio"], check=True,
                   stdout=subprocess.DEVNULL)


def fio(path, size, qd, runtime_s, bs="4k", rw="randread", rate_iops=None, engine="io_uring",
        extra=()):
    """fio reads with O_DIRECT (4 KiB random by default) for runtime_s seconds, or
    once over `size` if runtime_s is None; returns iops, MB/s (1e6 bytes),
    clat p50/p99 us and the command."""
    cmd = ["fio", "--name=flashbench", f"--filename={path}", f"--size={size}",
           f"--ioengine={engine}", "--direct=1", f"--rw={rw}", f"--bs={bs}",
           f"--iodepth={qd}", "--randrepeat=0", "--norandommap", "--output-format=json"]
    cmd += [f"--runtime={runtime_s}", "--time_based"] if runtime_s else []
    cmd += list(extra)
    if rate_iops:
        cmd += [f"--rate_iops={int(rate_iops)}", "--rate_process=poisson"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"fio failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    j = json.loads(r.stdout[r.stdout.index("{"):])
    rd = j["jobs"][0]["read"]
    pct = rd.get("clat_ns", {}).get("percentile", {})
    lat = rd.get("lat_ns", {})
    return {
        "iops": rd["iops"],
        "mb_per_s": rd["bw_bytes"] / 1e6,
        "p50_us": pct.get("50.000000", 0) / 1000,
        "p99_us": pct.get("99.000000", 0) / 1000,
        "mean_us": lat.get("mean", 0) / 1000,
        "cpu_us_per_io": (j["jobs"][0]["usr_cpu"] + j["jobs"][0]["sys_cpu"]) / 100
        * (runtime_s or rd["runtime"] / 1000) * 1e6 / max(1, rd["total_ios"])
        if "total_ios" in rd else None,
        "cmd": " ".join(cmd),
    }


def reader(path, size, threads, qd, runtime_s):
    """4 KiB random reads of `path` through tiercache's io_uring reader with no
    network in the way: `threads` rings, `qd` reads in flight in all."""
    cmd = [paths.READER, path, str(size), str(threads), str(qd), str(runtime_s)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"flash_randread failed: {' '.join(cmd)}\n{r.stderr[-2000:]}")
    out = json.loads(r.stdout)
    out["cmd"] = " ".join(cmd)
    return out


@contextlib.contextmanager
def spinning_cpu():
    """One busy loop on the machine while the block runs (a CPU taken, as a
    server and its client take CPUs beside their device reads)."""
    p = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        yield
    finally:
        p.kill()
        p.wait()


def beside(background, foreground, lead_s=1.0):
    """Runs `foreground()` while `background()` runs in another thread
    (started `lead_s` earlier; it must outlast the foreground); returns
    (foreground's result, background's)."""
    out = {}

    def bg():
        out["bg"] = background()
        out["bg_end"] = time.monotonic()

    t = threading.Thread(target=bg)
    t.start()
    time.sleep(lead_s)
    try:
        fg = foreground()
        fg_end = time.monotonic()
    finally:
        t.join()
    if "bg" not in out:
        raise RuntimeError("the background measurement failed (see above)")
    if out["bg_end"] < fg_end:
        raise RuntimeError(f"the background measurement ended {fg_end - out['bg_end']:.1f} s before the "
                           "foreground one: it did not run beside all of it")
    return fg, out["bg"]
