//! The hash index: buckets of eight 64-bit slots (one cache line), chained
//! into overflow buckets when full. A slot holds a 16-bit tag from the key's
//! hash and the item's location (segment, offset / 8); the key itself lives
//! with the item, so a tag match is confirmed by comparing keys, and a tag
//! collision costs one extra comparison, never a wrong answer.
//!
//! ```text
//! slot = tag:16 | segment:24 | offset/8:24     (0 = empty)
//! a slot whose tag is 0 but is non-zero is a pointer to the next bucket (slot 7 only)
//! ```

/// Where an item lives: a shard-local segment id and a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Loc {
    pub seg: u32,
    pub off: u32,
}

pub const MAX_SEGMENTS: u32 = 1 << 24;
pub const MAX_SEGMENT_BYTES: usize = 8 << 24;
const SLOTS: usize = 8;
const LOC_MASK: u64 = (1 << 48) - 1;

impl Loc {
    #[inline]
    fn pack(self) -> u64 {
        (u64::from(self.seg) << 24) | u64::from(self.off >> 3)
    }
    #[inline]
    fn unpack(v: u64) -> Loc {
        Loc {
            seg: ((v >> 24) & 0xFF_FFFF) as u32,
            off: ((v & 0xFF_FFFF) << 3) as u32,
        }
    }
}

#[inline]
fn tag_of(hash: u64) -> u64 {
    let t = hash >> 48;
    if t == 0 {
        1
    } else {
        t
    }
}

/// The index of one shard.
pub struct Index {
    buckets: Vec<[u64; SLOTS]>,
    primary: usize,
    free_overflow: Vec<u32>,
    items: usize,
}

impl Index {
    /// An index with `2^power` primary buckets.
    pub fn new(power: u32) -> Index {
        let primary = 1usize << power;
        Index {
            buckets: vec![[0; SLOTS]; primary],
            primary,
            free_overflow: Vec::new(),
            items: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.items
    }

    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Bytes of memory the index uses.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * SLOTS * 8
    }

    pub fn primary_buckets(&self) -> usize {
        self.primary
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        (hash as usize) & (self.primary - 1)
    }

    /// The first location with this hash's tag for which `is_key` holds.
    #[inline]
    pub fn find(&self, hash: u64, mut is_key: impl FnMut(Loc) -> bool) -> Option<Loc> {
        let tag = tag_of(hash);
        let mut b = self.home(hash);
        loop {
            let bucket = &self.buckets[b];
            for (i, &e) in bucket.iter().enumerate() {
                if e >> 48 == tag {
                    let loc = Loc::unpack(e & LOC_MASK);
                    if is_key(loc) {
                        return Some(loc);
                    }
                } else if i == SLOTS - 1 && e != 0 && e >> 48 == 0 {
                    b = e as usize;
                    break;
                }
            }
            let last = bucket[SLOTS - 1];
            if last == 0 || last >> 48 != 0 {
                return None;
            }
        }
    }

    /// Adds an entry (the caller has removed any previous one for the key).
    pub fn insert(&mut self, hash: u64, loc: Loc) {
        let entry = (tag_of(hash) << 48) | loc.pack();
        let mut b = self.home(hash);
        loop {
            let last = self.buckets[b][SLOTS - 1];
            if let Some(slot) = self.buckets[b].iter().position(|&e| e == 0) {
                self.buckets[b][slot] = entry;
                self.items += 1;
                return;
            }
            if last >> 48 == 0 {
                b = last as usize;
                continue;
            }
            // Full bucket without a chain: move the last item to a new bucket.
            let next = self.new_overflow();
            self.buckets[next][0] = last;
            self.buckets[next][1] = entry;
            self.buckets[b][SLOTS - 1] = next as u64;
            self.items += 1;
            return;
        }
    }

    fn new_overflow(&mut self) -> usize {
        if let Some(i) = self.free_overflow.pop() {
            return i as usize;
        }
        self.buckets.push([0; SLOTS]);
        self.buckets.len() - 1
    }

    /// Rewrites the entry for `old` to `new`; false when no entry points at `old`.
    pub fn relocate(&mut self, hash: u64, old: Loc, new: Loc) -> bool {
        let tag = tag_of(hash);
        let want = (tag << 48) | old.pack();
        self.for_slot(hash, want, |slot| *slot = (tag << 48) | new.pack())
    }

    /// Removes the entry pointing at `loc`; false when there is none.
    pub fn remove(&mut self, hash: u64, loc: Loc) -> bool {
        let want = (tag_of(hash) << 48) | loc.pack();
        let found = self.for_slot(hash, want, |slot| *slot = 0);
        if found {
            self.items -= 1;
        }
        found
    }

    /// Whether an entry points at `loc`.
    pub fn contains(&self, hash: u64, loc: Loc) -> bool {
        self.find(hash, |l| l == loc).is_some()
    }

    fn for_slot(&mut self, hash: u64, want: u64, f: impl FnOnce(&mut u64)) -> bool {
        let mut b = self.home(hash);
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(slot) = bucket.iter_mut().find(|e| **e == want) {
                f(slot);
                return true;
            }
            let last = bucket[SLOTS - 1];
            if last == 0 || last >> 48 != 0 {
                return false;
            }
            b = last as usize;
        }
    }

    /// Drops every entry and all overflow buckets.
    pub fn clear(&mut self) {
        self.buckets.truncate(self.primary);
        self.buckets.shrink_to_fit();
        for b in &mut self.buckets {
            *b = [0; SLOTS];
        }
        self.free_overflow.clear();
        self.items = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn insert_find_remove_with_chains() {
        let mut idx = Index::new(2);
        let mut model = HashMap::new();
        for i in 0..500u32 {
            let hash = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let loc = Loc { seg: i, off: i * 8 };
            idx.insert(hash, loc);
            model.insert(hash, loc);
        }
        assert_eq!(idx.len(), 500);
        for (&h, &loc) in &model {
            assert_eq!(idx.find(h, |l| l == loc), Some(loc));
        }
        for (i, (&h, &loc)) in model.iter().enumerate() {
            if i % 2 == 0 {
                assert!(idx.remove(h, loc));
                assert!(!idx.contains(h, loc));
            } else {
                let new = Loc {
                    seg: loc.seg,
                    off: loc.off + 8,
                };
                assert!(idx.relocate(h, loc, new));
                assert!(idx.contains(h, new));
            }
        }
        assert_eq!(idx.len(), 250);
        idx.clear();
        assert!(idx.is_empty());
    }

    #[test]
    fn loc_packing() {
        let l = Loc {
            seg: MAX_SEGMENTS - 1,
            off: (MAX_SEGMENT_BYTES - 8) as u32,
        };
        assert_eq!(Loc::unpack(l.pack()), l);
    }
}
