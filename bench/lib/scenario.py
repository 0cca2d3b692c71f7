"""Scenario files: bench/scenarios/NAME.toml, one per reproducible figure set.

A scenario names what to run and the knobs it takes, with their defaults:

    about = "one line: what the scenario measures"
    script = "flash_fio.py"        # the measuring script under bench/ (.py or .sh)
    results = "### Flash-hit throughput vs fio (4 KiB random reads)"
    [knobs]                        # environment variables the script reads
    QD = 64
    DURATION = 10

A preset names another scenario as its `base` and fixes some of its knobs in a
`[set]` table: the exact run behind a figure in bench/RESULTS.md, as data.

    about = "NHC at 80% hits, Loads 2.0-0.5, 10k/5k"
    base = "nhc_loads"
    [set]
    HIT = "0.80"

`--set KEY=VALUE` (or the same variable in the environment) overrides a knob;
a knob that is neither set nor in the environment keeps the script's own
default, so the command in bench/RESULTS.md reproduces the recorded figure.
"""
import os
import sys
import tomllib

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = os.path.join(BENCH, "scenarios")


def names():
    """Every scenario's name, sorted."""
    return sorted(f[:-5] for f in os.listdir(SCENARIOS) if f.endswith(".toml"))


def load(name):
    """The scenario NAME (or a path to a .toml file) as a dict, checked."""
    path = name if name.endswith(".toml") else os.path.join(SCENARIOS, name + ".toml")
    with open(path, "rb") as f:
        sc = tomllib.load(f)
    sc["name"] = os.path.basename(path)[:-5]
    if "base" in sc:
        base = load(sc["base"])
        sc["script"], sc["knobs"] = base["script"], base["knobs"]
        unknown = set(sc.get("set", {})) - set(base["knobs"]) - set(COMMON)
        if unknown:
            raise SystemExit(f"{path}: [set] {', '.join(sorted(unknown))} not knobs of {sc['base']}")
    sc.setdefault("knobs", {})
    sc["preset"] = {k: str(v) for k, v in sc.pop("set", {}).items()}
    script = os.path.join(BENCH, sc["script"])
    if not os.path.isfile(script):
        raise SystemExit(f"{path}: script {sc['script']} not found")
    sc["path"] = script
    return sc


# Knobs of the library itself (bench/lib/paths.py, lib/util.workdir), valid in every scenario.
COMMON = ("TIERCACHE", "BENCH", "READER", "MEMCACHED", "RESULTS", "FLASH_DIR", "CARGO_TARGET_DIR")


def parse_sets(pairs, sc):
    """`--set KEY=VALUE` pairs as a dict; a key the scenario does not list is
    an error (a typo would otherwise silently measure the default)."""
    out = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep:
            raise SystemExit(f"--set {p}: expected KEY=VALUE")
        if key not in sc["knobs"] and key not in COMMON:
            raise SystemExit(f"--set {key}: not a knob of {sc['name']} ({', '.join(sc['knobs'])})")
        out[key] = value
    return out


def command(sc, extra_args=()):
    """The argv that runs the scenario's script."""
    interp = ["bash"] if sc["path"].endswith(".sh") else [sys.executable]
    return interp + [sc["path"], *extra_args]


def environment(sc, sets):
    """The script's environment: the preset's values, then the caller's
    environment, then `--set` (the later wins)."""
    return {**sc["preset"], **os.environ, **sets}


def plan(sc, sets, extra_args=()):
    """The plan as text: each knob with its value and where it comes from,
    then the command line."""
    lines = [f"scenario {sc['name']}: {sc.get('about', '')}",
             "  results: " + sc.get("results", "(see the script)")]
    for k in COMMON:
        if k in sets or os.environ.get(k):
            lines.append(f"  {k} = {sets.get(k) or os.environ[k]}  (library)")
    for k, default in sc["knobs"].items():
        if k in sets:
            lines.append(f"  {k} = {sets[k]}  (--set)")
        elif os.environ.get(k):
            lines.append(f"  {k} = {os.environ[k]}  (environment)")
        elif k in sc["preset"]:
            lines.append(f"  {k} = {sc['preset'][k]}  (preset)")
        else:
            lines.append(f"  {k} = {default}  (default)")
    lines.append("  run: " + " ".join(command(sc, extra_args)))
    return "\n".join(lines)
