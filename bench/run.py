#!/usr/bin/env python3
"""One runner for every benchmark: `python3 bench/run.py SCENARIO [--set KEY=VALUE ...]`.

SCENARIO is a file bench/scenarios/SCENARIO.toml (see bench/lib/scenario.py).
Arguments after `--` go to the script. `--dry-run` prints the plan (knobs, their values and
sources, the command; for a procedure its servers and steps) and runs nothing; `--list` lists
the scenarios and what runs them; `--check` makes every scenario's plan with its defaults (a
typo in a TOML shows there). Knobs may also be given as environment variables, as the
commands in bench/RESULTS.md do.
"""
import argparse
import importlib
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.args = argv[cut + 1:]
    if a.check:
        return check()
    if a.list or not a.scenario:
        for n in scenario.names():
            sc = scenario.load(n)
            what = sc.get("procedure") or sc.get("script")
            print(f"{n:22} {what:22} {sc.get('about', '')}")
        return 0
    sc = scenario.load(a.scenario)
    sets = scenario.parse_sets(a.set, sc)
    print(scenario.plan(sc, sets, a.args), file=sys.stderr, flush=True)
    if a.dry_run:
        if "procedure" in sc:
            # the procedure's own plan, with the knobs as the run would see them
            os.environ.update(scenario.environment(sc, sets))
            for line in procedure_plan(sc):
                print("  " + line, file=sys.stderr)
        return 0
    env = scenario.environment(sc, sets)
    return subprocess.call(scenario.command(sc, a.args), env=env)


def procedure_plan(sc):
    return importlib.import_module("lib.procedures." + sc["procedure"]).plan(scenario.knobs(sc["name"]))


def check():
    """Every scenario's plan with its defaults (and a preset's values); 1 if any fails."""
    bad = 0
    for n in scenario.names():
        try:
            sc = scenario.load(n)
            scenario.plan(sc, {})
            if "procedure" in sc:
                saved = dict(os.environ)
                os.environ.update(sc["preset"])
                try:
                    lines = list(procedure_plan(sc))
                finally:
                    os.environ.clear()
                    os.environ.update(saved)
            print(f"ok  {n}" + (f" ({len(lines)} plan lines)" if "procedure" in sc else ""))
        except (Exception, SystemExit) as e:  # noqa: BLE001: a scenario's error is the check's result
            bad += 1
            print(f"BAD {n}: {type(e).__name__}: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
