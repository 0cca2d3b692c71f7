#!/usr/bin/env python3
"""Byte-level differential tester: tiercache versus a reference memcached.

For every ``*.case`` file a fresh memcached and a fresh tiercache are started
on free loopback ports.  The case's steps are replayed against both servers
over raw TCP sockets (step by step, interleaved, so both see the same wall
clock) and the raw reply bytes are compared.  The case file format is
documented in README.md next to this script.

Usage:
    python3 differential.py --tiercache PATH [--memcached PATH]
                            [--cases DIR_OR_FILE ...] [-v] [--dump]

Exit status is 0 when every compared step produced identical replies, 1 on
any mismatch or error (a server that does not start, dies or hangs; a broken
case file) and 2 when no case file was found.
"""

import argparse
import atexit
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SENTINEL = b"mn\r\n"
SENTINEL_REPLY = b"MN\r\n"
STEP_TIMEOUT = 5.0      # seconds to wait for a step's sentinel reply
CLOSE_TIMEOUT = 2.0     # seconds to wait for EOF on a `close` step
START_TIMEOUT = 10.0    # seconds to wait for a server to accept TCP
MAX_SLEEP_PER_CASE = 3.0
MAX_CANDIDATE_TIMEOUTS = 3  # a case is abandoned after this many tiercache timeouts
CHUNK_DELAY = 0.001     # pause between bytes of a `chunked` step
REPR_LIMIT = 300        # bytes of a reply shown in a mismatch report
DIFF_CONTEXT = 60       # bytes shown either side of a late first difference

STEP_OPTIONS = {"close", "chunked", "cas", "version", "ttl", "skip-compare", "nowait"}


# --------------------------------------------------------------------------
# Case file parsing
# --------------------------------------------------------------------------

class CaseError(Exception):
    """A malformed case file."""


@dataclass
class Step:
    """One directive of a case file."""
    kind: str                    # "send", "sleep" or "fresh-connection"
    lineno: int
    payload: bytes = b""
    options: frozenset = frozenset()
    mn_count: int = 0            # MN lines the payload itself produces
    seconds: float = 0.0         # for "sleep"
    source: str = ""             # the line as written, for reports


_REPEAT_RE = re.compile(r"\[(\d+)\*([^\]]*)\]")
_SIMPLE_ESCAPES = {"r": b"\r", "n": b"\n", "t": b"\t", "0": b"\x00",
                   "s": b" ", "\\": b"\\"}


def decode_payload(text):
    """Turn a payload written with escapes into bytes.

    Escapes: \\r \\n \\t \\0 \\s (space) \\\\ \\xHH and \\[N*TEXT] which repeats
    the literal TEXT (no escapes, no ']') N times.
    """
    out = bytearray()
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        if i + 1 >= len(text):
            raise CaseError("dangling backslash at end of payload")
        esc = text[i + 1]
        if esc in _SIMPLE_ESCAPES:
            out += _SIMPLE_ESCAPES[esc]
            i += 2
        elif esc == "x":
            hexdigits = text[i + 2:i + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{2}", hexdigits):
                raise CaseError(f"bad \\x escape: {text[i:i + 4]!r}")
            out.append(int(hexdigits, 16))
            i += 4
        elif esc == "[":
            match = _REPEAT_RE.match(text, i + 1)
            if not match:
                raise CaseError(f"bad repeat escape near {text[i:i + 20]!r}")
            out += match.group(2).encode("utf-8") * int(match.group(1))
            i = match.end()
        else:
            raise CaseError(f"unknown escape \\{esc}")
    return bytes(out)


def count_mn_commands(payload):
    """Number of lines in `payload` that are `mn` meta no-op commands."""
    return len(re.findall(rb"(?m)^mn(?=[ \r\n]|$)", payload))


def parse_send(line, lineno):
    """Parse `send[ OPTIONS]: PAYLOAD` into a Step."""
    head, sep, rest = line.partition(":")
    if not sep or (rest and not rest.startswith(" ")):
        raise CaseError(f"line {lineno}: expected 'send [options]: payload'")
    words = head.split()[1:]
    options = set()
    mn_count = None
    for word in words:
        if word.startswith("mn="):
            mn_count = int(word[3:])
        elif word in STEP_OPTIONS:
            options.add(word)
        else:
            raise CaseError(f"line {lineno}: unknown step option {word!r}")
    if {"close", "nowait"} <= options:
        raise CaseError(f"line {lineno}: 'close' and 'nowait' are exclusive")
    payload = decode_payload(rest[1:])
    if mn_count is None:
        mn_count = count_mn_commands(payload)
    return Step("send", lineno, payload, frozenset(options), mn_count,
                source=line)


def parse_case(path):
    """Parse a case file into a list of Steps."""
    steps = []
    slept = 0.0
    for lineno, raw in enumerate(Path(path).read_text().splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        word = stripped.split()[0].rstrip(":")
        try:
            if word == "send":
                # keep trailing blanks: they are part of the payload
                steps.append(parse_send(raw.lstrip(), lineno))
            elif word == "sleep":
                seconds = float(stripped.split()[1])
                slept += seconds
                steps.append(Step("sleep", lineno, seconds=seconds, source=stripped))
            elif word == "fresh-connection":
                steps.append(Step("fresh-connection", lineno, source=stripped))
            else:
                raise CaseError(f"line {lineno}: unknown directive {word!r}")
        except (ValueError, IndexError) as exc:
            raise CaseError(f"line {lineno}: {exc}") from exc
    if slept > MAX_SLEEP_PER_CASE:
        raise CaseError(f"sleeps add up to {slept}s (limit {MAX_SLEEP_PER_CASE}s)")
    return steps


# --------------------------------------------------------------------------
# Servers
# --------------------------------------------------------------------------

def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def is_memcached(binary):
    """True when `binary` looks like a memcached executable."""
    return Path(binary).name.startswith("memcached")


FLASH_DIR = tempfile.mkdtemp(prefix="tc-differential-")
atexit.register(shutil.rmtree, FLASH_DIR, True)


def server_command(binary, port):
    """The command line that starts `binary` on `port`.

    memcached gets `-U 0` (no UDP), `-o no_lru_maintainer` and, when run as
    root, `-u root` (it refuses to run as root otherwise).  The LRU maintainer
    thread briefly takes references on items, which makes memcached's incr/decr
    randomly allocate a new, unpadded item instead of rewriting the value in
    place; without it the replies are deterministic.  tiercache accepts the
    same core flags.
    """
    cmd = [binary, "-p", str(port), "-l", "127.0.0.1", "-t", "2", "-m", "64"]
    if not is_memcached(binary):
        # A fresh flash file per server: a shared default file would carry a
        # shutdown snapshot (items, CAS counter) from one server to the next.
        cmd += ["-o", f"ext_path={os.path.join(FLASH_DIR, f'flash-{port}')}:256M"]
        # As memcached, tiercache refuses to run as root without -u.
        if os.geteuid() == 0:
            cmd += ["-u", "root"]
    if is_memcached(binary):
        cmd += ["-U", "0", "-o", "no_lru_maintainer"]
        if os.geteuid() == 0:
            cmd += ["-u", "root"]
    return cmd


class Server:
    """A server process started on a free port; use as a context manager."""

    def __init__(self, name, binary):
        self.name = name
        self.binary = binary
        self.port = None
        self.proc = None
        self.log = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        """Start the process and wait until it accepts TCP connections."""
        self.port = free_port()
        cmd = server_command(self.binary, self.port)
        # a file, not a pipe: a chatty server must never block on its stderr
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}: "
                                   f"{shlex.join(cmd)}\n{self.output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not accept TCP within {START_TIMEOUT}s: "
                           f"{shlex.join(cmd)}")

    def stop(self):
        """Kill the process (and its process group) if it is running."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.proc = None
        self.log.close()

    def output(self, limit=2000):
        """The last `limit` bytes the server printed, as text."""
        self.log.seek(0)
        return self.log.read()[-limit:].decode(errors="replace")


# --------------------------------------------------------------------------
# Talking to a server
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Reply:
    """What one step got back: the bytes and how reading ended.

    status is "ok" (sentinel seen), "eof" (connection closed), "timeout"
    (neither within the time limit) or "sent" (a `nowait` step).
    """
    data: bytes
    status: str


class Client:
    """A raw TCP connection to one server that reconnects on demand."""

    def __init__(self, port):
        self.port = port
        self.sock = None

    def connect(self):
        """Open a new connection, closing any old one."""
        self.close()
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=STEP_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self):
        """Close the connection if one is open."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def send(self, data, chunked=False):
        """Send `data`, one byte per write when `chunked`."""
        if not chunked:
            self.sock.sendall(data)
            return
        for i in range(len(data)):
            self.sock.sendall(data[i:i + 1])
            time.sleep(CHUNK_DELAY)

    def read_until(self, done, timeout):
        """Read until done(buffer) is true, EOF, or `timeout` seconds pass."""
        buf = bytearray()
        deadline = time.monotonic() + timeout
        while not done(buf):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return Reply(bytes(buf), "timeout")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 20)
            except socket.timeout:
                return Reply(bytes(buf), "timeout")
            except ConnectionResetError:
                return Reply(bytes(buf), "eof")
            if not chunk:
                return Reply(bytes(buf), "eof")
            buf += chunk
        return Reply(bytes(buf), "ok")


def sentinel_done(expected_mn):
    """A predicate: the buffer ends with MN and holds `expected_mn`+1 MN lines."""
    def done(buf):
        if not buf.endswith(SENTINEL_REPLY):
            return False
        lines = re.findall(rb"(?m)^MN\r\n", bytes(buf))
        return len(lines) >= expected_mn + 1
    return done


def run_send(client, step):
    """Replay one `send` step on `client` and return its Reply."""
    if client.sock is None:
        client.connect()
    chunked = "chunked" in step.options
    try:
        if "nowait" in step.options:
            client.send(step.payload, chunked)
            return Reply(b"", "sent")
        if "close" in step.options:
            client.send(step.payload, chunked)
            reply = client.read_until(lambda buf: False, CLOSE_TIMEOUT)
            client.close()
            return reply
        client.send(step.payload, chunked)
        client.send(SENTINEL)
    except (BrokenPipeError, ConnectionResetError):
        client.close()
        return Reply(b"", "eof")
    reply = client.read_until(sentinel_done(step.mn_count), STEP_TIMEOUT)
    if reply.status != "ok":
        client.close()          # state unknown: start the next step afresh
        return reply
    return Reply(reply.data[:-len(SENTINEL_REPLY)], "ok")


# --------------------------------------------------------------------------
# Opt-in normalisation
# --------------------------------------------------------------------------

META_CODES = {b"VA", b"HD", b"EN", b"NF", b"NS", b"EX", b"MN", b"ME"}


def _normalise_meta_flags(tokens, options):
    """Replace CAS (`c`) and time (`t`, `l`) flag values in meta reply tokens."""
    out = []
    for tok in tokens:
        if "cas" in options and re.fullmatch(rb"c\d+", tok):
            tok = b"c<cas>"
        elif "ttl" in options and re.fullmatch(rb"[tl]\d+", tok):
            tok = tok[:1] + b"<time>"
        out.append(tok)
    return out


def _normalise_line(line, options):
    """Normalise one reply line; return (line, length of a data block that follows)."""
    tokens = line.split(b" ")
    data_len = 0
    if tokens[0] == b"VALUE" and len(tokens) >= 4:
        if tokens[3].isdigit():
            data_len = int(tokens[3])
        if "cas" in options and len(tokens) >= 5 and tokens[4].isdigit():
            tokens[4] = b"<cas>"
    elif tokens[0] in META_CODES:
        if tokens[0] == b"VA" and len(tokens) >= 2 and tokens[1].isdigit():
            data_len = int(tokens[1])
            tokens = tokens[:2] + _normalise_meta_flags(tokens[2:], options)
        else:
            tokens = tokens[:1] + _normalise_meta_flags(tokens[1:], options)
    elif tokens[0] == b"VERSION" and "version" in options:
        tokens = [b"VERSION", b"<version>"]
    return b" ".join(tokens), data_len


def normalise(data, options):
    """Apply the step's opt-in normalisations to a reply, skipping data blocks."""
    if not options & {"cas", "version", "ttl"}:
        return data
    out = bytearray()
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n", pos)
        if end < 0:
            out += data[pos:]
            break
        line, data_len = _normalise_line(data[pos:end], options)
        out += line + b"\r\n"
        pos = end + 2
        if data_len:
            out += data[pos:pos + data_len + 2]
            pos += data_len + 2
    return bytes(out)


# --------------------------------------------------------------------------
# Running cases
# --------------------------------------------------------------------------

@dataclass
class Mismatch:
    """One step whose replies differ."""
    case: str
    step: Step
    reference: Reply
    candidate: Reply


@dataclass
class CaseResult:
    """Outcome of one case file."""
    name: str
    steps: int = 0
    mismatches: list = field(default_factory=list)
    error: str = ""


def short_repr(data):
    """repr() of `data`, cut to REPR_LIMIT bytes with the total length noted."""
    if len(data) <= REPR_LIMIT:
        return repr(data)
    return f"{data[:REPR_LIMIT]!r}... ({len(data)} bytes)"


def first_difference(a, b):
    """Offset of the first differing byte of a and b."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def compare_step(result, step, ref, cand):
    """Record a mismatch if the (normalised) replies of one step differ."""
    if "skip-compare" in step.options:
        return
    ref_n = Reply(normalise(ref.data, step.options), ref.status)
    cand_n = Reply(normalise(cand.data, step.options), cand.status)
    if ref_n != cand_n:
        result.mismatches.append(Mismatch(result.name, step, ref_n, cand_n))


def check_servers(servers, step):
    """Raise if a server process has exited during `step`."""
    for server in servers:
        code = server.proc.poll()
        if code is not None:
            raise RuntimeError(f"{server.name} exited with status {code} "
                               f"during line {step.lineno}\n{server.output()}")


def replay(steps, result, servers, dump=False):
    """Replay `steps` against both servers, filling `result`."""
    clients = [Client(server.port) for server in servers]
    timeouts = 0
    try:
        for step in steps:
            if step.kind == "sleep":
                time.sleep(step.seconds)
                continue
            if step.kind == "fresh-connection":
                for client in clients:
                    client.close()
                continue
            ref, cand = (run_send(client, step) for client in clients)
            result.steps += 1
            if dump:
                print(f"  {result.name}:{step.lineno} {short_repr(step.payload)}\n"
                      f"    -> {short_repr(ref.data)} [{ref.status}]")
            if ref.status == "timeout" and "close" not in step.options:
                raise CaseError(f"line {step.lineno}: memcached's reply did not "
                                f"complete (is the step's data block complete?): "
                                f"{short_repr(ref.data)}")
            compare_step(result, step, ref, cand)
            check_servers(servers, step)
            if cand.status == "timeout" and "close" not in step.options:
                timeouts += 1
                if timeouts >= MAX_CANDIDATE_TIMEOUTS:
                    raise RuntimeError(f"tiercache timed out on {timeouts} steps "
                                       f"(last: line {step.lineno}); rest of case skipped")
    finally:
        for client in clients:
            client.close()


def run_case(path, reference_bin, candidate_bin, dump=False):
    """Run one case file against fresh servers; errors end up in result.error."""
    result = CaseResult(Path(path).name)
    try:
        steps = parse_case(path)
        with Server("memcached", reference_bin) as ref_srv, \
                Server("tiercache", candidate_bin) as cand_srv:
            replay(steps, result, [ref_srv, cand_srv], dump)
    except (CaseError, RuntimeError, OSError) as exc:
        result.error = str(exc)
    return result


def report_mismatch(mismatch):
    """Print one mismatch: case, step, bytes sent and both replies."""
    step = mismatch.step
    ref, cand = mismatch.reference, mismatch.candidate
    print(f"MISMATCH {mismatch.case} line {step.lineno}: {step.source}")
    print(f"  sent:      {short_repr(step.payload)}")
    print(f"  memcached: {short_repr(ref.data)} [{ref.status}]")
    print(f"  tiercache: {short_repr(cand.data)} [{cand.status}]")
    if ref.data != cand.data:
        offset = first_difference(ref.data, cand.data)
        print(f"  first difference at byte {offset}")
        if offset > REPR_LIMIT - DIFF_CONTEXT:
            start = offset - DIFF_CONTEXT
            end = offset + DIFF_CONTEXT
            print(f"  memcached[{start}:{end}]: {ref.data[start:end]!r}")
            print(f"  tiercache[{start}:{end}]: {cand.data[start:end]!r}")


def collect_cases(paths):
    """Expand directories into their sorted *.case files."""
    files = []
    for path in map(Path, paths):
        files.extend(sorted(path.glob("*.case")) if path.is_dir() else [path])
    return files


def parse_args(argv):
    """Command-line arguments."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiercache", required=True, help="server binary under test")
    parser.add_argument("--memcached", default="/usr/bin/memcached",
                        help="reference memcached binary (default: %(default)s)")
    parser.add_argument("--cases", nargs="+", default=[str(HERE / "cases")],
                        help="case files or directories of *.case files")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="announce each case before it runs")
    parser.add_argument("--dump", action="store_true",
                        help="print every step with memcached's reply")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    case_files = collect_cases(args.cases)
    if not case_files:
        print("differential: no case files found", file=sys.stderr)
        return 2
    total_steps = 0
    mismatches = []
    errors = 0
    for path in case_files:
        if args.verbose:
            print(f"running {path.name} ...", flush=True)
        result = run_case(path, args.memcached, args.tiercache, args.dump)
        total_steps += result.steps
        mismatches.extend(result.mismatches)
        status = "ok" if not result.mismatches else f"{len(result.mismatches)} mismatches"
        print(f"case {result.name}: {result.steps} steps, {status}")
        for mismatch in result.mismatches:
            report_mismatch(mismatch)
        if result.error:
            errors += 1
            print(f"ERROR {result.name}: {result.error}")
    summary = f"differential: {len(case_files)} cases, {total_steps} steps, {len(mismatches)} mismatches"
    if errors:
        summary += f", {errors} errors"
    print(summary)
    return 1 if mismatches or errors else 0


if __name__ == "__main__":
    sys.exit(main())
