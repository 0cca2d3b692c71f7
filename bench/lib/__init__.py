"""The benchmark library, one module per job (paths, util, stats, build, devices,
throttle, classes, servers, load, report), the scenario files' loader (scenario) and
the procedures that scenarios name (procedures/); bench/README.md lists them."""
