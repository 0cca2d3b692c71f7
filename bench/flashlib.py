"""The benchmark library under its old name: every helper of bench/lib/ (paths, util, stats,
build, devices, servers, load, report) re-exported, so `import flashlib as fl` keeps working."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from lib.paths import ROOT, TARGET, TIERCACHE, BENCH, READER, MEMCACHED, RESULTS  # noqa: E402,F401
from lib.util import knobs, log, free_port, size_bytes, cpu_ticks, steal_share, workdir, fs_of, machine, commit, now_utc, port_open, cpu_delta, show_cmd  # noqa: E402,F401
from lib.stats import median, fmt_runs  # noqa: E402,F401
from lib.build import build, build_reader  # noqa: E402,F401
from lib.devices import need_fio, fio, reader, spinning_cpu, beside  # noqa: E402,F401
from lib.servers import Cgroup, Server, scratch_server, tiercache_cmd, memcached_cmd  # noqa: E402,F401
from lib.load import bench, latency_bench_cmd, latency_of, value_of, set_keys, get_values, read_once, missing_keys, fill_all  # noqa: E402,F401
from lib.report import SECTION, write_results  # noqa: E402,F401
from lib import paths  # noqa: E402,F401
