"""The benchmark library, one module per job (paths, util, stats, build, devices,
throttle, servers, load, report) and the scenario files' loader (scenario);
bench/flashlib.py re-exports the helpers under their old names."""
