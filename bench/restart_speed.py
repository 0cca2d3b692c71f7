#!/usr/bin/env python3
"""Graceful-restart speed: fill a tiercache with N items (RAM and flash), stop it
with SIGTERM (it writes its snapshot), start it again and read from its log how
many items came back and how fast; then check a sample of items. Alongside, fio
(if installed) measures the disk's sequential read bandwidth in the same run, to
put the restore rate in proportion.
Usage: python3 bench/run.py restart_speed -- [tiercache-binary] [N] [-m MB]   (default 2000000 items, -m 256)"""
import os, re, shutil, socket, subprocess, sys, tempfile, time

args = sys.argv[1:]
mb = "256"
if "-m" in args:
    i = args.index("-m"); mb = args[i + 1]; del args[i:i + 2]
tc = args[0] if args else "target/release/tiercache"
n = int(args[1]) if len(args) > 1 else 2_000_000
port = 23511
work = tempfile.mkdtemp(prefix="tc-restart-")
flash = os.path.join(work, "flash")
cmd = [tc, "-p", str(port), "-m", mb, "-t", "2", "-o", f"ext_path={flash}:4G,ext_avg_item_size=512"]
if os.geteuid() == 0:
    cmd += ["-u", "root"]  # as memcached, tiercache refuses root without -u

def start():
    log = open(os.path.join(work, "log"), "a")
    p = subprocess.Popen(cmd, stdout=log, stderr=log)
    for _ in range(600):
        try:
            return p, socket.create_connection(("127.0.0.1", port))
        except OSError:
            time.sleep(0.05)
    sys.exit("server did not start")

def roundtrip(s, req):
    s.sendall(req + b"mn\r\n")
    buf = b""
    while not buf.endswith(b"MN\r\n"):
        buf += s.recv(1 << 20)
    return buf[:-4]

procs = []
import atexit
atexit.register(lambda: [q.kill() for q in procs if q.poll() is None])
p, s = start()
procs.append(p)
batch = []
for i in range(n):
    batch.append(b"set k%011d %d 0 32 noreply\r\n%s\r\n" % (i, i & 0xFFFF, b"%032d" % i))
    if len(batch) == 2000:
        s.sendall(b"".join(batch)); batch = []
s.sendall(b"".join(batch))
stats = roundtrip(s, b"stats\r\n").decode()
items = int(re.search(r"STAT curr_items (\d+)", stats).group(1))
on_flash = int(re.search(r"STAT extstore_objects_used (\d+)", stats).group(1))
sample = [roundtrip(s, b"gets k%011d\r\n" % i) for i in range(0, n, max(1, n // 1000))]
s.close()
t0 = time.time(); p.terminate(); p.wait(); stop_s = time.time() - t0
snap = os.path.getsize(flash + ".snapshot")
p, s = start()
procs.append(p)
log = open(os.path.join(work, "log")).read()
m = re.search(r'restored the cache from the shutdown snapshot items=(\d+) flash_segments=(\d+) seconds="?([0-9.]+)"? items_per_second="?(\d+)"?', log)
if not m:
    sys.exit("no restore line in the log:\n" + log[-2000:])
restored, segs, secs, rate = int(m.group(1)), int(m.group(2)), float(m.group(3)), int(m.group(4))
again = [roundtrip(s, b"gets k%011d\r\n" % i) for i in range(0, n, max(1, n // 1000))]
same = sum(a == b for a, b in zip(sample, again))
s.close(); p.terminate(); p.wait()
fio = ""
if shutil.which("fio"):
    out = subprocess.run(["fio", "--name=seq", f"--filename={flash}", "--rw=read", "--bs=1M", "--direct=1",
                          "--ioengine=psync", "--size=1G", "--runtime=5", "--time_based=0", "--output-format=terse"],
                         capture_output=True, text=True).stdout
    try:
        fio = f"fio sequential read of the flash file: {int(out.split(';')[6]) / 1024:.0f} MiB/s"
    except (IndexError, ValueError):
        fio = "fio output not understood"
print(f"items stored {items} ({on_flash} on flash), snapshot {snap / 2**20:.1f} MiB written in {stop_s:.2f} s at shutdown")
print(f"restored {restored} items ({segs} flash segments) in {secs:.3f} s: {rate:,} items/s; snapshot read at {snap / 2**20 / max(secs, 1e-9):.0f} MiB/s")
print(f"sample of {len(sample)} gets with CAS identical after restart: {same}/{len(sample)}")
if fio:
    print(fio)
shutil.rmtree(work)
