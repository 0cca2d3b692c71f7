//! Position arithmetic, sizing and resizing of the index.
//!
//! A key's *position* is the top `P` bits of its hash's low 32 bits. Its
//! first bucket among `n` is `pos * n / 2^P` (multiply-shift, so `n` need
//! not be a power of two), and the positions that land in bucket `b` are
//! `[ceil(b * 2^P / n), ceil((b + 1) * 2^P / n))`, fewer than `2^7` when
//! `n >= 2^(P-7)`: an entry keeps its offset in that range (`rest`), so
//! its position, and with it its bucket in a table of any other size, is
//! known without its key.

use super::*;

/// What every key that shares an index entry's place has in common: its
/// tag and its position. The crash journal's fingerprints are made of it
/// (`flash::journal::fingerprint`), so an index entry's fingerprint is
/// known without its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Class {
    pub tag: u16,
    pub pos: u32,
}

impl Class {
    /// The class of a key hash in an index of precision `prec`.
    pub fn of(hash: u64, prec: u32) -> Class {
        Class {
            tag: tag_of(hash) as u16,
            pos: position(hash, prec) as u32,
        }
    }
}

/// An entry the index had to drop for lack of room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted {
    pub loc: Loc,
    pub hit: bool,
    pub class: Class,
}

/// The key's position: the top `prec` bits of the hash's low 32 bits.
#[inline]
pub(super) fn position(hash: u64, prec: u32) -> u64 {
    (hash & 0xFFFF_FFFF) >> (32 - prec)
}

/// The first bucket among `n` of a key at `pos`.
#[inline]
pub(super) fn home(pos: u64, n: usize, prec: u32) -> usize {
    ((pos * n as u64) >> prec) as usize
}

/// The lowest position whose first bucket is `b`.
#[inline]
pub(super) fn first_position(b: usize, n: usize, prec: u32) -> u64 {
    ((b as u64) << prec).div_ceil(n as u64)
}

/// The fewest buckets an index of precision `prec` can have.
pub fn min_buckets(prec: u32) -> usize {
    1 << prec.saturating_sub(REST_BITS)
}

/// `n` within what an index of precision `prec` can have.
pub(super) fn clamp_buckets(prec: u32, n: usize) -> usize {
    n.clamp(min_buckets(prec), 1 << prec)
}

impl Index {
    /// The precision for an index that may grow to `max_bytes`: the
    /// smallest `P` with `2^P` buckets of 64 bytes at least that large (so
    /// it can shrink to 1/128 of it), between 8 and 32.
    pub fn precision_for(max_bytes: usize) -> u32 {
        let buckets = (max_bytes / std::mem::size_of::<Bucket>()).max(1);
        buckets.next_power_of_two().trailing_zeros().clamp(8, 32)
    }

    /// The buckets an index needs to hold `entries` at its target load.
    pub fn buckets_for(entries: usize) -> usize {
        (entries * 100).div_ceil(SLOTS * TARGET_PERCENT).max(1)
    }

    /// What [`Index::memory_bytes`] is for an index of `buckets`.
    pub fn bytes_for_buckets(buckets: usize) -> usize {
        buckets.max(1) * std::mem::size_of::<Bucket>()
    }

    /// Load, in percent of slots in use.
    #[cfg(test)]
    pub fn load_percent(&self) -> f64 {
        self.items as f64 * 100.0 / self.slots() as f64
    }

    /// The bucket count the index should move to, if any: grown to the
    /// target load once fuller than [`GROW_PERCENT`], shrunk to it once
    /// emptier than [`SHRINK_PERCENT`], within what its precision allows.
    pub fn wants_resize(&self) -> Option<usize> {
        let n = self.buckets.len();
        let want = clamp_buckets(self.prec, Index::buckets_for(self.items));
        let full = self.items * 100 > self.slots() * GROW_PERCENT;
        let empty = self.items * 100 < self.slots() * SHRINK_PERCENT;
        ((full && want > n) || (empty && want < n)).then_some(want)
    }

    /// The class of entry `e` found in bucket `b`.
    pub(super) fn class_at(&self, b: usize, e: u64) -> Class {
        let n = self.buckets.len();
        let tag = e >> TAG_SHIFT;
        let b1 = if e & ALT != 0 {
            alt_bucket(b, tag, n)
        } else {
            b
        };
        let rest = (e >> REST_SHIFT) & ((1 << REST_BITS) - 1);
        Class {
            tag: tag as u16,
            pos: (first_position(b1, n, self.prec) + rest) as u32,
        }
    }

    pub(super) fn evicted(&self, b: usize, e: u64) -> Evicted {
        Evicted {
            loc: Loc::unpack(e & LOC_MASK),
            hit: e & HIT != 0,
            class: self.class_at(b, e),
        }
    }

    /// The class of the entry for `loc`, if there is one.
    #[cfg(test)]
    pub fn class(&self, hash: u64, loc: Loc) -> Option<Class> {
        self.position(hash, loc)
            .map(|(b, i)| self.class_at(b, self.buckets[b].get(i)))
    }

    /// Rebuilds the table with `buckets` buckets (within what the precision
    /// allows), keeping hit bits; no key is read. Entries that find no room
    /// (rare below the grow load) are evicted as by an insert and returned.
    pub fn resize(
        &mut self,
        buckets: usize,
        mut rank: impl FnMut(Loc, bool) -> u64,
    ) -> Vec<Evicted> {
        let n = clamp_buckets(self.prec, buckets);
        let old = std::mem::replace(&mut self.buckets, vec![EMPTY; n]);
        let old_n = old.len();
        let mut out = Vec::new();
        for (b, bk) in old.iter().enumerate() {
            for i in 0..SLOTS {
                let e = bk.get(i);
                if e == 0 {
                    continue;
                }
                let class = {
                    // `class_at` in the old table.
                    let tag = e >> TAG_SHIFT;
                    let b1 = if e & ALT != 0 {
                        alt_bucket(b, tag, old_n)
                    } else {
                        b
                    };
                    let rest = (e >> REST_SHIFT) & ((1 << REST_BITS) - 1);
                    first_position(b1, old_n, self.prec) + rest
                };
                let b1 = home(class, n, self.prec);
                let rest = class - first_position(b1, n, self.prec);
                debug_assert!(rest < 1 << REST_BITS);
                let entry = (e & !(((1 << 8) - 1) << KEY_SHIFT)) | (rest << REST_SHIFT);
                if let Some(ev) = self.place(b1, entry, true, &mut rank, None) {
                    self.items -= 1;
                    out.push(ev);
                }
            }
        }
        out
    }
}
