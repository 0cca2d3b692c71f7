//! The items a flush_all dropped, remembered until the next expiry sweep so
//! that `stats` counts them as memcached does.
//!
//! memcached leaves flushed items in memory: a lookup that finds one counts
//! `get_flushed` (and drops it), and one that is reached first by the LRU
//! tail or the maintainer counts `reclaimed` (plus `expired_unfetched` if it
//! was never read). tiercache frees a shard's segments at once, so it keeps
//! the key hashes of the RAM items it dropped here: a lookup of one of them
//! before the sweep after next (one to two seconds; expired items get one)
//! counts `get_flushed`, and that sweep counts the rest as `reclaimed`. The
//! set is bounded (see [`Flushed::remember`]); items beyond the bound are
//! counted `reclaimed` at the flush.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use tiercache_policy::queue_cache::IdHasher;

/// Sets the hashes are spread over, so that none grows (rehashes) by more
/// than a few thousand entries in one step: a flush remembers the keys a
/// slice per lock hold, and one set of 65,536 hashes doubling took a few
/// hundred microseconds of a hold.
const PARTS: usize = 64;

type Part = HashSet<u64, BuildHasherDefault<IdHasher>>;

/// Key hashes with their low bit replaced by the item's "fetched" bit.
#[derive(Debug, Default)]
pub struct Flushed {
    parts: Vec<Part>,
    len: usize,
    /// A sweep has seen them: the next one drains them.
    aged: bool,
}

/// The part a hash is kept in (bits the low "fetched" bit does not touch).
#[inline]
fn part_of(hash: u64) -> usize {
    (hash >> 40) as usize % PARTS
}

/// What the sweep found left over.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Leftover {
    pub items: u64,
    pub unfetched: u64,
}

impl Flushed {
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Remembers a dropped item; false when the set is full (`cap` entries).
    pub fn remember(&mut self, hash: u64, fetched: bool, cap: usize) -> bool {
        if self.len >= cap {
            return false;
        }
        if self.parts.is_empty() {
            self.parts.resize_with(PARTS, Part::default);
        }
        if self.parts[part_of(hash)].insert((hash & !1) | u64::from(fetched)) {
            self.len += 1;
        }
        true
    }

    /// A lookup missed: whether the key was one of the flushed items (it is
    /// then forgotten, so it counts once).
    #[inline]
    pub fn take(&mut self, hash: u64) -> bool {
        if self.len == 0 {
            return false;
        }
        let part = &mut self.parts[part_of(hash)];
        let took = part.remove(&(hash & !1)) || part.remove(&(hash | 1));
        self.len -= usize::from(took);
        took
    }

    /// At an expiry sweep: what is left from the flush before the previous
    /// sweep (a flush the same sweep applied keeps its items a while).
    pub fn sweep(&mut self) -> Leftover {
        if self.len == 0 {
            return Leftover::default();
        }
        if !self.aged {
            self.aged = true;
            return Leftover::default();
        }
        self.drain()
    }

    /// Forgets everything; returns what was left.
    pub fn drain(&mut self) -> Leftover {
        self.aged = false;
        let items = std::mem::take(&mut self.len) as u64;
        let parts = std::mem::take(&mut self.parts);
        let unfetched = parts.iter().flatten().filter(|&&h| h & 1 == 0).count() as u64;
        Leftover { items, unfetched }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_takes_once_and_drains() {
        let mut f = Flushed::default();
        assert!(f.remember(10, false, 3));
        assert!(f.remember(21, true, 3));
        assert!(f.remember(30, true, 3));
        assert!(!f.remember(40, false, 3), "full");
        assert!(f.take(21));
        assert!(!f.take(21), "counted once");
        assert!(!f.take(99));
        assert_eq!(f.sweep(), Leftover::default(), "kept one sweep");
        assert_eq!(
            f.sweep(),
            Leftover {
                items: 2,
                unfetched: 1
            }
        );
        assert!(f.is_empty());
    }
}
