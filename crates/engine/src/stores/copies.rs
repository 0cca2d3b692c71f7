//! Items with a record on both device classes: the copies table the flash
//! log's part of a shard holds ([`Copies`], given the tier and the shard's
//! index by `LogPart`). A capacity hit promoted into
//! the fast class keeps its capacity record as a copy (no write to the
//! capacity class), so that a later hit may be read from either class
//! (non-hierarchical caching, `flash::tier::classes`).
//!
//! The index keeps one flash entry per key, the primary; the copy is
//! remembered here, per key hash, as the primary's location *and* its
//! segment's sequence number. Records are immutable and a sequence number is
//! never reused, so a copy is served only while its primary entry still
//! points at the very record it was copied from: any change of the key (a
//! store, a delete, a touch, a promotion to RAM) moves or removes that
//! entry, and the copy is never read again. After a crash both records are
//! on the device and recovery keeps the newer one (the fast record: a
//! promotion is refused unless its segment is newer than the copy's), so
//! the older copy is covered by whatever covers its key from then on.
//!
//! Copies where they pay (issue 35): when the scheduler finds the fast
//! class queued and the capacity class with headroom (`copies_pay`), a hit
//! on the fast class writes the item to the capacity class too
//! ([`Copies::copy_to_capacity`]), so that the split has reads to move even
//! when everything fits on the fast class. The new capacity record becomes
//! the primary and the fast record its copy: the same shape as above with
//! the classes swapped (the entry is the newest record and carries the copy
//! bit; the copy is older), so the same crash rules hold. Such a copy is
//! read when the split sends a read to the fast class; when the load falls
//! no more are made, every read goes to the fast record, and the capacity
//! class's reclaim lets the fast record become the entry again instead of
//! writing the capacity one again ([`Copies::fall_back_to_copy`]).

use super::Entries;
use crate::flash::tier::{Dest, DeviceClass, FlashTier};
use crate::index::{Index, Loc};
use crate::item::Header;
use crate::pool::SegmentPool;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

/// Copies a shard remembers at least, whatever the memory (the hottest
/// items: each was promoted, or copied where copies pay).
pub(super) const MIN_COPIES: usize = 8192;

/// About what a copy takes in the table: an entry of 41 bytes (with its
/// control byte) in a hash map kept between half and 7/8 full.
const COPY_BYTES: usize = 80;

/// The copy tables of all shards together may take up to 1/8 of the memory
/// limit (charged to it as they grow, [`Copies::account_copies`]).
const MEMORY_SHARE: usize = 8;

/// Copies a shard remembers at most: its share of 1/8 of `memory_limit`,
/// at least [`MIN_COPIES`]. A fixed 8,192 a shard made the bound depend
/// on the shard count: `-m 48` (4 shards) held 32,768 copies and `-m 64`
/// (8 shards) 65,536, and with uniform keys at twice the fast device's
/// load the capacity class got only the reads of the copied items (4,092
/// of its 5,000 reads/s, 273,168 copies refused; bench/RESULTS.md, issue
/// 35). With keys read alike, a third of the items need a copy for the
/// capacity class to take a third of the reads.
pub fn max_copies(memory_limit: usize, shards: usize) -> usize {
    (memory_limit / MEMORY_SHARE / COPY_BYTES / shards.max(1)).max(MIN_COPIES)
}

/// An item's capacity copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopyOf {
    pub primary: Loc,
    pub primary_seq: u64,
    pub copy: Loc,
    pub copy_seq: u64,
}

/// A flash hit: the key's hash, its index entry and its record's bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hit<'a> {
    pub hash: u64,
    pub loc: Loc,
    pub item_bytes: &'a [u8],
}

/// A shard's copies table.
pub(crate) struct Copies {
    /// Copies it holds at most ([`max_copies`]).
    max: usize,
    /// Capacity copies of items promoted into the fast class, by key hash.
    copies: HashMap<u64, CopyOf>,
    /// The copy table's DRAM as charged to the memory limit.
    copies_bytes_reported: usize,
    /// Copies to the capacity class refused since the copy table was last
    /// pruned for them ([`Copies::copy_to_capacity`]: one prune per 256).
    copies_refused: u32,
}

impl Copies {
    /// An empty table of at most `max` copies.
    pub(crate) fn new(max: usize) -> Copies {
        Copies {
            max,
            copies: HashMap::new(),
            copies_bytes_reported: 0,
            copies_refused: 0,
        }
    }

    /// The capacity copy of the item whose index entry is `loc`, while both
    /// records are where they were when it was made.
    pub(crate) fn copy_of(
        &self,
        f: &FlashTier,
        index: &Index,
        hash: u64,
        loc: Loc,
    ) -> Option<CopyOf> {
        let c = *self.copies.get(&hash)?;
        (c.primary == loc
            && index.contains(hash, loc)
            && f.seq_of(loc) == Some(c.primary_seq)
            && f.seq_of(c.copy) == Some(c.copy_seq))
        .then_some(c)
    }

    /// Forgets copies whose records moved or went; a table at most a
    /// quarter full gives half its room back.
    pub(crate) fn prune(&mut self, f: &FlashTier, index: &Index, pool: &SegmentPool) {
        let keys: Vec<u64> = self.copies.keys().copied().collect();
        for hash in keys {
            let primary = self.copies[&hash].primary;
            if self.copy_of(f, index, hash, primary).is_none() {
                self.copies.remove(&hash);
            }
        }
        if self.copies.len() * 4 <= self.copies.capacity() {
            self.copies.shrink_to(self.copies.len() * 2);
            self.account_copies(pool);
        }
    }

    /// A capacity hit: copies the item into the fast class while the
    /// scheduler admits data, keeping the capacity record as its copy.
    pub(crate) fn promote_to_fast(&mut self, f: &FlashTier, ram: &mut Entries<'_>, hit: Hit<'_>) {
        let Hit {
            hash,
            loc,
            item_bytes,
        } = hit;
        if !f.data_admit() || f.class_at(loc) != Some(DeviceClass::Capacity) {
            return;
        }
        if self.copy_of(f, ram.index, hash, loc).is_some() {
            // A capacity copy of a fast item: the fast record is there.
            return;
        }
        if Header::read(item_bytes).expired(ram.now) || !ram.index.contains(hash, loc) {
            return;
        }
        self.make_room_for_a_copy(f, ram.index, ram.pool);
        let Some(copy_seq) = f.seq_of(loc) else {
            return;
        };
        let dest = Dest::Promote { from_seq: copy_seq };
        if self.write_copy(f, ram, (hash, loc, copy_seq), item_bytes, dest) {
            f.stats.promotions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Writes the item at `loc` (whose segment's sequence number is
    /// `copy_seq`) again to `dest`: the new record becomes the index entry
    /// (hit), and the record at `loc` its copy. False when the write was
    /// refused.
    fn write_copy(
        &mut self,
        f: &FlashTier,
        ram: &mut Entries<'_>,
        (hash, loc, copy_seq): (u64, Loc, u64),
        item_bytes: &[u8],
        dest: Dest,
    ) -> bool {
        let Ok(new) = f.append(item_bytes, false, ram.now, &mut 0, dest) else {
            return false;
        };
        let Some(primary_seq) = f.seq_of(new) else {
            return false;
        };
        ram.index.relocate(hash, loc, new);
        ram.index.set_hit(hash, new);
        f.release(loc);
        self.copies.insert(
            hash,
            CopyOf {
                primary: new,
                primary_seq,
                copy: loc,
                copy_seq,
            },
        );
        self.account_copies(ram.pool);
        true
    }

    /// A hit on the fast class while copies pay (the scheduler found the
    /// fast class queued and the capacity class with headroom): writes the
    /// item to the capacity class too, sequentially (its moves' stream),
    /// charged to the write budget. The new capacity record becomes the
    /// entry, with the copy bit, and the fast record its copy: the entry is
    /// the newer record, as after a promotion, so the crash rules of the
    /// module's documentation hold unchanged. Only items hit before (the
    /// hot ones), not expiring within a minute, and not already copied.
    pub(crate) fn copy_to_capacity(&mut self, f: &FlashTier, ram: &mut Entries<'_>, hit: Hit<'_>) {
        let Hit {
            hash,
            loc,
            item_bytes,
        } = hit;
        if !f.copies_pay() || f.class_at(loc) != Some(DeviceClass::Fast) {
            return;
        }
        let h = Header::read(item_bytes);
        if h.expired(ram.now)
            || !f.moves_unhit(loc, h.exptime, ram.now)
            || ram.index.hit(hash, loc) != Some(true)
            || self.copy_of(f, ram.index, hash, loc).is_some()
        {
            return;
        }
        let Some(fast_seq) = f.seq_of(loc) else {
            return;
        };
        if self.copies.len() >= self.max {
            // A full table of valid copies refuses more rather than
            // forgetting some (a forgotten one leaves its item on the
            // capacity class alone, outside the split's control). Pruning
            // walks the table: once per 256 refusals, not per hit.
            self.copies_refused += 1;
            let pruned = self.copies_refused >= 256;
            if pruned {
                self.copies_refused = 0;
                self.prune(f, ram.index, ram.pool);
            }
            if self.copies.len() >= self.max {
                f.stats.copies_refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
        let size = crate::flash::format::record_size(h.klen as usize, h.vlen as usize);
        if !f.take_write_budget(size) {
            return;
        }
        let dest = Dest::Replica { from_seq: fast_seq };
        if self.write_copy(f, ram, (hash, loc, fast_seq), item_bytes, dest) {
            f.stats.copies_made.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Room for one more copy in a full table: stale copies are pruned,
    /// and if it is still full of valid ones, 1/16 of them are forgotten.
    fn make_room_for_a_copy(&mut self, f: &FlashTier, index: &Index, pool: &SegmentPool) {
        if self.copies.len() >= self.max {
            self.prune(f, index, pool);
            // Still full of valid copies: forget some rather than refuse
            // the promotion. Refusing kept the table full for good when the
            // working set changed and nothing wrote to the fast class
            // (classic caching never brought the new set in; bench/RESULTS.md,
            // nhc_change.py). A forgotten copy is an unremembered older
            // record of its key, as after a restart: its primary carries the
            // copy bit, and whatever covers the primary covers it.
            let drop: Vec<u64> = self.copies.keys().take(self.max / 16).copied().collect();
            for hash in drop {
                self.copies.remove(&hash);
            }
        }
    }

    /// Charges the copy table's DRAM to `-m` as it grows and shrinks, as
    /// the index is charged: the hash map's buckets, each an entry and one
    /// control byte (about [`COPY_BYTES`] a copy when full).
    fn account_copies(&mut self, pool: &SegmentPool) {
        let now = self.copies.capacity() * (std::mem::size_of::<(u64, CopyOf)>() + 1);
        if now != self.copies_bytes_reported {
            let delta = now as isize - self.copies_bytes_reported as isize;
            pool.add_index_bytes(delta);
            self.copies_bytes_reported = now;
        }
    }

    /// A fast record being reclaimed whose capacity copy is still there: the
    /// copy becomes the key's entry (nothing is written). False when there
    /// is no such copy.
    pub(crate) fn fall_back_to_copy(
        &mut self,
        f: &FlashTier,
        index: &mut Index,
        hash: u64,
        loc: Loc,
        hit: bool,
    ) -> bool {
        let Some(c) = self.copy_of(f, index, hash, loc) else {
            return false;
        };
        self.copies.remove(&hash);
        index.relocate(hash, loc, c.copy);
        if hit {
            index.set_hit(hash, c.copy);
        }
        f.acquire(c.copy);
        let counter = if f.class_at(loc) == Some(DeviceClass::Capacity) {
            // A copy made where it paid, released by the capacity class.
            &f.stats.copies_dropped
        } else {
            &f.stats.moves_to_copy
        };
        counter.fetch_add(1, Ordering::Relaxed);
        true
    }
}
