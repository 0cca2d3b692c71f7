//! The `stats` keys Debian's memcached 1.6.18 gives and tiercache does not,
//! and the other way round, each with its reason: what `stats_keys.rs`
//! compares the two servers' key sets against, and the keys
//! `stats_exporter.rs` lets the exporter's parse skip.

/// Keys memcached 1.6.18 gives and tiercache does not: (group, keys, why).
pub const ONLY_MEMCACHED: &[(&str, &[&str], &str)] = &[
    ("stats", &["libevent"], "tiercache's event loops are mio (epoll), not libevent"),
    (
        "stats",
        &[
            "response_obj_oom",
            "response_obj_count",
            "response_obj_bytes",
            "read_buf_count",
            "read_buf_bytes",
            "read_buf_bytes_free",
            "read_buf_oom",
        ],
        "memcached's pooled response objects and read buffers; tiercache's buffers belong to \
         their connection and are bounded per connection (README, Connections and their memory)",
    ),
    (
        "stats",
        &[
            "slab_reassign_rescues",
            "slab_reassign_chunk_rescues",
            "slab_reassign_evictions_nomem",
            "slab_reassign_inline_reclaim",
            "slab_reassign_busy_items",
            "slab_reassign_busy_deletes",
            "slab_reassign_running",
            "slabs_moved",
        ],
        "no slab classes, so no page moves between them: memory is taken and reclaimed a segment at a time",
    ),
    (
        "stats",
        &[
            "lru_crawler_running",
            "lru_maintainer_juggles",
            "crawler_items_checked",
            "lrutail_reflocked",
            "moves_to_cold",
            "moves_to_warm",
            "moves_within_lru",
            "direct_reclaims",
            "lru_bumps_dropped",
            "evicted_active",
        ],
        "memcached's segmented LRU with its maintainer and crawler threads; tiercache evicts \
         whole segments by its policy (S3-FIFO by default); its counterpart of the crawler \
         is a once-a-second expiry sweep (lru_crawler_starts, crawler_reclaimed), which \
         does not count the items it checks",
    ),
    (
        "stats",
        &["malloc_fails"],
        "item memory is preallocated segments; a set that finds none counts in store_no_memory",
    ),
    (
        "stats",
        &["unexpected_napi_ids", "round_robin_fallback"],
        "no NAPI-id thread assignment (memcached -o napi_ids)",
    ),
    (
        "stats+flash",
        &["extstore_objects_evicted", "extstore_bytes_evicted"],
        "not counted yet: the flash tier counts the segments it reclaims (extstore_page_evictions), \
         not the items and bytes dropped with them",
    ),
    (
        "stats+flash",
        &["extstore_bytes_used", "extstore_bytes_fragmented"],
        "live bytes per flash segment are not tracked (extstore_objects_used counts the items)",
    ),
    (
        "stats+flash",
        &["get_aborted_extstore", "get_oom_extstore"],
        "a flash read is never abandoned for want of memory: it reads into the worker's own \
         buffers; failed reads count in flash_read_errors",
    ),
    (
        "items",
        &[
            "number_hot",
            "number_warm",
            "number_cold",
            "age_hot",
            "age_warm",
            "hits_to_hot",
            "hits_to_warm",
            "hits_to_cold",
            "hits_to_temp",
            "moves_to_cold",
            "moves_to_warm",
            "moves_within_lru",
            "direct_reclaims",
            "evicted_active",
            "crawler_items_checked",
        ],
        "memcached's segmented LRU (hot, warm, cold, temp) and its crawler; tiercache's \
         segments have no such sub-queues (`age` is the oldest RAM segments' least recent access)",
    ),
    (
        "items",
        &["evicted_nonzero", "evicted_time"],
        "not counted yet: evictions take a segment at a time, and its items' TTLs and last \
         access times are not summed",
    ),
    (
        "settings",
        &[
            "chunk_size",
            "growth_factor",
            "slab_chunk_max",
            "slab_reassign",
            "slab_automove",
            "slab_automove_ratio",
            "slab_automove_window",
            "slab_automove_freeratio",
        ],
        "slab allocator settings: tiercache has one size-independent segment log (segment_size)",
    ),
    (
        "settings",
        &[
            "lru_crawler",
            "lru_crawler_sleep",
            "lru_crawler_tocrawl",
            "lru_maintainer_thread",
            "lru_segmented",
            "hot_lru_pct",
            "warm_lru_pct",
            "hot_max_factor",
            "warm_max_factor",
            "temp_lru",
            "temporary_ttl",
            "tail_repair_time",
            "oldest",
        ],
        "segmented LRU, maintainer and crawler settings (tiercache: eviction_policy)",
    ),
    (
        "settings",
        &[
            "ext_compact_under",
            "ext_drop_under",
            "ext_max_frag",
            "ext_max_sleep",
            "ext_recache_rate",
            "ext_item_age",
        ],
        "extstore compaction and recache tunables: tiercache reclaims whole flash segments \
         and promotes by -o ext_promote",
    ),
    (
        "settings",
        &["worker_logbuf_size"],
        "no per-worker log buffers: `watch` lines go straight into each watcher's \
         bounded buffer (watcher_logbuf_size)",
    ),
    (
        "settings",
        &["reqs_per_event"],
        "tiercache runs every request a read brought (no -R yield; conn_yields is 0)",
    ),
    ("settings", &["num_threads_per_udp"], "no UDP (-U 0 only)"),
    (
        "settings",
        &["inline_ascii_response", "read_buf_mem_limit"],
        "memcached's response buffer internals",
    ),
    (
        "settings",
        &["num_napi_ids", "memory_file"],
        "no NAPI ids; no restartable memory file (tiercache restarts from its snapshot)",
    ),
];

/// Keys tiercache gives and memcached does not: (group, keys, why).
pub const ONLY_TIERCACHE: &[(&str, &[&str], &str)] = &[
    (
        "stats",
        &[
            "tiercache_version",
            "segment_size",
            "segments_allocated",
            "segments_in_use",
            "reinserted",
            "shards",
            "dram_overhead_per_item",
            "conn_output_stalls",
            "flash_reads_ahead",
            "index_*",
            "sla_*",
            "segment_evacuat*",
            "sweep_segments_*",
            "shard_lock_*",
            "malloc_trim*",
        ],
        "tiercache's own figures (README): `version` is the memcached protocol level, \
         `tiercache_version` the server's; index_* describe the compact index; sla_* the \
         SLA view (docs/SLA.md); segment_evacuat* the lock held while a RAM segment \
         leaves; shard_lock_* the shards' lock holds by cause; malloc_trim* the heap given back to the OS (docs/ARCHITECTURE.md)",
    ),
    (
        "stats+flash",
        &["extstore_page_size", "extstore_pages_queued"],
        "the flash segment size and the sealed segments waiting to be written",
    ),
    (
        "stats+flash",
        &["flash_*"],
        "tiercache's flash tier figures (README, The flash tier)",
    ),
    (
        "settings",
        &["interface", "eviction_policy", "segment_size"],
        "`interface` is the name tiercache used before `inter` (kept for dashboards); the \
         policy and the segment size are tiercache's own",
    ),
];

/// The listed keys of `group`; a key ending in `*` is a prefix.
pub fn listed(list: &[(&str, &[&str], &str)], group: &str) -> Vec<String> {
    list.iter()
        .filter(|(g, _, why)| *g == group && !why.is_empty())
        .flat_map(|(_, keys, _)| keys.iter().map(|k| k.to_string()))
        .collect()
}

pub fn covered(patterns: &[String], key: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => p == key,
    })
}
