//! Position arithmetic, sizing and resizing of the index.
//!
//! A key's *position* is the top `P` bits of its hash's low 32 bits. Its
//! first bucket among `n` is `pos * n / 2^P` (multiply-shift, so `n` need
//! not be a power of two), and the positions that land in bucket `b` are
//! `[ceil(b * 2^P / n), ceil((b + 1) * 2^P / n))`, fewer than `2^7` when
//! `n >= 2^(P-7)`: an entry keeps its offset in that range (`rest`), so
//! its position, and with it its bucket in a table of any other size, is
//! known without its key.

use super::buckets::Buckets;
use super::table::{Moving, Table};
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

/// Buckets in a 4 KiB page (bucket arrays are page aligned,
/// `index/buckets.rs`).
const PAGE_BUCKETS: usize = 4096 / std::mem::size_of::<Bucket>();
/// What faulting in a page of new buckets counts for in a rebuild step's
/// budget of old buckets (a fault costs about as much as moving eight
/// buckets' entries).
const FAULT_COST: usize = 8;

/// The fewest buckets an index of precision `prec` can have (over its
/// tables).
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

    /// The bucket count table `t` should move to, if any: grown to the
    /// target load once fuller than [`GROW_PERCENT`], shrunk to it once
    /// emptier than [`SHRINK_PERCENT`], within what its precision allows.
    pub fn wants_resize(&self, t: usize) -> Option<usize> {
        self.tables[t].wants_resize()
    }

    /// Whether the table of `hash` is full: past its grow load, so held
    /// back by the budget (or its precision), and at [`FULL_PERMILLE`] of
    /// its slots, where a new entry evicts one. Between the grow load and
    /// this the index still has room: a table the small store kept at its
    /// grow load (95%) left 5% of the index's slots idle, and the store on
    /// held fewer keys than the log tier alone (issue 32).
    pub fn at_budget(&self, hash: u64) -> bool {
        let t = self.split(hash).0;
        let table = &self.tables[t];
        table.items * 1000 >= table.slots() * FULL_PERMILLE
    }

    /// The next table, from a cursor that goes round the tables, that
    /// wants a resize, and the bucket count it wants (a table whose
    /// rebuild is under way: its new count); `budget` is how many tables
    /// it may still look at (each call takes from it), so a pass that
    /// finds nothing ends.
    pub fn next_due(&mut self, budget: &mut usize) -> Option<(usize, usize)> {
        while *budget > 0 {
            *budget -= 1;
            let t = self.cursor;
            self.cursor = (self.cursor + 1) % self.tables.len();
            let table = &self.tables[t];
            if table.moving.is_some() {
                return Some((t, table.buckets.len()));
            }
            if let Some(want) = table.wants_resize() {
                return Some((t, want));
            }
        }
        None
    }

    /// Rebuilds table `t` with `buckets` buckets (within what its precision
    /// allows) at once, keeping hit bits; no key is read, and no other table
    /// is touched. Entries that find no room (rare below the grow load) are
    /// evicted as by an insert and returned. A rebuild under way is
    /// finished first.
    pub fn resize_table(
        &mut self,
        t: usize,
        buckets: usize,
        mut rank: impl FnMut(Loc, bool) -> u64,
    ) -> Vec<Evicted> {
        let mut out = self.resize_step(t, usize::MAX, &mut rank);
        self.start_resize(t, buckets);
        out.extend(self.resize_step(t, usize::MAX, &mut rank));
        out
    }

    /// Starts rebuilding table `t` with `buckets` buckets (within what its
    /// precision allows): its entries stay where they are, found by every
    /// lookup, until [`resize_step`](Self::resize_step) moves them. The
    /// new buckets are a zeroed allocation, whose pages the steps fault
    /// in. Nothing happens while a rebuild of `t` is under way.
    pub fn start_resize(&mut self, t: usize, buckets: usize) {
        let table = &mut self.tables[t];
        if table.moving.is_some() {
            return;
        }
        let before = table.memory_bytes();
        let n = clamp_buckets(table.prec, buckets);
        let old = std::mem::replace(&mut table.buckets, Buckets::zeroed(n));
        self.old_bytes += Index::bytes_for_buckets(old.len());
        table.moving = Some(Moving {
            old,
            done: 0,
            faulted: 0,
        });
        self.bytes = self.bytes + self.tables[t].memory_bytes() - before;
    }

    /// Whether a rebuild of table `t` is under way.
    pub fn resizing(&self, t: usize) -> bool {
        self.tables[t].moving.is_some()
    }

    /// Moves the entries of up to `max` more old buckets of table `t`'s
    /// rebuild (none when there is none); returns the entries that found no
    /// room, evicted as by an insert. The last step hands the old buckets
    /// to [`take_freed`](Self::take_freed), to be freed outside the lock.
    pub fn resize_step(
        &mut self,
        t: usize,
        max: usize,
        rank: impl FnMut(Loc, bool) -> u64,
    ) -> Vec<Evicted> {
        let before = self.tables[t].memory_bytes();
        let (out, freed) = self.tables[t].step(max, rank);
        if let Some(old) = freed {
            self.old_bytes -= Index::bytes_for_buckets(old.len());
            self.freed.push(old);
        }
        self.bytes = self.bytes + self.tables[t].memory_bytes() - before;
        out.into_iter().map(|ev| self.in_index(t, ev)).collect()
    }

    /// The old buckets of rebuilds that ended, to be freed where no lock
    /// is held (a 512 KiB free is an munmap).
    pub fn take_freed(&mut self) -> Option<Box<dyn Send>> {
        (!self.freed.is_empty()).then(|| Box::new(std::mem::take(&mut self.freed)) as Box<dyn Send>)
    }

    /// Resizes every table to its share of `buckets` (tests, and the
    /// measurement of what one resize costs).
    #[cfg(test)]
    pub fn resize(
        &mut self,
        buckets: usize,
        mut rank: impl FnMut(Loc, bool) -> u64,
    ) -> Vec<Evicted> {
        let each = buckets.div_ceil(self.tables.len());
        (0..self.tables.len())
            .flat_map(|t| self.resize_table(t, each, &mut rank))
            .collect()
    }
}

impl Table {
    /// None while a rebuild is under way: it finishes first.
    fn wants_resize(&self) -> Option<usize> {
        if self.moving.is_some() {
            return None;
        }
        let n = self.buckets.len();
        let want = clamp_buckets(self.prec, Index::buckets_for(self.items));
        let full = self.items * 100 > self.slots() * GROW_PERCENT;
        let empty = self.items * 100 < self.slots() * SHRINK_PERCENT;
        ((full && want > n) || (empty && want < n)).then_some(want)
    }

    /// Moves the entries of up to `max` old buckets of the rebuild under
    /// way into the new buckets ([`Index::resize_step`]); returns what
    /// found no room, and the old buckets once all are moved.
    ///
    /// The new buckets' pages are faulted in first, [`FAULT_COST`] of
    /// `max` a page (at least one page a step): an entry that sits in its
    /// second bucket has its new home anywhere in the table, so moving
    /// entries into a table of unmapped pages faulted up to a page per
    /// such entry, most of the table's 128 pages in the first steps
    /// (measured: steps of 128 buckets up to 250-325 us on the CPU instead
    /// of a median of 27 us).
    #[allow(clippy::type_complexity)]
    fn step(
        &mut self,
        max: usize,
        mut rank: impl FnMut(Loc, bool) -> u64,
    ) -> (Vec<Evicted>, Option<Buckets>) {
        let mut out = Vec::new();
        // Taken out while entries are placed in the new buckets.
        let Some(mut m) = self.moving.take() else {
            return (out, None);
        };
        let (n, old_n) = (self.buckets.len(), m.old.len());
        let mut max = max;
        while m.faulted < n {
            // Byte 63 of a bucket is always zero: the write maps the page.
            self.buckets[m.faulted].0[63] = std::hint::black_box(0);
            m.faulted += PAGE_BUCKETS;
            max = max.saturating_sub(FAULT_COST);
            if max == 0 {
                self.moving = Some(m);
                return (out, None);
            }
        }
        let end = m.done.saturating_add(max).min(old_n);
        for b in m.done..end {
            let bk = std::mem::replace(&mut m.old[b], EMPTY);
            for i in 0..SLOTS {
                let e = bk.get(i);
                if e == 0 {
                    continue;
                }
                let class = {
                    // `class_at` in the old buckets.
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
        m.done = end;
        if end < old_n {
            self.moving = Some(m);
            (out, None)
        } else {
            (out, Some(m.old))
        }
    }
}
