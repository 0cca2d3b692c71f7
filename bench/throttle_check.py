#!/usr/bin/env python3
"""Does the cgroup v1 blkio read throttle see every reader? The device-class
benchmarks (nhc_*) make a fast and a slow device out of loop devices and
`blkio.throttle.read_iops_device`; their figures mean something only if the
throttle limits the reader tiercache uses. This checks it for each reader,
on one loop device limited to LIMIT reads per second:

- fio, 4 KiB random reads at queue depth 16, with psync, libaio, io_uring
  and io_uring with a kernel submission thread (SQPOLL), each in the
  throttled cgroup, and io_uring outside it (the device's own speed);
- tiercache itself, in the cgroup, with its io_uring reader (`ext_io=uring`,
  the default's choice) and its thread pool (`ext_io=pool`): KEYS values of
  VALUE bytes on the device and RAM too small for them, then SECS seconds
  of uniform gets (tiercache-bench, closed loop); flash reads per second
  from `stats` (`flash_fast_reads`).

A reader the throttle sees reads at most about LIMIT per second.

Environment: LIMIT=2000 SECS=5 KEYS=60000 VALUE=3000 MEM=32 PORT=21750
             FILE_MB=1024 RESULTS=bench/RESULTS.md (RESULTS=- to only print)
Needs root (losetup, cgroup v1 blkio at /sys/fs/cgroup/blkio) and fio.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench, set_keys  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.servers import joining, scratch_server, tiercache_cmd  # noqa: E402
from lib.util import log, scratch  # noqa: E402
from lib.throttle import Blkio, losetup  # noqa: E402

TAG = "throttle_check"
K = scenario.knobs(TAG)


def fio_iops(dev, engine, cgroup, extra=()):
    """fio's read IOPS, run inside `cgroup` (a Blkio) or outside (None)."""
    cmd = ["fio", "--name=t", f"--filename={dev}", "--direct=1", "--rw=randread", "--bs=4k",
           "--size=256M", f"--runtime={K.SECS}", "--time_based", f"--ioengine={engine}",
           "--iodepth=16", "--output-format=terse", *extra]
    r = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=joining(cgroup))
    if r.returncode != 0:
        raise RuntimeError(f"fio failed: {r.stderr[-500:]}")
    return float(r.stdout.strip().split(";")[7])


def tiercache_reads(dev, io, cgroup):
    """Flash reads per second of tiercache with reader `io`, in `cgroup`."""
    def make(d):
        return tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={dev}", "ext_wipe", f"ext_io={io}"])
    with scratch_server(TAG, f"tiercache-{io}", make, K.PORT, cgroup=cgroup) as (srv, cmd):
        set_keys(K.PORT, range(K.KEYS), K.VALUE)
        time.sleep(1)
        a = srv.stats()
        t = time.monotonic()
        out = bench(K.PORT, ["--keys", K.KEYS, "--value-size", K.VALUE, "--get-ratio", 1,
                                "-d", f"{K.SECS}s", "-t", 2, "-c", 4, "-p", 16], TAG)
        secs = time.monotonic() - t
        b = srv.stats()
        reads = (b["flash_fast_reads"] - a["flash_fast_reads"]) / secs
        hit = out["runs"][0].get("hit_ratio")
        log(TAG, f"tiercache ext_io={io}: {reads:,.0f} flash reads/s, hit ratio {hit}")
        return reads, hit, cmd


def main():
    if os.geteuid() != 0:
        sys.exit("throttle_check: needs root (losetup, cgroup blkio)")
    build(TAG)
    with scratch(TAG) as d:
        run_in(d)


def run_in(d):
    img = os.path.join(d, "dev.img")
    with open(img, "wb") as f:
        f.truncate(K.FILE_MB << 20)
    # fio reads what is there: give it data, not holes.
    subprocess.run(["dd", "if=/dev/urandom", f"of={img}", "bs=1M", "count=256", "conv=notrunc",
                    "status=none"], check=True)
    dev = losetup(img)
    cg = Blkio(f"tc_{TAG}", [(dev, K.LIMIT)])
    rows = []
    try:
        for name, engine, extra in [("psync", "psync", ()), ("libaio", "libaio", ()),
                                    ("io_uring", "io_uring", ()),
                                    ("io_uring, SQPOLL", "io_uring", ("--sqthread_poll=1",))]:
            iops = fio_iops(dev, engine, cg, extra)
            log(TAG, f"fio {name}: {iops:,.0f} IOPS")
            rows.append((f"fio {name}", "in the cgroup", iops))
        free = fio_iops(dev, "io_uring", None)
        log(TAG, f"fio io_uring outside the cgroup: {free:,.0f} IOPS")
        rows.append(("fio io_uring", "outside (the device's speed)", free))
        cmds = []
        for io in ("uring", "pool"):
            reads, hit, cmd = tiercache_reads(dev, io, cg)
            rows.append((f"tiercache `ext_io={io}` (gets, hit ratio {hit:.2f})", "in the cgroup",
                         reads))
            cmds.append(cmd)
    finally:
        cg.remove()
        subprocess.run(["losetup", "-d", dev])
    table = "\n".join(f"| {r} | {w} | {v:,.0f} | {v / K.LIMIT:.2f} |" for r, w, v in rows)
    seen = all(v <= K.LIMIT * 1.1 for r, w, v in rows if w == "in the cgroup")
    body = f"""{header(K)}
- one loop device (`losetup --direct-io=on` over a {K.FILE_MB} MiB file), its reads limited to
  {K.LIMIT:,}/s by cgroup v1 `blkio.throttle.read_iops_device`; fio: 4 KiB random reads, queue
  depth 16, {K.SECS} s; tiercache: {K.KEYS:,} values of {K.VALUE:,} B on the device, `-m {K.MEM}`,
  {K.SECS} s of uniform gets (`tiercache-bench -t 2 -c 4 -p 16`), reads from `flash_fast_reads`:
  {"; ".join(f"`{c}`" for c in cmds)}

| reader | where | reads/s | / limit |
| --- | --- | ---: | ---: |
{table}

{"Every reader in the cgroup is held to the limit, io_uring's included (with and without a kernel submission thread): the throttled device classes of the nhc_* benchmarks hold for the default reader." if seen else "**A reader in the cgroup went past the limit**: benchmarks that rely on the throttle do not hold for it."}
"""
    write_results("Does the blkio throttle see every reader? (throttle_check.py)", body, TAG)


if __name__ == "__main__":
    main()
