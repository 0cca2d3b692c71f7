//! Items with a record on both device classes. A capacity hit promoted into
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
//! ([`Shard::copy_to_capacity`]), so that the split has reads to move even
//! when everything fits on the fast class. The new capacity record becomes
//! the primary and the fast record its copy: the same shape as above with
//! the classes swapped (the entry is the newest record and carries the copy
//! bit; the copy is older), so the same crash rules hold. Such a copy is
//! read when the split sends a read to the fast class; when the load falls
//! no more are made, every read goes to the fast record, and the capacity
//! class's reclaim lets the fast record become the entry again instead of
//! writing the capacity one again ([`Shard::fall_back_to_copy`]).

use super::*;
use crate::flash::tier::{Dest, DeviceClass};
use std::sync::atomic::Ordering;

/// Copies a shard remembers at most (the hottest items: each was promoted).
pub(super) const MAX_COPIES: usize = 8192;

/// An item's capacity copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CopyOf {
    pub primary: Loc,
    pub primary_seq: u64,
    pub copy: Loc,
    pub copy_seq: u64,
}

impl Shard {
    /// The capacity copy of the item whose index entry is `loc`, while both
    /// records are where they were when it was made.
    pub(crate) fn copy_of(&self, hash: u64, loc: Loc) -> Option<CopyOf> {
        let c = *self.copies.get(&hash)?;
        let f = self.flash.as_ref()?;
        (c.primary == loc
            && self.index.contains(hash, loc)
            && f.seq_of(loc) == Some(c.primary_seq)
            && f.seq_of(c.copy) == Some(c.copy_seq))
        .then_some(c)
    }

    /// Forgets copies whose records moved or went; a table at most a
    /// quarter full gives half its room back.
    pub(super) fn prune_copies(&mut self) {
        let keys: Vec<u64> = self.copies.keys().copied().collect();
        for hash in keys {
            let primary = self.copies[&hash].primary;
            if self.copy_of(hash, primary).is_none() {
                self.copies.remove(&hash);
            }
        }
        if self.copies.len() * 4 <= self.copies.capacity() {
            self.copies.shrink_to(self.copies.len() * 2);
            self.account_copies();
        }
    }

    /// A capacity hit: copies the item into the fast class while the
    /// scheduler admits data, keeping the capacity record as its copy.
    pub(super) fn promote_to_fast(&mut self, hash: u64, loc: Loc, item_bytes: &[u8]) {
        let Some(f) = self.flash.clone() else {
            return;
        };
        if !f.data_admit() || f.class_at(loc) != Some(DeviceClass::Capacity) {
            return;
        }
        if self.copy_of(hash, loc).is_some() {
            // A capacity copy of a fast item: the fast record is there.
            return;
        }
        if Header::read(item_bytes).expired(self.clock_now) || !self.index.contains(hash, loc) {
            return;
        }
        self.make_room_for_a_copy();
        let Some(copy_seq) = f.seq_of(loc) else {
            return;
        };
        let dest = Dest::Promote { from_seq: copy_seq };
        if self.write_copy(&f, (hash, loc, copy_seq), item_bytes, dest) {
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
        (hash, loc, copy_seq): (u64, Loc, u64),
        item_bytes: &[u8],
        dest: Dest,
    ) -> bool {
        let Ok(new) = f.append(item_bytes, false, self.clock_now, &mut 0, dest) else {
            return false;
        };
        let Some(primary_seq) = f.seq_of(new) else {
            return false;
        };
        self.index.relocate(hash, loc, new);
        self.index.set_hit(hash, new);
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
        self.account_copies();
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
    pub(super) fn copy_to_capacity(&mut self, hash: u64, loc: Loc, item_bytes: &[u8]) {
        let Some(f) = self.flash.clone() else {
            return;
        };
        if !f.copies_pay() || f.class_at(loc) != Some(DeviceClass::Fast) {
            return;
        }
        let h = Header::read(item_bytes);
        if h.expired(self.clock_now)
            || !f.moves_unhit(loc, h.exptime, self.clock_now)
            || self.index.hit(hash, loc) != Some(true)
            || self.copy_of(hash, loc).is_some()
        {
            return;
        }
        let Some(fast_seq) = f.seq_of(loc) else {
            return;
        };
        if self.copies.len() >= MAX_COPIES {
            // A full table of valid copies refuses more rather than
            // forgetting some (a forgotten one leaves its item on the
            // capacity class alone, outside the split's control). Pruning
            // walks the table: once per 256 refusals, not per hit.
            self.copies_refused += 1;
            if self.copies_refused < 256 {
                return;
            }
            self.copies_refused = 0;
            self.prune_copies();
            if self.copies.len() >= MAX_COPIES {
                return;
            }
        }
        let size = crate::flash::format::record_size(h.klen as usize, h.vlen as usize);
        if !f.take_write_budget(size) {
            return;
        }
        let dest = Dest::Replica { from_seq: fast_seq };
        if self.write_copy(&f, (hash, loc, fast_seq), item_bytes, dest) {
            f.stats.copies_made.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Room for one more copy in a full table: stale copies are pruned,
    /// and if it is still full of valid ones, 1/16 of them are forgotten.
    fn make_room_for_a_copy(&mut self) {
        if self.copies.len() >= MAX_COPIES {
            self.prune_copies();
            // Still full of valid copies: forget some rather than refuse
            // the promotion. Refusing kept the table full for good when the
            // working set changed and nothing wrote to the fast class
            // (classic caching never brought the new set in; bench/RESULTS.md,
            // nhc_change.py). A forgotten copy is an unremembered older
            // record of its key, as after a restart: its primary carries the
            // copy bit, and whatever covers the primary covers it.
            let drop: Vec<u64> = self.copies.keys().take(MAX_COPIES / 16).copied().collect();
            for hash in drop {
                self.copies.remove(&hash);
            }
        }
    }

    /// Charges the copy table's DRAM to `-m` as it grows and shrinks, as
    /// the index is charged: the hash map's buckets, each an entry and one
    /// control byte (at most about 656 KiB a shard, for [`MAX_COPIES`]).
    pub(super) fn account_copies(&mut self) {
        let now = self.copies.capacity() * (std::mem::size_of::<(u64, CopyOf)>() + 1);
        if now != self.copies_bytes_reported {
            let delta = now as isize - self.copies_bytes_reported as isize;
            self.shared.pool.add_index_bytes(delta);
            self.copies_bytes_reported = now;
        }
    }

    /// A fast record being reclaimed whose capacity copy is still there: the
    /// copy becomes the key's entry (nothing is written). False when there
    /// is no such copy.
    pub(super) fn fall_back_to_copy(&mut self, hash: u64, loc: Loc, hit: bool) -> bool {
        let Some(c) = self.copy_of(hash, loc) else {
            return false;
        };
        let Some(f) = self.flash.clone() else {
            return false;
        };
        self.copies.remove(&hash);
        self.index.relocate(hash, loc, c.copy);
        if hit {
            self.index.set_hit(hash, c.copy);
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
