//! [`FlashTier::stats_snapshot`]: the tier's figures read once into a
//! [`FlashStats`].

use super::*;
use crate::flash::stats::FlashStats;

impl FlashTier {
    /// The tier's and its journal's figures (`recovery` and `io_backend`,
    /// which the engine keeps, are None).
    pub fn stats_snapshot(&self) -> FlashStats {
        let l = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let (st, u, j) = (&self.stats, self.usage(), self.journal());
        let classes = self.class_stats();
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
            reclaim_waits: l(&st.reclaim_waits),
            buffer_reads: l(&st.buffer_reads),
            buffer_reads_open: l(&st.buffer_reads_open),
            admission_refused: l(&st.admission_refused),
            degraded: self.degraded(),
            journal_commits: l(&j.stats.commits),
            journal_tombstones: l(&j.stats.tombstones),
            // The floor of the class new items land on (fast when it has devices).
            journal_floor: j.floor(self.new_class),
            journal_floor_capacity: j.floor(DeviceClass::Capacity),
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
            promotions_refused: l(&st.promotions_refused),
            copies_made: l(&st.copies_made),
            copies_refused: l(&st.copies_refused),
            copies_dropped: l(&st.copies_dropped),
            dual_fast_reads: l(&st.dual_fast_reads),
            dual_capacity_reads: l(&st.dual_capacity_reads),
        }
    }
}
