//! [`FlashStats`]: the flash tier's figures for `stats`, read once into a
//! plain struct, so that a front end formats numbers instead of reading the
//! tier's and the journal's atomics itself.

use super::io::IoBackend;
use super::tier::{FlashTier, NhcStats, Recovery};
use std::sync::atomic::Ordering;

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
    /// Per device class: fast, capacity.
    pub classes: [ClassStats; 2],
    /// The non-hierarchical caching scheduler.
    pub nhc: NhcStats,
    /// Fast-class records moved to the capacity class on reclaim (written
    /// again), and those whose capacity copy became the entry instead.
    pub moves: u64,
    pub moves_to_copy: u64,
    /// Capacity hits copied into the fast class.
    pub promotions: u64,
    /// Hits on items with copies on both classes, by the class that served them.
    pub dual_fast_reads: u64,
    pub dual_capacity_reads: u64,
}

/// One device class's figures.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClassStats {
    pub devices: u64,
    pub segments: u64,
    pub segments_free: u64,
    pub reads: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Reads in flight now (the queue depth).
    pub queue_depth: u64,
    /// Sum of read latencies, microseconds (mean = this / reads).
    pub latency_us: u64,
    /// Of that, the time at the devices (without the wait for a pread
    /// thread), microseconds.
    pub device_us: u64,
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

impl FlashTier {
    /// The tier's and its journal's figures (`recovery` and `io_backend`,
    /// which the engine keeps, are None).
    pub fn stats_snapshot(&self) -> FlashStats {
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let (st, u, j) = (&self.stats, self.usage(), self.journal());
        let classes = self.class_stats();
        // New items land on the fast class when it has devices.
        let new_class = usize::from(classes[0].devices == 0);
        FlashStats {
            segment_size: self.segment_size() as u64,
            capacity: self.capacity(),
            buffer_bytes: self.buffer_bytes() as u64,
            segments_free: u.free,
            segments_sealed: u.sealed,
            segments_queued: u.queued,
            segments_failed: u.failed,
            segments_written: l(&st.segments_written),
            checkpoints: l(&st.checkpoints),
            segments_reclaimed: l(&st.segments_reclaimed),
            objects_written: l(&st.objects_written),
            objects_read: l(&st.objects_read),
            objects_reinserted: l(&st.objects_reinserted),
            bytes_written: l(&st.bytes_written),
            bytes_admitted: l(&st.bytes_admitted),
            bytes_read: l(&st.bytes_read),
            reads_in_flight: l(&st.reads_in_flight),
            read_errors: l(&st.read_errors),
            verify_failures: l(&st.verify_failures),
            tag_misses: l(&st.tag_misses),
            write_errors: l(&st.write_errors),
            busy: l(&st.busy),
            admission_refused: l(&st.admission_refused),
            degraded: self.degraded(),
            journal_commits: l(&j.stats.commits),
            journal_tombstones: l(&j.stats.tombstones),
            journal_floor: j.floor(new_class),
            journal_floor_capacity: j.floor(1),
            journal_wrap_floor_raises: l(&j.stats.wrap_floor_raises),
            journal_failed: j.failed(),
            journal_failure_recorded: self.distrust.recorded(),
            recovery: None,
            io_backend: None,
            classes,
            nhc: self.nhc_stats(),
            moves: l(&st.moves),
            moves_to_copy: l(&st.moves_to_copy),
            promotions: l(&st.promotions),
            dual_fast_reads: l(&st.dual_fast_reads),
            dual_capacity_reads: l(&st.dual_capacity_reads),
        }
    }
}
