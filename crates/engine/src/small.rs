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
#[cfg(test)]
mod flush_tests;
pub mod format;
pub mod inval;
pub mod invalidate;
pub mod log;
pub mod lookup;
pub mod recover;
mod sets;
pub mod store;
#[cfg(test)]
mod tests;

pub use format::Obj;
pub use invalidate::{Check, Gate};
pub use lookup::{Found, Step};
pub use recover::Recovered;
pub use store::{SmallConfig, SmallStore};

/// The store's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SmallStats {
    pub objects_admitted: u64,
    /// Key and value bytes admitted.
    pub bytes_admitted: u64,
    pub log_bytes_written: u64,
    pub log_segments_written: u64,
    pub set_bytes_written: u64,
    pub sets_written: u64,
    /// Log objects written into their set.
    pub moved: u64,
    /// Log objects dropped (their set had too few log objects) and readmitted (hit).
    pub dropped: u64,
    pub readmitted: u64,
    /// Objects evicted from a full set.
    pub evicted: u64,
    /// Set rewrites for a delete or an overwrite (durable ones on the
    /// changing thread, or those of invalidation jobs).
    pub invalidations: u64,
    /// Invalidation jobs queued, the keys they took, and the changes told
    /// to wait for one ([`SmallStore::gate`]).
    pub invalidate_jobs: u64,
    pub invalidate_keys: u64,
    pub invalidate_waits: u64,
    /// Changes whose key the filter or a log tag said the store may hold,
    /// cleared by reading its blocks instead of waiting for a job
    /// ([`SmallStore::check_with`]).
    pub change_checks: u64,
    pub hits_buffer: u64,
    pub hits_log: u64,
    pub hits_set: u64,
    /// Device reads for gets, and those that found nothing (filter false positives).
    pub reads: u64,
    pub false_positive_reads: u64,
    pub verify_failures: u64,
    /// Admissions refused because a segment flush had to wait (see
    /// [`SmallStore::set_flush_duty`]).
    pub deferred: u64,
    /// Changes (and stops) that had to finish a segment flush under way
    /// first: it rewrote their key's set, or was writing the key.
    pub flush_waits: u64,
    /// Microseconds segment flushes spent on the device (from the read of
    /// the oldest segment to the write of the sealed one).
    pub flush_us: u64,
    /// Microseconds of flush work done holding the store's owner's lock
    /// (its shard's): all of it for a flush on the request thread, the
    /// plan and the commit for a background one, and the waits of changes
    /// that had to finish a flush first. The longest single hold.
    pub flush_locked_us: u64,
    pub flush_locked_max_us: u64,
}

/// The store's figures over all its regions, for `stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SmallTotals {
    pub stats: SmallStats,
    /// Objects held (older log copies of a key included).
    pub objects: u64,
    /// DRAM the store holds (filters, log index, segment buffers).
    pub dram_bytes: u64,
    /// Objects in the log (its index's entries), of `objects`.
    pub log_objects: u64,
    /// Of `dram_bytes`: the per-set filters (a fixed cost, sized for the
    /// region), and the log index (which grows with the log's objects).
    pub dram_filter_bytes: u64,
    pub dram_log_bytes: u64,
    /// Device bytes of the store's regions.
    pub region_bytes: u64,
}

impl SmallTotals {
    /// Adds another region's figures.
    pub fn add(&mut self, o: &SmallTotals) {
        self.stats.add(&o.stats);
        self.objects += o.objects;
        self.dram_bytes += o.dram_bytes;
        self.log_objects += o.log_objects;
        self.dram_filter_bytes += o.dram_filter_bytes;
        self.dram_log_bytes += o.dram_log_bytes;
        self.region_bytes += o.region_bytes;
    }
}

impl SmallStats {
    /// Adds another region's counters.
    pub fn add(&mut self, o: &SmallStats) {
        self.objects_admitted += o.objects_admitted;
        self.bytes_admitted += o.bytes_admitted;
        self.log_bytes_written += o.log_bytes_written;
        self.log_segments_written += o.log_segments_written;
        self.set_bytes_written += o.set_bytes_written;
        self.sets_written += o.sets_written;
        self.moved += o.moved;
        self.dropped += o.dropped;
        self.readmitted += o.readmitted;
        self.evicted += o.evicted;
        self.invalidations += o.invalidations;
        self.invalidate_jobs += o.invalidate_jobs;
        self.invalidate_keys += o.invalidate_keys;
        self.invalidate_waits += o.invalidate_waits;
        self.change_checks += o.change_checks;
        self.hits_buffer += o.hits_buffer;
        self.hits_log += o.hits_log;
        self.hits_set += o.hits_set;
        self.reads += o.reads;
        self.false_positive_reads += o.false_positive_reads;
        self.verify_failures += o.verify_failures;
        self.deferred += o.deferred;
        self.flush_waits += o.flush_waits;
        self.flush_us += o.flush_us;
        self.flush_locked_us += o.flush_locked_us;
        self.flush_locked_max_us = self.flush_locked_max_us.max(o.flush_locked_max_us);
    }

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
