"""Writing a subsection of the "## Flash tier" section of bench/RESULTS.md."""
import os

from . import paths
from .util import commit, log, machine, now_utc


SECTION = "## Flash tier"


def header(k, more=""):
    """A report's first lines: the command that reproduces it (the knobs set, K.shown),
    the date, the commit and the machine (then MORE)."""
    return (f"- command: `{k.shown + ' ' if k.shown else ''}python3 bench/run.py {k.sc['name']}`\n"
            f"- date: {now_utc()}; commit {commit()}; machine: {machine()}{more}")


def write_results(subsection_title, body, tag):
    """Replaces (or appends) `### subsection_title` inside `## Flash tier` of
    RESULTS.md, leaving everything else intact; with RESULTS=- prints it."""
    block = f"### {subsection_title}\n\n{body.rstrip()}\n\n"
    if paths.RESULTS == "-":
        print(block, end="", flush=True)
        return
    text = open(paths.RESULTS).read() if os.path.exists(paths.RESULTS) else "# Benchmark results\n"
    lines = text.splitlines(keepends=True)
    # locate the flash section
    start = next((i for i, l in enumerate(lines) if l.rstrip() == SECTION), None)
    if start is None:
        if not text.endswith("\n\n"):
            text = text.rstrip("\n") + "\n\n"
        text += (f"{SECTION}\n\nScripts `bench/flash_*.py` (see bench/README.md), one command "
                 "each; every figure below is a median of runs made side by side on the same "
                 "machine in one invocation.\n\n" + block)
        open(paths.RESULTS, "w").write(text)
        log(tag, f"wrote {paths.RESULTS} ({SECTION} / {subsection_title})")
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
    open(paths.RESULTS, "w").write(out.rstrip("\n") + "\n")
    log(tag, f"wrote {paths.RESULTS} ({SECTION} / {subsection_title})")
