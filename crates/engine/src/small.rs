//! The dense small-object store (issue 16; docs/SMALL.md): Kangaroo's
//! layout in tiercache's format. A small flash log (KLog, [`log`]) with a
//! compact index partitioned by set sits in front of a large
//! set-associative store of 4 KiB sets ([`format`]); objects move from the
//! log to their set several at a time, and the sets need no per-object
//! DRAM pointer: a per-set Bloom filter, hit bits and a write generation
//! ([`filter`]). [`store`] holds the write and move paths, [`lookup`] the
//! reads, [`invalidate`] the changes of keys it holds, [`recover`]
//! the start from what the device holds, [`flush`] the segment flushes,
//! whose device I/O can run off the shard's lock.

#[cfg(test)]
mod crash_tests;
pub mod filter;
pub mod flush;
mod flush_io;
#[cfg(test)]
mod flush_tests;
pub mod format;
pub mod inval;
pub mod invalidate;
pub mod log;
pub mod lookup;
pub mod recover;
mod setio;
mod sets;
pub mod store;
mod store_tombs;
#[cfg(test)]
mod tests;
mod tomb;
#[cfg(test)]
mod tomb_tests;

pub use format::Obj;
pub use invalidate::{Check, Gate};
pub use lookup::{Found, Step};
pub use recover::Recovered;
pub use store::{SmallConfig, SmallStore};

use crate::stat::stats_struct;

stats_struct! {
    /// The store's counters, with their `stats` names, in the order `stats`
    /// shows them.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct SmallStats {
        objects_admitted: counter => "small_objects_admitted";
        /// Key and value bytes admitted.
        bytes_admitted: counter => "small_bytes_admitted";
        log_bytes_written: counter => "small_log_bytes_written";
        set_bytes_written: counter => "small_set_bytes_written";
        sets_written: counter => "small_sets_written";
        /// Log objects written into their set.
        moved: counter => "small_moved";
        /// Log objects dropped (their set had too few log objects) and readmitted (hit).
        dropped: counter => "small_dropped";
        readmitted: counter => "small_readmitted";
        /// Objects evicted from a full set.
        evicted: counter => "small_evicted";
        /// Set rewrites for a delete or an overwrite (durable ones on the
        /// changing thread, or those of invalidation jobs).
        invalidations: counter => "small_invalidations";
        /// Invalidation jobs queued, the keys they took, and the changes told
        /// to wait for one ([`SmallStore::gate`]).
        invalidate_jobs: counter => "small_invalidate_jobs";
        invalidate_keys: counter => "small_invalidate_keys";
        invalidate_waits: counter => "small_invalidate_waits";
        /// Changes whose key the filter or a log tag said the store may hold,
        /// cleared by reading its blocks instead of waiting for a job
        /// ([`SmallStore::check_with`]).
        change_checks: counter => "small_change_checks";
        /// Changes of keys the store may hold made durable by a tombstone
        /// in the crash journal instead of a set rewrite, the changes told
        /// to wait for its commit, and the tombstones retired by a set
        /// rewrite (docs/SMALL.md, "Changes of held keys").
        tombstones: counter => "small_tombstones";
        tombstone_waits: counter => "small_tombstone_waits";
        tombstones_retired: counter => "small_tombstones_retired";
        /// Admissions refused because a segment flush had to wait (see
        /// [`SmallStore::set_flush_duty`]).
        deferred: counter => "small_deferred";
        /// Small items sent to the log-structured tier because its index
        /// had room for them (the default choice: docs/SMALL.md).
        index_room: counter => "small_index_room";
        /// Small items sent to the log-structured tier because the store's
        /// DRAM had no room in the index's budget (the index could not give
        /// it more).
        deferred_dram: counter => "small_deferred_dram";
        log_segments_written: counter => "small_log_segments_written";
        /// Changes (and stops) that had to finish a segment flush under way
        /// first: it rewrote their key's set, or was writing the key.
        flush_waits: counter => "small_flush_waits";
        /// Microseconds segment flushes spent on the device (from the read of
        /// the oldest segment to the write of the sealed one).
        flush_us: counter => "small_flush_us";
        /// Where segment flushes' time went (microseconds; added by issue
        /// 32's measurement): sealed to the start of the device work (the
        /// queue, the flush duty), the read of the segment written over,
        /// the set and log page reads (and their count), the set rebuilds
        /// (CPU), the set writes, the sync before the segment write, and
        /// the sealed segment's write.
        flush_queue_us: counter => "small_flush_queue_us";
        flush_old_read_us: counter => "small_flush_old_read_us";
        flush_reads: counter => "small_flush_reads";
        flush_read_us: counter => "small_flush_read_us";
        flush_build_us: counter => "small_flush_build_us";
        flush_write_us: counter => "small_flush_write_us";
        flush_sync_us: counter => "small_flush_sync_us";
        flush_log_write_us: counter => "small_flush_log_write_us";
        /// Microseconds of flush work done holding the store's owner's lock
        /// (its shard's): all of it for a flush on the request thread, the
        /// plan and the commit for a background one, and the waits of changes
        /// that had to finish a flush first. The longest single hold.
        flush_locked_us: counter => "small_flush_locked_us";
        flush_locked_max_us: max => "small_flush_locked_max_us";
        /// Hits in the write buffer (shown only in `small_hits`), the log and
        /// the sets.
        hits_buffer: counter => "small_hits_buffer" in Hidden;
        hits_log: counter => "small_hits_log";
        hits_set: counter => "small_hits_set";
        /// Device reads for gets, and those that found nothing (filter false positives).
        reads: counter => "small_reads";
        false_positive_reads: counter => "small_false_positive_reads";
        verify_failures: counter => "small_verify_failures";
    }
}

stats_struct! {
    /// The store's figures over all its regions, for `stats`: its levels,
    /// then its counters.
    #[derive(Debug, Clone, Copy, Default, PartialEq)]
    pub struct SmallTotals {
        /// Objects held (older log copies of a key included).
        objects: gauge => "small_objects";
        /// Device bytes of the store's regions.
        region_bytes: gauge => "small_region_bytes";
        /// DRAM the store holds (filters, log index, segment buffers).
        dram_bytes: gauge => "small_dram_bytes";
        /// Objects in the log (its index's entries), of `objects`.
        log_objects: gauge => "small_log_objects";
        /// Of `dram_bytes`: the per-set filters (a fixed cost, sized for the
        /// region), and the log index (which grows with the log's objects).
        dram_filter_bytes: gauge => "small_dram_filter_bytes";
        dram_log_bytes: gauge => "small_dram_log_bytes";
        /// Tombstones whose set is not rewritten yet.
        tombstones_live: gauge => "small_tombstones_live";
        stats: nested [SmallStats];
    }
}

impl SmallStats {
    /// Device bytes written per key-and-value byte admitted.
    pub fn write_amplification(&self) -> f64 {
        let w = self.log_bytes_written + self.set_bytes_written;
        if self.bytes_admitted == 0 {
            0.0
        } else {
            w as f64 / self.bytes_admitted as f64
        }
    }
}
