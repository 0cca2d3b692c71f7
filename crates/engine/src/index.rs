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
//! allowed to grow) the least valuable entry within two moves of the key
//! goes (its two buckets and their entries' other buckets, where a
//! set-associative cache would look in one set): the caller ranks entries
//! (flash before RAM, unhit before hit, oldest segment first) and is told
//! what was evicted.

mod buckets;
mod persist;
mod resize;
mod table;
#[cfg(test)]
mod tests;

pub use resize::{min_buckets, Class, Evicted};
use table::{Key, Table};

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
/// Per mille of a table's slots in use at which it is full for the small
/// store's choice ([`Index::at_budget`]): the log tier alone runs its index
/// at 99.9% once at its budget, evicting as it inserts.
pub const FULL_PERMILLE: usize = 990;

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

/// Position bits of one table: a shard's index of precision `P` is
/// `2^(P - TABLE_PREC)` tables (one when `P` is smaller), each of at most
/// `2^TABLE_PREC` buckets (512 KiB), resized on its own.
pub const TABLE_PREC: u32 = 13;

/// The index of one shard: its tables, chosen by the top bits of a key's
/// position.
pub struct Index {
    tables: Vec<Table>,
    /// Position bits `P` (fixed for the index's life).
    prec: u32,
    /// Position bits of each table, `min(P, TABLE_PREC)`.
    tprec: u32,
    /// Bytes of every table's buckets.
    bytes: usize,
    /// The next table [`Index::next_due`] looks at.
    cursor: usize,
    /// Old buckets of finished rebuilds ([`Index::take_freed`]).
    freed: Vec<buckets::Buckets>,
    /// Bytes of old buckets of the rebuilds under way.
    old_bytes: usize,
}

impl Index {
    /// An index that keeps `prec` bits of position, of about `buckets`
    /// buckets over its tables (each within what its precision allows).
    pub fn new(prec: u32, buckets: usize) -> Index {
        let tprec = prec.min(TABLE_PREC);
        let count = 1usize << (prec - tprec);
        let each = buckets.div_ceil(count);
        Index::from_tables(prec, (0..count).map(|_| Table::new(tprec, each)).collect())
    }

    /// An index of precision `prec` whose tables have no buckets until
    /// their first insert ([`Table::unallocated`]).
    pub fn unallocated(prec: u32) -> Index {
        let tprec = prec.min(TABLE_PREC);
        let count = 1usize << (prec - tprec);
        Index::from_tables(
            prec,
            (0..count).map(|_| Table::unallocated(tprec)).collect(),
        )
    }

    fn from_tables(prec: u32, tables: Vec<Table>) -> Index {
        let mut idx = Index {
            prec,
            tprec: prec.min(TABLE_PREC),
            bytes: 0,
            cursor: 0,
            freed: Vec::new(),
            old_bytes: 0,
            tables,
        };
        idx.bytes = idx.tables.iter().map(Table::memory_bytes).sum();
        idx
    }

    /// Entries over all tables (stats: one pass over the tables).
    pub fn len(&self) -> usize {
        self.tables.iter().map(|t| t.items).sum()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of memory the index uses.
    pub fn memory_bytes(&self) -> usize {
        self.bytes
    }

    /// Of those, the bytes of old buckets that rebuilds under way free
    /// when they end.
    pub fn old_bytes(&self) -> usize {
        self.old_bytes
    }

    /// Buckets over all tables.
    pub fn buckets(&self) -> usize {
        self.tables.iter().map(|t| t.buckets.len()).sum()
    }

    pub fn precision(&self) -> u32 {
        self.prec
    }

    /// Entries the index has room for.
    pub fn slots(&self) -> usize {
        self.buckets() * SLOTS
    }

    /// How many tables the index has.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }

    /// Buckets of table `t`.
    pub fn table_buckets(&self, t: usize) -> usize {
        self.tables[t].buckets.len()
    }

    /// The table of `hash`, and the key as that table sees it.
    #[inline]
    fn split(&self, hash: u64) -> (usize, Key) {
        let pos = resize::position(hash, self.prec);
        let key = Key {
            tag: tag_of(hash),
            pos: pos & ((1 << self.tprec) - 1),
        };
        ((pos >> self.tprec) as usize, key)
    }

    /// The table a key of `hash` is in.
    pub fn table_of(&self, hash: u64) -> usize {
        self.split(hash).0
    }

    /// An entry table `t` gave up, with its class in the whole index.
    fn in_index(&self, t: usize, mut ev: Evicted) -> Evicted {
        ev.class.pos += (t as u32) << self.tprec;
        ev
    }

    /// The first location with this hash's class for which `is_key` holds.
    #[inline]
    pub fn find(&self, hash: u64, mut is_key: impl FnMut(Loc) -> bool) -> Option<Loc> {
        let (t, k) = self.split(hash);
        let table = &self.tables[t];
        if !table.allocated() {
            return None;
        }
        let mut found = None;
        table.visit(k, |_, _, e| {
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

    /// Table, bucket and slot of the entry for `loc`.
    fn position(&self, hash: u64, loc: Loc) -> Option<(usize, (usize, usize))> {
        let (t, k) = self.split(hash);
        self.tables[t].position(k, loc).map(|at| (t, at))
    }

    /// Adds an entry (the caller has removed any previous one for the key).
    /// When there is no room, the entry `rank` ranks lowest among those of
    /// the full bucket goes (never the new one) and is returned.
    #[cfg(test)]
    pub fn insert(
        &mut self,
        hash: u64,
        loc: Loc,
        may_walk: bool,
        rank: impl FnMut(Loc, bool) -> u64,
    ) -> Option<Evicted> {
        self.insert_in_table(hash, loc, may_walk, rank).1
    }

    /// Adds an entry as [`insert`](Self::insert) does (the shard's way:
    /// it also says which table the entry went to, the one that may want a
    /// resize now).
    pub fn insert_in_table(
        &mut self,
        hash: u64,
        loc: Loc,
        may_walk: bool,
        rank: impl FnMut(Loc, bool) -> u64,
    ) -> (usize, Option<Evicted>) {
        let (t, k) = self.split(hash);
        let table = &mut self.tables[t];
        if !table.allocated() {
            let before = table.memory_bytes();
            let ev = table.insert(k, loc, may_walk, rank);
            self.bytes += table.memory_bytes() - before;
            return (t, ev.map(|ev| self.in_index(t, ev)));
        }
        let ev = table.insert(k, loc, may_walk, rank);
        (t, ev.map(|ev| self.in_index(t, ev)))
    }

    /// Rewrites the entry for `old` to `new` and clears its hit bit; false
    /// when no entry points at `old`.
    pub fn relocate(&mut self, hash: u64, old: Loc, new: Loc) -> bool {
        match self.position(hash, old) {
            Some((t, at)) => {
                self.tables[t].update(at, |e| (e & !(HIT | LOC_MASK)) | new.pack());
                true
            }
            None => false,
        }
    }

    /// Sets the hit bit of the entry for `loc`; false when there is none.
    pub fn set_hit(&mut self, hash: u64, loc: Loc) -> bool {
        match self.position(hash, loc) {
            Some((t, at)) => {
                self.tables[t].update(at, |e| e | HIT);
                true
            }
            None => false,
        }
    }

    /// The hit bit of the entry for `loc`; None when no entry points at it.
    pub fn hit(&self, hash: u64, loc: Loc) -> Option<bool> {
        self.position(hash, loc)
            .map(|(t, at)| self.tables[t].get(at) & HIT != 0)
    }

    /// Removes the entry pointing at `loc`; false when there is none.
    pub fn remove(&mut self, hash: u64, loc: Loc) -> bool {
        let Some((t, at)) = self.position(hash, loc) else {
            return false;
        };
        self.tables[t].update(at, |_| 0);
        self.tables[t].items -= 1;
        true
    }

    /// Whether an entry points at `loc`.
    pub fn contains(&self, hash: u64, loc: Loc) -> bool {
        self.position(hash, loc).is_some()
    }

    /// Drops every entry whose location `keep` rejects; returns how many
    /// went. One pass over every bucket (a restart's clean-up, not a
    /// request's work).
    pub fn retain(&mut self, mut keep: impl FnMut(Loc) -> bool) -> usize {
        let mut dropped = 0;
        for t in &mut self.tables {
            let mut gone = 0;
            for bk in t.all_buckets_mut() {
                for i in 0..SLOTS {
                    let e = bk.get(i);
                    if e != 0 && !keep(Loc::unpack(e & LOC_MASK)) {
                        bk.set(i, 0);
                        gone += 1;
                    }
                }
            }
            t.items -= gone;
            dropped += gone;
        }
        dropped
    }

    /// Drops every entry.
    #[cfg(test)]
    pub fn clear(&mut self) {
        for t in &mut self.tables {
            t.clear();
        }
    }

    /// The class of the entry for `loc`, if there is one.
    #[cfg(test)]
    pub fn class(&self, hash: u64, loc: Loc) -> Option<Class> {
        self.position(hash, loc).map(|(t, (b, i))| {
            let c = self.tables[t].class_at(b, self.tables[t].get((b, i)));
            Class {
                tag: c.tag,
                pos: c.pos + ((t as u32) << self.tprec),
            }
        })
    }

    /// Load, in percent of slots in use.
    #[cfg(test)]
    pub fn load_percent(&self) -> f64 {
        self.len() as f64 * 100.0 / self.slots() as f64
    }

    /// The table of `hash` and its place there.
    #[cfg(test)]
    fn place_of(&self, hash: u64) -> (usize, table::Place) {
        let (t, k) = self.split(hash);
        (t, self.tables[t].place_of(k))
    }

    /// Buckets a lookup of `hash` reads before finding `loc` (or all of
    /// them for a miss): the cache lines it touches.
    #[cfg(test)]
    fn lines_touched(&self, hash: u64, loc: Option<Loc>) -> usize {
        let (t, k) = self.split(hash);
        let table = &self.tables[t];
        let p = table.place_of(k);
        let in_b1 = loc
            .is_some_and(|l| (0..SLOTS).any(|i| table.buckets[p.b1].get(i) & LOC_MASK == l.pack()));
        if in_b1 || p.b1 == p.b2 {
            1
        } else {
            2
        }
    }
}
