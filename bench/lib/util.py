"""Knobs, logging, the machine's description, ports, sizes and CPU counters: what every benchmark needs."""
import contextlib
import datetime
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import types

from . import paths


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


def flash_dir():
    """Where scratch directories go: on the file system of the repository
    (O_DIRECT must work there; tmpfs would not do). FLASH_DIR overrides."""
    base = os.environ.get("FLASH_DIR", os.path.join(paths.ROOT, "target", "flash-bench"))
    os.makedirs(base, exist_ok=True)
    return base


def workdir(tag):
    """A new scratch directory in flash_dir()."""
    return tempfile.mkdtemp(prefix=tag + ".", dir=flash_dir())


@contextlib.contextmanager
def scratch(tag):
    """A scratch directory (workdir) for the block, removed after it, also after
    a failure, unless KEEP is set."""
    d = workdir(tag)
    try:
        yield d
    finally:
        if os.environ.get("KEEP") is None:
            shutil.rmtree(d, ignore_errors=True)


def flash_record(klen, vlen):
    """An item's record on flash: (its bytes: 8-byte record prefix + 24-byte item
    header + key + value, padded to 8; the bytes it takes with block padding: a
    record of at most 4 KiB does not cross a 4 KiB block)."""
    rec = (8 + 24 + klen + vlen + 7) // 8 * 8
    return rec, 4096 / (4096 // rec) if rec <= 4096 else rec


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
    r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=paths.ROOT,
                       capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                           cwd=paths.ROOT, capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + (" (with uncommitted changes)" if dirty else "")


def now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def ask(port, data, until=b"\r\n", timeout=30.0):
    """Sends DATA on a new connection to 127.0.0.1:PORT; the reply up to UNTIL
    (or what came before the server closed)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        got = b""
        while not got.endswith(until):
            r = s.recv(65536)
            if not r:
                break
            got += r
    return got


def cpu_delta(a, b):
    """Per thread group CPU seconds between two thread_cpu() snapshots."""
    return {k: (b[k][0] - a.get(k, (0, 0))[0], b[k][1] - a.get(k, (0, 0))[1]) for k in b}


def show_cmd(cmd, d):
    """A command line for RESULTS.md: scratch directory and binary path shortened."""
    return " ".join(cmd).replace(d, "DIR").replace(paths.TIERCACHE, "tiercache")
