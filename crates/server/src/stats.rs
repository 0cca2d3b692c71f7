//! Counters: one set per worker thread (relaxed atomics on the worker's own
//! cache lines, so counting costs no contention), summed for `stats`, and the
//! `stats` replies with memcached's names. The engine's figures are written
//! by walking their declarations (`for_each`, see `tiercache_engine::stat`);
//! every other line names its kind where it is written ([`line`]), so that
//! `/metrics` exports each line as what it is.

pub mod kinds;
pub mod line;
pub mod locks;

pub(crate) use line::stat;
use line::{counter, declared, Sink};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use tiercache_engine::flash::{DeviceClass, FlashStats};
use tiercache_engine::stat::Section;
use tiercache_engine::EngineStats;

macro_rules! counters {
    ($($name:ident),* $(,)?) => {
        /// Per-worker counters, named as memcached names them in `stats`
        /// (every one counts up), and the worker's request latencies (for
        /// the SLA view).
        #[derive(Default, Debug)]
        #[repr(align(128))]
        pub struct WorkerStats {
            $(pub $name: AtomicU64,)*
            /// Not reset by `stats reset`: minutes are judged against the
            /// two hours before them.
            pub latency: crate::admin::sla::Recorder,
        }

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
            fn emit(&self, out: &mut dyn Sink) {
                $(counter(out, stringify!($name), self.$name);)*
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
    /// Since when (µs after the start) some worker has not been accepting,
    /// and the time of the earlier such stretches (memcached's
    /// `time_in_listen_disabled_us`).
    pub listen_disabled_since: AtomicU64,
    pub listen_disabled_us: AtomicU64,
    /// Connections closed for being idle longer than `-o idle_timeout`
    /// (memcached's name).
    pub idle_kicks: AtomicU64,
    /// Runs of the once-a-second expiry sweep, tiercache's counterpart of
    /// memcached's LRU crawler (`lru_crawler_starts`), and the expired
    /// items it freed (`crawler_reclaimed`).
    pub crawler_starts: AtomicU64,
    pub crawler_reclaimed: AtomicU64,
    /// Times the maintenance thread gave freed heap back to the OS
    /// (`malloc_trims`) and the time that took (`malloc_trim_us`); see
    /// [`crate::heap_trim`].
    pub malloc_trims: AtomicU64,
    pub malloc_trim_us: AtomicU64,
}

impl ConnStats {
    /// A worker stopped accepting at `now` (µs after the start).
    pub fn accept_stopped(&self, now: u64) {
        if self.accept_blocked.fetch_add(1, Ordering::Relaxed) == 0 {
            self.listen_disabled_since.store(now, Ordering::Relaxed);
        }
    }

    /// A worker accepts again at `now`.
    pub fn accept_resumed(&self, now: u64) {
        if self.accept_blocked.fetch_sub(1, Ordering::Relaxed) == 1 {
            let since = self.listen_disabled_since.load(Ordering::Relaxed);
            add(&self.listen_disabled_us, now.saturating_sub(since));
        }
    }

    /// Time in µs during which accepting was stopped, up to `now`.
    pub fn listen_disabled_us(&self, now: u64) -> u64 {
        let mut t = self.listen_disabled_us.load(Ordering::Relaxed);
        if self.accept_blocked.load(Ordering::Relaxed) > 0 {
            let since = self.listen_disabled_since.load(Ordering::Relaxed);
            t += now.saturating_sub(since);
        }
        t
    }
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
    /// Listening sockets.
    pub listeners: usize,
    /// File descriptors kept for the server's own use (memcached's
    /// `reserved_fds`).
    pub reserved_fds: u64,
    /// `-o idle_timeout` is on (memcached prints `idle_kicks` only then).
    pub idle_timeout: bool,
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

/// The shards' figures of `section`, as they declare them.
fn shard_lines(out: &mut dyn Sink, e: &EngineStats, section: Section) {
    e.shard.for_each(|s, v| {
        if s.section == section {
            declared(out, s, v);
        }
    });
}

/// The general `stats` reply, without the final `END`.
pub fn general(out: &mut dyn Sink, v: &StatsView<'_>) {
    let e = &v.engine;
    let (user, sys) = rusage();
    let c = |a: &AtomicU64| a.load(Ordering::Relaxed);
    stat(out, "pid", std::process::id());
    stat(out, "uptime", v.started.elapsed().as_secs());
    stat(out, "time", v.now);
    stat(out, "version", crate::VERSION);
    stat(out, "tiercache_version", crate::TIERCACHE_VERSION);
    stat(out, "pointer_size", 64);
    counter(out, "rusage_user", format!("{user:.6}"));
    counter(out, "rusage_system", format!("{sys:.6}"));
    stat(out, "max_connections", v.max_connections);
    stat(out, "curr_connections", c(&v.conns.curr_connections));
    counter(out, "total_connections", c(&v.conns.total_connections));
    counter(
        out,
        "rejected_connections",
        c(&v.conns.rejected_connections),
    );
    // Connections and listeners the server holds state for.
    stat(
        out,
        "connection_structures",
        c(&v.conns.curr_connections) + v.listeners as u64,
    );
    stat(out, "reserved_fds", v.reserved_fds);
    // Counted where the engine looks keys up (as memcached's item lookup
    // counts them), whichever command asked.
    let mut totals = v.totals;
    totals.get_expired += e.shard.get_expired;
    totals.get_flushed += e.shard.get_flushed;
    totals.emit(out);
    stat(out, "limit_maxbytes", e.memory_limit);
    let blocked = c(&v.conns.accept_blocked);
    stat(out, "accepting_conns", u8::from(blocked == 0));
    counter(out, "listen_disabled_num", c(&v.conns.listen_disabled_num));
    counter(
        out,
        "time_in_listen_disabled_us",
        v.conns
            .listen_disabled_us(v.started.elapsed().as_micros() as u64),
    );
    stat(out, "threads", v.threads);
    // memcached yields a connection after `-R` requests of one read;
    // tiercache runs every request a read brought before the next
    // connection's, so it never yields.
    counter(out, "conn_yields", 0);
    if v.idle_timeout {
        stat(out, "idle_kicks", c(&v.conns.idle_kicks));
    }
    stat(out, "hash_power_level", e.index_buckets.trailing_zeros());
    stat(out, "hash_bytes", e.index_bytes);
    stat(out, "hash_is_expanding", 0);
    // evictions, curr_items, bytes, the evacuations, the sweep, ...
    shard_lines(out, e, Section::Main);
    locks::general(out, &e.holds);
    locks::general_waits(out, &e.waits);
    counter(out, "lru_crawler_starts", c(&v.conns.crawler_starts));
    counter(out, "crawler_reclaimed", c(&v.conns.crawler_reclaimed));
    counter(out, "malloc_trims", c(&v.conns.malloc_trims));
    counter(out, "malloc_trim_us", c(&v.conns.malloc_trim_us));
    // RAM segments allocated and not holding items now: memcached's pool
    // of free slab pages.
    stat(
        out,
        "slab_global_page_pool",
        e.segments_allocated.saturating_sub(e.shard.segments),
    );
    // tiercache's own figures.
    stat(out, "segment_size", e.segment_size);
    stat(out, "segments_allocated", e.segments_allocated);
    stat(out, "shards", e.shards);
    // The index: its tables alone (`hash_bytes` also counts the flash
    // write buffers), what they hold and how full they are; it resizes
    // itself between 70% and 95% and evicts when its budget is reached.
    stat(out, "index_bytes", e.index_table_bytes);
    stat(out, "index_buckets", e.index_buckets);
    stat(out, "index_entries", e.index_entries);
    stat(out, "index_slots", e.index_slots);
    let load = if e.index_slots > 0 {
        e.index_entries as f64 * 100.0 / e.index_slots as f64
    } else {
        0.0
    };
    stat(out, "index_load_percent", format!("{load:.1}"));
    let per_item = if e.shard.curr_items > 0 {
        e.index_bytes as f64 / e.shard.curr_items as f64 + tiercache_engine::ITEM_HEADER as f64
    } else {
        0.0
    };
    stat(out, "dram_overhead_per_item", format!("{per_item:.1}"));
}

/// `stats settings`: memcached's names for the settings tiercache has
/// (`inter`, not `interface`; `interface` is kept for dashboards that read
/// it). Settings of memcached's slab allocator, LRU maintainer and
/// crawler, which tiercache does not have, are left out (the list is in
/// `tests/stats_keys.rs`).
pub fn settings(
    out: &mut Vec<u8>,
    cfg: &crate::config::Config,
    seg: usize,
    verbosity: u32,
    maxbytes: usize,
) {
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    stat(out, "maxbytes", maxbytes);
    stat(out, "maxconns", cfg.server.max_connections);
    stat(out, "tcpport", cfg.server.port);
    stat(out, "udpport", 0);
    stat(out, "inter", &cfg.server.listen);
    stat(out, "interface", &cfg.server.listen);
    stat(out, "verbosity", verbosity);
    stat(out, "evictions", "on");
    // No unix socket (-s).
    stat(out, "domain_socket", "NULL");
    stat(out, "shutdown_command", yes_no(cfg.server.enable_shutdown));
    stat(out, "num_threads", cfg.server.threads);
    stat(
        out,
        "stat_key_prefix",
        char::from(cfg.server.detail_delimiter),
    );
    stat(out, "detail_enabled", yes_no(cfg.server.detail_enabled));
    stat(out, "cas_enabled", "yes");
    stat(out, "binding_protocol", cfg.binding_protocol().stats_name());
    stat(out, "auth_enabled_sasl", "no");
    stat(out, "auth_enabled_ascii", "no");
    stat(out, "item_size_max", cfg.cache.max_item_size);
    // Over -c a connection gets "ERROR Too many open connections" and is
    // closed at once, as memcached's maxconns_fast does.
    stat(out, "maxconns_fast", "yes");
    stat(out, "hashpower_init", cfg.cache.hash_power);
    stat(out, "flush_enabled", yes_no(!cfg.server.disable_flush_all));
    stat(out, "dump_enabled", yes_no(!cfg.server.disable_dumping));
    stat(out, "tcp_backlog", cfg.server.backlog);
    stat(out, "hash_algorithm", "xxh3");
    stat(out, "idle_timeout", cfg.server.idle_timeout);
    // `stats sizes` is not kept.
    stat(out, "track_sizes", "no");
    stat(out, "watcher_logbuf_size", cfg.server.watcher_logbuf_size);
    // The flash tier's settings, also without one (as memcached built
    // with extstore prints them). A write buffer is one flash segment; a
    // reclaimed flash segment drops the items nobody read while they were
    // on it (hit ones are reinserted with ext_reinsert).
    stat(out, "ext_item_size", cfg.flash.tier.min_value_size);
    stat(out, "ext_low_ttl", cfg.flash.tier.low_ttl);
    stat(out, "ext_wbuf_size", cfg.flash_page_size());
    stat(out, "ext_drop_unread", "yes");
    stat(out, "eviction_policy", &cfg.cache.policy);
    stat(out, "segment_size", seg);
}

/// `stats items` / `stats slabs`: one class (1) holding every item. For
/// `stats slabs` a page and a chunk are both a RAM segment (the unit
/// memory is taken and reclaimed in): `total_pages` and `used_chunks` are
/// the segments holding items, none is partly free in memcached's sense
/// (`free_chunks` 0), and free segments are `slab_global_page_pool` in
/// `stats`. The command counters are the server's, all of them in the one
/// class. `age` is Some for `stats items` (None for `stats slabs`): seconds
/// since the last access of the least recently accessed item of the
/// oldest RAM segments, the ones the next reclaims judge (memcached's LRU
/// tail).
pub fn items(
    out: &mut Vec<u8>,
    e: &EngineStats,
    t: &Totals,
    crawler_reclaimed: u64,
    age: Option<u32>,
) {
    let slabs = age.is_none();
    let s = &e.shard;
    if slabs {
        stat(out, "1:chunk_size", e.segment_size);
        stat(out, "1:chunks_per_page", 1);
        stat(out, "1:total_pages", s.segments);
        stat(out, "1:total_chunks", s.segments);
        stat(out, "1:used_chunks", s.segments);
        stat(out, "1:free_chunks", 0);
        stat(out, "1:free_chunks_end", 0);
        stat(out, "1:get_hits", t.get_hits);
        stat(out, "1:cmd_set", t.cmd_set);
        stat(out, "1:delete_hits", t.delete_hits);
        stat(out, "1:incr_hits", t.incr_hits);
        stat(out, "1:decr_hits", t.decr_hits);
        stat(out, "1:cas_hits", t.cas_hits);
        stat(out, "1:cas_badval", t.cas_badval);
        stat(out, "1:touch_hits", t.touch_hits);
        stat(out, "active_slabs", 1);
        stat(out, "total_malloced", e.segments_allocated * e.segment_size);
    } else if s.curr_items > 0 {
        // memcached lists only classes that hold items.
        stat(out, "items:1:number", s.curr_items);
        stat(out, "items:1:age", age.unwrap_or(0));
        // Here only, as memcached 1.6.18 (older ones gave it in `stats
        // slabs`): the exporter makes one series of it from either group,
        // and from both it would collect that series twice and fail.
        stat(out, "items:1:mem_requested", s.bytes);
        stat(out, "items:1:evicted", s.evictions);
        stat(out, "items:1:outofmemory", t.store_no_memory);
        // No reference counts, so no tail repairs and no locked items.
        stat(out, "items:1:tailrepairs", 0);
        stat(out, "items:1:reclaimed", s.reclaimed);
        stat(out, "items:1:expired_unfetched", s.expired_unfetched);
        stat(out, "items:1:evicted_unfetched", s.evicted_unfetched);
        stat(out, "items:1:crawler_reclaimed", crawler_reclaimed);
        stat(out, "items:1:lrutail_reflocked", 0);
    }
}

/// The flash tier's lines of `stats`: its figures as
/// [`FlashStats`] declares them (memcached's `extstore_*` names where they
/// mean the same, `flash_*` for the rest), the shards' flash figures, and
/// what is computed from them.
pub fn flash(out: &mut dyn Sink, f: &FlashStats, e: &EngineStats) {
    let capacity_class = f.classes[DeviceClass::Capacity].devices > 0;
    let tier = |out: &mut dyn Sink, section: Section| {
        f.for_each(|s, v| {
            let shown = s.section == section
                || (section == Section::Flash
                    && s.section == Section::CapacityClass
                    && capacity_class);
            if shown {
                declared(out, s, v);
            }
        })
    };
    // memcached's names: the tier's, the constants, the shards'.
    tier(out, Section::Main);
    // tiercache does not compact pages, so nothing is lost, rescued or
    // skipped by compaction.
    counter(out, "extstore_compact_lost", 0);
    counter(out, "extstore_compact_rescues", 0);
    counter(out, "extstore_compact_skipped", 0);
    // Flash items, gets answered from flash, flash hits copied back to
    // RAM (recache).
    shard_lines(out, e, Section::Extstore);
    // tiercache's: the tier's, then the shards' (flash hits, demotions,
    // promotions...).
    tier(out, Section::Flash);
    stat(
        out,
        "flash_write_amplification",
        format!(
            "{:.3}",
            crate::admin::small_stats::device_write_amplification(f, e)
        ),
    );
    shard_lines(out, e, Section::Flash);
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
    // Index bytes per indexed item (RAM and flash items have the same
    // entries): what a flash item costs in DRAM, besides its segment's
    // share of the segment table.
    let per_item = if e.index_entries > 0 {
        e.index_table_bytes as f64 / e.index_entries as f64
    } else {
        0.0
    };
    stat(out, "flash_index_bytes_per_item", format!("{per_item:.2}"));
    crate::admin::class_stats::write(out, f);
    crate::admin::small_stats::write(out, e);
}
