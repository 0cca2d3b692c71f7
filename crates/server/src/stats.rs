//! Counters: one set per worker thread (relaxed atomics on the worker's own
//! cache lines, so counting costs no contention), summed for `stats`, and the
//! `stats` replies with memcached's names.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tiercache_engine::flash::FlashStats;
use tiercache_engine::EngineStats;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Per-worker counters, named as memcached names them in `stats`.
        #[derive(Default, Debug)]
        #[repr(align(128))]
        pub struct WorkerStats { $(pub $name: AtomicU64,)* }

        /// A summed snapshot.
        #[derive(Default, Debug, Clone, Copy)]
        pub struct Totals { $(pub $name: u64,)* }

        impl WorkerStats {
            pub fn add_to(&self, t: &mut Totals) {
                $(t.$name += self.$name.load(Ordering::Relaxed);)*
            }
            pub fn reset(&self) {
                $(self.$name.store(0, Ordering::Relaxed);)*
            }
        }

        impl Totals {
            fn emit(&self, out: &mut Vec<u8>) {
                $(stat(out, stringify!($name), self.$name);)*
            }
        }
    };
}

counters!(
    cmd_get,
    cmd_set,
    cmd_flush,
    cmd_touch,
    cmd_meta,
    get_hits,
    get_misses,
    get_expired,
    get_flushed,
    delete_misses,
    delete_hits,
    incr_misses,
    incr_hits,
    decr_misses,
    decr_hits,
    cas_misses,
    cas_hits,
    cas_badval,
    touch_hits,
    touch_misses,
    store_too_large,
    store_no_memory,
    bytes_read,
    bytes_written,
    flash_reads_ahead,
    // Times a connection stopped reading because its pending output went
    // over `max_pending_output` (a client that does not read its replies).
    conn_output_stalls,
);

#[inline]
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

#[inline]
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Connection-level counters shared by all workers.
#[derive(Default, Debug)]
pub struct ConnStats {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Times a worker's accept failed for want of fds or memory (EMFILE,
    /// ENFILE, ENOBUFS, ENOMEM) and it stopped accepting until it could
    /// again (memcached's name).
    pub listen_disabled_num: AtomicU64,
    /// Workers that are not accepting now (for `accepting_conns`).
    pub accept_blocked: AtomicU64,
}

fn stat(out: &mut Vec<u8>, name: &str, v: impl std::fmt::Display) {
    use std::io::Write;
    let _ = write!(out, "STAT {name} {v}\r\n");
}

/// Everything the general `stats` reply needs.
pub struct StatsView<'a> {
    pub started: Instant,
    pub start_unix: u64,
    pub now: u32,
    pub threads: usize,
    pub max_connections: usize,
    pub conns: &'a ConnStats,
    pub totals: Totals,
    pub engine: EngineStats,
}

fn rusage() -> (f64, f64) {
    // SAFETY: getrusage writes into the zeroed struct we own; no other effects.
    #[allow(unsafe_code)]
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    (t(ru.ru_utime), t(ru.ru_stime))
}

/// The general `stats` reply, without the final `END`.
pub fn general(out: &mut Vec<u8>, v: &StatsView<'_>) {
    let e = &v.engine;
    let (user, sys) = rusage();
    stat(out, "pid", std::process::id());
    stat(out, "uptime", v.started.elapsed().as_secs());
    stat(out, "time", v.now);
    stat(out, "version", crate::VERSION);
    stat(out, "pointer_size", 64);
    stat(out, "rusage_user", format!("{user:.6}"));
    stat(out, "rusage_system", format!("{sys:.6}"));
    stat(out, "max_connections", v.max_connections);
    stat(
        out,
        "curr_connections",
        v.conns.curr_connections.load(Ordering::Relaxed),
    );
    stat(
        out,
        "total_connections",
        v.conns.total_connections.load(Ordering::Relaxed),
    );
    stat(
        out,
        "rejected_connections",
        v.conns.rejected_connections.load(Ordering::Relaxed),
    );
    // Counted where the engine looks keys up (as memcached's item lookup
    // counts them), whichever command asked.
    let mut totals = v.totals;
    totals.get_expired += e.shard.get_expired;
    totals.get_flushed += e.shard.get_flushed;
    totals.emit(out);
    stat(out, "limit_maxbytes", e.memory_limit);
    let blocked = v.conns.accept_blocked.load(Ordering::Relaxed);
    stat(out, "accepting_conns", u8::from(blocked == 0));
    stat(
        out,
        "listen_disabled_num",
        v.conns.listen_disabled_num.load(Ordering::Relaxed),
    );
    stat(out, "threads", v.threads);
    stat(out, "hash_power_level", e.index_buckets.trailing_zeros());
    stat(out, "hash_bytes", e.index_bytes);
    stat(out, "hash_is_expanding", 0);
    stat(out, "evictions", e.shard.evictions);
    stat(out, "reclaimed", e.shard.reclaimed);
    stat(out, "curr_items", e.shard.curr_items);
    stat(out, "total_items", e.shard.total_items);
    stat(out, "expired_unfetched", e.shard.expired_unfetched);
    stat(out, "evicted_unfetched", e.shard.evicted_unfetched);
    stat(out, "bytes", e.shard.bytes);
    // tiercache's own figures.
    stat(out, "segment_size", e.segment_size);
    stat(out, "segments_allocated", e.segments_allocated);
    stat(out, "segments_in_use", e.shard.segments);
    stat(out, "reinserted", e.shard.reinserted);
    stat(out, "shards", e.shards);
    let per_item = if e.shard.curr_items > 0 {
        e.index_bytes as f64 / e.shard.curr_items as f64 + tiercache_engine::ITEM_HEADER as f64
    } else {
        0.0
    };
    stat(out, "dram_overhead_per_item", format!("{per_item:.1}"));
}

/// `stats settings`.
pub fn settings(out: &mut Vec<u8>, cfg: &crate::config::Config, seg: usize) {
    stat(out, "maxbytes", cfg.cache.memory_mb << 20);
    stat(out, "maxconns", cfg.server.max_connections);
    stat(out, "tcpport", cfg.server.port);
    stat(out, "udpport", 0);
    stat(out, "interface", &cfg.server.listen);
    stat(out, "verbosity", cfg.server.verbosity);
    stat(out, "num_threads", cfg.server.threads);
    stat(out, "evictions", "on");
    stat(out, "cas_enabled", "yes");
    stat(out, "item_size_max", cfg.cache.max_item_size);
    stat(out, "eviction_policy", &cfg.cache.policy);
    stat(out, "segment_size", seg);
    stat(out, "flush_enabled", "yes");
    stat(
        out,
        "shutdown_command",
        if cfg.server.enable_shutdown {
            "yes"
        } else {
            "no"
        },
    );
}

/// `stats items` / `stats slabs`: one pseudo class holding everything.
pub fn items(out: &mut Vec<u8>, e: &EngineStats, slabs: bool) {
    let s = &e.shard;
    if slabs {
        stat(out, "1:chunk_size", e.segment_size);
        stat(out, "1:total_pages", e.shard.segments);
        stat(out, "1:used_chunks", s.curr_items);
        stat(out, "active_slabs", 1);
        stat(out, "total_malloced", e.segments_allocated * e.segment_size);
    } else {
        stat(out, "items:1:number", s.curr_items);
        stat(out, "items:1:evicted", s.evictions);
        stat(out, "items:1:evicted_unfetched", s.evicted_unfetched);
        stat(out, "items:1:expired_unfetched", s.expired_unfetched);
        stat(out, "items:1:reclaimed", s.reclaimed);
    }
}

/// The flash tier's lines of `stats`: memcached's `extstore_*` names where
/// they mean the same, `flash_*` for the rest.
pub fn flash(out: &mut Vec<u8>, f: &FlashStats, e: &EngineStats) {
    stat(out, "extstore_page_size", f.segment_size);
    stat(out, "extstore_limit_maxbytes", f.capacity);
    stat(out, "extstore_pages_free", f.segments_free);
    stat(out, "extstore_pages_used", f.segments_sealed);
    stat(out, "extstore_pages_queued", f.segments_queued);
    stat(out, "extstore_objects_used", e.shard.flash_items);
    stat(out, "extstore_objects_written", f.objects_written);
    stat(out, "extstore_bytes_written", f.bytes_written);
    stat(out, "extstore_objects_read", f.objects_read);
    stat(out, "extstore_bytes_read", f.bytes_read);
    stat(out, "extstore_page_reclaims", f.segments_reclaimed);
    stat(out, "extstore_io_queue", f.reads_in_flight);
    stat(out, "flash_segments_written", f.segments_written);
    stat(out, "flash_bytes_admitted", f.bytes_admitted);
    stat(
        out,
        "flash_write_amplification",
        format!("{:.3}", f.write_amplification()),
    );
    stat(out, "flash_hits", e.shard.flash_hits);
    stat(out, "flash_demoted", e.shard.demoted);
    stat(out, "flash_not_demoted", e.shard.not_demoted);
    stat(out, "flash_promoted", e.shard.promoted);
    stat(out, "flash_promote_declined", e.shard.promote_declined);
    stat(out, "flash_reinserted", f.objects_reinserted);
    stat(out, "flash_read_errors", f.read_errors);
    stat(out, "flash_verify_failures", f.verify_failures);
    stat(out, "flash_tag_misses", f.tag_misses);
    stat(out, "flash_write_errors", f.write_errors);
    stat(out, "flash_failed_segments", f.segments_failed);
    stat(out, "flash_backpressure", f.busy);
    stat(out, "flash_admission_refused", f.admission_refused);
    stat(out, "flash_degraded", u8::from(f.degraded));
    stat(out, "flash_journal_commits", f.journal_commits);
    stat(out, "flash_journal_tombstones", f.journal_tombstones);
    stat(out, "flash_journal_floor", f.journal_floor);
    stat(
        out,
        "flash_journal_wrap_floor_raises",
        f.journal_wrap_floor_raises,
    );
    stat(out, "flash_journal_failed", u8::from(f.journal_failed));
    // 1 once a failed journal is recorded where the next start looks (the
    // superblocks or a mark file): that start will not trust the devices.
    stat(
        out,
        "flash_journal_failure_recorded",
        u8::from(f.journal_failure_recorded),
    );
    if let Some(r) = f.recovery {
        stat(out, "flash_crash_recovered_items", r.items);
        stat(out, "flash_crash_recovered_segments", r.segments);
        stat(out, "flash_crash_dropped_by_tombstones", r.dead);
        stat(out, "flash_crash_dropped_older_copies", r.duplicates);
        stat(out, "flash_crash_untrusted_segments", r.untrusted_segments);
    }
    if let Some(b) = f.io_backend {
        stat(out, "flash_io_backend", b.name());
    }
    let per_item = if e.shard.curr_items > 0 {
        e.index_bytes as f64 / e.shard.curr_items as f64
    } else {
        0.0
    };
    stat(out, "flash_index_bytes_per_item", format!("{per_item:.2}"));
}
