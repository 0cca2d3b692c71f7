//! A bounded FIFO set of key hashes: remembers what was recently evicted from
//! probation, so that a returning key goes straight to main (S3-FIFO's ghost queue).
//!
//! Each entry has a weight, and the set holds at most `capacity` of weight:
//! weight 1 bounds it in entries (the engine, which sees no sizes), the
//! object's size bounds it in bytes (libCacheSim's ghost FIFO, sized at a
//! share of the cache's bytes).
//!
//! Dead entries in the FIFO (taken or replaced) are dropped by a
//! compaction done a few entries per insert, not in one pass over the
//! FIFO (about a millisecond for 100k entries, inside an evacuation slice).
//!
//! The live entries are split over [`PARTS`] hash maps by their hash, so
//! that a map that grows rehashes a thousandth of them: in the server a
//! ghost is updated under a shard's lock, and one map of a hundred
//! thousand entries took 1.4 to 2.6 ms to rehash, the longest lock holds
//! of a set (measured with `stats locks`). The maps hash with
//! [`IdHasher`](crate::queue_cache::IdHasher) (the keys are hashes
//! already), not SipHash.
//!
//! A lowered capacity is reached [`TRIM_EXTRA`] entries per call beyond
//! what an insert adds, not in one walk; after a compaction the two FIFO
//! buffers trade places rather than one being regrown from empty.
//!
//! Still, each eviction costs a few random lookups (the insert, the trim
//! at the front, compaction steps): about 5 µs of a 64-item evacuation
//! slice's CPU when the maps are cold. A table that needs none (an entry
//! remembered while less than the capacity came in since) was tried and
//! measured: the longest evacuation hold on the CPU about halved (394-411
//! against 822-846 µs, bench/RESULTS.md), but it is not an exact FIFO, and the
//! simulator's S3-FIFO then differed from libCacheSim's by up to 2.3%
//! (tests/libcachesim_reference.rs asks for 2 misses): not taken yet.

use crate::queue_cache::IdMap;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct Ghost {
    /// (hash, sequence number, weight), oldest first; entries taken or
    /// replaced since stay here until they reach the front, or until a
    /// compaction drops them. The whole order is `compacted` then `order`.
    order: VecDeque<(u64, u64, u64)>,
    /// While a compaction is under way: the live entries it has moved from
    /// the front of `order`, oldest first ([`Ghost::compact_step`]).
    compacted: VecDeque<(u64, u64, u64)>,
    compacting: bool,
    /// Live entries: hash to (sequence number, weight), in [`PARTS`] maps
    /// by [`part`]; empty until the first insert.
    members: Vec<IdMap<(u64, u64)>>,
    /// How many live entries there are.
    live: usize,
    seq: u64,
    /// Total weight of the live entries.
    weight: u64,
    capacity: u64,
}

impl Ghost {
    pub fn new(capacity: usize) -> Ghost {
        Ghost {
            capacity: capacity as u64,
            ..Default::default()
        }
    }

    /// Bounds the entries' total weight (an entry count when every weight is 1).
    pub fn set_capacity(&mut self, capacity: usize) {
        self.set_capacity_weight(capacity as u64);
    }

    pub fn set_capacity_weight(&mut self, capacity: u64) {
        self.capacity = capacity;
        self.trim();
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The live entry of `hash`: (sequence number, weight).
    fn get(&self, hash: u64) -> Option<(u64, u64)> {
        self.members.get(part(hash))?.get(&hash).copied()
    }

    fn remove(&mut self, hash: u64) -> Option<(u64, u64)> {
        let m = self.members.get_mut(part(hash))?.remove(&hash);
        self.live -= usize::from(m.is_some());
        m
    }

    /// Total weight of the entries held.
    pub fn weight(&self) -> u64 {
        self.weight
    }

    pub fn insert(&mut self, hash: u64) {
        self.insert_weighted(hash, 1);
    }

    /// Remembers `hash` with `weight`, forgetting the oldest entries until the
    /// total fits. An entry heavier than the whole capacity is not kept.
    pub fn insert_weighted(&mut self, hash: u64, weight: u64) {
        if weight > self.capacity {
            return;
        }
        self.seq += 1;
        if self.members.is_empty() {
            self.members = (0..PARTS).map(|_| IdMap::default()).collect();
        }
        match self.members[part(hash)].insert(hash, (self.seq, weight)) {
            Some((_, w)) => self.weight -= w,
            None => self.live += 1,
        }
        self.weight += weight;
        self.order.push_back((hash, self.seq, weight));
        self.trim_by(weight);
    }

    /// Removes and reports whether the hash was present.
    pub fn take(&mut self, hash: u64) -> bool {
        match self.remove(hash) {
            Some((_, w)) => {
                self.weight -= w;
                true
            }
            None => false,
        }
    }

    fn trim(&mut self) {
        self.trim_by(0);
    }

    /// Forgets the oldest entries while the weight is over the capacity:
    /// as many as it takes to shed `owed` (the weight an insert just
    /// added, so a fixed capacity is kept exactly, as libCacheSim's FIFO
    /// does), then at most [`TRIM_EXTRA`] more, so that a capacity cut
    /// (the engine sets one after every segment it empties) is reached a
    /// few entries per call, each a random map lookup: a cut of thousands
    /// applied in one call took hundreds of microseconds of a shard's lock.
    fn trim_by(&mut self, owed: u64) {
        let entries = self.order.len() + self.compacted.len();
        if !self.compacting && entries > 2 * self.live + 16 {
            // Mostly taken or replaced entries: a compaction keeps only the
            // live ones, [`COMPACT_STEP`] entries per call from now on.
            self.compacting = true;
        }
        if self.compacting {
            self.compact_step(COMPACT_STEP);
        }
        let (mut shed, mut extra) = (0, 0);
        while self.weight > self.capacity && (shed < owed || extra < TRIM_EXTRA) {
            let front = match self.compacted.pop_front() {
                Some(e) => Some(e),
                None => self.order.pop_front(),
            };
            match front {
                Some((h, s, w)) => {
                    if self.is_live(h, s) {
                        self.remove(h);
                        self.weight -= w;
                        if shed < owed {
                            shed += w;
                        } else {
                            extra += 1;
                        }
                    }
                }
                None => break,
            }
        }
    }

    /// Whether the FIFO entry (`hash`, `seq`) is its hash's live entry.
    fn is_live(&self, hash: u64, seq: u64) -> bool {
        self.get(hash).map(|m| m.0) == Some(seq)
    }

    /// Moves up to `n` entries from the front of `order` to the back of
    /// `compacted`, dropping dead ones: the FIFO's order is kept. Each call
    /// moves more than an insert adds, so the compaction ends; then
    /// `compacted` is the whole FIFO.
    fn compact_step(&mut self, n: usize) {
        for _ in 0..n {
            match self.order.pop_front() {
                Some(e) if self.is_live(e.0, e.1) => self.compacted.push_back(e),
                Some(_) => {}
                None => {
                    // The buffers trade places, keeping their capacity: a
                    // FIFO of many thousand entries regrown from empty
                    // at every compaction reallocated and copied it all.
                    std::mem::swap(&mut self.order, &mut self.compacted);
                    self.compacting = false;
                    return;
                }
            }
        }
    }
}

/// Maps the live entries are split over: a map that grows rehashes
/// 1/1024 of the entries. With 64 maps, a ghost sized to a shard's RAM
/// items (hundreds of thousands at `-m 64` and 100-byte values) rehashed
/// maps of about ten thousand entries at once: the suspected cause of
/// evacuation slices of 120-300 us on the CPU (issue 31; slices that long
/// were still seen after this change, so not the only one). 1024 empty
/// maps cost 32 KiB.
const PARTS: usize = 1024;

/// FIFO entries a compaction looks at per insert (an insert adds one).
const COMPACT_STEP: usize = 8;

/// The most live entries one call forgets beyond an insert's own weight,
/// to fit a lowered capacity.
pub const TRIM_EXTRA: usize = 2;

/// The map of `hash`: its top bits after a multiplication, so that small
/// hashes (a trace's object ids, in the simulator) spread too.
#[inline]
fn part(hash: u64) -> usize {
    (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - PARTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_keeps_the_fifo_order_and_bounds_the_dead() {
        let mut g = Ghost::new(1000);
        for h in 0..1000 {
            g.insert(h);
        }
        // Most taken: a compaction starts and runs a step per insert.
        for h in 0..900 {
            assert!(g.take(h));
        }
        for h in 1000..1100 {
            g.insert(h);
        }
        assert!(g.order.len() + g.compacted.len() <= 2 * g.len() + 16 + COMPACT_STEP);
        // The oldest live entries still go first: 200 live, cut to 150,
        // and 50 more inserted (the cut is reached a few per insert).
        g.set_capacity(150);
        for h in 2000..2050 {
            g.insert(h);
        }
        assert_eq!(g.len(), 150);
        for h in 900..1000 {
            assert!(!g.take(h), "{h} was among the oldest");
        }
        for h in (1000..1100).chain(2000..2050) {
            assert!(g.take(h), "{h} is still there");
        }
        assert!(g.is_empty());
    }

    #[test]
    fn a_lower_capacity_is_reached_a_step_per_call() {
        let mut g = Ghost::new(10_000);
        for h in 0..10_000 {
            g.insert(h);
        }
        g.set_capacity(100);
        assert_eq!(
            g.len(),
            10_000 - TRIM_EXTRA,
            "one step, not the whole excess"
        );
        let mut n = 0;
        while g.len() > 100 {
            g.insert(1_000_000 + n);
            n += 1;
            assert!(g.len() < 10_000, "each insert forgets more than it adds");
        }
        assert!(n as usize <= 10_000 / TRIM_EXTRA + 1, "{n} inserts");
        // The oldest went first, the newest stayed.
        assert!(!g.take(9_000));
        assert!(g.take(1_000_000 + n - 1));
    }

    #[test]
    fn bounded_and_fifo() {
        let mut g = Ghost::new(2);
        g.insert(1);
        g.insert(2);
        g.insert(3);
        assert!(!g.take(1));
        assert!(g.take(3));
        assert!(!g.take(3));
        assert_eq!(g.len(), 1);
    }

    #[test]
    fn bounded_by_weight() {
        let mut g = Ghost::new(0);
        g.set_capacity_weight(100);
        g.insert_weighted(1, 60);
        g.insert_weighted(2, 30);
        assert_eq!(g.weight(), 90);
        g.insert_weighted(3, 20); // 110 > 100: the oldest (1) goes
        assert!(!g.take(1));
        assert_eq!(g.weight(), 50);
        g.insert_weighted(4, 101); // heavier than the capacity: not kept
        assert!(!g.take(4));
        assert!(g.take(2) && g.take(3));
        assert_eq!(g.weight(), 0);
        // A heavy insert forgets as many light ones as its weight needs,
        // however many: a fixed capacity is kept exactly.
        for h in 10..110 {
            g.insert_weighted(h, 1);
        }
        g.insert_weighted(200, 50);
        assert_eq!(g.weight(), 100);
        assert!(!g.take(59) && g.take(60));
    }
}
