//! [`FlashStats`]: the flash tier's figures for `stats`, read once into a
//! plain struct, so that a front end formats numbers instead of reading the
//! tier's and the journal's atomics itself; and the counters those figures
//! are read from ([`TierStats`], [`DevStats`]), kept here at the bottom of
//! the flash tier so that its files import them without importing the tier.

use crate::device::io::IoBackend;
use crate::stat::stats_struct;
use std::sync::atomic::AtomicU64;
use tiercache_policy::nhc::{Iteration, Objective};

/// The flash tier's figures at one moment. The per-item counts kept by the
/// shards (flash items and hits, demotions, promotions) are in
/// [`crate::EngineStats`]'s `shard`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlashStats {
    /// Bytes in a flash segment.
    pub segment_size: u64,
    /// Bytes of device space for segments.
    pub capacity: u64,
    /// Bytes of RAM in write buffers (part of the `-m` budget).
    pub buffer_bytes: u64,
    /// Segments by state.
    pub segments_free: u64,
    pub segments_sealed: u64,
    pub segments_queued: u64,
    pub segments_failed: u64,
    pub segments_written: u64,
    /// Idle open buffers written without being sealed (`checkpoint`).
    pub checkpoints: u64,
    pub segments_reclaimed: u64,
    pub objects_written: u64,
    pub objects_read: u64,
    pub objects_reinserted: u64,
    /// Bytes written to the devices (segments, whole).
    pub bytes_written: u64,
    /// Bytes of records appended to write buffers.
    pub bytes_admitted: u64,
    pub bytes_read: u64,
    /// Reads submitted and not completed yet (a gauge).
    pub reads_in_flight: u64,
    pub read_errors: u64,
    pub verify_failures: u64,
    pub tag_misses: u64,
    pub write_errors: u64,
    /// Requests that waited for the device (back-pressure).
    pub busy: u64,
    /// Times a reclaim's move or reinsert of a record waited for a write
    /// buffer (the flusher then wrote a queued one, or waited a moment).
    pub reclaim_waits: u64,
    pub admission_refused: u64,
    /// Serving from RAM only (the device failed, or the journal did).
    pub degraded: bool,
    pub journal_commits: u64,
    pub journal_tombstones: u64,
    /// The crash journal's floor of the class new items land on (fast when
    /// there is one), and of the capacity class.
    pub journal_floor: u64,
    pub journal_floor_capacity: u64,
    pub journal_wrap_floor_raises: u64,
    pub journal_failed: bool,
    /// A failed journal is recorded where the next start looks.
    pub journal_failure_recorded: bool,
    /// What the crash recovery at start found (filled by
    /// [`crate::Engine::flash_stats`]; None after a graceful restart).
    pub recovery: Option<Recovery>,
    /// The reader in use (filled by [`crate::Engine::flash_stats`]).
    pub io_backend: Option<IoBackend>,
    /// Per device class (indexed by a `DeviceClass`, or in `CLASSES` order).
    pub classes: crate::flash::class::PerClass<ClassStats>,
    /// The non-hierarchical caching scheduler.
    pub nhc: NhcStats,
    /// Fast-class records moved to the capacity class on reclaim (written
    /// again), and those whose capacity copy became the entry instead.
    pub moves: u64,
    pub moves_to_copy: u64,
    /// Capacity hits copied into the fast class.
    pub promotions: u64,
    /// Fast hits copied to the capacity class while copies paid, and those
    /// copies released when the capacity class reclaimed them (the fast
    /// record became the entry again, nothing written).
    pub copies_made: u64,
    pub copies_dropped: u64,
    /// Hits on items with copies on both classes, by the class that served them.
    pub dual_fast_reads: u64,
    pub dual_capacity_reads: u64,
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
    /// Fast hits copied to the capacity class (copies where they pay), and
    /// those released by the capacity class's reclaim.
    pub copies_made: AtomicU64,
    pub copies_dropped: AtomicU64,
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
