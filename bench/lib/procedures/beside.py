"""Writes beside RAM hits (issues 16 and 31): per run, grid cell and server (servers
alternating), a fresh server in a scratch directory, cold keys prefilled, HOT keys set
and read once (RAM holds them), then for SECS seconds at once, open loop
(tiercache-bench --mode latency, 4 connections each): a writer of sets at the cell's
`rate` and a reader of the hot keys at RRATE. Reported, medians of RUNS runs: the hits'
and the sets' latency, the hot keys' hit share, the scenario's `stats` columns, and
paired ratios of the hits' latency.

Scenario data (values: see lib.scenario.value; `size` and `rate` are the grid cell's
value size and set rate, `dir` the server's scratch directory):
    title = "..."                   # the RESULTS.md subsection (### in ## Flash tier)
    describe = "..."                # the "- per run:" line of the report
    servers = "=SERVERS.split(',')" # the servers compared, in order
    grid = {size = "=[VLEN]", rate = "=[WRATE]"}
    [server.NAME] binary, opts, port (lib.servers.from_spec)
                  fill_opts, restart_opts   # with restart_opts: the prefill runs with
                                    # fill_opts added, then a graceful restart with these
    [prefill] / [hot] how = "preload" (tiercache-bench) | "set" (one connection),
                  prefix, keys, bench = [...] (preload's connections)
    reset = true                    # `stats reset` before the timed phase
    writer = [...], reader = [...]  # tiercache-bench arguments (keys, mix, rate)
    [[column]] stat, head, end (value at the end, else the change), per = "set"
                  (per `cmd_set`), scale, fmt
    ratios = [["a", "b"], ...]      # paired ratios a / b of the hits' p99 and p99.9
    ratios_of = ["reader"]          # and of the sets' ("writer")
    server_side = true              # tiercache servers also serve /metrics (PORT + 1): the
                                    # hot gets' time inside the server (parsed to answered,
                                    # lock waits included), p99 and p99.9 as the histogram's
                                    # bucket bounds: what of the client's tail is the server's
"""
import json
import os
import re
import subprocess
import urllib.request

from lib import report, servers, stats
from lib.build import build
from lib.load import bench, latency_bench_cmd, latency_of, read_once, set_keys
from lib.scenario import shown, value
from lib.util import log


def fill(k, spec, size, tag):
    """Sets the keys of a [prefill] or [hot] table."""
    keys, prefix = value(spec["keys"], k, size=size), spec["prefix"]
    if spec.get("how", "set") == "set":
        t = set_keys(k.PORT, range(keys), size, prefix=prefix)
        log(tag, f"{keys:,} {prefix} keys set in {t:.1f} s")
    else:
        bench(k.PORT, ["--key-prefix", prefix, "--keys", keys, "--value-size", size, "--preload", "--get-ratio", 1,
                       "-d", "0s"] + value(spec.get("bench", []), k), tag, timeout=600)


def metrics_port(k, name):
    """The /metrics port of server NAME when the scenario asks for server-side times
    (tiercache servers only: memcached has no such histogram), else None."""
    if not k.sc.get("server_side") or k.sc["server"][name].get("binary") == "memcached":
        return None
    return value(k.sc["server"][name].get("port", "=PORT"), k) + 1


def hit_histogram(port):
    """The cumulative buckets {upper bound in us: count} of the server's
    `get` RAM hits (tiercache_request_duration_seconds)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for m in re.finditer(r'request_duration_seconds_bucket\{command="get",outcome="ram_hit",le="([^"]+)"\} (\S+)',
                         text):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1)) * 1e6
        out[le] = float(m.group(2))
    return out


def quantile_bound(a, b, q):
    """The bucket bound under which a share Q of the requests between the
    histograms A and B finished (None without requests)."""
    bounds = sorted(b)
    total = b.get(float("inf"), 0) - a.get(float("inf"), 0)
    if total <= 0:
        return None
    for le in bounds:
        if b[le] - a.get(le, 0) >= q * total:
            return le
    return None


def one(k, name, size, rate, tag):
    spec = k.sc["server"][name]
    restart = spec.get("restart_opts")
    mport = metrics_port(k, name)
    side = [f"metrics_port={mport}"] if mport else []
    first = lambda d: servers.from_spec(k, name, d, (spec.get("fill_opts", []) if restart else []) + side)  # noqa: E731
    with servers.scratch_server(tag, name, first, k.PORT) as (srv, line):
        if "prefill" in k.sc:
            fill(k, k.sc["prefill"], size, tag)
        if restart:
            # the fill ran with fill_opts; the measured server restarts gracefully with restart_opts
            srv.stop()
            cmd = servers.from_spec(k, name, srv.cwd, list(restart) + side)
            srv = servers.Server(name + "-measured", cmd, k.PORT, srv.cwd)
            line = servers.show_cmd(cmd, srv.cwd)
        try:
            return measure(k, srv, line, name, size, rate, tag, mport)
        finally:
            srv.stop()


def measure(k, srv, line, name, size, rate, tag, mport=None):
    fill(k, k.sc["hot"], size, tag)
    read_once(k.PORT, k.HOT, prefix=k.sc["hot"]["prefix"])
    if k.sc.get("reset"):
        srv.reset_stats()
    a, ca = srv.stats(), srv.thread_cpu()
    ha = hit_histogram(mport) if mport else None
    wj, rj = os.path.join(srv.cwd, "w.json"), os.path.join(srv.cwd, "r.json")
    writer = subprocess.Popen(latency_bench_cmd(k.PORT, k.SECS, size, value(k.sc["writer"], k, size=size, rate=rate),
                                                wj), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    reader = subprocess.run(latency_bench_cmd(k.PORT, k.SECS, size, value(k.sc["reader"], k, size=size, rate=rate),
                                              rj), capture_output=True, text=True)
    writer.wait(timeout=k.SECS * 3 + 60)
    if reader.returncode or writer.returncode:
        raise RuntimeError(f"tiercache-bench failed: {reader.stderr[-1000:]}")
    b, cb = srv.stats(), srv.thread_cpu()
    hb = hit_histogram(mport) if mport else None
    with open(rj) as f:
        hot = json.load(f)["runs"][0]["hit_ratio"]
    out = {"reader": latency_of(rj, "get_hit"), "writer": latency_of(wj, "set"), "hot_hits": hot, "cmd": line,
           "cmd_set": stats.delta(a, b, "cmd_set"),
           "server": {q: quantile_bound(ha, hb, f) for q, f in (("p99", 0.99), ("p999", 0.999))} if mport else None}
    for c in k.sc.get("column", []):
        x = b.get(c["stat"]) if c.get("end") else stats.delta(a, b, c["stat"])
        if x is not None and c.get("per") == "set":
            x /= max(out["cmd_set"], 1)
        out[c["stat"]] = None if x is None else x * c.get("scale", 1)
    cpu = {n: sum(cb[n]) - sum(ca.get(n, (0, 0))) for n in cb}
    inside = "" if not mport else f" (in the server: p99 <= {out['server']['p99']} us, p99.9 <= {out['server']['p999']} us)"
    log(tag, f"{name} {size} B, {rate:,} sets/s: hits p99 {out['reader']['p99']:,.0f} us p99.9 "
             f"{out['reader']['p999']:,.0f} us{inside}, sets p99 {out['writer']['p99']:,.0f} us, hot hits {hot:.4f}; "
        + ", ".join(f"{c['stat']} {out[c['stat']]}" for c in k.sc.get("column", []))
        + "; CPU s by thread " + ", ".join(f"{n} {c:.2f}" for n, c in sorted(cpu.items()) if c > 0.01))
    return out


def table(k, runs, names):
    m = stats.median
    cols = k.sc.get("column", [])
    side = bool(k.sc.get("server_side"))
    rows = ["| server | hits/s | hits p50 | p99 | p99.9 | max | sets/s | sets p50 | p99 | p99.9 | hot-key hits | "
            + ("hits in the server p99 / p99.9 | " if side else "")
            + "".join(f"{c['head']} | " for c in cols) + "runs' hit p99 |",
            "| --- | " + "---: | " * (10 + side + len(cols)) + "--- |"]
    for s in names:
        rs = runs[s]
        cells = [f"{m([r['reader'][q] for r in rs]):,.0f}" for q in ("ops", "p50", "p99", "p999", "max")]
        cells += [f"{m([r['writer'][q] for r in rs]):,.0f}" for q in ("ops", "p50", "p99", "p999")]
        cells.append(f"{100 * m([r['hot_hits'] for r in rs]):.2f}%")
        if side:
            inside = [r["server"] for r in rs if r.get("server")]
            cells.append(" / ".join(f"<= {m([x[q] for x in inside]):,.0f}" for q in ("p99", "p999"))
                         if inside and None not in (m([x[q] for x in inside]) for q in ("p99", "p999")) else "")
        for c in cols:
            x = m([r[c["stat"]] for r in rs])
            cells.append("" if x is None else c.get("fmt", "{:,.0f}").format(x))
        rows.append(f"| {s} | " + " | ".join(cells) + f" | {stats.fmt_runs([r['reader']['p99'] for r in rs])} |")
    return rows


def ratios(k, runs):
    said = []
    for a, b in k.sc.get("ratios", []):
        if runs.get(a) and runs.get(b):
            for who in k.sc.get("ratios_of", ["reader"]):
                p99, p999 = (stats.paired(runs[b], runs[a], lambda x: max(1, x[who][q]))[0] for q in ("p99", "p999"))
                said.append(f"{a} / {b}{'' if who == 'reader' else ' (sets)'}: p99 **{p99:.2f}x**, p99.9 {p999:.2f}x")
    return "; ".join(said) or "n/a"


def plan(k):
    """The dry run's lines: the servers' command lines, the grid, the loads."""
    for s in shown(k.sc["servers"], k):
        yield f"server {s}: {' '.join(map(str, shown_cmd(k, s)))}"
    yield f"grid: sizes {shown(k.sc['grid']['size'], k)}, set rates {shown(k.sc['grid']['rate'], k)}"
    for w in ("writer", "reader"):
        yield f"{w}: {shown(k.sc[w], k, size='SIZE', rate='RATE')}"


def shown_cmd(k, s):
    try:
        return servers.from_spec(k, s, "DIR")
    except SystemExit as e:
        return [str(e)]


def main(k):
    tag = k.sc["name"]
    build(tag)
    names = value(k.sc["servers"], k)
    grid = [(size, rate) for size in value(k.sc["grid"]["size"], k) for rate in value(k.sc["grid"]["rate"], k)]
    runs = {}
    for i in range(k.RUNS):
        for size, rate in grid:
            for s in names if i % 2 == 0 else names[::-1]:
                runs.setdefault((size, rate), {}).setdefault(s, []).append(one(k, s, size, rate, tag))
    parts = []
    for size, rate in grid:
        cell = runs[(size, rate)]
        parts.append(f"#### {size}-byte values, {rate:,} sets/s beside {k.RRATE:,} hot gets/s\n\n"
                     + "\n".join(table(k, cell, names))
                     + f"\n\nPaired per run, medians of the ratios of the latency: {ratios(k, cell)}.\n")
    cmds = "\n".join(f"  - {s}: `{runs[grid[0]][s][0]['cmd']}`" for s in names)
    cols = ("\n  - hits in the server: the hot gets' time from parsed to answered (lock waits included), "
            "from tiercache's /metrics histogram (`tiercache_request_duration_seconds`, get, ram_hit), "
            "as the bound of the bucket that holds the quantile" if k.sc.get("server_side") else "")
    cols += "".join(f"\n  - {c['head']}: `{c['stat']}`" + (" at the end" if c.get("end") else " in the window")
                   + (" per set" if c.get("per") else "") for c in k.sc.get("column", []))
    body = f"""{report.header(k)}
- servers, a fresh one per run, in a scratch directory:
{cmds}
- per run: {value(k.sc['describe'], k)}; latency in microseconds, medians of {k.RUNS} runs, servers alternating
- columns:{cols or ' -'}

{chr(10).join(parts)}"""
    report.write_results(value(k.sc["title"], k), body, tag)
