#!/usr/bin/env python3
"""Crash recovery scan speed: fill a tiercache so that most of its flash file
holds items, kill -9 it (no snapshot), start it again on the same file and read
from its log how many bytes the recovery scan read, how many items it brought
back and how long it took; check a sample of keys with gets; then measure the
device's sequential read bandwidth with fio on the same file. Kill, restart and
fio are repeated RUNS times; medians are reported, with the ratio of the scan's
MB/s to fio's.

Usage: python3 bench/run.py crash_scan -- [tiercache-binary] [--flash-size 4G] [--items N]
           [--value-size 4000] [-m 256] [--runs 3] [--json PATH|-]
(--items defaults to enough items to fill ~90% of the flash file plus RAM.)
The scratch directory is under target/flash-bench (FLASH_DIR= overrides; it must
be on a file system with O_DIRECT, not tmpfs); KEEP=1 keeps it."""
import argparse
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import paths  # noqa: E402
from lib.devices import fio, need_fio  # noqa: E402
from lib.load import get_values, set_keys, value_of  # noqa: E402
from lib.servers import Server, tiercache_cmd  # noqa: E402
from lib.stats import median  # noqa: E402
from lib.util import commit, fs_of, log, machine, show_cmd, size_bytes, workdir  # noqa: E402

TAG = "crash_scan"
LINE = "recovered flash items after an unclean shutdown"
SAMPLE = 1000  # keys read back after each restart, spread over the key range


def recovery_line(log_path):
    """The fields of the recovery log line (None if there is none)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(log_path, errors="replace").read())
    line = next((l for l in text.splitlines() if LINE in l), None)
    if line is None:
        return None
    return {k: float(v) for k, v in re.findall(r'(\w+)="?([0-9.]+)"?', line.split(LINE, 1)[1])}


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3")
        return True
    except OSError:
        return False


def fio_seq(path, size):
    """Sequential 1 MiB O_DIRECT reads of the whole file, io_uring, else psync."""
    for engine in ("io_uring", "psync"):
        try:
            return fio(path, size, 4, None, bs="1M", rw="read", engine=engine,
                          extra=["--readonly"])
        except RuntimeError as e:
            log(TAG, f"fio with {engine} failed: {str(e).splitlines()[-1]}")
    raise RuntimeError("fio failed with io_uring and psync")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tiercache", nargs="?", default=paths.TIERCACHE)
    ap.add_argument("--flash-size", default="4G")
    ap.add_argument("--items", type=int)
    ap.add_argument("--value-size", type=int, default=4000)
    ap.add_argument("-m", "--memory", type=int, default=256, help="tiercache -m (MB)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--port", type=int, default=23611)
    ap.add_argument("--json", help="write the results as JSON to PATH (- for stdout)")
    a = ap.parse_args()
    paths.TIERCACHE = paths.TIERCACHE = os.path.abspath(a.tiercache)
    need_fio(TAG)
    flash_bytes = size_bytes(a.flash_size)
    n = a.items or int((0.9 * flash_bytes + (a.memory << 20)) // (a.value_size + 96))
    d = workdir(TAG)
    flash = os.path.join(d, "tiercache.flash")
    snapshot = flash + ".snapshot"
    cmd = tiercache_cmd(a.port, a.memory, 2, [f"ext_path={flash}:{a.flash_size}"])
    log(TAG, "server:", " ".join(cmd))
    where = f"machine: {machine()}; files on {fs_of(d)}; commit {commit()}"
    srv = Server("tiercache", cmd, a.port, d, log_path=os.path.join(d, "load.log"))
    runs = []
    try:
        log(TAG, f"loading {n:,} x {a.value_size} B ({n * a.value_size / 1e9:.2f} GB)")
        load_s = set_keys(a.port, range(n), a.value_size)
        time.sleep(2)  # the flusher writes its buffers
        before = srv.stats()
        used, free = before.get("extstore_pages_used", 0), before.get("extstore_pages_free", 0)
        log(TAG, f"loaded in {load_s:.1f} s; curr_items {before.get('curr_items'):,}, "
               f"on flash {before.get('extstore_objects_used'):,}, flash segments used {used} of {used + free}")
        sample = range(0, n, max(1, n // SAMPLE))
        value = value_of(a.value_size)
        for run in range(1, a.runs + 1):
            srv.proc.kill()
            srv.proc.wait()
            if os.path.exists(snapshot):
                raise RuntimeError(f"{snapshot} exists after kill -9; not a crash restart")
            dropped = drop_caches()
            t0 = time.monotonic()
            srv = Server("tiercache", cmd, a.port, d, wait_s=600,
                            log_path=os.path.join(d, f"restart-{run}.log"))
            listen_s = time.monotonic() - t0
            cpu_s = sum(u + s_ for u, s_ in srv.thread_cpu().values())  # all of it the start's
            rec = recovery_line(srv.log_path)
            if rec is None:
                raise RuntimeError(f"no '{LINE}' line in {srv.log_path}:\n"
                                   + open(srv.log_path).read()[-2000:])
            got = dict(get_values(a.port, sample))
            right = sum(v == value for v in got.values())
            if right == 0 or right != len(got):
                raise RuntimeError(f"run {run}: of {len(sample)} sampled keys {len(got)} came back, "
                                   f"{right} with the value that was set; log {srv.log_path}")
            f = fio_seq(flash, a.flash_size)
            mbps = rec["bytes_read"] / 1e6 / max(rec["seconds"], 1e-9)
            r = {"run": run, "items": int(rec["items"]), "flash_segments": int(rec["flash_segments"]),
                 "dropped_by_tombstones": int(rec["dropped_by_tombstones"]),
                 "untrusted_segments": int(rec["untrusted_segments"]),
                 "bytes_read": int(rec["bytes_read"]), "seconds": rec["seconds"],
                 "mb_per_s": mbps, "items_per_s": rec["items"] / max(rec["seconds"], 1e-9),
                 "start_to_listen_s": listen_s, "cpu_s": cpu_s, "page_cache_dropped": dropped,
                 "sample": len(sample), "sample_back": right,
                 "fio_mb_per_s": f["mb_per_s"], "fio_cmd": f["cmd"], "ratio": mbps / f["mb_per_s"]}
            runs.append(r)
            log(TAG, f"run {run}: {r['items']:,} items, {r['bytes_read'] / 1e6:,.0f} MB in "
                   f"{r['seconds']:.3f} s = {mbps:,.0f} MB/s, {r['items_per_s']:,.0f} items/s; listening after "
                   f"{listen_s:.2f} s, {cpu_s:.2f} CPU s; sample {right}/{len(sample)}; "
                   f"fio {f['mb_per_s']:,.0f} MB/s; "
                   f"ratio {r['ratio']:.2f}")
    finally:
        srv.proc.kill()
        srv.proc.wait()
        if os.environ.get("KEEP") is None:
            shutil.rmtree(d, ignore_errors=True)
    med = {k: median([r[k] for r in runs]) for k in
           ("items", "bytes_read", "seconds", "mb_per_s", "items_per_s", "start_to_listen_s", "cpu_s",
            "fio_mb_per_s", "ratio")}
    fio_cmd = runs[0]["fio_cmd"].replace(flash, "DIR/tiercache.flash")
    print(f"tiercache: {show_cmd(cmd, d)}")
    print(f"loaded {n:,} x {a.value_size} B; before the first kill: curr_items {before.get('curr_items'):,}, "
          f"on flash {before.get('extstore_objects_used'):,}")
    print(f"fio: {fio_cmd}")
    print(where)
    print()
    print("| run | items recovered | segments | MB read | scan s | scan MB/s | items/s | start to listen s "
          "| server CPU s | sample back | fio MB/s | scan / fio |")
    print("| --- |" + " ---: |" * 11)
    for r in runs:
        print(f"| {r['run']} | {r['items']:,} | {r['flash_segments']:,} | {r['bytes_read'] / 1e6:,.0f} "
              f"| {r['seconds']:.3f} | {r['mb_per_s']:,.0f} | {r['items_per_s']:,.0f} | {r['start_to_listen_s']:.2f} "
              f"| {r['cpu_s']:.2f} | {r['sample_back']}/{r['sample']} | {r['fio_mb_per_s']:,.0f} | {r['ratio']:.2f} |")
    print(f"| median | {med['items']:,.0f} | | {med['bytes_read'] / 1e6:,.0f} | {med['seconds']:.3f} "
          f"| **{med['mb_per_s']:,.0f}** | **{med['items_per_s']:,.0f}** | {med['start_to_listen_s']:.2f} "
          f"| {med['cpu_s']:.2f} | "
          f"| **{med['fio_mb_per_s']:,.0f}** | **{med['ratio']:.2f}** |")
    if a.json:
        out = json.dumps({"command": show_cmd(cmd, d), "fio": fio_cmd, "machine": where,
                          "items_loaded": n, "value_size": a.value_size, "before_kill": before,
                          "runs": runs, "median": med}, indent=1)
        if a.json == "-":
            print(out)
        else:
            open(a.json, "w").write(out + "\n")


if __name__ == "__main__":
    main()
