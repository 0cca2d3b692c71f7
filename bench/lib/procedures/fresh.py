"""A fresh server per measurement (or, with `keep`, servers kept across the runs): for
each run, each cell (a workload, a key count...) and each server of the scenario
(their order reversed every other run unless `swap = false`), a server in a scratch
directory, the scenario's steps, and
the figures of the run; a table with a row per cell and server (medians, and the
runs of the first figure) and, with `ratios`, a row of ratios of the medians.

Scenario data (values: see lib.scenario.value; a cell's keys are variables):
    title = "..."           # the RESULTS.md subsection (### in ## Flash tier)
    describe = "..."        # the "- load:" line of the report
    servers = ["a", "b"]    # [server.NAME] tables: lib.servers.from_spec
    swap = true
    keep = false            # true: the servers start once (ports apart), [[setup]] runs once
                            # on each, [[step]] every run of every cell, and a cell's values
                            # may use `med(server, figure, cell)` of the cells before it;
                            # else a fresh server per run and cell runs [[setup]], [[step]]
    [[cell]] name = "...", any other key = a variable of the expressions; `each = "KNOB"`:
                            # a cell per value of that comma-separated knob, as `each`
    [vars] NAME = ...       # more variables, evaluated with the cell's
    [[step]] bench = [...]  # tiercache-bench arguments; `time = "VAR"`: its wall time as VAR;
                            # `until = "STAT"`: repeated until STAT is above 0 (at most until_s;
                            # its time as `time`); `measure = true`: the measured window: `run`
                            # (its runs[0]), `pre` (its preload), `a`, `b` (stats before and
                            # after), `d` (their difference), `window` (seconds)
    [[step]] sleep = S
    [[step]] set = "=N", vlen, prefix   # keys PREFIX0..N-1 set over one connection (noreply)
    [[step]] missing = "=N" # keys key:0..N-1 with a value of `vlen` bytes not there, as `missing`
    [[step]] fill = "=N", vlen, mbs   # keys key:0..N-1 at MBS MB/s, then the missing ones again
                            # (lib.load.fill_all): `fill_s`, `fill_first`, `fill_kept`
    [server.NAME] cgroup = "=LIMIT << 20"   # the server in a memory cgroup of that many bytes
    fail_on = [...]         # stats that must be 0 after the window (and no client errors)
    [[figure]] name, expr, head, fmt      # evaluated after the steps; `end`: `stats` then
    ratios = [["a", "b"]]   # a row "a / b" of the medians' ratios
    notes = [...]           # stats listed for each cell's and server's last run
    summary = "..."         # the closing line(s): `med(server, figure)`, `ratio(a, b, figure)`
    report_when = "=..."    # no report when false (a look at one side)
"""
import contextlib
import os
import time

from lib import report, servers, stats
from lib.build import build
from lib.load import bench, fill_all, missing_keys, set_keys
from lib.scenario import shown, value
from lib.util import log


def variables(k, cell, **more):
    """A cell's variables and the [vars] evaluated with them (MORE: `med` of the cells done)."""
    vs = {key: value(v, k, **more) for key, v in cell.items() if key != "when"}
    vs.update({key: value(v, k, **vs, **more) for key, v in k.sc.get("vars", {}).items()})
    return vs


@contextlib.contextmanager
def started(k, name, vs, tag):
    """The server NAME in a scratch directory (in a memory cgroup of `cgroup`
    bytes if its table says so), its options formatted with the variables VS;
    yields the state the steps share: VS, the server, its port and command line."""
    spec = k.sc["server"][name]
    make = lambda d: servers.from_spec(k, name, d, more=vs)  # noqa: E731
    port = value(spec.get("port", "=PORT"), k)
    cg = servers.Cgroup(f"tiercache-bench-{name}-{os.getpid()}", value(spec["cgroup"], k)) if "cgroup" in spec else None
    try:
        with servers.scratch_server(tag, name, make, port, cgroup=cg) as (srv, line):
            yield dict(vs, srv=srv, port=port, cmd=line, server=name)
    finally:
        if cg is not None:
            cg.remove()


def steps(k, vs, sts, tag):
    for st in sts:
        if "sleep" in st:
            time.sleep(st["sleep"])
        elif "missing" in st:
            vs["missing"] = len(missing_keys(vs["port"], value(st["missing"], k, **vs), value(st["vlen"], k, **vs)))
        elif "fill" in st:
            t, first, kept = fill_all(vs["port"], value(st["fill"], k, **vs), value(st["vlen"], k, **vs),
                                      value(st["mbs"], k, **vs), tag)
            vs.update(fill_s=t, fill_first=first, fill_kept=kept)
        elif "set" in st:
            t = set_keys(vs["port"], range(value(st["set"], k, **vs)), value(st["vlen"], k, **vs),
                         prefix=value(st.get("prefix", "key:"), k, **vs))
            vs[st.get("time", "set_s")] = t
        else:
            vs.update(step(k, vs["srv"], vs["port"], st, vs, tag))


def figures(k, vs, tag):
    """The run's figures, after its steps."""
    vs["end"] = vs["srv"].stats()
    out = {f["name"]: value(f["expr"], k, **vs) for f in k.sc["figure"]}
    out["cmd"], out["stats"] = vs["cmd"], vs["end"]
    log(tag, f"{vs['name']}, {vs['server']}: " + ", ".join(f"{f['name']} {out[f['name']]}" for f in k.sc["figure"]))
    return out


def step(k, srv, port, st, vs, tag):
    args = value(st["bench"], k, **vs)
    timeout = value(st.get("timeout"), k, **vs)
    out, t0 = {}, time.monotonic()
    if "until" in st:
        while srv.stats().get(st["until"], 0) == 0:
            if time.monotonic() - t0 > st.get("until_s", 120):
                raise RuntimeError(f"no {st['until']} after {st.get('until_s', 120)} s")
            bench(port, args, tag, timeout=timeout)
    elif st.get("measure"):
        a, t0 = srv.stats(), time.monotonic()
        r = bench(port, args, tag, timeout=timeout)
        b = srv.stats()
        out = {"a": a, "b": b, "run": (r.get("runs") or [None])[0], "pre": r.get("preload"),
               "window": time.monotonic() - t0,
               "d": {key: stats.delta(a, b, key) for key, x in b.items() if isinstance(x, (int, float))}}
        healthy(k, srv, b, out["run"])
    else:
        r = bench(port, args, tag, timeout=timeout)
        out = {"pre": r.get("preload"), "run": (r.get("runs") or [None])[0]}
    if "time" in st:
        out[st["time"]] = time.monotonic() - t0
    return out


def healthy(k, srv, b, r):
    """Raises (with the tail of the server's log) on anything amiss."""
    bad = [] if srv.alive() else [f"server exited ({srv.proc.returncode})"]
    bad += [f"{s} {b[s]}" for s in k.sc.get("fail_on", []) if b.get(s)]
    if k.sc.get("fail_on") and r and (r["errors"] or r["unanswered"]):
        bad.append(f"client saw {r['errors']} errors, {r['unanswered']} unanswered")
    if bad:
        raise RuntimeError("; ".join(bad) + f"\nlog {srv.log_path}:\n" + open(srv.log_path).read()[-3000:])


def medians(k, runs, names):
    """{(server, figure): the median over the runs} of one cell (a figure that is not a
    number: its last run's)."""
    def mid(xs):
        return stats.median(xs) if all(isinstance(x, (int, float)) for x in xs if x is not None) else xs[-1]
    return {(s, f["name"]): mid([r[f["name"]] for r in runs[s]]) for s in names for f in k.sc["figure"]}


def rows(k, cell, runs, names, med):
    """The table's rows of one cell (a row per server, one per ratio) and its notes."""
    figs = k.sc["figure"]
    fmt = {f["name"]: f.get("fmt", "{:,.0f}") for f in figs}

    def show(x, f):
        return "n/a" if x is None else fmt[f].format(x) if isinstance(x, (int, float)) else str(x)
    first = figs[0]["name"]
    out = [f"| {cell} | {s} | " + " | ".join(show(med[(s, f['name'])], f["name"]) for f in figs) + " | "
           + " / ".join(show(r[first], first) for r in runs[s]) + " |" for s in names]
    for a, b in k.sc.get("ratios", []):
        if a in runs and b in runs:
            out.append(f"| {cell} | **{a} / {b}** | " + " | ".join(
                f"**{med[(a, f['name'])] / med[(b, f['name'])]:.2f}**" if isinstance(med[(a, f["name"])], (int, float))
                and med[(b, f["name"])] else "" for f in figs) + " | |")
    notes = [f"- {cell}, {s}'s last run: " + ", ".join(f"`{n}` {runs[s][-1]['stats'][n]}" for n in k.sc["notes"]
                                                           if n in runs[s][-1]["stats"]) for s in names
             if k.sc.get("notes")]
    return out, notes


def cells(k):
    """The scenario's cells, one per value of the knob a cell's `each` names; those whose
    `when` is false left out."""
    return [{**c, "each": e, "name": value(c["name"], k, each=e)} for c in k.sc["cell"] if value(c.get("when", True), k)
            for e in ([int(x) for x in getattr(k, c["each"]).split(",")] if "each" in c else [None])]


def plan(k):
    """The dry run's lines: the servers, the cells, the steps (with the first cell's variables)."""
    cs = cells(k)
    vs = {key: shown(v, k) for key, v in cs[0].items() if key != "when"}
    vs.update({key: shown(v, k, **vs) for key, v in k.sc.get("vars", {}).items()})
    for s in shown(k.sc["servers"], k):
        yield f"server {s}: {' '.join(map(str, servers.from_spec(k, s, 'DIR', more=vs)))}"
    yield "cells: " + "; ".join(c["name"] for c in cs)
    for st in k.sc.get("setup", []) + k.sc["step"]:
        yield "step: " + ", ".join(f"{key}={shown(v, k, **vs)}" for key, v in st.items())
    yield "figures: " + ", ".join(f["name"] for f in k.sc["figure"])


def main(k):
    tag = k.sc["name"]
    build(tag)
    names = value(k.sc["servers"], k)
    cs = cells(k)
    runs = {c["name"]: {s: [] for s in names} for c in cs}
    meds = {}

    def med(server, fig, cell=None):
        """A figure's median in a cell done (by default the last)."""
        return meds[cell or cs[-1]["name"]][(server, fig)]

    def order(i):
        return names[::-1] if k.sc.get("swap", True) and i % 2 else names
    if k.sc.get("keep"):
        # the servers start once, [[setup]] runs once on each, then every cell's runs on
        # the same servers; a cell's variables may use `med` of the cells before it
        with contextlib.ExitStack() as stack:
            live = {s: stack.enter_context(started(k, s, variables(k, cs[0]), tag)) for s in names}
            for s in names:
                steps(k, live[s], k.sc.get("setup", []), tag)
            for c in cs:
                for s in names:
                    live[s].update(variables(k, c, med=med))
                for i in range(k.RUNS):
                    for s in order(i):
                        steps(k, live[s], k.sc["step"], tag)
                        runs[c["name"]][s].append(figures(k, live[s], tag))
                meds[c["name"]] = medians(k, runs[c["name"]], names)
    else:
        for i in range(k.RUNS):
            for c in cs:
                for s in order(i):
                    with started(k, s, variables(k, c), tag) as vs:
                        steps(k, vs, k.sc.get("setup", []) + k.sc["step"], tag)
                        runs[c["name"]][s].append(figures(k, vs, tag))
        meds.update({c["name"]: medians(k, runs[c["name"]], names) for c in cs})
    if not value(k.sc.get("report_when", True), k):
        return
    figs = k.sc["figure"]
    table = ["| cell | server | " + " | ".join(f["head"] for f in figs) + f" | runs ({figs[0]['head']}) |",
             "| --- | --- | " + "---: | " * len(figs) + "--- |"]
    notes = []
    for c in cs:
        r, n = rows(k, c["name"], runs[c["name"]], names, meds[c["name"]])
        table += r
        notes += n

    def ratio(a, b, fig, cell=None):
        return med(a, fig, cell) / med(b, fig, cell)
    cmds = "\n".join(f"  - {s}: `{runs[cs[0]['name']][s][0]['cmd']}`" for s in names)
    figs = "".join(f"\n  - {f['head']}: `{f['expr'].lstrip('=')}`" for f in k.sc["figure"])
    summary = value(k.sc.get("summary", ""), k, med=med, ratio=ratio, cells=[c["name"] for c in cs])
    body = f"""{report.header(k)}
- servers, {'started once and kept across the cells and runs' if k.sc.get('keep') else 'a fresh one per run and cell'}, in a scratch directory:
{cmds}
- load: {value(k.sc['describe'], k)}; {k.RUNS} runs, servers alternating, medians
- figures (`run`: the measured tiercache-bench run, `d`: `stats` deltas over it, `b`: `stats` at its end):{figs}

{chr(10).join(table)}

{chr(10).join(notes + [''])}{summary}
"""
    report.write_results(value(k.sc["title"], k), body, tag)
