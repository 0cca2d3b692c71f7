"""Procedures: the measurement loops that scenarios name (`procedure = "NAME"`),
each a module with `main(k)`, `k` the scenario's knobs (lib.scenario.knobs) whose
`sc` is the scenario's data."""
