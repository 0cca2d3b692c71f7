"""`ext_nhc=1` against `ext_nhc=0` (classic caching) on two throttled loop devices
(issue 17; lib/classes.py): per run and setting a fresh server on the wiped devices,
KEYS items of VALUE bytes preloaded, then the scenario's phases in order; nhc=0 and
nhc=1 alternate (classic first), RUNS times; a table of paired ratios per phase.

Scenario data (values: see lib.scenario.value):
    title = "..."                 # the RESULTS.md subsection, before "(date, commit)"
    load = "..."                  # the "- load:" line of the report
    dist = "=f'zipf:{SKEW}'"      # the keys' distribution
    fast_mb = "=FAST_MB"          # the fast device's size
    trace = "nhc-loads"           # TRACE_DIR's CSV names
    [server] pool = true, ext_to = "nhc"     # lib.classes.start_server
    [[phase]]                     # one measured phase
    name, threads, conns, pipeline (closed loop) or rate (open loop), secs,
    warm_s (not measured, the same load first), settle_s (open loop: measured
    after it, per-second figures), when (skipped if false), pause_s,
    calibrate = "KNOB" (sets the knob to the first run's gets/s if 0),
    each = "KNOB" (one phase per value of that comma-separated knob, as `each`)
"""
import os
import time

from lib import classes, stats
from lib.build import build
from lib.scenario import shown, value
from lib.util import commit, flash_dir, fs_of, log, machine, now_utc


def phases(k):
    """The phases in order, each evaluated when it starts (a rate may use a
    knob an earlier phase calibrated); those whose `when` is false left out."""
    for p in k.sc["phase"]:
        if value(p.get("when", True), k):
            for each in [float(x) for x in getattr(k, p["each"]).split(",")] if "each" in p else [None]:
                yield {key: value(v, k, each=each) for key, v in p.items() if key not in ("each", "when")}


def seed(k, i, measured):
    """tiercache-bench's `--seed` for phase I's warm-up or measured run: a
    run with the same seed and connections replays the same gets, so with
    one seed for all (the default, 1, before 2026-12-07) each phase began by
    replaying the previous one's: classic caching had promoted its capacity
    items already, and at Load 2.0 served half its gets from write buffers
    that the replay left unsealed (bench/RESULTS.md, "Issue 35, third
    session"). The same for both servers of a pair. ONE_SEED=1 gives the
    old replay, for comparison."""
    return 1 if getattr(k, "ONE_SEED", 0) else 2 * i + 2 + int(measured)


def run_phase(srv, k, p, keys, tag, i=0):
    load = keys + ["--threads", p["threads"], "--conns", p["conns"]]
    load += ["--mode", "latency", "--rate", int(p["rate"])] if "rate" in p else ["--pipeline", p["pipeline"]]
    if p.get("warm_s"):
        classes.bench(k.PORT, load + ["--seed", seed(k, i, False), "-d", f"{p['warm_s']}s", "--no-stats"], tag)
    keys = keys + ["--seed", seed(k, i, True)]
    if p.get("settle_s") is not None:
        r = classes.settled(srv, keys + ["--threads", p["threads"], "--conns", p["conns"]], p["rate"],
                            p["settle_s"], p["secs"], tag)
    else:
        load += ["--seed", seed(k, i, True)]
        r = classes.measure(srv, load, p["secs"], tag)
    if "rate" in p:
        r["offered"] = p["rate"]
    return r


def one_run(devs, cg, nhc, d, k, tag):
    srv, line = classes.start_server(devs, cg, nhc, d, k, **k.sc.get("server", {}))
    try:
        with classes.traced(srv, getattr(k, "TRACE_DIR", ""), k.sc.get("trace", tag), nhc):
            classes.preload(k.PORT, k.KEYS, k.VALUE, tag)
            keys = ["--keys", k.KEYS, "--value-size", k.VALUE, "--dist", value(k.sc["dist"], k), "--get-ratio", "1"]
            out = {}
            for i, p in enumerate(phases(k)):
                out[p["name"]] = r = run_phase(srv, k, p, keys, tag, i)
                if p.get("calibrate") and not getattr(k, p["calibrate"]):
                    setattr(k, p["calibrate"], r["ops"])
                    log(tag, f"{p['calibrate']} = {r['ops']:,.0f} gets/s (classic, {p['name']}; fast "
                             f"{r['fast']:,.0f} reads/s, hit {r['hit']:.3f})")
                time.sleep(p.get("pause_s", 0))
            return out, line
    finally:
        srv.stop()


def plan(k):
    """The dry run's lines: the server and the phases."""
    yield f"fast device: {shown(k.sc.get('fast_mb', '=FAST_MB'), k)} MiB"
    yield "server (nhc=1): " + " ".join(classes.server_cmd(("FAST", "CAP"), 1, k, **k.sc.get("server", {})))
    for p in k.sc["phase"]:
        yield "phase: " + ", ".join(f"{key}={shown(v, k, each='EACH')}" for key, v in p.items())


def main(k):
    tag = k.sc["name"]
    classes.check_root(tag)
    build(tag)
    try:
        fast_mb = value(k.sc.get("fast_mb", "=FAST_MB"), k)
    except (KeyError, ValueError) as e:
        classes.skip(tag, f"no fast device size ({e}): set FAST_MB")
    res, cmds, loadavg = {0: [], 1: []}, {}, []
    with classes.loop_devices(tag, fast_mb, k.CAP_MB, k.FAST_IOPS, k.CAP_IOPS) as (loops, cg, d):
        for run in range(k.RUNS):
            for nhc in (0, 1):
                loadavg.append(os.getloadavg()[0])
                r, cmds[nhc] = one_run(loops, cg, nhc, d, k, tag)
                loadavg.append(os.getloadavg()[0])
                res[nhc].append(r)
                log(tag, f"run {run + 1} nhc={nhc}: " + "; ".join(
                    f"{n} {x['ops']:,.0f} gets/s" + (f"/{x['offered']:,.0f}" if "offered" in x else "")
                    + f" (fast {x['fast']:,.0f}, cap {x['cap']:,.0f}, hit {x['hit']:.3f}, la {x['la']}, state "
                      f"{x['state']}, copies {x['copies']}, gets/s from RAM {x['get_hits'] - x['flash_hits']:,.0f}, "
                      f"flash {x['flash_hits']:,.0f} ({x['buffer']:,.0f} from write buffers: fast {x['buffer_fast']:,.0f}, "
                      f"capacity {x['buffer_cap']:,.0f}, open {x['buffer_open']:,.0f}; "
                      f"{x['promoted']:,.0f} promoted, {x['promotions_refused']:,.0f} refused), misses {x['misses']:,.0f}, p50 {x['p50']} p99 {x['p99']} us)" for n, x in r.items()))
    report(k, res, cmds, fast_mb, loadavg)


def report(k, res, cmds, fast_mb, loadavg):
    med = stats.median
    c0 = [r for r in res[0][0]]
    hit = med([r[c0[0]]["hit"] for r in res[0]])
    print(f"\n### {value(k.sc['title'], k)} ({now_utc()}, {commit()})\n")
    print(f"- machine: {machine()}; load average {min(loadavg):.1f}-{max(loadavg):.1f} during the runs")
    print(f"- devices: loop files over {fs_of(flash_dir())}, `losetup --direct-io=on`, fast {fast_mb} MiB "
          f"at {k.FAST_IOPS}, capacity {k.CAP_MB} MiB at {k.CAP_IOPS} reads/s (cgroup v1 "
          f"`blkio.throttle.read_iops_device`); classic fast hit ratio {hit:.3f} ({c0[0]}, median)")
    print(f"- server (nhc=1): `{cmds.get(1)}`")
    print(f"- load: {value(k.sc['load'], k)}; {k.RUNS} pairs, nhc=0 and 1 alternating")
    print(f"- command: `sudo {k.shown + ' ' if k.shown else ''}python3 bench/run.py {k.sc['name']}`\n")
    print("| load | offered gets/s | classic gets/s | nhc gets/s | nhc/classic (paired median) | pairs | "
          "classic fast / capacity reads/s (hit) | nhc fast / capacity reads/s | nhc load_admit, state | "
          "nhc copies made |")
    print("| --- | ---: | ---: | ---: | ---: | --- | --- | --- | --- | --- |")
    for name in c0:
        c = [r[name] for r in res[0]]
        n = [r[name] for r in res[1]]
        ratio, pairs = stats.paired(c, n, lambda x: x["ops"])
        off = f"{c[0]['offered']:,.0f}" if "offered" in c[0] else "-"
        print(f"| {name} | {off} | {med([x['ops'] for x in c]):,.0f} | {med([x['ops'] for x in n]):,.0f} | "
              f"{ratio:.2f} | {' / '.join(f'{p:.2f}' for p in pairs)} | "
              f"{med([x['fast'] for x in c]):,.0f} / {med([x['cap'] for x in c]):,.0f} "
              f"({med([x['hit'] for x in c]):.2f}) | "
              f"{med([x['fast'] for x in n]):,.0f} / {med([x['cap'] for x in n]):,.0f} | "
              f"{', '.join(str(x['la']) for x in n)}; {', '.join(str(x['state']) for x in n)} | "
              f"{', '.join(str(x['copies']) for x in n)} |")
    for name in c0:
        p = [[r[name] for r in res[nhc]] for nhc in (0, 1)]
        if "offered" in p[0][0] or name == "light":
            q = {f"{w}{nhc}": med([x[w] for x in p[nhc]]) for w in ("p50", "p99") for nhc in (0, 1)}
            q = {w: "n/a" if x is None else f"{x:,.0f}" for w, x in q.items()}
            print(f"\n{name}: get latency p50 {q['p500']} / {q['p501']} us, p99 {q['p990']} / {q['p991']} us "
                  "(classic / nhc, medians)", end="")
    print(f"\n\nCeiling: {(k.FAST_IOPS + k.CAP_IOPS) / k.FAST_IOPS:.2f}x (both devices busy against the fast one "
          "alone).")
