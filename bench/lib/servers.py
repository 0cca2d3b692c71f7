"""Servers: a memory cgroup, a server process with its stats, scratch directories, command lines."""
import contextlib
import os
import subprocess
import time

from . import paths
from .scenario import value
from .util import ask, scratch, port_open, show_cmd


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


def joining(cgroup):
    """A child's preexec_fn that moves it into CGROUP (a Cgroup or a throttle.Blkio),
    or None for no cgroup."""
    if cgroup is None:
        return None
    procs = cgroup.procs_file()

    def join():
        with open(procs, "w") as fh:
            fh.write(str(os.getpid()))
    return join


class Server:
    def __init__(self, name, cmd, port, cwd, cgroup=None, log_path=None, wait_s=30):
        self.name, self.cmd, self.port, self.cwd, self.cgroup = name, cmd, port, cwd, cgroup
        self.log_path = log_path or os.path.join(cwd, f"{name}.log")
        logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=cwd, stdout=logf, stderr=subprocess.STDOUT,
                                     preexec_fn=joining(cgroup))
        for _ in range(int(wait_s * 10)):
            if port_open(port):
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"{name} exited at start; log {self.log_path}:\n"
                                   + open(self.log_path).read()[-2000:])
            time.sleep(0.1)
        raise RuntimeError(f"{name} does not listen on {port}")

    def _ask(self, line, until):
        """Sends one command line; the reply up to `until`."""
        return ask(self.port, line.encode() + b"\r\n", until)

    def stats(self, what=""):
        buf = self._ask(f"stats {what}" if what else "stats", b"END\r\n")
        out = {}
        for line in buf.decode(errors="replace").split("\r\n"):
            p = line.split(" ", 2)
            if len(p) == 3 and p[0] == "STAT":
                try:
                    out[p[1]] = float(p[2]) if "." in p[2] else int(p[2])
                except ValueError:
                    out[p[1]] = p[2]
        return out

    def reset_stats(self):
        """`stats reset`: counters and the longest lock holds start again."""
        buf = self._ask("stats reset", b"\r\n")
        if buf != b"RESET\r\n":
            raise RuntimeError(f"stats reset answered {buf!r}")

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


@contextlib.contextmanager
def scratch_server(tag, name, make_cmd, port, cgroup=None):
    """Starts make_cmd(scratch_dir) in a fresh scratch directory; yields
    (server, command for RESULTS.md); stops it and removes the directory
    (kept with KEEP=1)."""
    with scratch(tag) as d:
        cmd = make_cmd(d)
        srv = Server(name, cmd, port, d, cgroup)
        try:
            yield srv, show_cmd(cmd, d)
        finally:
            srv.stop()


def tiercache_cmd(port, mem_mb, threads, ext_opts):
    # As memcached, tiercache refuses to run as root without -u.
    root = ["-u", "root"] if os.geteuid() == 0 else []
    return [paths.TIERCACHE, "-p", str(port), "-l", "127.0.0.1", "-t", str(threads), "-m",
            str(mem_mb)] + root + ["-o", ",".join(ext_opts)]


def memcached_cmd(port, mem_mb, threads, ext_opts):
    cmd = [paths.MEMCACHED, "-U", "0", "-p", str(port), "-l", "127.0.0.1", "-t", str(threads),
           "-m", str(mem_mb)]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    return cmd + ["-o", ",".join(ext_opts)]


def from_spec(k, name, d, extra=(), more=None):
    """The command line of the scenario's server NAME (its `[server.NAME]` table)
    in the scratch directory D, with the knobs K:
        binary = "memcached" | "tiercache" (default) | "=BEFORE" (a path)
        opts = [...]     # its -o options (none: the server's defaults), `{dir}` is D
        port = "=PORT + 1"   # default PORT
    and `-m MEM -t 2`; MORE: more variables of the values."""
    spec = k.sc["server"][name]
    opts = [o for o in (value(o, k, dir=d, **(more or {})) for o in spec.get("opts", []) + list(extra)) if o]
    port = value(spec.get("port", "=PORT"), k)
    binary = value(spec.get("binary", "tiercache"), k)
    if not binary:
        raise SystemExit(f"{k.sc['name']}: server {name}'s binary {spec['binary']!r} is empty: set it")
    if binary == "memcached":
        cmd = memcached_cmd(port, k.MEM, 2, opts)
    else:
        cmd = tiercache_cmd(port, k.MEM, 2, opts)
        cmd = [binary if binary != "tiercache" else paths.TIERCACHE] + cmd[1:]
    return cmd[:-2] if cmd[-2:] == ["-o", ""] else cmd
