//! The chain of stores below RAM as one field of the RAM tier's `Shard`:
//! the flash log's part and the small store's part, the one lookup order
//! over them ([`Chain::locate`]), and the operations every change and the
//! shard's upkeep ask of the chain as a whole (the small store's part of
//! the crash gate, flush_all, figures). The log's part of the gate, its
//! tombstones and copies are [`LogPart`]'s.

use super::log::{Dropped, LogPart, Probed};
use super::small::SmallPart;
use super::Entries;
use crate::flash::{Fetched, ReadReq};
use crate::index::Index;
use crate::pool::SegmentPool;
use crate::store::{Located, Lower, CHAIN};

/// The stores below RAM of one shard.
pub(crate) struct Chain {
    /// The flash log's part (its tier is None without flash devices).
    pub(crate) log: LogPart,
    /// The shard's region of the small-object store, if there is one.
    pub(crate) small: Option<SmallPart>,
}

impl Chain {
    pub(crate) fn new(log: LogPart) -> Chain {
        Chain { log, small: None }
    }

    /// The one lookup order below RAM: asks the stores of `ask` (in chain
    /// order: [`CHAIN`](crate::store::CHAIN), or a tail of it) for `key`
    /// with the records and blocks in `fetched`; the first that holds it
    /// answers. A store that needs blocks read first answers [`Located::Need`];
    /// so does the log, at the end, when entries under the key's tag were
    /// not read (a lookup must read them before it says "not found").
    pub(crate) fn locate(
        &mut self,
        ask: &[Lower],
        index: &Index,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &Fetched,
    ) -> Located {
        for &lower in ask {
            let found = match lower {
                Lower::Log => self
                    .log
                    .locate(index, key, hash, now, fetched)
                    .map_or(Located::Absent, Located::Log),
                Lower::Small => match self.small.as_mut() {
                    Some(p) => p.lookup(key, now, fetched),
                    None => Located::Absent,
                },
            };
            if !matches!(found, Located::Absent) {
                return found;
            }
        }
        if self.log.unread(index, hash, fetched) {
            Located::Need
        } else {
            Located::Absent
        }
    }

    /// A probe in the lookup order ([`CHAIN`]): reads `key`'s log records
    /// into `fetched` as needed ([`LogPart::probe`]), and the small store's
    /// blocks only when the log has no verified record of the key and no
    /// read pending ([`SmallPart::find`]). Returns the log entries dropped
    /// on the way.
    pub(crate) fn probe(
        &mut self,
        mut ram: Entries<'_>,
        key: &[u8],
        hash: u64,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) -> Dropped {
        let mut dropped = Dropped::default();
        for lower in CHAIN {
            let probed = match lower {
                Lower::Log => (self.log).probe(&mut ram, key, hash, fetched, reads, &mut dropped),
                Lower::Small => match self.small.as_mut() {
                    Some(p) => {
                        let flash = self.log.tier().map(|f| &**f);
                        match p.find(key, ram.now, fetched, reads, flash) {
                            Located::Absent => Probed::Absent,
                            _ => Probed::Found,
                        }
                    }
                    None => Probed::Absent,
                },
            };
            if probed == Probed::Found {
                break;
            }
        }
        dropped
    }

    /// The small store's part of the crash gate ([`SmallPart::gate`]):
    /// Some(whether it held the key; false without a store) once it holds
    /// no copy of it; None when the change must wait.
    pub(crate) fn gate_small(&mut self, key: &[u8]) -> Option<bool> {
        match self.small.as_mut() {
            Some(p) => p.gate(key, false, self.log.tier().map(|f| &**f)),
            None => Some(false),
        }
    }

    /// [`gate_small`](Self::gate_small) for a change that replaces the key
    /// whatever it held (an insert): the small store may drop its copy by a
    /// tombstone in the crash journal, and the answer does not say whether
    /// it held one ([`SmallStore::gate_replace`](crate::small::SmallStore::gate_replace)).
    pub(crate) fn gate_small_replace(&mut self, key: &[u8]) -> bool {
        match self.small.as_mut() {
            Some(p) => p.gate(key, true, self.log.tier().map(|f| &**f)).is_some(),
            None => true,
        }
    }

    /// Whether a change of `key` must wait for the small store's
    /// invalidation of it ([`SmallStore::must_wait`](crate::small::SmallStore::must_wait);
    /// the key is queued for one): asked before a store takes RAM for the
    /// new item.
    pub(crate) fn small_must_wait(&mut self, key: &[u8]) -> bool {
        self.small
            .as_mut()
            .is_some_and(|p| p.store.must_wait_replace(key))
    }

    /// Ahead of a change that replaces or deletes `key` whatever it holds
    /// (pipelined behind a change that waits): queues the key's
    /// invalidation in the small store now, so that one job serves both
    /// ([`SmallStore::prepare`](crate::small::SmallStore::prepare)).
    pub(crate) fn small_prepare(&mut self, key: &[u8], overwrite: bool) {
        if let Some(p) = self.small.as_mut() {
            p.store.prepare(key, overwrite);
        }
    }

    /// Before a change of `key`: whether the small store needs blocks not
    /// in `fetched` to tell that it holds no copy of the key.
    pub(crate) fn small_check_needs_reads(&mut self, key: &[u8], fetched: &Fetched) -> bool {
        self.small
            .as_mut()
            .is_some_and(|p| p.check_needs_reads(key, fetched))
    }

    /// Before a plain set of `key`: the reads of the small store's blocks
    /// that its check will ask for ([`SmallPart::check_reads`]).
    pub(crate) fn small_check_reads(
        &mut self,
        key: &[u8],
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) {
        if let Some(p) = self.small.as_mut() {
            p.check_reads(key, fetched, reads, self.log.tier().map(|f| &**f));
        }
    }

    /// Runs `f` on the small store (a flusher thread's short phases),
    /// then counts its DRAM in the pool again and charges its set
    /// rewrites to the write budget.
    pub(crate) fn with_small_store(
        &mut self,
        pool: &SegmentPool,
        f: &mut dyn FnMut(&mut crate::small::SmallStore),
    ) {
        if let Some(p) = self.small.as_mut() {
            f(&mut p.store);
            p.report_bytes(pool);
            p.charge_writes(self.log.tier().map(|f| &**f));
        }
    }

    /// The small store's figures for this shard's region; None without one.
    pub(crate) fn small_figures(&self) -> Option<crate::small::SmallTotals> {
        self.small.as_ref().map(SmallPart::figures)
    }

    /// DRAM the small store holds now, as charged to `-m`.
    pub(crate) fn small_dram(&self) -> usize {
        self.small.as_ref().map_or(0, SmallPart::dram)
    }

    /// The shard's once-a-second upkeep of the chain (after the log's
    /// tombstones are pruned and the index resized): stale copies pruned,
    /// the small store's DRAM counted again.
    pub(crate) fn upkeep(&mut self, index: &Index, pool: &SegmentPool) {
        self.log.prune_copies(index, pool);
        if let Some(p) = self.small.as_mut() {
            p.report_bytes(pool);
        }
    }

    /// flush_all: the small store drops everything, durably (the log's
    /// records are covered by the journal's floor, raised before).
    pub(crate) fn flush(&mut self) -> std::io::Result<()> {
        match self.small.as_mut() {
            Some(p) => p.store.clear(),
            None => Ok(()),
        }
    }

    /// A graceful stop: the small store's open segment is written.
    pub(crate) fn write_small_buffer(&mut self) -> std::io::Result<()> {
        match self.small.as_mut() {
            Some(p) => p.store.flush_buffer(),
            None => Ok(()),
        }
    }
}
