//! The flash log's part of one shard: the tier it appends to, the write
//! buffer room reserved for an evacuation's demotions, the tombstones this
//! shard asked the crash journal for, the credits that say whether
//! promotions and verify-before-set reads pay, and the copies table
//! (`copies.rs`). Its records are indexed in the shard's index: the
//! methods here take the index and read or change only flash entries.

mod reclaim;
mod tombs;

pub(crate) use reclaim::Reclaimed;

use super::copies::{Copies, CopyOf, Hit};
use super::Entries;
use crate::credit::Credit;
use crate::flash::tier::{AppendError, Busy, Dest, DeviceClass, FlashTier, Where};
use crate::flash::{is_flash, FetchState, Fetched, ReadReq};
use crate::index::{Class, Index, Loc};
use crate::item::{self, Header};
use std::sync::Arc;
use std::time::Instant;

/// The flash log's part of a shard (its fields were `Shard`'s).
pub(crate) struct LogPart {
    /// The flash tier; None without flash devices.
    tier: Option<Arc<FlashTier>>,
    /// Flash buffer rollovers reserved for the evacuation in progress.
    reserved: usize,
    /// The first and the latest of the flash tier's refusals of
    /// write-buffer room to this shard's evacuations in the present wait
    /// (None: it gave room at the last asking).
    busy_since: Option<(Instant, Instant)>,
    /// Tombstones this shard asked the crash journal for, by fingerprint:
    /// (horizon, ticket). Kept a while after they are durable so that a
    /// request retried after waiting for one finds it.
    tombs: tombs::Tombs,
    /// The latest ticket in `tombs`: once it is durable, all of them are.
    tombs_last: u64,
    /// Whether reading a new key's same-tag flash records pays: up when a
    /// read showed them to be other keys' (kept), down when it found the key
    /// itself (dropped anyway). See [`LogPart::worth_verifying`].
    verify_credit: Credit,
    /// Whether promoting flash hits pays: up when a promoted item is hit in
    /// RAM, down when it reaches a RAM queue's tail unhit.
    /// Gates [`Promote::Second`](crate::flash::tier::Promote::Second).
    promote_credit: Credit,
    /// Items with a record on both device classes (`copies.rs`).
    copies: Copies,
}

/// Flash entries the log's part dropped from the index (a probe, a
/// recovery dedupe), for the shard's counts (`curr_items`, `flash_items`;
/// `reclaimed` for the expired ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Dropped {
    pub entries: u64,
    pub expired: u64,
}

/// What [`LogPart::probe`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Probed {
    /// A verified record of the key, or reads of its entries pending.
    Found,
    /// None: the stores after the log are probed.
    Absent,
}

/// What [`LogPart::reserve_demotions`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Room {
    /// Room for the demotions (or none needed).
    Reserved,
    /// None, for longer than `TierParams::max_write_wait`: the evacuation
    /// goes on without it and evicts what cannot be written
    /// (`flash_write_waits_expired`).
    WaitExpired,
}

impl LogPart {
    /// The log's part of a shard, remembering at most `max_copies` copies
    /// ([`super::copies::max_copies`]).
    pub(crate) fn new(tier: Option<Arc<FlashTier>>, max_copies: usize) -> LogPart {
        LogPart {
            tier,
            reserved: 0,
            busy_since: None,
            tombs: tombs::Tombs::default(),
            tombs_last: 0,
            verify_credit: Credit::default(),
            promote_credit: Credit::default(),
            copies: Copies::new(max_copies),
        }
    }

    /// The flash tier, if there is one.
    #[inline]
    pub(crate) fn tier(&self) -> Option<&Arc<FlashTier>> {
        self.tier.as_ref()
    }

    /// Flash entries with the key's tag (the key itself is on flash).
    pub(crate) fn candidates(&self, index: &Index, hash: u64) -> Vec<Loc> {
        let mut v = Vec::new();
        if self.tier.is_some() {
            index.find(hash, |loc| {
                if is_flash(loc) {
                    v.push(loc);
                }
                false
            });
        }
        v
    }

    /// Drops a flash entry from the index (its segment holds one item
    /// less); true if it was there, for the caller's counts.
    pub(crate) fn drop_entry(&self, index: &mut Index, hash: u64, loc: Loc) -> bool {
        let dropped = index.remove(hash, loc);
        if dropped {
            self.release(loc);
        }
        dropped
    }

    /// Reads `key`'s flash records into `fetched` as needed: records still
    /// in write buffers are copied at once, others get a read pushed to
    /// `reads`. Entries whose records are gone, corrupt (a tombstone: they
    /// may read fine after a restart), expired or older than another of the
    /// key's are dropped, counted in `dropped`.
    pub(crate) fn probe(
        &mut self,
        ram: &mut Entries<'_>,
        key: &[u8],
        hash: u64,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
        dropped: &mut Dropped,
    ) -> Probed {
        let Some(flash) = self.tier.clone() else {
            return Probed::Absent;
        };
        let now = ram.now;
        let mut drop = |log: &Self, index: &mut Index, loc| {
            if log.drop_entry(index, hash, loc) {
                dropped.entries += 1;
            }
        };
        let mut need = false;
        let mut best: Option<(Loc, u64)> = None;
        for loc in self.candidates(ram.index, hash) {
            if fetched.state(loc).is_none() {
                // An item with a copy on both classes is read from the one
                // the scheduler's load_admit picks (the copy is on the
                // capacity class after a promotion, on the fast one when
                // it was made where it paid).
                let copy = self.copy_of(ram.index, hash, loc);
                flash.note_lookup(copy.is_some() || flash.class_at(loc) == Some(DeviceClass::Fast));
                let from_copy = copy.is_some_and(|c| {
                    let copy_fast = flash.class_at(c.copy) == Some(DeviceClass::Fast);
                    !fetched.copy_failed(loc)
                        && flash.route_to_fast() == copy_fast
                        && flash.fetch_copy(loc, c.primary_seq, c.copy, c.copy_seq, fetched, reads)
                });
                if !from_copy && !flash.fetch(loc, fetched, reads) {
                    drop(self, ram.index, loc);
                    continue;
                }
            }
            match fetched.state(loc) {
                Some(FetchState::Pending) => need = true,
                Some(FetchState::Bad) => {
                    // The record may read fine after a restart: no longer
                    // tracked, it needs a tombstone.
                    self.tombstone(Class::of(hash, ram.index.precision()));
                    drop(self, ram.index, loc)
                }
                Some(FetchState::Item(item)) => {
                    if !still_valid(&flash, loc, fetched) {
                        continue;
                    }
                    if item::key_of(item) != key {
                        flash
                            .stats
                            .tag_misses
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    if Header::read(item).expired(now) {
                        drop(self, ram.index, loc);
                        dropped.expired += 1;
                        continue;
                    }
                    // At most one entry per key is the rule (recovery
                    // dedupes); should two match, the newest record wins
                    // and the older entry goes (a record of the key older
                    // than one that is indexed is covered by whatever covers
                    // the newer one: its tombstone horizon or the floor).
                    let seq = fetched.item_seq(loc).map_or(0, |(_, s)| s);
                    match best {
                        Some((_, best_seq)) if best_seq >= seq => drop(self, ram.index, loc),
                        Some((old, _)) => {
                            drop(self, ram.index, old);
                            best = Some((loc, seq));
                        }
                        None => best = Some((loc, seq)),
                    }
                }
                Some(FetchState::Block(_)) | None => {}
            }
        }
        match best.is_some() || need {
            true => Probed::Found,
            false => Probed::Absent,
        }
    }

    /// A flash entry left the index: its segment holds one item less.
    #[inline]
    pub(crate) fn release(&self, loc: Loc) {
        if let Some(f) = &self.tier {
            f.release(loc);
        }
    }

    /// Whether changes ask the crash journal for tombstones.
    pub(crate) fn journals(&self) -> bool {
        self.tier.as_ref().is_some_and(|f| f.params().crash_journal)
    }

    /// Asks the journal for a tombstone over every record appended so far
    /// of every key of an index class; returns its ticket (0 without a
    /// crash journal).
    pub(crate) fn tombstone(&mut self, class: Class) -> u64 {
        let Some(f) = self.tier.as_ref().filter(|f| f.params().crash_journal) else {
            return 0;
        };
        let j = f.journal();
        let h = f.max_seq();
        let fp = crate::flash::journal::class_fingerprint(class);
        let t = j.add_fingerprint(fp, h);
        self.tombs.insert(fp, h, t, |x| j.is_durable(x));
        self.tombs_last = t;
        t
    }

    /// The log's part of the crash gate for a change of a key of `class`
    /// whose flash candidates are `on_flash` and whose RAM item, if any,
    /// carries the flash copy bit (`ram_copy`: its record may still be on
    /// flash): asks for the tombstone the change needs; true once it is
    /// durable. When it asks (a crash journal, and something of the key
    /// on flash or a tombstone pending), the caller clears the RAM item's
    /// copy bit: the tombstone covers its record.
    pub(crate) fn gate(&mut self, class: Class, on_flash: &[Loc], ram_copy: bool) -> bool {
        let Some(f) = self.tier.as_ref().filter(|f| f.params().crash_journal) else {
            return true;
        };
        let j = f.journal();
        let mut need = on_flash
            .iter()
            .filter_map(|&loc| f.tombstone_horizon(loc))
            .max();
        if ram_copy {
            need = Some(f.max_seq());
        }
        // The common case: nothing of the key on flash, no tombstone pending.
        if need.is_none() && j.is_durable(self.tombs_last) {
            return true;
        }
        let j = j.clone();
        let fp = crate::flash::journal::class_fingerprint(class);
        if let Some(m) = need {
            if self.tombs.get(fp).is_none_or(|(h, _)| h < m) {
                self.tombstone(class);
            }
        }
        self.tombs.get(fp).is_none_or(|(_, t)| j.is_durable(t))
    }

    /// Forgets tombstones that were durable at the previous sweep, a
    /// bounded number ([`tombs::Tombs::prune`]; each new tombstone also
    /// forgets a couple).
    pub(crate) fn prune_tombs(&mut self) {
        let Some(f) = &self.tier else {
            return;
        };
        let j = f.journal();
        self.tombs.prune(j.last_ticket(), |t| j.is_durable(t));
    }

    /// The flash item for `key` among records already fetched: the entry
    /// of its newest verified, unexpired record still in its segment.
    pub(crate) fn locate(
        &self,
        index: &Index,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &Fetched,
    ) -> Option<Loc> {
        if fetched.is_empty() {
            return None;
        }
        let flash = self.tier.as_ref()?;
        self.candidates(index, hash)
            .into_iter()
            .filter_map(|loc| {
                let (item, seq) = fetched.item_seq(loc)?;
                (item::key_of(item) == key
                    && !Header::read(item).expired(now)
                    && still_valid(flash, loc, fetched))
                .then_some((seq, loc))
            })
            .max_by_key(|&(seq, _)| seq)
            .map(|(_, loc)| loc)
    }

    /// Whether `hash` has flash entries not fetched yet: a get that missed
    /// in RAM must read them before it can say "not found".
    pub(crate) fn unread(&self, index: &Index, hash: u64, fetched: &Fetched) -> bool {
        self.candidates(index, hash)
            .into_iter()
            .any(|loc| fetched.state(loc).is_none())
    }

    /// The flash entries under `key`'s tag whose fetched records are other
    /// keys' (verified and still current): a store of `key` may keep them
    /// (`Shard::insert_keeping`) instead of dropping every same-tag entry.
    /// Valid until the shard lock is released. Scores the reads for
    /// [`worth_verifying`](Self::worth_verifying).
    pub(crate) fn other_keys(
        &mut self,
        index: &Index,
        key: &[u8],
        hash: u64,
        fetched: &Fetched,
    ) -> Vec<Loc> {
        let Some(flash) = self.tier.clone().filter(|_| !fetched.is_empty()) else {
            return Vec::new();
        };
        let mut keep = Vec::new();
        let mut same = 0;
        for loc in self.candidates(index, hash) {
            let Some(item) = fetched.item(loc) else {
                continue;
            };
            if !still_valid(&flash, loc, fetched) {
                continue;
            }
            if item::key_of(item) == key {
                same += 1;
            } else {
                keep.push(loc);
            }
        }
        let score = 4 * keep.len() as i32 - same;
        self.verify_credit.score(score);
        keep
    }

    /// Whether a store of a key that is not in RAM should first read the
    /// flash records under its tag, to keep those of other keys (a tag
    /// collision) instead of dropping them. Yes while such reads have been
    /// finding other keys' records; when they mostly find the key itself
    /// (overwrites of items on flash, whose old record must go anyway), only
    /// one store in 64 reads, to notice when that changes.
    pub(crate) fn worth_verifying(&mut self, index: &Index, hash: u64) -> bool {
        if self.tier.is_none() || index.find(hash, is_flash).is_none() {
            return false;
        }
        self.verify_credit.allow()
    }

    /// Whether the flash record at `loc` is still in a write buffer and
    /// belongs to another key than `key` (known without a device read; an
    /// item demoted by this very insert's allocation is such a record).
    pub(crate) fn resident_other_key(&self, loc: Loc, key: &[u8]) -> bool {
        let Some(flash) = &self.tier else {
            return false;
        };
        match flash.locate(loc) {
            Where::Resident(item, _) => item::key_of(&item) != key,
            _ => false,
        }
    }

    /// The first hit in RAM of an item promoted from flash: the promotion paid.
    pub(crate) fn promotion_paid(&mut self) {
        self.promote_credit.score(4);
    }

    /// A promoted item (still carrying its flash copy) that reached a RAM
    /// queue's tail: one left unhit since it came back (or since its last
    /// reinsertion) was a wasted promotion.
    pub(crate) fn score_promotion(&mut self, h: &Header) {
        if h.bits & item::FREQ_MASK == 0 {
            self.promote_credit.score(-1);
        }
    }

    /// The capacity copy of the item whose index entry is `loc`
    /// ([`Copies::copy_of`]).
    pub(crate) fn copy_of(&self, index: &Index, hash: u64, loc: Loc) -> Option<CopyOf> {
        let f = self.tier.as_ref()?;
        self.copies.copy_of(f, index, hash, loc)
    }

    /// Forgets copies whose records moved or went ([`Copies::prune`]).
    pub(crate) fn prune_copies(&mut self, index: &Index, pool: &crate::pool::SegmentPool) {
        if let Some(f) = &self.tier {
            self.copies.prune(f, index, pool);
        }
    }

    /// A flash hit that stays on flash (not promoted to RAM): a fast hit
    /// while copies pay goes to the capacity class too (if it was hit
    /// before: the hit bit is set after, [`Copies::copy_to_capacity`]); a
    /// capacity hit may go to the fast class ([`Copies::promote_to_fast`]).
    pub(crate) fn hit_stays(&mut self, mut ram: Entries<'_>, hit: Hit<'_>) {
        if let Some(f) = &self.tier {
            self.copies.copy_to_capacity(f, &mut ram, hit);
        }
        ram.index.set_hit(hit.hash, hit.loc);
        if let Some(f) = &self.tier {
            self.copies.promote_to_fast(f, &mut ram, hit);
        }
    }

    /// A fast record being reclaimed falls back to its capacity copy, if
    /// it has one ([`Copies::fall_back_to_copy`]).
    pub(crate) fn fall_back_to_copy(
        &mut self,
        index: &mut Index,
        hash: u64,
        loc: Loc,
        hit: bool,
    ) -> bool {
        match &self.tier {
            Some(f) => self.copies.fall_back_to_copy(f, index, hash, loc, hit),
            None => false,
        }
    }

    /// Whether a second flash hit is promoted now (`ext_promote=second`).
    pub(crate) fn promotions_pay(&mut self) -> bool {
        self.promote_credit.allow()
    }

    /// Flash write-buffer room for demoting `live` items in `bytes` bytes
    /// of a RAM segment (worst case: every record pads out a block), held
    /// until [`unreserve`](Self::unreserve). `Err(Busy)` when the flash
    /// tier has none now.
    pub(crate) fn reserve_demotions(&mut self, live: usize, bytes: usize) -> Result<Room, Busy> {
        let Some(f) = &self.tier else {
            return Ok(Room::Reserved);
        };
        if live == 0 || f.degraded() {
            return Ok(Room::Reserved);
        }
        let block = crate::device::aligned::BLOCK;
        let worst = 2 * (bytes + live * crate::flash::format::RECORD_PREFIX) + 2 * block;
        match f.reserve(worst.min(f.segment_size() - block)) {
            Ok(n) => {
                self.reserved = n;
                self.busy_since = None;
                Ok(Room::Reserved)
            }
            Err(_) => {
                let bound = f.params().max_write_wait;
                let now = Instant::now();
                // One wait: refusals no further apart than the bound (the
                // shard's sets retry every millisecond). A refusal after a
                // quiet spell starts a new one, rather than finding an old
                // first refusal and evicting at once.
                let since = match self.busy_since {
                    Some((first, last)) if now - last < bound => first,
                    _ => now,
                };
                self.busy_since = Some((since, now));
                if bound.is_zero() || now - since < bound {
                    return Err(Busy);
                }
                // The device is behind by every write buffer for longer
                // than a set should wait: go on without room, and evict
                // what cannot be written (as memcached's extstore does at
                // once), until the tier has room again.
                Ok(Room::WaitExpired)
            }
        }
    }

    /// Gives back the room [`reserve_demotions`](Self::reserve_demotions)
    /// reserved.
    pub(crate) fn unreserve(&mut self) {
        if let Some(f) = &self.tier {
            f.unreserve(std::mem::take(&mut self.reserved));
        }
    }

    /// Appends an item leaving RAM (its bytes as stored) with the room
    /// reserved; the new record's entry, or why not.
    pub(crate) fn append_demoted(&mut self, bytes: &[u8], now: u32) -> Result<Loc, AppendError> {
        let f = self.tier.as_ref().ok_or(AppendError::Refused)?;
        f.append(bytes, true, now, &mut self.reserved, Dest::New)
    }
}

/// Whether a fetched record still belongs to the segment its entry
/// points into (the slot was not reclaimed and reused meanwhile).
pub(crate) fn still_valid(flash: &FlashTier, loc: Loc, fetched: &Fetched) -> bool {
    fetched
        .item_seq(loc)
        .is_some_and(|(_, seq)| flash.seq_of(loc) == Some(seq))
}
