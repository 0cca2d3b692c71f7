#!/usr/bin/env python3
"""DRAM bytes per flash-resident item, measured from RSS.

Method: two tiercache servers that differ only in the size of their flash
file (SMALL and LARGE; ext_avg_item_size set to the record size so the index
is sized for a full device, as an operator would). -m covers the index, so
each gets -m = MEM + its index size (read from `hash_bytes` at start): the RAM
tiers are the same size. Each gets
more small items (KEY + VALUE bytes) than its flash holds, so that both RAM
tiers are full and both flash files are full (FIFO reclaim running). The RAM
tiers, write buffers, code and connections are then the same in both, and

    DRAM per flash item = (RSS_large - RSS_small) / (flash items_large - flash items_small)

is what each additional flash-resident item costs in DRAM (index entries,
per-segment metadata, anything else that grows with the flash tier).

Also reported, for the large server, the simple method: (RSS at the end - RSS
when the RAM tier had just filled) / items that went to flash in between; the
index is allocated and zeroed for the full device at start, so it is in RSS
before the first item and this one undercounts.

Environment: SMALL=256M LARGE=1G MEM=64 VALUE=100 RUNS=3 OVERFILL=1.2
             RESULTS=bench/RESULTS.md
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scenario  # noqa: E402
from lib.build import build  # noqa: E402
from lib.load import bench  # noqa: E402
from lib.report import header, write_results  # noqa: E402
from lib.servers import scratch_server, tiercache_cmd  # noqa: E402
from lib.stats import fmt_runs, med_of, median  # noqa: E402
from lib.util import flash_record, log, size_bytes  # noqa: E402

TAG = "flash_dram"
K = scenario.knobs(TAG)
SMALL, LARGE, MEM, VALUE, RUNS, OVERFILL, PORT = K.SMALL, K.LARGE, K.MEM, K.VALUE, K.RUNS, K.OVERFILL, K.PORT


def fill(srv, first, n, klen_hint):
    """Writes keys first..first+n-1 with tiercache-bench (8 connections)."""
    bench(srv.port, ["--threads", 2, "--conns", 4, "--keys", first + n, "--value-size", VALUE,
                        "--preload", "--get-ratio", 1, "-d", "0s", "--no-stats",
                        "--drain-timeout", "120s"], TAG)


def settle(srv):
    time.sleep(1.5)
    return srv.rss(), srv.stats()


def index_mib(flash_size, avg):
    """hash_bytes of a server with this flash tier, in MiB (the index is
    allocated for the full device at start)."""
    make = lambda d: tiercache_cmd(PORT, MEM + 1024, 2, [f"ext_path={d}/tc.flash:{flash_size}",  # noqa: E731
                                                            f"ext_avg_item_size={avg}"])
    with scratch_server(TAG, "tiercache", make, PORT) as (srv, _):
        return -(-srv.stats()["hash_bytes"] // (1 << 20))


def one(flash_size, avg):
    # -m covers the index: give each server MEM MiB plus its index, so that
    # the RAM tiers are the same size whatever the flash size
    m = MEM + index_mib(flash_size, avg)
    make = lambda d: tiercache_cmd(PORT, m, 2, [f"ext_path={d}/tc.flash:{flash_size}",  # noqa: E731
                                                   f"ext_avg_item_size={avg}"])
    with scratch_server(TAG, "tiercache", make, PORT) as (srv, shown):
        rss0, st0 = settle(srv)
        # 1) fill the RAM tier until items start going to flash
        ram_items = MEM * (1 << 20) // (24 + 12 + VALUE)
        bench(srv.port, ["--threads", 2, "--conns", 4, "--keys", ram_items, "--key-prefix", "r:",
                            "--value-size", VALUE, "--preload", "--get-ratio", 1, "-d", "0s",
                            "--no-stats"], TAG)
        rss1, st1 = settle(srv)
        # 2) more items than the flash holds
        n = int(size_bytes(flash_size) / avg * OVERFILL)
        t0 = time.monotonic()
        fill(srv, 0, n, None)
        rss2, st2 = settle(srv)
        res = {"rss0": rss0, "rss1": rss1, "rss2": rss2,
               "flash1": st1.get("extstore_objects_used", 0), "flash2": st2.get("extstore_objects_used", 0),
               "items2": st2.get("curr_items", 0), "hash_bytes": st2.get("hash_bytes"),
               "index_per_item": st2.get("flash_index_bytes_per_item"),
               "reclaims": st2.get("extstore_page_reclaims", 0), "fill_s": time.monotonic() - t0,
               "pages_used": st2.get("extstore_pages_used"), "pages_free": st2.get("extstore_pages_free"),
               "rec_bytes": st2.get("extstore_bytes_written", 0) / max(1, st2.get("extstore_objects_written", 1)),
               "written": n + ram_items, "m": m, "segs": st2.get("segments_allocated"),
               "cmd": shown}
        log(TAG, f"flash {flash_size}: RSS {rss0 >> 20} -> {rss1 >> 20} (RAM full, {res['flash1']:,} on flash) -> "
               f"{rss2 >> 20} MiB with {res['flash2']:,} on flash, {res['items2']:,} items, hash_bytes "
               f"{res['hash_bytes']}, page reclaims {res['reclaims']}, pages used {res['pages_used']} free {res['pages_free']}, "
               f"device bytes per object written {res['rec_bytes']:.1f}, {res['fill_s']:.0f} s")
        return res


def main():
    build(TAG)
    klen = len("key:") + len(str(int(size_bytes(LARGE) / 100 * OVERFILL)))
    rec, avg = flash_record(klen, VALUE)
    avg_i = int(round(avg))
    smalls, larges, per = [], [], []
    for run in range(RUNS):
        s = one(SMALL, avg_i)
        g = one(LARGE, avg_i)
        smalls.append(s)
        larges.append(g)
        p = (g["rss2"] - s["rss2"]) / max(1, g["flash2"] - s["flash2"])
        per.append(p)
        log(TAG, f"run {run + 1}: {p:.2f} B of DRAM per flash item")
    simple = [(g["rss2"] - g["rss1"]) / max(1, g["flash2"] - g["flash1"]) for g in larges]
    m = med_of
    p = median(per)
    verdict = "met" if p <= 8 else "not met"
    body = f"""{header(K)}
- servers: `{larges[0]['cmd']}` and `{smalls[0]['cmd']}` (-m = {MEM} MiB for the RAM tier + the index, which -m covers and which is allocated for the full device at start: the RAM tiers are the same size, {m('segs', smalls):.0f} and {m('segs', larges):.0f} segments allocated at the end); items of a {klen}-byte key and a {VALUE}-byte value ({rec} B records, {avg:.1f} B each on flash with block padding, hence `ext_avg_item_size={avg_i}`)
- fill: {MEM} MiB worth of other keys first (the RAM tier full: RSS_before), then {OVERFILL}x as many items as the flash file holds, with `tiercache-bench --preload` (8 connections); RSS from /proc/PID/status after 1.5 s; {RUNS} runs, medians
- method: two servers that differ only in flash size (and in -m by their index size), both with RAM and flash full: (RSS_large - RSS_small) / (flash items_large - flash items_small), which cancels the RAM tier, buffers and fixed costs and counts everything that grows with the flash tier (index sized for the full device, segment metadata)

| flash file | RSS MiB, empty | RSS MiB, RAM tier full | RSS MiB, end | items on flash at the end | `hash_bytes` | stats `flash_index_bytes_per_item` |
| --- | ---: | ---: | ---: | ---: | ---: | ---: |
| {SMALL} | {m('rss0', smalls) / 2**20:.1f} | {m('rss1', smalls) / 2**20:.1f} | {m('rss2', smalls) / 2**20:.1f} | {m('flash2', smalls):,.0f} | {m('hash_bytes', smalls):,.0f} | {m('index_per_item', smalls)} |
| {LARGE} | {m('rss0', larges) / 2**20:.1f} | {m('rss1', larges) / 2**20:.1f} | {m('rss2', larges) / 2**20:.1f} | {m('flash2', larges):,.0f} | {m('hash_bytes', larges):,.0f} | {m('index_per_item', larges)} |

DRAM per flash item, two-size difference: {fmt_runs(per, '{:.2f}')}; median **{p:.2f} B** (target <= 8 B: **{verdict}**).
Simple method on the {LARGE} server, (RSS_end - RSS_RAM_full) / flash items added: {fmt_runs(simple, '{:.2f}')} B (undercounts: the index for the whole device is allocated and zeroed at start, so it is in RSS before the first item; compare "RSS MiB, empty" of the two sizes).
Flash space: on the {LARGE} file {m('flash2', larges):,.0f} records of {avg:.1f} B are {m('flash2', larges) * avg / 1e6:,.0f} MB in {m('pages_used', larges):.0f} segments of 4 MiB ({m('flash2', larges) * avg / (m('pages_used', larges) * 4 * 2**20):.0%} full), so the index sized for a full device holds about half the items it was sized for.
Index alone: `hash_bytes` difference / flash item difference = {(m('hash_bytes', larges) - m('hash_bytes', smalls)) / max(1, m('flash2', larges) - m('flash2', smalls)):.2f} B.
"""
    print(body)
    write_results("DRAM bytes per flash item (from RSS)", body, TAG)


if __name__ == "__main__":
    main()
