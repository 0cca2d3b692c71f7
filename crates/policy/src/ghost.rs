//! A bounded FIFO set of key hashes: remembers what was recently evicted from
//! probation, so that a returning key goes straight to main (S3-FIFO's ghost queue).
//!
//! Each entry has a weight, and the set holds at most `capacity` of weight:
//! weight 1 bounds it in entries (the engine, which sees no sizes), the
//! object's size bounds it in bytes (libCacheSim's ghost FIFO, sized at a
//! share of the cache's bytes).
//!
//! The live entries are split over [`PARTS`] hash maps by their hash, so
//! that a map that grows rehashes a sixty-fourth of them: in the server a
//! ghost is updated under a shard's lock, and one map of a hundred
//! thousand entries took 1.4 to 2.6 ms to rehash, the longest lock holds
//! of a set (measured with `stats locks`).

use std::collections::{HashMap, VecDeque};

#[derive(Debug, Default)]
pub struct Ghost {
    /// (hash, sequence number, weight), oldest first; entries taken or
    /// replaced since stay here until they reach the front.
    order: VecDeque<(u64, u64, u64)>,
    /// Live entries: hash to (sequence number, weight), in [`PARTS`] maps
    /// by [`part`]; empty until the first insert.
    members: Vec<HashMap<u64, (u64, u64)>>,
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
            self.members = (0..PARTS).map(|_| HashMap::new()).collect();
        }
        match self.members[part(hash)].insert(hash, (self.seq, weight)) {
            Some((_, w)) => self.weight -= w,
            None => self.live += 1,
        }
        self.weight += weight;
        self.order.push_back((hash, self.seq, weight));
        self.trim();
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
        if self.order.len() > 2 * self.live + 16 {
            // Mostly taken or replaced entries: keep only the live ones.
            let order = std::mem::take(&mut self.order);
            self.order = order
                .into_iter()
                .filter(|&(h, s, _)| self.get(h).map(|m| m.0) == Some(s))
                .collect();
        }
        while self.weight > self.capacity {
            match self.order.pop_front() {
                Some((h, s, w)) => {
                    if self.get(h).map(|m| m.0) == Some(s) {
                        self.remove(h);
                        self.weight -= w;
                    }
                }
                None => break,
            }
        }
    }
}

/// Maps the live entries are split over.
const PARTS: usize = 64;

/// The map of `hash`: its top bits after a multiplication, so that small
/// hashes (a trace's object ids, in the simulator) spread too.
#[inline]
fn part(hash: u64) -> usize {
    (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
