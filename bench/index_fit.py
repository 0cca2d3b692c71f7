#!/usr/bin/env python3
"""Issue 15: the flash index fits the items actually stored.

Default configuration, no ext_avg_item_size: `tiercache -m 64 -t 2 -o
ext_path=DIR/tc.flash:1G`.

1. Small items: N keys (default 4,000,000) with 100-byte values, set over
   one connection (noreply, then `mn`). Reports refused sets
   (`store_no_memory`), `evictions`, `flash_index_evictions`, the index
   figures, and reads back every STEP-th key checking its value.
2. DRAM per flash-resident item, measured from RSS: for 100-byte and
   4000-byte values, the device filled to about FILLS (10% and 90%), the
   same load into a RAM-only server with the same -m:
       (RSS_flash - RSS_ram) / flash items
   -m covers the index on both, so this is what the flash tier adds beyond
   -m (write buffers, segment table, anything not budgeted); the index's own
   cost, which -m covers, is `index_bytes / index_entries` from stats, shown
   beside it.

3. Drifting sizes: one server, value sizes moving through DRIFT (100 B to
   8 KiB and back); each phase writes new keys for about 70% of the device,
   at most N of them (the 100-byte phases: the N keys of part 1, which the
   index at -m 64 holds; 70% of the device is 5 M such keys, more than the
   index may hold at -m 64, see bench/RESULTS.md),
   then reports refused sets, index size and load, bytes per index entry and
   RSS, and reads back every STEP-th key of the phase checking its value.

Environment: N=4000000 STEP=20 MEM=64 SIZE=1G FILLS=0.1,0.9 PORT=21515
             DRIFT=100,1000,8000,1000,100 PHASES=small,dram,drift
             RESULTS=bench/RESULTS.md (set RESULTS= to skip writing)
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import read_back, set_keys  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.servers import scratch_server, tiercache_cmd  # noqa: E402
from lib.util import flash_record, log, size_bytes  # noqa: E402

TAG = "index_fit"
K = scenario.knobs(TAG)
# The crash journal's share of the device (records on flash: lib.util.flash_record).
JOURNAL_SHARE = 1 / 32


def flash_cmd(d):
    return tiercache_cmd(K.PORT, K.MEM, 2, [f"ext_path={d}/tc.flash:{K.SIZE}"])


def ram_cmd(_d):
    return tiercache_cmd(K.PORT, K.MEM, 2, ["ext_path=none"])


def figures(st):
    keys = ["curr_items", "store_no_memory", "evictions", "flash_index_evictions", "index_bytes",
            "index_entries", "index_load_percent", "flash_index_bytes_per_item", "hash_bytes",
            "extstore_pages_used", "extstore_pages_free"]
    return {k: st.get(k) for k in keys}


def small_items():
    with scratch_server(TAG, "tiercache", flash_cmd, K.PORT) as (srv, shown):
        t = set_keys(K.PORT, range(K.N), 100)
        time.sleep(2)
        st = srv.stats()
        rss = srv.rss()
        sample = range(0, K.N, K.STEP)
        got, bad = read_back(K.PORT, sample, 100)
        return shown, t, st, rss, len(sample), got, bad


def load(make, n, vlen):
    with scratch_server(TAG, "tiercache", make, K.PORT) as (srv, shown):
        set_keys(K.PORT, range(n), vlen)
        time.sleep(2)
        return shown, srv.rss(), srv.stats()


def dram_per_item(vlen, fill):
    klen = len(f"key:{int(1e6)}")
    cap = size_bytes(K.SIZE) * (1 - JOURNAL_SHARE) / flash_record(klen, vlen)[1]
    ram_items = K.MEM * (1 << 20) / (24 + klen + vlen)
    n = int(cap * fill + ram_items)
    shown_f, rss_f, st_f = load(flash_cmd, n, vlen)
    shown_r, rss_r, st_r = load(ram_cmd, n, vlen)
    flash_items = int(st_f.get("extstore_objects_used", 0) or 0)
    per = (rss_f - rss_r) / max(flash_items, 1)
    idx = int(st_f["index_bytes"]) / max(int(st_f["index_entries"]), 1)
    return dict(vlen=vlen, fill=fill, n=n, flash_items=flash_items, rss_flash=rss_f, rss_ram=rss_r,
                per_item=per, index_per_entry=idx, st=figures(st_f), cmd_f=shown_f, cmd_r=shown_r)


def drift():
    """Value sizes moving through K.DRIFT on one server: a row per phase."""
    rows = []
    klen = len(f"key:{int(1e6)}")
    cap = size_bytes(K.SIZE) * (1 - JOURNAL_SHARE)
    with scratch_server(TAG, "tiercache", flash_cmd, K.PORT) as (srv, shown):
        for phase, vlen in enumerate(int(v) for v in K.DRIFT.split(",")):
            n = min(K.N, int(cap * 0.7 / flash_record(klen, vlen)[1]))
            prefix = f"d{phase}:"
            t = set_keys(K.PORT, range(n), vlen, prefix=prefix)
            time.sleep(2)
            st = srv.stats()
            sample = range(0, n, K.STEP)
            got, bad = read_back(K.PORT, sample, vlen, prefix)
            row = dict(phase=phase, vlen=vlen, n=n, t=t, sampled=len(sample), got=got, bad=bad,
                       rss=srv.rss(), st=figures(st))
            log(TAG, f"drift {phase} ({vlen} B): {n:,} sets in {t:.1f} s; read back {got:,} of "
                        f"{len(sample):,}, {bad} wrong; {row['st']}")
            rows.append(row)
    return shown, rows


def main():
    build(TAG)
    phases = K.PHASES.split(",")
    body = [
        header(K),
        "",
    ]
    if "small" in phases:
        body += small_section()
    if "dram" in phases:
        body += dram_section()
    if "drift" in phases:
        body += drift_section()
    write_results("Issue 15: the index fits the items stored (index_fit.py)", "\n".join(body), TAG)


def drift_section():
    shown, rows = drift()
    body = [
        f"Drifting sizes, one server `{shown}`: each phase sets new keys (about 70% of the device, at most N={K.N:,}) "
        f"with the phase's value size; figures after the phase; every {K.STEP}th key of the phase read back.",
        "",
        "| phase | value B | keys set | read back | wrong | `store_no_memory` | `evictions` | `flash_index_evictions` "
        "| `index_entries` | `index_load_percent` | `flash_index_bytes_per_item` | `index_bytes` | RSS MiB |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        f = r["st"]
        body.append(f"| {r['phase']} | {r['vlen']} | {r['n']:,} | {r['got']:,} of {r['sampled']:,} | {r['bad']} | "
                    f"{f['store_no_memory']} | {f['evictions']} | {f['flash_index_evictions']} | {f['index_entries']} | "
                    f"{f['index_load_percent']} | {f['flash_index_bytes_per_item']} | {f['index_bytes']} | "
                    f"{r['rss'] / 2**20:.1f} |")
    return body + [""]


def small_section():
    shown, t, st, rss, sampled, got, bad = small_items()
    f = figures(st)
    log(TAG, f"small items: {K.N:,} sets in {t:.1f} s; {f}; read back {got:,} of {sampled:,}, {bad} wrong")
    return [
        f"- server: `{shown}` (defaults, no ext_avg_item_size)",
        "",
        f"Small items: {K.N:,} keys x 100-byte values set in {t:.1f} s (one connection, noreply):",
        f"`store_no_memory` **{f['store_no_memory']}**, `evictions` {f['evictions']}, "
        f"`flash_index_evictions` {f['flash_index_evictions']}, `curr_items` {f['curr_items']}, "
        f"`index_bytes` {f['index_bytes']}, `index_load_percent` {f['index_load_percent']}, "
        f"`flash_index_bytes_per_item` {f['flash_index_bytes_per_item']}, extstore pages used/free "
        f"{f['extstore_pages_used']}/{f['extstore_pages_free']}, RSS {rss / 2**20:.1f} MiB. "
        f"Read back every {K.STEP}th key: {got:,} of {sampled:,} present, {bad} with a wrong value.",
        "",
    ]


def dram_section():
    rows = []
    for vlen in (100, 4000):
        for fill in [float(x) for x in K.FILLS.split(",")]:
            r = dram_per_item(vlen, fill)
            log(TAG, f"{vlen} B at {fill:.0%}: {r['flash_items']:,} flash items, RSS {r['rss_flash']/2**20:.1f} "
                        f"vs {r['rss_ram']/2**20:.1f} MiB: {r['per_item']:.2f} B/item beyond -m; index "
                        f"{r['index_per_entry']:.2f} B/entry; {r['st']}")
            rows.append(r)
    body = [
        "DRAM per flash-resident item: (RSS of the flash server - RSS of a RAM-only server with the same -m "
        "and the same keys) / flash items; -m covers the index in both, so this is what the flash tier costs "
        "beyond -m. The index itself (inside -m) is `index_bytes / index_entries`.",
        "",
        "| value | device fill | keys set | flash items | RSS flash MiB | RSS RAM-only MiB | B/flash item beyond -m | index B/entry | `flash_index_evictions` | `store_no_memory` |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        body.append(f"| {r['vlen']} | {r['fill']:.0%} | {r['n']:,} | {r['flash_items']:,} | {r['rss_flash']/2**20:.1f} | "
                    f"{r['rss_ram']/2**20:.1f} | {r['per_item']:.2f} | {r['index_per_entry']:.2f} | "
                    f"{r['st']['flash_index_evictions']} | {r['st']['store_no_memory']} |")
    return body + [""]


if __name__ == "__main__":
    main()
