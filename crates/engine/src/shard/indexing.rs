//! The shard's index kept within its budget: inserts that evict the least
//! valuable entry of a full bucket (a flash entry's record gets a
//! tombstone), resizes as the item count moves, and the index's bytes
//! reported to the memory pool.

use super::*;

/// The most old buckets one pass of [`Shard::resize_index`] moves
/// (32 KiB of index; the pass is one lock hold).
const RESIZE_PASS_BUCKETS: usize = 1 << 9;

/// Old buckets an insert into a table under rebuild moves (4 KiB of
/// index, about ten microseconds): a full table's rebuild is spread over
/// 144 inserts into it (its first 16 steps map the new pages), where rebuilding it at once held the lock for 250 us
/// to over a millisecond (issue 31).
const INSERT_STEP_BUCKETS: usize = 1 << 6;

/// How far the pool's non-segment charge (the index, the small store's
/// DRAM, the log tier's write buffers) may go over the index's budget
/// before the small store defers its admissions to the log tier: the
/// store's DRAM grows in steps (its filters at its first set write), and
/// the index gives it back a table at a time.
const SMALL_SLACK: usize = 1 << 20;

/// The least the index gives the small store's DRAM at a time
/// ([`Shard::give_small_room`]).
const SHRINK_STEP: usize = 64 << 10;

impl Shard {
    pub(super) fn account_index(&mut self) {
        let set_aside = self.flushing.as_ref().map_or(0, |f| f.index_bytes());
        let now = self.index.memory_bytes() + set_aside;
        if now != self.index_bytes_reported {
            self.shared
                .pool
                .add_index_bytes(now as isize - self.index_bytes_reported as isize);
            self.index_bytes_reported = now;
        }
    }

    /// Bytes of memory this shard's index uses.
    pub fn index_bytes(&self) -> usize {
        self.index.memory_bytes()
    }

    /// Indexes a new item (whose counters are already counted). When the
    /// index is full and may not grow, the least valuable entry of the
    /// key's bucket goes ([`index_evicted`](Self::index_evicted)). Only
    /// the key's table may be resized: at most 512 KiB of index is rebuilt
    /// under the lock ([`crate::index::TABLE_PREC`]).
    pub(crate) fn index_insert(&mut self, hash: u64, loc: Loc) {
        self.give_small_room(hash);
        let may_grow = self.shared.pool.index_bytes() < self.shared.index_cap();
        let flash = self.below.log.tier().cloned();
        let (t, evicted) =
            self.index
                .insert_in_table(hash, loc, may_grow, ranking(flash.as_deref()));
        if let Some(ev) = evicted {
            self.index_evicted(ev);
        }
        if self.index.resizing(t) {
            self.resize_step(t, INSERT_STEP_BUCKETS);
        } else if let Some(want) = self.index.wants_resize(t) {
            let _ = self.resize_table(t, want);
        }
        self.account_index();
    }

    /// Moves up to `max` more old buckets of table `t`'s rebuild under
    /// way; returns how many were asked for.
    fn resize_step(&mut self, t: usize, max: usize) -> usize {
        self.mark_hold(super::hold::HoldCause::Resize);
        self.stats.index_resize_steps += 1;
        let flash = self.below.log.tier().cloned();
        let evicted = self.index.resize_step(t, max, ranking(flash.as_deref()));
        for ev in evicted {
            self.index_evicted(ev);
        }
        self.free_old_buckets();
        max
    }

    /// The old buckets of finished rebuilds: freed by the maintenance
    /// thread, outside the lock, when there is one (else here).
    fn free_old_buckets(&mut self) {
        if let Some(old) = self.index.take_freed() {
            if self.shared.evacuator.attached() {
                self.shared.pool.free_later(old);
            }
        }
    }

    /// Finishes every rebuild under way (before a snapshot, whose layout
    /// has one array of buckets a table).
    pub(crate) fn finish_index_resizes(&mut self) {
        for t in 0..self.index.tables() {
            if self.index.resizing(t) {
                self.resize_step(t, usize::MAX);
            }
        }
        self.account_index();
    }

    /// Starts a shrink of every table to its fewest buckets, left under
    /// way (tests: a rebuild that evicts when it finishes).
    #[doc(hidden)]
    pub fn start_index_shrinks_for_tests(&mut self) {
        for t in 0..self.index.tables() {
            self.index.start_resize(t, 1);
        }
        self.account_index();
    }

    /// Resizes the tables that ask to (after deletes, expiry or a flush),
    /// going round them a little at a time: at most
    /// [`RESIZE_PASS_BUCKETS`] old buckets moved per call, so that a shrink
    /// of a large index never holds the shard's lock for long. Returns
    /// whether it had anything to do.
    pub(super) fn resize_index(&mut self) -> bool {
        let mut look = self.index.tables();
        let (mut rebuilt, mut did) = (0, false);
        while rebuilt < RESIZE_PASS_BUCKETS {
            let Some((t, want)) = self.index.next_due(&mut look) else {
                break;
            };
            // A table its floor or the budget keeps as it is costs nothing.
            let moved = self.resize_table(t, want);
            did |= moved > 0;
            rebuilt += moved.max(1);
        }
        self.account_index();
        did
    }

    /// Resizes table `t` towards `want` buckets (grown to its target load
    /// past its grow load, shrunk when emptier than its shrink load),
    /// within the index budget (`Shared::index_cap`) and not below its
    /// share of the floor. The memory budget follows: a bigger index
    /// leaves room for fewer RAM segments. The rebuild starts here and
    /// goes on a step at each insert into the table
    /// ([`index_insert`](Self::index_insert)) and each pass; a call for a
    /// table under rebuild makes a step. Returns the old buckets it asked
    /// to move (0 when the table stays as it is).
    fn resize_table(&mut self, t: usize, mut want: usize) -> usize {
        let step = INSERT_STEP_BUCKETS;
        if self.index.resizing(t) {
            return self.resize_step(t, step);
        }
        let now = self.index.table_buckets(t);
        let floor = self.index_floor.div_ceil(self.index.tables());
        want = want.max(floor.min(now));
        if want > now {
            let room = self
                .shared
                .index_cap()
                .saturating_sub(self.shared.pool.index_bytes() + self.small_reserve())
                / Index::bytes_for_buckets(1);
            want = want.min(now + room);
        }
        if want != now {
            // Also when an insert asks (a set, an evacuation's reinsert):
            // the hold is then counted as a resize, its weightiest work.
            self.index.start_resize(t, want);
            self.stats.index_resizes += 1;
            return self.resize_step(t, step);
        }
        0
    }

    /// What a table's growth leaves unused of the index's budget: nothing
    /// without the small store or before it holds anything; once it does,
    /// [`SMALL_SLACK`], the most its segment buffers may take beside its
    /// lasting DRAM. Its buffers come and go with its flushes; a table
    /// grown into the room a drained queue left was shrunk again by the
    /// next admissions ([`give_small_room`](Self::give_small_room)), and
    /// each such rebuild leaves the table less full (issue 32: 707 index
    /// resizes in the 12 s the store took items at 4 M keys, the index
    /// 2.86 M entries in 21.6 MB, 7.55 B an entry against the log tier
    /// alone's 7.11). The index grows again once the store's lasting DRAM
    /// shrinks (its objects moved into sets).
    fn small_reserve(&self) -> usize {
        match self.below.small.as_ref() {
            Some(p) if !p.first && p.lasting() > 0 => SMALL_SLACK,
            _ => 0,
        }
    }

    /// Whether the small store may take another item, its DRAM counted in
    /// the index's budget: false while the index and the store are over it
    /// by more than [`SMALL_SLACK`] (the index gives room as new keys come,
    /// [`give_small_room`](Self::give_small_room), or cannot: its floor).
    pub(super) fn small_dram_room(&self) -> bool {
        self.shared.pool.index_bytes() <= self.shared.index_cap() + SMALL_SLACK
    }

    /// Before a new key's entry: when the index and the small store's DRAM
    /// are over the index's budget, the key's table gives room
    /// ([`shrink_table`](Self::shrink_table)). The store takes items only
    /// once the index is at its budget, so what the index gives up are
    /// entries it would have evicted for new keys anyway, the lowest
    /// ranked first, for the store's objects. Done here,
    /// where an insert evicts anyway, not while an item is demoted.
    fn give_small_room(&mut self, hash: u64) {
        let Some((lasting, passing)) = self
            .below
            .small
            .as_ref()
            .filter(|p| !p.first)
            .map(|p| (p.lasting(), p.dram().saturating_sub(p.lasting())))
        else {
            return;
        };
        // The store's segment buffers come and go with its flushes: the
        // pool may be over the cap for them a while (the store defers past
        // the slack), but the index gives no entry for them; a first
        // version that did shrank tables for each burst of queued segments,
        // then grew them back to their target load (89%) once the queue
        // drained: the index ran 94.5% full at 4 M keys (96.6% without).
        // Nor for the old buckets of a rebuild under way, freed when it ends.
        let over = self
            .shared
            .pool
            .index_bytes()
            .saturating_sub(self.index.old_bytes())
            .saturating_sub(passing)
            .saturating_sub(self.shared.index_cap())
            .min(lasting);
        // Room is given 64 KiB at a time: each shrink rebuilds a full table,
        // whose entries then pack less tightly (two buckets a key) than
        // inserts that evict fill it; with a rebuild for every few
        // kilobytes of the store's log index the index ran 96.6% full at
        // 4 M keys, with 64 KiB steps 98.2% (the log tier alone: 99.98%).
        if over >= SHRINK_STEP {
            self.shrink_table(self.index.table_of(hash), over);
        }
    }

    /// Shrinks table `t` by up to `bytes` of buckets (at most an eighth of
    /// it at a time, not below its share of the floor), evicting the
    /// entries that no longer fit, lowest ranked first.
    fn shrink_table(&mut self, t: usize, bytes: usize) {
        let now = self.index.table_buckets(t);
        let floor = self.index_floor.div_ceil(self.index.tables());
        let give = bytes
            .div_ceil(Index::bytes_for_buckets(1))
            .min(now / 8)
            .min(now.saturating_sub(floor));
        if give == 0 {
            return;
        }
        self.mark_hold(super::hold::HoldCause::Resize);
        self.stats.index_resizes += 1;
        self.stats.index_resize_steps += 1;
        let flash = self.below.log.tier().cloned();
        let evicted = self
            .index
            .resize_table(t, now - give, ranking(flash.as_deref()));
        for ev in evicted {
            self.index_evicted(ev);
        }
        self.free_old_buckets();
        self.account_index();
    }

    /// An entry the index dropped for room: its item is gone from the
    /// cache (an eviction). A flash record of it stays on the device until
    /// its segment is reused, so it gets a tombstone, as a delete would:
    /// a later change of the key finds no entry to tombstone, and a crash
    /// must not bring the record back over that change.
    pub(super) fn index_evicted(&mut self, ev: Evicted) {
        self.stats.index_evictions += 1;
        self.stats.evictions += 1;
        self.stats.curr_items -= 1;
        if is_flash(ev.loc) {
            self.stats.flash_items -= 1;
            if !ev.hit {
                self.stats.evicted_unfetched += 1;
            }
            if let Some(f) = self.below.log.tier().cloned() {
                if f.tombstone_horizon(ev.loc).is_some() {
                    self.below.log.tombstone(ev.class);
                }
                f.release(ev.loc);
            }
        } else {
            let h = self.header(ev.loc);
            if !h.expired(self.clock_now) {
                self.report_eviction(ev.loc, &h);
            }
            if h.bits & item::FLASH_COPY != 0 {
                self.below.log.tombstone(ev.class);
            }
            if h.bits & item::FETCHED == 0 {
                self.stats.evicted_unfetched += 1;
            }
            self.update_bits(ev.loc, item::DEAD, 0);
            self.seg_mut(ev.loc.seg).live_items -= 1;
            self.stats.bytes -= h.size() as u64;
        }
    }

    /// The key class of `hash` in this shard's index.
    pub(crate) fn class_of(&self, hash: u64) -> Class {
        Class::of(hash, self.index.precision())
    }
}

/// How much an index entry is worth keeping when its bucket is full:
/// flash entries before RAM ones, unhit before hit, the oldest segment
/// first (as a set-associative cache evicts within its set).
/// The ranking of index entries for eviction (lowest goes first): flash
/// before RAM, unhit before hit, oldest segment first. It reads the flash
/// segments' numbers under one hold of the tier's lock, taken at the first
/// call and let go when the ranking is dropped (the insert or resize that
/// ranks ends): an eviction ranks up to a few hundred candidates.
fn ranking(flash: Option<&FlashTier>) -> impl FnMut(Loc, bool) -> u64 + '_ {
    let mut seqs = None;
    move |loc: Loc, hit: bool| {
        if !is_flash(loc) {
            return u64::MAX - 1;
        }
        let seq = flash
            .and_then(|f| seqs.get_or_insert_with(|| f.seqs()).of(loc))
            .unwrap_or(0);
        seq.min(1 << 61) | (u64::from(hit) << 62)
    }
}
