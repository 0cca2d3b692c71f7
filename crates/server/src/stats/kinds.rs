//! Which `stats` lines count up (Prometheus counters) and which are levels
//! (gauges), and the metric name and unit each is exported under. Written
//! once here so that `/metrics` types every stat the way Prometheus expects
//! (`promtool check metrics`: counters end in `_total`, units are base
//! units, no `_sum` outside histograms). A stat not listed is a gauge.

/// The `stats` names that only count up (until `stats reset` or a restart,
/// which Prometheus's `rate()` treats as a counter reset). The per-class
/// flash lines (`flash_fast_*`, `flash_capacity_*`) are listed by their
/// suffix in [`CLASS_COUNTERS`].
pub const COUNTERS: &[&str] = &[
    // memcached's general stats.
    "auth_cmds",
    "auth_errors",
    "bytes_read",
    "bytes_written",
    "cas_badval",
    "cas_hits",
    "cas_misses",
    "cmd_flush",
    "cmd_get",
    "cmd_meta",
    "cmd_set",
    "cmd_touch",
    "conn_yields",
    "crawler_reclaimed",
    "decr_hits",
    "decr_misses",
    "delete_hits",
    "delete_misses",
    "evicted_unfetched",
    "evictions",
    "expired_unfetched",
    "get_expired",
    "get_flushed",
    "get_hits",
    "get_misses",
    "incr_hits",
    "incr_misses",
    "listen_disabled_num",
    "lru_crawler_starts",
    "reclaimed",
    "rejected_connections",
    "rusage_system",
    "rusage_user",
    "time_in_listen_disabled_us",
    "total_connections",
    "total_items",
    "touch_hits",
    "touch_misses",
    "store_no_memory",
    "store_too_large",
    "log_worker_dropped",
    "log_worker_written",
    "log_watcher_skipped",
    "log_watcher_sent",
    // tiercache's RAM tier and server.
    "conn_output_stalls",
    "index_evictions",
    "malloc_trims",
    "malloc_trim_us",
    "reinserted",
    "segment_evacuations",
    "segment_evacuations_waited",
    "segment_evacuations_late",
    "segment_evacuation_reinserts_refused",
    "segment_evacuation_slices_sets",
    "segment_evacuation_slices_evacuator",
    "sweep_segments_walked",
    "sweep_segments_skipped",
    "segment_evacuate_us",
    "shard_lock_holds",
    // extstore's names for the flash tier.
    "extstore_objects_written",
    "extstore_bytes_written",
    "extstore_objects_read",
    "extstore_bytes_read",
    "extstore_page_reclaims",
    "extstore_page_allocs",
    "extstore_page_evictions",
    "extstore_compact_lost",
    "extstore_compact_rescues",
    "extstore_compact_skipped",
    "get_extstore",
    "recache_from_extstore",
    "badcrc_from_extstore",
    "miss_from_extstore",
    // The flash tier.
    "flash_segments_written",
    "flash_segment_checkpoints",
    "flash_bytes_admitted",
    "flash_hits",
    "flash_demoted",
    "flash_not_demoted",
    "flash_promoted",
    "flash_promote_declined",
    "flash_reinserted",
    "flash_read_errors",
    "flash_verify_failures",
    "flash_tag_misses",
    "flash_write_errors",
    "flash_backpressure",
    "flash_write_waits_expired",
    "flash_reclaim_waits",
    "flash_admission_refused",
    "flash_journal_commits",
    "flash_journal_tombstones",
    "flash_journal_wrap_floor_raises",
    "flash_journal_failed",
    "flash_index_evictions",
    "flash_reads_ahead",
    "flash_class_moves",
    "flash_class_moves_to_copy",
    "flash_class_copies_made",
    "flash_class_copies_dropped",
    "flash_class_promotions",
    "flash_dual_fast_reads",
    "flash_dual_capacity_reads",
    "flash_nhc_iterations",
    "flash_nhc_load_admit_moves",
    "flash_nhc_tune_entries",
    "flash_nhc_tune_exits",
    // The small-object store.
    "small_objects_admitted",
    "small_bytes_admitted",
    "small_log_bytes_written",
    "small_set_bytes_written",
    "small_sets_written",
    "small_moved",
    "small_dropped",
    "small_readmitted",
    "small_evicted",
    "small_invalidations",
    "small_invalidate_jobs",
    "small_invalidate_keys",
    "small_invalidate_waits",
    "small_change_checks",
    "small_deferred",
    "small_log_segments_written",
    "small_flush_waits",
    "small_flush_us",
    "small_flush_locked_us",
    "small_hits_log",
    "small_hits_set",
    "small_reads",
    "small_false_positive_reads",
    "small_verify_failures",
];

/// Suffixes of the per-class flash lines (`flash_{class}_{suffix}`) that
/// count up; `_us_sum` are sums of microseconds.
pub const CLASS_COUNTERS: &[&str] = &[
    "reads",
    "bytes_read",
    "bytes_written",
    "device_us_sum",
    "read_latency_us_sum",
];

/// A stat counts up.
pub fn is_counter(name: &str) -> bool {
    COUNTERS.contains(&name)
        || tiercache_engine::flash::CLASSES.iter().any(|c| {
            name.strip_prefix("flash_")
                .and_then(|r| r.strip_prefix(c.name()))
                .and_then(|r| r.strip_prefix('_'))
                .is_some_and(|s| CLASS_COUNTERS.contains(&s))
        })
}

/// How a stat is exported: its metric name (without the `tiercache_`
/// prefix), the factor from the stat's unit to the metric's base unit, and
/// whether it is a counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub name: String,
    pub scale: f64,
    pub counter: bool,
}

/// A stat's export, given the length of an SLA-view "minute" in seconds.
/// Counters get `_total`; microseconds and minutes become seconds
/// (`_us_sum`, `_us`, `_minutes` → `_seconds`); `rusage_*` are seconds.
pub fn export(stat: &str, minute_secs: f64) -> Export {
    let counter = is_counter(stat);
    let clean: String = stat
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let (base, scale) = if let Some(b) = clean.strip_suffix("_us_sum") {
        (format!("{b}_seconds"), 1e-6)
    } else if let Some(b) = clean.strip_suffix("_us") {
        (format!("{b}_seconds"), 1e-6)
    } else if let Some(b) = clean.strip_suffix("_minutes") {
        (format!("{b}_seconds"), minute_secs)
    } else if clean.starts_with("rusage_") && counter {
        (format!("{clean}_seconds"), 1.0)
    } else {
        (clean, 1.0)
    };
    let name = if counter {
        format!("{base}_total")
    } else {
        base
    };
    Export {
        name,
        scale,
        counter,
    }
}

/// The gauge name `/metrics` used for a counter before counters were typed
/// (0.1): still served, marked deprecated in its help, so dashboards keep
/// working while they move to the `_total` name. `None` for the stats whose
/// old name was not a valid metric (`_us_sum`) and for gauges.
pub fn legacy_gauge(stat: &str, minute_secs: f64) -> Option<Export> {
    if !is_counter(stat) || stat.ends_with("_us_sum") {
        return None;
    }
    let mut e = export(stat, minute_secs);
    e.name.truncate(e.name.len() - "_total".len());
    if stat.starts_with("rusage_") {
        e.name.truncate(e.name.len() - "_seconds".len());
    }
    e.counter = false;
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_get_total_and_base_units() {
        let e = export("get_hits", 60.0);
        assert_eq!(
            (e.name.as_str(), e.scale, e.counter),
            ("get_hits_total", 1.0, true)
        );
        let e = export("flash_fast_device_us_sum", 60.0);
        assert_eq!(e.name, "flash_fast_device_seconds_total");
        assert_eq!(e.scale, 1e-6);
        let e = export("segment_evacuate_us", 60.0);
        assert_eq!(e.name, "segment_evacuate_seconds_total");
        let e = export("rusage_user", 60.0);
        assert_eq!(e.name, "rusage_user_seconds_total");
    }

    #[test]
    fn levels_stay_gauges() {
        for s in [
            "curr_items",
            "bytes",
            "flash_fast_queue_depth",
            "flash_fast_segments",
        ] {
            let e = export(s, 60.0);
            assert!(!e.counter, "{s}");
            assert_eq!(e.name, s);
        }
        let e = export("segment_evacuate_max_us", 60.0);
        assert_eq!(
            (e.name.as_str(), e.counter),
            ("segment_evacuate_max_seconds", false)
        );
        let e = export("sla_unavailable_minutes", 60.0);
        assert_eq!(
            (e.name.as_str(), e.scale),
            ("sla_unavailable_seconds", 60.0)
        );
    }

    #[test]
    fn legacy_names_are_the_old_gauges() {
        assert_eq!(legacy_gauge("get_hits", 60.0).unwrap().name, "get_hits");
        assert_eq!(
            legacy_gauge("rusage_user", 60.0).unwrap().name,
            "rusage_user"
        );
        let e = legacy_gauge("time_in_listen_disabled_us", 60.0).unwrap();
        assert_eq!(
            (e.name.as_str(), e.scale),
            ("time_in_listen_disabled_seconds", 1e-6)
        );
        assert!(legacy_gauge("flash_fast_device_us_sum", 60.0).is_none());
        assert!(legacy_gauge("curr_items", 60.0).is_none());
    }

    #[test]
    fn listed_once() {
        let mut seen = std::collections::HashSet::new();
        for c in COUNTERS {
            assert!(seen.insert(c), "{c} listed twice");
        }
    }
}
