"""The benchmark library: scenario files (`scenario.py`) and, for now, the
shared helpers of the measuring scripts in `bench/flashlib.py`."""
