"""Scenario files: bench/scenarios/NAME.toml, one per reproducible figure set.

A scenario names what to run and the knobs it takes, with their defaults:

    about = "one line: what the scenario measures"
    procedure = "nhc_pairs"        # a procedure of bench/lib/procedures/ ...
    script = "flash_fio.py"        # ... or a script under bench/ (.py or .sh)
    results = "### Flash-hit throughput vs fio (4 KiB random reads)"
    [knobs]                        # the knobs and their defaults (environment variables)
    QD = 64
    DURATION = 10

The rest of the file is the procedure's data (servers, phases, columns: see
the procedure's docstring). A knob's default is written here once: a script
or procedure reads it with `knobs(TAG)`, the environment and `--set` override
it.

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
import types

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
        sc = {**base, **sc, "knobs": base["knobs"], "name": sc["name"]}
        unknown = set(sc.get("set", {})) - set(base["knobs"]) - set(COMMON)
        if unknown:
            raise SystemExit(f"{path}: [set] {', '.join(sorted(unknown))} not knobs of {sc['base']}")
    sc.setdefault("knobs", {})
    sc["preset"] = {k: str(v) for k, v in sc.pop("set", {}).items()}
    if "procedure" in sc:
        sc["path"] = os.path.join(BENCH, "lib", "procedures", sc["procedure"] + ".py")
    else:
        sc["path"] = os.path.join(BENCH, sc["script"])
    if not os.path.isfile(sc["path"]):
        raise SystemExit(f"{path}: {sc['path']} not found")
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
    """The argv that runs the scenario's script or procedure (a procedure runs
    as `python3 bench/lib/procedures SCENARIO`: lib/procedures/__main__.py)."""
    if "procedure" in sc:
        return [sys.executable, os.path.dirname(sc["path"]), sc["name"], *extra_args]
    interp = ["bash"] if sc["path"].endswith(".sh") else [sys.executable]
    return interp + [sc["path"], *extra_args]


def knobs(name):
    """The knobs of scenario NAME as a namespace: each knob's value from the
    environment (the runner puts a preset's and `--set`'s values there) or its
    default, converted to the default's type; an empty variable takes the
    default. `shown` is the `NAME=value ...` of the knobs set in the
    environment, for the command in RESULTS.md; `sc` is the scenario itself."""
    sc = load(name)
    ns = types.SimpleNamespace(**{k: type(d)(os.environ.get(k) or d) for k, d in sc["knobs"].items()})
    ns.shown = " ".join(f"{k}={os.environ[k]}" for k in sc["knobs"] if k in os.environ)
    ns.sc = sc
    return ns


def value(expr, k, **more):
    """A data value of a scenario: a string starting with `=` is a Python
    expression over the knobs (`"=FAST_IOPS // 2"`), a string with `{KNOB}`
    is formatted with them, anything else is itself."""
    if isinstance(expr, str) and expr.startswith("="):
        names = {**vars(k), **more, "__builtins__": {"int": int, "float": float, "max": max, "min": min, "sum": sum, "round": round}}
        return eval(expr[1:], names)
    if isinstance(expr, str) and "{" in expr:
        return expr.format(**vars(k), **more)
    if isinstance(expr, list):
        return [value(x, k, **more) for x in expr]
    return expr


def shown(expr, k, **more):
    """value(), or the expression itself where it needs what only a run knows."""
    try:
        return value(expr, k, **more)
    except (NameError, KeyError, TypeError, ValueError, ZeroDivisionError):
        return expr


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
