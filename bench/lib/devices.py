"""The device side: fio, the engine's raw reader, a spinning CPU, running a load beside another."""
import contextlib
import json
import shutil
import subprocess
import threading
import time

from . import paths
from .load import bench
from .servers import Server, tiercache_cmd
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


def flash_server(tag, d, k, threads, load, ram_load, preload_s="0s"):
    """tiercache on a flash file of FLASH_SIZE in D (`ext_threads=QD` and EXT_OPTS),
    KEYS values of VALUE bytes preloaded with the tiercache-bench arguments LOAD (then
    PRELOAD_S of gets), RAM_KEYS more written last with RAM_LOAD (so in RAM), and fio's
    file in D laid out once (not timed); returns (the server, its command line, fio's
    file). The caller stops the server."""
    ext = [f"ext_path={d}/tiercache.flash:{k.FLASH_SIZE}", f"ext_threads={k.QD}"]
    cmd = tiercache_cmd(k.PORT, k.MEM, threads, ext + [o for o in k.EXT_OPTS.split(",") if o])
    log(tag, "server:", " ".join(cmd))
    srv = Server("tiercache", cmd, k.PORT, d)
    try:
        log(tag, f"preloading {k.KEYS} x {k.VALUE} B")
        pre = bench(k.PORT, load + ["--preload", "--get-ratio", 1, "--pipeline", 32, "-d", preload_s, "--no-stats"], tag)
        st = srv.stats()
        log(tag, f"preload {pre['preload']['elapsed_s']:.1f} s; curr_items {st.get('curr_items')}, "
                 f"on flash {st.get('extstore_objects_used')}")
        if st.get("extstore_objects_used", 0) < k.KEYS * 0.8:
            log(tag, "WARNING: fewer than 80% of the keys are on flash")
        bench(k.PORT, ram_load + ["--preload", "--pipeline", 32, "--get-ratio", 1, "-d", "0s", "--no-stats"], tag)
        fio_file = f"{d}/fio.dat"
        fio(fio_file, k.FLASH_SIZE, 1, 1)
    except BaseException:
        srv.stop()
        raise
    return srv, cmd, fio_file
