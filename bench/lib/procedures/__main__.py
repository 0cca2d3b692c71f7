"""`python3 bench/lib/procedures SCENARIO`: runs the procedure a scenario names
(bench/run.py does this; the knobs come from the environment)."""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from lib import scenario  # noqa: E402

k = scenario.knobs(sys.argv[1])
sys.exit(importlib.import_module("lib.procedures." + k.sc["procedure"]).main(k))
