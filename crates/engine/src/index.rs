//! The hash index: a bucketized cuckoo table of 56-bit entries, nine to a
//! 64-byte bucket (one cache line), that can be resized to any bucket count
//! without the keys: every entry keeps the hash bits its place needs.
//!
//! An entry holds an 11-bit tag from the key's hash, the rest of the key's
//! *position* that its bucket does not imply (`rest`), which of its two
//! buckets it is in (`alt`), a hit bit, and the item's location (segment,
//! offset / 8). The key itself lives with the item (in RAM or on flash), so
//! a match is confirmed by comparing keys; a false match costs one extra
//! comparison (or flash read), never a wrong answer.
//!
//! ```text
//! entry  = tag:11 | rest:7 | alt:1 | hit:1 | segment:16 | offset/8:20   (0 = empty; tag is never 0)
//! bucket = 9 entries of 7 bytes, little-endian, then one zero byte       (64 bytes, cache-line aligned)
//! ```
//!
//! Placement (`resize.rs` has the arithmetic): a shard's index has a fixed
//! *precision* `P` (from `-m`); a key's position is the top `P` bits of its
//! hash's low 32 bits, and its first bucket among `n` is
//! `b1 = pos * n / 2^P`. The bucket says which range of positions the key
//! has; `rest` is the key's offset in that range, which has fewer than
//! `2^7` positions as long as `n >= 2^(P-7)`. So from an entry and its
//! bucket the position is known exactly, and the table can be rebuilt for
//! any `n` in `[2^(P-7), 2^P]` ([`Index::resize`]): it grows and shrinks
//! with the items, without reading a key. The second bucket is
//! `b2 = (f(tag) - b1) mod n` (partial-key cuckoo hashing, as in cuckoo
//! filters), known from the tag alone, so entries move between their two
//! buckets without their keys.
//!
//! A lookup compares `tag | rest | alt` in one go: a key matches only
//! entries of its own *class* (tag and position, 11 + P hash bits), which
//! is also what the crash journal's fingerprints are made of
//! ([`Class`]): everything an insert drops as a possible older copy of a
//! key shares its fingerprint.
//!
//! There are no overflow chains. An insert takes a free slot in `b1`, else
//! in `b2`, else kicks a random entry to its other bucket (a short random
//! walk). When that fails (the table is full, or at its DRAM budget and not
//! allowed to grow) the least valuable entry of the bucket goes, as in a
//! set-associative cache: the caller ranks entries (flash before RAM,
//! unhit before hit, oldest segment first) and is told what was evicted.

mod persist;
mod resize;
#[cfg(test)]
mod tests;

pub use resize::{min_buckets, Class, Evicted};

/// Where an item lives: a shard-local segment id and a byte offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Loc {
    pub seg: u32,
    pub off: u32,
}

/// Segments per shard an entry can address.
pub const MAX_SEGMENTS: u32 = 1 << 16;
/// Largest segment an entry can address (offsets are stored / 8 in 20 bits).
pub const MAX_SEGMENT_BYTES: usize = 8 << 20;
/// Entries per bucket.
pub const SLOTS: usize = 9;
/// Bytes of one entry in a bucket.
pub const ENTRY_BYTES: usize = 7;
/// How far an index can be resized: its bucket count stays within a
/// factor `2^REST_BITS` below `2^P` (the bits of position an entry keeps).
pub const REST_BITS: u32 = 7;
/// An index grows when it is fuller than this (percent of slots) ...
pub const GROW_PERCENT: usize = 95;
/// ... to this load, and shrinks to it when it gets emptier than
/// [`SHRINK_PERCENT`].
pub const TARGET_PERCENT: usize = 89;
pub const SHRINK_PERCENT: usize = 70;

const HIT: u64 = 1 << 36;
const ALT: u64 = 1 << 37;
const LOC_MASK: u64 = (1 << 36) - 1;
/// `tag | rest | alt`: the bits a lookup compares.
const KEY_SHIFT: u32 = 37;
const REST_SHIFT: u32 = 38;
const TAG_SHIFT: u32 = 45;
const TAG_MASK: u64 = 0x7FF;
const ENTRY_MASK: u64 = (1 << 56) - 1;
/// Kicks before an insert gives up and evicts.
const MAX_KICKS: usize = 500;
/// Kicks when the index may not grow and is nearly full, where long walks
/// mostly fail: evict at once instead of paying a walk of cache misses.
const FEW_KICKS: usize = 4;
const CROWDED_PERCENT: usize = 97;

impl Loc {
    #[inline]
    fn pack(self) -> u64 {
        debug_assert!(self.seg < MAX_SEGMENTS, "segment {} out of range", self.seg);
        debug_assert!(
            (self.off as usize) < MAX_SEGMENT_BYTES && self.off.is_multiple_of(8),
            "offset {} out of range or unaligned",
            self.off
        );
        (u64::from(self.seg) << 20) | u64::from(self.off >> 3)
    }
    #[inline]
    fn unpack(v: u64) -> Loc {
        Loc {
            seg: ((v >> 20) & 0xFFFF) as u32,
            off: ((v & 0xF_FFFF) << 3) as u32,
        }
    }
}

/// The entry's tag: hash bits 52..62, never 0.
#[inline]
fn tag_of(hash: u64) -> u64 {
    let t = (hash >> 52) & TAG_MASK;
    if t == 0 {
        1
    } else {
        t
    }
}

/// The other bucket of an entry with this tag in bucket `b` of `n`:
/// `(x - b) mod n` for an `x` from the tag, so that the other bucket's
/// other bucket is `b` again.
#[inline]
fn alt_bucket(b: usize, tag: u64, n: usize) -> usize {
    let x = (((tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) * n as u64) >> 32) as usize;
    if x >= b {
        x - b
    } else {
        x + n - b
    }
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Bucket([u8; 64]);

const EMPTY: Bucket = Bucket([0; 64]);

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);
const _: () = assert!(SLOTS * ENTRY_BYTES < 64);

impl Bucket {
    #[inline]
    fn get(&self, i: usize) -> u64 {
        let o = i * ENTRY_BYTES;
        u64::from_le_bytes(self.0[o..o + 8].try_into().expect("8 bytes")) & ENTRY_MASK
    }
    #[inline]
    fn set(&mut self, i: usize, e: u64) {
        let o = i * ENTRY_BYTES;
        self.0[o..o + ENTRY_BYTES].copy_from_slice(&e.to_le_bytes()[..ENTRY_BYTES]);
    }
    #[inline]
    fn free_slot(&self) -> Option<usize> {
        (0..SLOTS).find(|&i| self.get(i) == 0)
    }
}

/// The index of one shard.
pub struct Index {
    buckets: Vec<Bucket>,
    /// Position bits `P` (fixed for the index's life).
    prec: u32,
    items: usize,
    rng: u64,
}

/// Where a key's entries can be: its two buckets and the `tag | rest`
/// bits its entries carry.
#[derive(Clone, Copy)]
struct Place {
    b1: usize,
    b2: usize,
    /// `tag | rest`, shifted to [`REST_SHIFT`].
    key: u64,
}

impl Index {
    /// An index of `buckets` buckets (clamped to what `prec` allows) that
    /// keeps `prec` bits of position.
    pub fn new(prec: u32, buckets: usize) -> Index {
        let n = resize::clamp_buckets(prec, buckets);
        Index {
            buckets: vec![EMPTY; n],
            prec,
            items: 0,
            rng: 0x2545_F491_4F6C_DD1D,
        }
    }

    pub fn len(&self) -> usize {
        self.items
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.items == 0
    }

    /// Bytes of memory the index uses.
    pub fn memory_bytes(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    pub fn precision(&self) -> u32 {
        self.prec
    }

    /// Entries the index has room for.
    pub fn slots(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    #[inline]
    fn place_of(&self, hash: u64) -> Place {
        let n = self.buckets.len();
        let tag = tag_of(hash);
        let pos = resize::position(hash, self.prec);
        let b1 = resize::home(pos, n, self.prec);
        let rest = pos - resize::first_position(b1, n, self.prec);
        Place {
            b1,
            b2: alt_bucket(b1, tag, n),
            key: (tag << (TAG_SHIFT - REST_SHIFT)) | rest,
        }
    }

    /// Calls `f(bucket, slot, entry)` on the entries of `p`'s class, in
    /// lookup order, until it returns true.
    #[inline]
    fn visit(&self, p: Place, mut f: impl FnMut(usize, usize, u64) -> bool) -> bool {
        let home = p.key << 1;
        let away = home | 1;
        for (b, want) in [(p.b1, home), (p.b2, away)] {
            let bk = &self.buckets[b];
            for i in 0..SLOTS {
                let e = bk.get(i);
                if e >> KEY_SHIFT == want && f(b, i, e) {
                    return true;
                }
            }
            if p.b2 == p.b1 {
                break;
            }
        }
        false
    }

    /// The first location with this hash's class for which `is_key` holds.
    #[inline]
    pub fn find(&self, hash: u64, mut is_key: impl FnMut(Loc) -> bool) -> Option<Loc> {
        let mut found = None;
        self.visit(self.place_of(hash), |_, _, e| {
            let loc = Loc::unpack(e & LOC_MASK);
            if is_key(loc) {
                found = Some(loc);
                true
            } else {
                false
            }
        });
        found
    }

    /// (bucket, slot) of the entry for `loc`.
    fn position(&self, hash: u64, loc: Loc) -> Option<(usize, usize)> {
        let want = loc.pack();
        let mut found = None;
        self.visit(self.place_of(hash), |b, i, e| {
            if e & LOC_MASK == want {
                found = Some((b, i));
                true
            } else {
                false
            }
        });
        found
    }

    /// Adds an entry (the caller has removed any previous one for the key).
    /// When there is no room, the entry `rank` ranks lowest among those of
    /// the full bucket goes (never the new one) and is returned.
    pub fn insert(
        &mut self,
        hash: u64,
        loc: Loc,
        may_walk: bool,
        rank: impl FnMut(Loc, bool) -> u64,
    ) -> Option<Evicted> {
        let p = self.place_of(hash);
        let entry = (p.key << REST_SHIFT) | loc.pack();
        self.items += 1;
        let evicted = self.place(p.b1, entry, may_walk, rank, Some(entry));
        if evicted.is_some() {
            self.items -= 1;
        }
        evicted
    }

    #[inline]
    fn next_random(&mut self) -> u64 {
        // xorshift64
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// The other bucket of the entry `e` in bucket `b`, and `e` as it
    /// would be there.
    #[inline]
    fn other(&self, b: usize, e: u64) -> (usize, u64) {
        let nb = alt_bucket(b, e >> TAG_SHIFT, self.buckets.len());
        if nb == b {
            (b, e)
        } else {
            (nb, e ^ ALT)
        }
    }

    /// Stores `entry` (with `alt` clear) whose first bucket is `b1`; on
    /// failure evicts the lowest ranked entry of the last bucket tried
    /// (never `keep`) and returns it.
    fn place(
        &mut self,
        b1: usize,
        entry: u64,
        may_walk: bool,
        mut rank: impl FnMut(Loc, bool) -> u64,
        keep: Option<u64>,
    ) -> Option<Evicted> {
        let (b2, entry2) = self.other(b1, entry);
        for (b, e) in [(b1, entry), (b2, entry2)] {
            if let Some(i) = self.buckets[b].free_slot() {
                self.buckets[b].set(i, e);
                return None;
            }
        }
        // Both full: a random walk, each step moving an entry to its other bucket.
        let crowded = self.items * 100 >= self.slots() * CROWDED_PERCENT;
        let kicks = if !may_walk && crowded {
            FEW_KICKS
        } else {
            MAX_KICKS
        };
        let (mut b, mut e) = if self.next_random() & 1 == 0 {
            (b1, entry)
        } else {
            (b2, entry2)
        };
        for _ in 0..kicks {
            let i = (self.next_random() % SLOTS as u64) as usize;
            let victim = self.buckets[b].get(i);
            let (nb, moved) = self.other(b, victim);
            if nb == b {
                // An entry whose two buckets are one cannot move.
                continue;
            }
            self.buckets[b].set(i, e);
            e = moved;
            b = nb;
            if let Some(i) = self.buckets[b].free_slot() {
                self.buckets[b].set(i, e);
                return None;
            }
        }
        // `b` is one of `e`'s buckets and is full: the least valuable of
        // its entries and `e` goes.
        let score = |rank: &mut dyn FnMut(Loc, bool) -> u64, x: u64| {
            if keep.is_some_and(|k| k & !ALT == x & !ALT) {
                u64::MAX
            } else {
                rank(Loc::unpack(x & LOC_MASK), x & HIT != 0)
            }
        };
        let mut worst = (score(&mut rank, e), None);
        for i in 0..SLOTS {
            let s = score(&mut rank, self.buckets[b].get(i));
            if s < worst.0 || worst.1.is_none() && worst.0 == u64::MAX {
                worst = (s, Some(i));
            }
        }
        let out = match worst.1 {
            Some(i) => {
                let out = self.buckets[b].get(i);
                self.buckets[b].set(i, e);
                (b, out)
            }
            None => (b, e),
        };
        Some(self.evicted(out.0, out.1))
    }

    /// Rewrites the entry for `old` to `new` and clears its hit bit; false
    /// when no entry points at `old`.
    pub fn relocate(&mut self, hash: u64, old: Loc, new: Loc) -> bool {
        match self.position(hash, old) {
            Some((b, i)) => {
                let e = self.buckets[b].get(i);
                self.buckets[b].set(i, (e & !(HIT | LOC_MASK)) | new.pack());
                true
            }
            None => false,
        }
    }

    /// Sets the hit bit of the entry for `loc`; false when there is none.
    pub fn set_hit(&mut self, hash: u64, loc: Loc) -> bool {
        match self.position(hash, loc) {
            Some((b, i)) => {
                let e = self.buckets[b].get(i);
                self.buckets[b].set(i, e | HIT);
                true
            }
            None => false,
        }
    }

    /// The hit bit of the entry for `loc`; None when no entry points at it.
    pub fn hit(&self, hash: u64, loc: Loc) -> Option<bool> {
        self.position(hash, loc)
            .map(|(b, i)| self.buckets[b].get(i) & HIT != 0)
    }

    /// Removes the entry pointing at `loc`; false when there is none.
    pub fn remove(&mut self, hash: u64, loc: Loc) -> bool {
        let Some((b, i)) = self.position(hash, loc) else {
            return false;
        };
        self.buckets[b].set(i, 0);
        self.items -= 1;
        true
    }

    /// Whether an entry points at `loc`.
    pub fn contains(&self, hash: u64, loc: Loc) -> bool {
        self.position(hash, loc).is_some()
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.buckets.fill(EMPTY);
        self.items = 0;
    }

    /// Buckets a lookup of `hash` reads before finding `loc` (or all of
    /// them for a miss): the cache lines it touches.
    #[cfg(test)]
    fn lines_touched(&self, hash: u64, loc: Option<Loc>) -> usize {
        let p = self.place_of(hash);
        let in_b1 = loc
            .is_some_and(|l| (0..SLOTS).any(|i| self.buckets[p.b1].get(i) & LOC_MASK == l.pack()));
        if in_b1 || p.b1 == p.b2 {
            1
        } else {
            2
        }
    }
}
