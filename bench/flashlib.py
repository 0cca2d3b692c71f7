"""Shared helpers of the flash-tier benchmarks (bench/flash_*.py): building the
binaries, starting servers (optionally in a memory cgroup), reading `stats`,
running tiercache-bench and fio, medians, and writing a subsection of the
"## Flash tier" section of bench/RESULTS.md."""
import contextlib
import datetime
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
TIERCACHE = os.environ.get("TIERCACHE", os.path.join(TARGET, "release", "tiercache"))
BENCH = os.environ.get("BENCH", os.path.join(TARGET, "release", "tiercache-bench"))
READER = os.environ.get("READER", os.path.join(TARGET, "release", "examples", "flash_randread"))
MEMCACHED = os.environ.get("MEMCACHED", "memcached")
RESULTS = os.environ.get("RESULTS", os.path.join(ROOT, "bench", "RESULTS.md"))


def knobs(**defaults):
    """A script's environment variables, each with its default: a namespace of
    the values (converted to the default's type) whose `shown` is the
    `NAME=value ...` of those set in the environment, for the command in
    RESULTS.md. A variable set to the empty string takes its default."""
    ns = types.SimpleNamespace(**{k: type(v)(os.environ.get(k) or v) for k, v in defaults.items()})
    ns.shown = " ".join(f"{k}={os.environ[k]}" for k in defaults if k in os.environ)
    return ns


def log(tag, *a):
    print(f"[{tag}]", *a, file=sys.stderr, flush=True)


def build(tag):
    if "TIERCACHE" in os.environ and "BENCH" in os.environ:
        return
    log(tag, "building tiercache and tiercache-bench (release)")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tiercache-server",
                    "-p", "tiercache-bench"], cwd=ROOT, check=True)


def build_reader(tag):
    """The flash read path alone (crates/engine/examples/flash_randread.rs)."""
    if "READER" in os.environ:
        return
    log(tag, "building flash_randread (release)")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tiercache-engine",
                    "--example", "flash_randread"], cwd=ROOT, check=True)


def reader(path, size, threads, qd, runtime_s):
    """4 KiB random reads of `path` through tiercache's io_uring reader with no
    network in the way: `threads` rings, `qd` reads in flight in all."""
    cmd = [READER, path, str(size), str(threads), str(qd), str(runtime_s)]
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


def free_port():
    """A port free now on 127.0.0.1."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def size_bytes(s):
    """'2G' / '512M' / '1.5GB' / '4096' as bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    s = s.strip().upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def cpu_ticks():
    """The machine's CPU time so far (/proc/stat "cpu" line): user, nice,
    system, idle, iowait, irq, softirq, steal, in ticks."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def steal_share(a, b):
    """Share of CPU time the hypervisor took from this machine between two
    `cpu_ticks()` samples (steal / all)."""
    d = [y - x for x, y in zip(a, b)]
    return d[7] / max(1, sum(d))


def need_fio(tag):
    if shutil.which("fio"):
        return
    log(tag, "fio not found: apt-get install -y fio")
    subprocess.run(["apt-get", "install", "-y", "-q", "fio"], check=True,
                   stdout=subprocess.DEVNULL)


def workdir(tag):
    """A scratch directory on the file system of the repository (O_DIRECT must
    work there; tmpfs would not do). FLASH_DIR overrides."""
    base = os.environ.get("FLASH_DIR", os.path.join(ROOT, "target", "flash-bench"))
    os.makedirs(base, exist_ok=True)
    d = tempfile.mkdtemp(prefix=tag + ".", dir=base)
    return d


def fs_of(path):
    out = subprocess.run(["df", "-PT", path], capture_output=True, text=True).stdout
    parts = out.splitlines()[-1].split()
    return f"{parts[0]} ({parts[1]})"


def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) // (1024 * 1024)
    return f"{os.cpu_count()} CPUs, {cpu}, {mem} GiB RAM, Linux {os.uname().release}"


def commit():
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                       capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_runs(xs, f="{:,.0f}"):
    return " / ".join(f.format(x) if x is not None else "n/a" for x in xs)


# --- cgroups -------------------------------------------------------------------

class Cgroup:
    """A memory cgroup with a limit on RSS plus page cache: v1
    (memory.limit_in_bytes) where the memory controller is mounted as v1, else
    v2 (memory.max)."""

    def __init__(self, name, limit_bytes):
        v1 = "/sys/fs/cgroup/memory"
        if os.path.exists(os.path.join(v1, "memory.limit_in_bytes")):
            self.version = 1
            self.path = os.path.join(v1, name)
            os.makedirs(self.path, exist_ok=True)
            # no swap here; memsw may not exist
            self._write("memory.limit_in_bytes", str(limit_bytes))
        else:
            root = "/sys/fs/cgroup"
            if os.path.exists("/sys/fs/cgroup/unified/cgroup.controllers"):
                root = "/sys/fs/cgroup/unified"
            self.version = 2
            self.path = os.path.join(root, name)
            os.makedirs(self.path, exist_ok=True)
            self._write("memory.max", str(limit_bytes))
        self.limit = limit_bytes

    def _write(self, f, v):
        with open(os.path.join(self.path, f), "w") as fh:
            fh.write(v)

    def _read(self, f):
        try:
            with open(os.path.join(self.path, f)) as fh:
                return fh.read()
        except OSError:
            return None

    def usage(self):
        v = self._read("memory.usage_in_bytes" if self.version == 1 else "memory.current")
        return int(v) if v else None

    def peak(self):
        v = self._read("memory.max_usage_in_bytes" if self.version == 1 else "memory.peak")
        return int(v) if v else None

    def failcnt(self):
        if self.version == 1:
            v = self._read("memory.failcnt")
            return int(v) if v else None
        v = self._read("memory.events")
        if not v:
            return None
        for line in v.splitlines():
            if line.startswith("max "):
                return int(line.split()[1])
        return None

    def oom_kills(self):
        text = self._read("memory.oom_control" if self.version == 1 else "memory.events") or ""
        for line in text.splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return None

    def procs_file(self):
        return os.path.join(self.path, "cgroup.procs")

    def remove(self):
        try:
            os.rmdir(self.path)
        except OSError:
            pass

    def describe(self):
        f = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        return f"cgroup v{self.version} {f}={self.limit}"


# --- servers -------------------------------------------------------------------

def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Server:
    def __init__(self, name, cmd, port, cwd, cgroup=None, log_path=None, wait_s=30):
        self.name, self.cmd, self.port, self.cwd, self.cgroup = name, cmd, port, cwd, cgroup
        self.log_path = log_path or os.path.join(cwd, f"{name}.log")
        logf = open(self.log_path, "w")
        pre = None
        if cgroup is not None:
            procs = cgroup.procs_file()

            def pre():
                with open(procs, "w") as fh:
                    fh.write(str(os.getpid()))
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=logf, stderr=subprocess.STDOUT,
                                     preexec_fn=pre)
        for _ in range(int(wait_s * 10)):
            if port_open(port):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited at start; log {self.log_path}:\n"
                                   + open(self.log_path).read()[-2000:])
            time.sleep(0.1)
        raise RuntimeError(f"{name} does not listen on {port}")

    def stats(self, what=""):
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(f"stats {what}\r\n".encode() if what else b"stats\r\n")
            buf = b""
            while not buf.endswith(b"END\r\n"):
                c = s.recv(65536)
                if not c:
                    break
                buf += c
        out = {}
        for line in buf.decode(errors="replace").split("\r\n"):
            p = line.split(" ", 2)
            if len(p) == 3 and p[0] == "STAT":
                try:
                    out[p[1]] = float(p[2]) if "." in p[2] else int(p[2])
                except ValueError:
                    out[p[1]] = p[2]
        return out

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return None

    def thread_cpu(self):
        """CPU seconds (user, system) per thread group: thread names with a
        trailing -N merged (worker-0, worker-1 -> worker)."""
        tick = os.sysconf("SC_CLK_TCK")
        out = {}
        base = f"/proc/{self.proc.pid}/task"
        for t in os.listdir(base):
            try:
                name = open(f"{base}/{t}/comm").read().strip()
                f = open(f"{base}/{t}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            head, _, tail = name.rpartition("-")
            if head and tail.isdigit():
                name = head
            u, s_ = out.get(name, (0.0, 0.0))
            out[name] = (u + int(f[11]) / tick, s_ + int(f[12]) / tick)
        return out

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def cpu_delta(a, b):
    """Per thread group CPU seconds between two thread_cpu() snapshots."""
    return {k: (b[k][0] - a.get(k, (0, 0))[0], b[k][1] - a.get(k, (0, 0))[1]) for k in b}


def show_cmd(cmd, d):
    """A command line for RESULTS.md: scratch directory and binary path shortened."""
    return " ".join(cmd).replace(d, "DIR").replace(TIERCACHE, "tiercache")


@contextlib.contextmanager
def scratch_server(tag, name, make_cmd, port, cgroup=None):
    """Starts make_cmd(scratch_dir) in a fresh scratch directory; yields
    (server, command for RESULTS.md); stops it and removes the directory
    (kept with KEEP=1)."""
    d = workdir(tag)
    cmd = make_cmd(d)
    srv = Server(name, cmd, port, d, cgroup)
    try:
        yield srv, show_cmd(cmd, d)
    finally:
        srv.stop()
        if os.environ.get("KEEP") is None:
            shutil.rmtree(d, ignore_errors=True)


def tiercache_cmd(port, mem_mb, threads, ext_opts):
    # As memcached, tiercache refuses to run as root without -u.
    root = ["-u", "root"] if os.geteuid() == 0 else []
    return [TIERCACHE, "-p", str(port), "-l", "127.0.0.1", "-t", str(threads), "-m",
            str(mem_mb)] + root + ["-o", ",".join(ext_opts)]


def memcached_cmd(port, mem_mb, threads, ext_opts):
    cmd = [MEMCACHED, "-U", "0", "-p", str(port), "-l", "127.0.0.1", "-t", str(threads),
           "-m", str(mem_mb)]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    return cmd + ["-o", ",".join(ext_opts)]


# --- load --------------------------------------------------------------------

def bench(port, args, tag="bench", timeout=None):
    """Runs tiercache-bench against 127.0.0.1:port; returns its JSON output."""
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    cmd = [BENCH, "-s", f"127.0.0.1:{port}", "-q", "--json", path] + [str(a) for a in args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"tiercache-bench failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
    for line in r.stderr.splitlines():
        if "WARNING" in line:
            log(tag, line.strip())
    with open(path) as f:
        out = json.load(f)
    os.unlink(path)
    return out


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


# --- results -------------------------------------------------------------------

SECTION = "## Flash tier"


def write_results(subsection_title, body, tag):
    """Replaces (or appends) `### subsection_title` inside `## Flash tier` of
    RESULTS.md, leaving everything else intact; with RESULTS=- prints it."""
    block = f"### {subsection_title}\n\n{body.rstrip()}\n\n"
    if RESULTS == "-":
        print(block, end="", flush=True)
        return
    text = open(RESULTS).read() if os.path.exists(RESULTS) else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    # locate the flash section
    start = next((i for i, l in enumerate(lines) if l.rstrip() == SECTION), None)
    if start is None:
        if not text.endswith("\n\n"):
            text = text.rstrip("\n") + "\n\n"
        text += (f"{SECTION}\n\nScripts `bench/flash_*.py` (see bench/README.md), one command "
                 "each; every figure below is a median of runs made side by side on the same "
                 "machine in one invocation.\n\n" + block)
        open(RESULTS, "w").write(text)
        log(tag, f"wrote {RESULTS} ({SECTION} / {subsection_title})")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    sec = lines[start:end]
    head = f"### {subsection_title}"
    s = next((i for i, l in enumerate(sec) if l.rstrip() == head), None)
    if s is None:
        new_sec = "".join(sec).rstrip("\n") + "\n\n" + block
    else:
        e = next((i for i in range(s + 1, len(sec)) if sec[i].startswith("### ")), len(sec))
        new_sec = "".join(sec[:s]) + block + "".join(sec[e:])
        new_sec = new_sec.rstrip("\n") + "\n\n"
    out = "".join(lines[:start]) + new_sec + "".join(lines[end:])
    open(RESULTS, "w").write(out.rstrip("\n") + "\n")
    log(tag, f"wrote {RESULTS} ({SECTION} / {subsection_title})")


# --- paced writes ----------------------------------------------------------------

def value_of(vlen):
    """The vlen-byte value set_keys writes."""
    return ((b"%d" % vlen) * (vlen // len(b"%d" % vlen) + 1))[:vlen]


def set_keys(port, keys, vlen, mb_per_s=None, prefix="key:"):
    """Sets `keys` (integers) to vlen-byte values over one connection with
    noreply, at most mb_per_s MB/s of values, then waits for the server with
    `mn`. Returns the seconds taken."""
    s = socket.create_connection(("127.0.0.1", port))
    val = value_of(vlen)
    t0 = time.monotonic()
    sent = 0
    batch = []
    for i, k in enumerate(keys):
        batch.append(b"set %s%d 0 0 %d noreply\r\n%s\r\n" % (prefix.encode(), k, vlen, val))
        if len(batch) == 64 or i == len(keys) - 1:
            s.sendall(b"".join(batch))
            sent += len(batch) * vlen
            batch = []
            if mb_per_s:
                ahead = sent / (mb_per_s * 1e6) - (time.monotonic() - t0)
                if ahead > 0:
                    time.sleep(ahead)
    s.sendall(b"mn\r\n")
    buf = b""
    s.settimeout(300)
    while not buf.endswith(b"MN\r\n"):
        c = s.recv(65536)
        if not c:
            raise RuntimeError("connection closed during set_keys")
        buf += c
    s.close()
    return time.monotonic() - t0


def get_values(port, keys, batch=100, prefix="key:"):
    """Reads `keys` (integers) with multigets; yields (key, value) for those
    that are there."""
    keys = list(keys)
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(300)
    f = s.makefile("rb", buffering=1 << 20)
    for lo in range(0, len(keys), batch):
        s.sendall(("get " + " ".join(f"{prefix}{k}" for k in keys[lo:lo + batch]) + "\r\n").encode())
        while True:
            line = f.readline()
            if line == b"END\r\n":
                break
            if not line.startswith(b"VALUE "):
                raise RuntimeError(f"unexpected reply {line[:80]!r}")
            p = line.split()
            ln = int(p[3])
            data = f.read(ln + 2)
            if len(data) == ln + 2:
                yield int(p[1][len(prefix):]), data[:ln]
    s.close()


def missing_keys(port, n, vlen, batch=100, prefix="key:"):
    """Reads key 0..n-1 with multigets; returns the keys that are not there
    with a vlen-byte value."""
    found = {k for k, v in get_values(port, range(n), batch, prefix) if len(v) == vlen}
    return [k for k in range(n) if k not in found]


def fill_all(port, n, vlen, mb_per_s, tag, rounds=4):
    """Writes keys 0..n-1 at mb_per_s, then re-writes the missing ones (as a
    client would after misses) up to `rounds` times. Returns (seconds, kept
    after the first pass, kept at the end)."""
    t = set_keys(port, range(n), vlen, mb_per_s)
    time.sleep(1)
    miss = missing_keys(port, n, vlen)
    first = n - len(miss)
    for r in range(rounds):
        if not miss:
            break
        log(tag, f"port {port}: {len(miss):,} keys missing after pass {r + 1}; writing them again")
        t += set_keys(port, miss, vlen, mb_per_s)
        time.sleep(1)
        miss = missing_keys(port, n, vlen)
    return t, first, n - len(miss)


def latency_bench_cmd(port, secs, vlen, args, out):
    """tiercache-bench in open-loop latency mode (one thread, 4 connections)
    for `secs` seconds, JSON to `out`; `args` add the keys, mix and rate."""
    return [BENCH, "-s", f"127.0.0.1:{port}", "-q", "--no-stats", "--json", out,
            "--mode", "latency", "-d", f"{secs}s", "--threads", "1", "--conns", "4",
            "--value-size", str(vlen)] + [str(a) for a in args]


def latency_of(path, kind):
    """ops/s and p50/p99/p99.9/max µs of one kind ("get_hit", "set"...) from
    a tiercache-bench JSON result (all requests if it has no such kind)."""
    import json
    with open(path) as f:
        r = json.load(f)["runs"][0]
    g = r["latency"].get(kind) or r["latency"]["all"]
    return {"ops": r["ops_per_sec"], "p50": g["p50_us"], "p99": g["p99_us"],
            "p999": g["p999_us"], "max": g["max_us"]}
