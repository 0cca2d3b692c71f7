//! [`FlashStats`]: the flash tier's figures for `stats`, read once into a
//! plain struct, so that a front end formats numbers instead of reading the
//! tier's and the journal's atomics itself; and the counters those figures
//! are read from ([`TierStats`], [`DevStats`]), kept here at the bottom of
//! the flash tier so that its files import them without importing the tier.

use crate::device::io::IoBackend;
use crate::stat::stats_struct;
use std::sync::atomic::AtomicU64;
use tiercache_policy::nhc::{Iteration, Objective};

stats_struct! {
    /// The flash tier's figures at one moment, with their `stats` names, in
    /// the order `stats` shows them: memcached's `extstore_*` names where
    /// they mean the same (the struct's own section), tiercache's `flash_*`
    /// names `in Flash`. The per-item counts kept by the shards (flash
    /// items and hits, demotions, promotions) are in
    /// [`crate::EngineStats`]'s `shard`.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct FlashStats {
        /// Bytes in a flash segment (memcached's page).
        segment_size: gauge => "extstore_page_size";
        /// Bytes of device space for segments.
        capacity: gauge => "extstore_limit_maxbytes";
        /// Bytes of RAM in write buffers (part of the `-m` budget).
        buffer_bytes: plain;
        /// Segments by state.
        segments_free: gauge => "extstore_pages_free";
        segments_sealed: gauge => "extstore_pages_used";
        segments_queued: gauge => "extstore_pages_queued";
        objects_written: counter => "extstore_objects_written";
        /// Bytes written to the devices (segments, whole).
        bytes_written: counter => "extstore_bytes_written";
        objects_read: counter => "extstore_objects_read";
        bytes_read: counter => "extstore_bytes_read";
        /// Segments reclaimed: reclaiming the oldest segment to make room
        /// drops what is left on it (memcached's page evictions).
        segments_reclaimed: counter => "extstore_page_reclaims", "extstore_page_evictions";
        /// Reads submitted and not completed yet (a gauge).
        reads_in_flight: gauge => "extstore_io_queue";
        /// Segments written: a write buffer takes a free flash segment (a
        /// page) for each.
        segments_written: counter => "extstore_page_allocs", "flash_segments_written" in Flash;
        /// Records that failed verification, and records of another key
        /// with the same tag.
        verify_failures: counter => "badcrc_from_extstore", "flash_verify_failures" in Flash;
        tag_misses: counter => "miss_from_extstore", "flash_tag_misses" in Flash;
        /// Idle open buffers written without being sealed (`checkpoint`).
        checkpoints: counter => "flash_segment_checkpoints" in Flash;
        /// Bytes of records appended to write buffers.
        bytes_admitted: counter => "flash_bytes_admitted" in Flash;
        objects_reinserted: counter => "flash_reinserted" in Flash;
        read_errors: counter => "flash_read_errors" in Flash;
        write_errors: counter => "flash_write_errors" in Flash;
        segments_failed: gauge => "flash_failed_segments" in Flash;
        /// Requests that waited for the device (back-pressure).
        busy: counter => "flash_backpressure" in Flash;
        /// Times a reclaim's move or reinsert of a record waited for a write
        /// buffer (the flusher then wrote a queued one, or waited a moment).
        reclaim_waits: counter => "flash_reclaim_waits" in Flash;
        /// Flash hits whose record was still in a write buffer (copied from
        /// RAM, no device read).
        buffer_reads: counter => "flash_buffer_reads" in Flash;
        /// Of those, the records still in an open (unsealed) buffer.
        buffer_reads_open: counter => "flash_buffer_reads_open" in Flash;
        admission_refused: counter => "flash_admission_refused" in Flash;
        /// Serving from RAM only (the device failed, or the journal did).
        degraded: gauge [bool] => "flash_degraded" in Flash;
        journal_commits: counter => "flash_journal_commits" in Flash;
        journal_tombstones: counter => "flash_journal_tombstones" in Flash;
        /// The crash journal's floor of the class new items land on (fast when
        /// there is one), and of the capacity class (shown with one).
        journal_floor: gauge => "flash_journal_floor" in Flash;
        journal_floor_capacity: gauge => "flash_journal_floor_capacity" in CapacityClass;
        journal_wrap_floor_raises: counter => "flash_journal_wrap_floor_raises" in Flash;
        /// The journal failed (a counter in `/metrics` since 0.1).
        journal_failed: counter [bool] => "flash_journal_failed" in Flash;
        /// 1 once a failed journal is recorded where the next start looks (the
        /// superblocks or a mark file): that start will not trust the devices.
        journal_failure_recorded: gauge [bool] => "flash_journal_failure_recorded" in Flash;
        /// What the crash recovery at start found (filled by
        /// [`crate::Engine::flash_stats`]; None after a graceful restart).
        recovery: plain [Option<Recovery>];
        /// The reader in use (filled by [`crate::Engine::flash_stats`]).
        io_backend: plain [Option<IoBackend>];
        /// Per device class (indexed by a `DeviceClass`, or in `CLASSES` order).
        classes: plain [crate::flash::class::PerClass<ClassStats>];
        /// The non-hierarchical caching scheduler.
        nhc: plain [NhcStats];
        /// Capacity hits copied into the fast class.
        promotions: counter => "flash_class_promotions" in Classes;
        /// Capacity hits not copied into the fast class because its open
        /// buffer was not newer than the capacity record's segment.
        promotions_refused: counter => "flash_class_promotions_refused" in Classes;
        /// Fast-class records moved to the capacity class on reclaim (written
        /// again), and those whose capacity copy became the entry instead.
        moves: counter => "flash_class_moves" in Classes;
        moves_to_copy: counter => "flash_class_moves_to_copy" in Classes;
        /// Fast hits copied to the capacity class while copies paid, and those
        /// copies released when the capacity class reclaimed them (the fast
        /// record became the entry again, nothing written).
        copies_made: counter => "flash_class_copies_made" in Classes;
        copies_dropped: counter => "flash_class_copies_dropped" in Classes;
        /// Copies to the capacity class refused because the shard's copy
        /// table was full of valid copies (it refuses rather than forgets).
        copies_refused: counter => "flash_class_copies_refused" in Classes;
        /// Hits on items with copies on both classes, by the class that served them.
        dual_fast_reads: counter => "flash_dual_fast_reads" in Classes;
        dual_capacity_reads: counter => "flash_dual_capacity_reads" in Classes;
    }
}

stats_struct! {
    /// One device class's figures; `stats` shows them as
    /// `flash_{class}_{name}`, in this order.
    #[derive(Debug, Clone, Copy, Default)]
    pub struct ClassStats {
        devices: gauge => "devices";
        segments: gauge => "segments";
        segments_free: gauge => "segments_free";
        reads: counter => "reads";
        bytes_read: counter => "bytes_read";
        bytes_written: counter => "bytes_written";
        /// Reads in flight now (the queue depth).
        queue_depth: gauge => "queue_depth";
        /// Sum of read latencies, microseconds (mean = this / reads).
        latency_us: counter => "read_latency_us_sum";
        /// Of that, the time at the devices (without the wait for a pread
        /// thread), microseconds.
        device_us: counter => "device_us_sum";
        /// Records of the class's segments fetched from a write buffer.
        buffer_reads: counter => "buffer_reads";
    }
}

impl FlashStats {
    /// Bytes written to the devices per byte admitted (0 before any).
    pub fn write_amplification(&self) -> f64 {
        if self.bytes_admitted > 0 {
            self.bytes_written as f64 / self.bytes_admitted as f64
        } else {
            0.0
        }
    }
}

/// Counters of the flash tier (monotonic unless noted).
#[derive(Default)]
pub struct TierStats {
    pub bytes_written: AtomicU64,
    pub bytes_admitted: AtomicU64,
    pub objects_written: AtomicU64,
    pub objects_reinserted: AtomicU64,
    pub objects_evicted: AtomicU64,
    pub objects_read: AtomicU64,
    pub bytes_read: AtomicU64,
    pub read_errors: AtomicU64,
    pub verify_failures: AtomicU64,
    pub tag_misses: AtomicU64,
    pub write_errors: AtomicU64,
    pub segments_written: AtomicU64,
    /// Idle open buffers written so far without being sealed.
    pub checkpoints: AtomicU64,
    pub segments_reclaimed: AtomicU64,
    /// Segments reclaimed early because every record in them had expired.
    pub segments_expired: AtomicU64,
    pub busy: AtomicU64,
    pub reclaim_waits: AtomicU64,
    /// Records fetched from a write buffer instead of a device.
    pub buffer_reads: AtomicU64,
    /// Of those, from an open (unsealed) buffer.
    pub buffer_reads_open: AtomicU64,
    pub admission_refused: AtomicU64,
    /// Reads submitted and not completed yet (a gauge).
    pub reads_in_flight: AtomicU64,
    /// Per device, in the order of the devices.
    pub devs: Vec<DevStats>,
    /// Records the fast class reclaimed that moved to the capacity class
    /// (written again, or their capacity copy kept instead).
    pub moves: AtomicU64,
    pub moves_to_copy: AtomicU64,
    /// Capacity hits copied into the fast class (data_admit).
    pub promotions: AtomicU64,
    /// Promotions refused: the fast open buffer not newer than the copy.
    pub promotions_refused: AtomicU64,
    /// Fast hits copied to the capacity class (copies where they pay), and
    /// those released by the capacity class's reclaim.
    pub copies_made: AtomicU64,
    pub copies_dropped: AtomicU64,
    /// Copies refused by a full copy table.
    pub copies_refused: AtomicU64,
    /// Hits on items with copies on both classes, by the class that served them.
    pub dual_fast_reads: AtomicU64,
    pub dual_capacity_reads: AtomicU64,
}

/// Read figures of one device.
#[derive(Debug, Default)]
pub struct DevStats {
    pub reads: AtomicU64,
    pub bytes_read: AtomicU64,
    /// Reads submitted and not completed (a gauge): the queue depth.
    pub in_flight: AtomicU64,
    /// Sum of read latencies (submission to completion), microseconds.
    pub latency_us: AtomicU64,
    /// Of that, the time at the device (without the wait for a pread
    /// thread), microseconds.
    pub device_us: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Records of this device's segments fetched from a write buffer.
    pub buffer_reads: AtomicU64,
}

/// What `stats` shows of the scheduler.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NhcStats {
    pub enabled: bool,
    pub state: u32,
    pub data_admit: bool,
    pub load_admit: f64,
    pub entered_tune: u64,
    pub left_tune: u64,
    pub load_admit_moves: u64,
    /// Finished iterations of state 2, and the last one (its probes'
    /// reads per interval and scores, and the move), for traces.
    pub iterations: u64,
    pub last_iteration: Option<Iteration>,
    /// What the feedback measures.
    pub feedback: Option<Objective>,
    /// Copies of fast items on the capacity class pay now.
    pub copies_pay: bool,
    /// The balance feedback's learned limits (reads/s) and latency floors
    /// (us) per class, fast then capacity ([`Nhc::learned`](tiercache_policy::nhc::Nhc::learned)).
    pub limits: [f64; 2],
    pub floors_us: [f64; 2],
}

/// What a crash recovery found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Recovery {
    pub segments: u64,
    pub items: u64,
    /// Records dropped by a tombstone.
    pub dead: u64,
    /// Older records of keys that had a newer one (dropped after the scan).
    pub duplicates: u64,
    /// Segments with a valid header below their class's floor (not trusted).
    pub untrusted_segments: u64,
    pub bytes_read: u64,
}
