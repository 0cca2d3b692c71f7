//! One table of the index: a bucketized cuckoo table of `2^P'` positions
//! (`P'` at most [`TABLE_PREC`]), resized on its own (`resize.rs`) and a
//! few buckets at a time: while a rebuild is under way the table has its
//! new buckets and the old ones not yet moved ([`Moving`]), a lookup reads
//! the key's buckets in both, and each step moves the next old buckets'
//! entries over, as Redis rehashes its dictionaries incrementally. So no
//! lock hold moves a whole table's entries.

use super::buckets::Buckets;
use super::*;

/// A key as one table sees it: its tag and its position in the table.
#[derive(Clone, Copy)]
pub(super) struct Key {
    pub tag: u64,
    pub pos: u64,
}

/// Where a key's entries can be: its two buckets and the `tag | rest`
/// bits its entries carry.
#[derive(Clone, Copy)]
pub(super) struct Place {
    pub b1: usize,
    pub b2: usize,
    /// `tag | rest`, shifted to [`REST_SHIFT`].
    pub key: u64,
}

/// A table's buckets and the entries in them.
pub(super) struct Table {
    pub buckets: Buckets,
    /// Position bits of this table (`P'`).
    pub prec: u32,
    /// Entries in `buckets` and in the old buckets of a rebuild.
    pub items: usize,
    rng: u64,
    /// The rebuild under way, if any.
    pub moving: Option<Moving>,
}

/// A rebuild under way: the buckets it moves from, of which the first
/// `done` are moved (and empty), and how many of the new buckets have
/// their pages mapped (`faulted`, a page at a time: the first steps only
/// fault pages in, see [`Table::step`](super::resize)). A position `(b, i)`
/// with `b` at or past the new buckets' count is slot `i` of old bucket
/// `b - count`.
pub(super) struct Moving {
    pub old: Buckets,
    pub done: usize,
    pub faulted: usize,
}

impl Table {
    pub fn new(prec: u32, buckets: usize) -> Table {
        Table::from_buckets(
            prec,
            Buckets::zeroed(resize::clamp_buckets(prec, buckets)),
            0,
        )
    }

    /// A table with no buckets yet: lookups find nothing, and the first
    /// insert gives it its fewest buckets. (A flush's new index: its
    /// tables, hundreds per shard, are not allocated and faulted in
    /// within the flush's lock hold.)
    pub fn unallocated(prec: u32) -> Table {
        Table::from_buckets(prec, Buckets::none(), 0)
    }

    /// Whether it has buckets (see [`Table::unallocated`]).
    #[inline]
    pub fn allocated(&self) -> bool {
        !self.buckets.is_empty()
    }

    pub fn from_buckets(prec: u32, buckets: Buckets, items: usize) -> Table {
        Table {
            buckets,
            prec,
            items,
            rng: 0x2545_F491_4F6C_DD1D,
            moving: None,
        }
    }

    pub fn slots(&self) -> usize {
        self.buckets.len() * SLOTS
    }

    pub fn memory_bytes(&self) -> usize {
        let old = self.moving.as_ref().map_or(0, |m| m.old.len());
        (self.buckets.len() + old) * std::mem::size_of::<Bucket>()
    }

    #[inline]
    pub fn place_of(&self, k: Key) -> Place {
        place_among(k, self.buckets.len(), self.prec)
    }

    /// The bucket at position `b` (new, or old past the new ones).
    #[inline]
    fn bucket(&self, b: usize) -> &Bucket {
        match b.checked_sub(self.buckets.len()) {
            None => &self.buckets[b],
            Some(o) => &self.moving.as_ref().expect("an old bucket").old[o],
        }
    }

    #[inline]
    fn bucket_mut(&mut self, b: usize) -> &mut Bucket {
        match b.checked_sub(self.buckets.len()) {
            None => &mut self.buckets[b],
            Some(o) => &mut self.moving.as_mut().expect("an old bucket").old[o],
        }
    }

    /// Calls `f(bucket, slot, entry)` on the entries of `k`'s class, in
    /// lookup order (its buckets in the new table, then in the old one
    /// while a rebuild is under way), until it returns true.
    #[inline]
    pub fn visit(&self, k: Key, mut f: impl FnMut(usize, usize, u64) -> bool) -> bool {
        let n = self.buckets.len();
        if visit_place(&self.buckets, self.place_of(k), 0, &mut f) {
            return true;
        }
        match &self.moving {
            None => false,
            // No old buckets (a table that had none when its rebuild
            // started): nothing to read, and no place among zero buckets.
            Some(m) if m.old.is_empty() => false,
            Some(m) => {
                // Moved buckets are empty, so finding nothing there costs
                // only the read.
                let p = place_among(k, m.old.len(), self.prec);
                visit_place(&m.old[..], p, n, &mut f)
            }
        }
    }

    /// (bucket, slot) of the entry for `loc`.
    pub fn position(&self, k: Key, loc: Loc) -> Option<(usize, usize)> {
        if !self.allocated() {
            return None;
        }
        let want = loc.pack();
        let mut found = None;
        self.visit(k, |b, i, e| {
            if e & LOC_MASK == want {
                found = Some((b, i));
                true
            } else {
                false
            }
        });
        found
    }

    /// Adds an entry; when there is no room, the lowest ranked entry of a
    /// full bucket goes (never the new one) and is returned.
    pub fn insert(
        &mut self,
        k: Key,
        loc: Loc,
        may_walk: bool,
        rank: impl FnMut(Loc, bool) -> u64,
    ) -> Option<Evicted> {
        if !self.allocated() {
            self.buckets = Buckets::zeroed(resize::min_buckets(self.prec));
        }
        let p = self.place_of(k);
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
    pub fn place(
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
        // `b` is one of `e`'s buckets and is full, and so is its other one.
        // The least valuable entry within reach goes: in either bucket, or
        // in the other bucket of an entry there (which then moves over to
        // make room). 9 + 9 + 162 candidates rather than the 9 of one
        // bucket: an old entry is among them far more often, so a full
        // index evicts close to its least valuable entries overall (with a
        // bucket's 9, keys just written went while older ones stayed).
        self.evict_within_reach(b, e, &mut rank, keep)
    }

    /// Makes room for the homeless entry `e` (as stored in bucket `b`) by
    /// evicting the lowest ranked entry of its two buckets and of those
    /// buckets' entries' other buckets (never `keep`; `e` itself when it
    /// ranks lowest), and returns what went; None when one of those other
    /// buckets had a free slot after all (the entry moves there).
    fn evict_within_reach(
        &mut self,
        b: usize,
        e: u64,
        rank: &mut impl FnMut(Loc, bool) -> u64,
        keep: Option<u64>,
    ) -> Option<Evicted> {
        let mut score = |x: u64| {
            if keep.is_some_and(|k| k & !ALT == x & !ALT) {
                u64::MAX
            } else {
                rank(Loc::unpack(x & LOC_MASK), x & HIT != 0)
            }
        };
        // (score, where: bucket and slot of `e`'s place, and the bucket and
        // slot of the entry that goes when it is one move further).
        let mut best = (score(e), None::<((usize, usize), Option<(usize, usize)>)>);
        // `e` as it is stored in each of its buckets.
        let (b2, e2) = self.other(b, e);
        let e_in = |hb: usize| if hb == b { e } else { e2 };
        let both = [b, b2];
        let homes = if b2 == b { &both[..1] } else { &both[..] };
        for &hb in homes {
            for i in 0..SLOTS {
                let x = self.buckets[hb].get(i);
                let s = score(x);
                if s < best.0 || best.1.is_none() && best.0 == u64::MAX {
                    best = (s, Some(((hb, i), None)));
                }
                let (nb, moved) = self.other(hb, x);
                if nb == hb {
                    continue;
                }
                for j in 0..SLOTS {
                    let y = self.buckets[nb].get(j);
                    if y == 0 {
                        // Room one move away: `x` moves, nothing goes.
                        self.buckets[nb].set(j, moved);
                        self.buckets[hb].set(i, e_in(hb));
                        return None;
                    }
                    let s = score(y);
                    if s < best.0 {
                        best = (s, Some(((hb, i), Some((nb, j)))));
                    }
                }
            }
        }
        Some(match best.1 {
            None => self.evicted(b, e),
            Some(((hb, i), None)) => {
                let out = self.buckets[hb].get(i);
                self.buckets[hb].set(i, e_in(hb));
                self.evicted(hb, out)
            }
            Some(((hb, i), Some((nb, j)))) => {
                let out = self.buckets[nb].get(j);
                let x = self.buckets[hb].get(i);
                let (_, moved) = self.other(hb, x);
                self.buckets[nb].set(j, moved);
                self.buckets[hb].set(i, e_in(hb));
                self.evicted(nb, out)
            }
        })
    }

    /// The class of entry `e` found in bucket `b` (its position in this
    /// table; an old bucket's when `b` is past the new ones).
    pub fn class_at(&self, b: usize, e: u64) -> Class {
        let (b, n) = match (b.checked_sub(self.buckets.len()), &self.moving) {
            (Some(o), Some(m)) => (o, m.old.len()),
            _ => (b, self.buckets.len()),
        };
        let tag = e >> TAG_SHIFT;
        let b1 = if e & ALT != 0 {
            alt_bucket(b, tag, n)
        } else {
            b
        };
        let rest = (e >> REST_SHIFT) & ((1 << REST_BITS) - 1);
        Class {
            tag: tag as u16,
            pos: (resize::first_position(b1, n, self.prec) + rest) as u32,
        }
    }

    pub fn evicted(&self, b: usize, e: u64) -> Evicted {
        Evicted {
            loc: Loc::unpack(e & LOC_MASK),
            hit: e & HIT != 0,
            class: self.class_at(b, e),
        }
    }

    /// Rewrites the entry at (`b`, `i`) with `f`.
    #[inline]
    pub fn update(&mut self, (b, i): (usize, usize), f: impl FnOnce(u64) -> u64) {
        let bk = self.bucket_mut(b);
        let e = bk.get(i);
        bk.set(i, f(e));
    }

    pub fn get(&self, (b, i): (usize, usize)) -> u64 {
        self.bucket(b).get(i)
    }

    /// Every bucket that may hold entries: the new ones, and the old ones
    /// of a rebuild under way.
    pub fn all_buckets_mut(&mut self) -> impl Iterator<Item = &mut Bucket> {
        let old = self.moving.as_mut().map_or(&mut [][..], |m| &mut m.old[..]);
        self.buckets.iter_mut().chain(old.iter_mut())
    }

    #[cfg(test)]
    pub fn clear(&mut self) {
        self.buckets.fill(EMPTY);
        self.moving = None;
        self.items = 0;
    }
}

/// Where a key's entries can be in a table of `n` buckets.
#[inline]
fn place_among(k: Key, n: usize, prec: u32) -> Place {
    let b1 = resize::home(k.pos, n, prec);
    let rest = k.pos - resize::first_position(b1, n, prec);
    Place {
        b1,
        b2: alt_bucket(b1, k.tag, n),
        key: (k.tag << (TAG_SHIFT - REST_SHIFT)) | rest,
    }
}

/// [`Table::visit`] over one array of buckets, whose positions are
/// reported `base` on.
#[inline]
fn visit_place(
    buckets: &[Bucket],
    p: Place,
    base: usize,
    f: &mut impl FnMut(usize, usize, u64) -> bool,
) -> bool {
    let home = p.key << 1;
    let away = home | 1;
    for (b, want) in [(p.b1, home), (p.b2, away)] {
        let bk = &buckets[b];
        for i in 0..SLOTS {
            let e = bk.get(i);
            if e >> KEY_SHIFT == want && f(base + b, i, e) {
                return true;
            }
        }
        if p.b2 == p.b1 {
            break;
        }
    }
    false
}
