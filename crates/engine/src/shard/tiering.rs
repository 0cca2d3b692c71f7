//! The RAM side of the chain below it (`stores/`): demotion of items
//! leaving RAM (routed by size, `store::route`), probes and lookups of
//! their records, promotion back to RAM, and the records a flash reclaim
//! hands back.

use super::*;
use crate::store::{after, route, Leaving};
use crate::stores::copies::Hit;
use crate::stores::log::{Dropped, Reclaimed};
use crate::stores::Entries;
use crate::wait::Wait;

/// The chain's side of a shard.
impl Shard {
    /// Moves an item leaving RAM to the store below that [`route`] names
    /// (the log when the small store will not take it now); false when it
    /// is not admitted.
    pub(super) fn demote(&mut self, hash: u64, loc: Loc, h: &Header) -> bool {
        let leaving = Leaving {
            size: h.size(),
            key_value: h.klen as usize + h.vlen as usize,
            from_log: h.bits & item::FLASH_COPY != 0,
        };
        let small_max = self.below.small.as_ref().map(|p| p.max);
        match route(leaving, self.shared.pool.seg_size(), small_max) {
            None => {
                // A jumbo item stays in RAM.
                self.stats.not_demoted += 1;
                false
            }
            Some(Lower::Small) => match self.demote_small(hash, loc, h) {
                Some(admitted) => admitted,
                None => self.demote_to_log(hash, loc, h),
            },
            Some(Lower::Log) => self.demote_to_log(hash, loc, h),
        }
    }

    /// [`demote`](Self::demote) to the flash log, with the room the
    /// evacuation reserved.
    fn demote_to_log(&mut self, hash: u64, loc: Loc, h: &Header) -> bool {
        let Some(f) = self.below.log.tier() else {
            return false;
        };
        if h.expired(self.clock_now) || !f.admits_size(h.vlen as usize) {
            self.stats.not_demoted += 1;
            return false;
        }
        let size = h.size();
        let o = loc.off as usize;
        let bytes = &self.segs[loc.seg as usize]
            .as_ref()
            .expect("live segment")
            .data[o..o + size];
        match self.below.log.append_demoted(bytes, self.clock_now) {
            Ok(new) => {
                self.index.relocate(hash, loc, new);
                self.stats.demoted += 1;
                self.stats.flash_items += 1;
                self.stats.bytes -= size as u64;
                true
            }
            Err(AppendError::Refused | AppendError::Busy) => {
                self.stats.not_demoted += 1;
                false
            }
        }
    }

    /// Reads `key`'s records below RAM into `fetched` as needed
    /// ([`Chain::probe`]): records still in write buffers are copied at
    /// once, others get a read pushed to `reads`. Stale and corrupt entries
    /// are dropped on the way. The command that runs afterwards finds the
    /// key in RAM or among the records ([`locate`](Self::locate)). Nothing
    /// is probed for a key in RAM.
    pub fn probe(
        &mut self,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) {
        if self.find(key, hash, now).is_some() {
            return;
        }
        let ram = Entries {
            index: &mut self.index,
            pool: &self.shared.pool,
            now,
        };
        let dropped = self.below.probe(ram, key, hash, fetched, reads);
        self.count_dropped(dropped);
    }

    /// Counts flash entries the chain dropped.
    fn count_dropped(&mut self, d: Dropped) {
        self.stats.curr_items -= d.entries;
        self.stats.flash_items -= d.entries;
        self.stats.reclaimed += d.expired;
    }

    /// The key's item in RAM, for a command that works on it there (every
    /// change but a plain set, and `mg`): found in RAM, or copied back now,
    /// in the command's own lock hold, from its verified record in
    /// `fetched` (the log tier's or the small store's). Promoting in the
    /// same hold matters: an item promoted earlier, while the request's
    /// reads were probed, can be pushed back to flash by other connections
    /// before the command runs, and a command that then saw no item (an
    /// `md` answering `NF`) left the value to be served afterwards.
    ///
    /// [`Wait::Reads`] while `may_read` when the key has records not read
    /// yet; [`Wait::Busy`] when RAM for the copy waits for the writer. None
    /// otherwise: the key is not cached, or its records could not be
    /// reached ([`drop_unreached`](Self::drop_unreached) drops them once
    /// the command holds the journal's gate).
    pub(crate) fn ram_item(
        &mut self,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<Option<Loc>, Wait> {
        let mut found = self.locate(key, hash, now, fetched, &CHAIN);
        if let Located::Log(on_flash) = found {
            let item = fetched.item(on_flash).expect("looked up");
            match self.promote(hash, on_flash, item) {
                Ok(loc) => return Ok(Some(loc)),
                Err(InsertError::Busy) => return Err(Wait::Busy),
                // No room: it stays on flash, unreached; the stores after
                // the log are asked.
                Err(_) => {
                    found =
                        (self.below).locate(after(Lower::Log), &self.index, key, hash, now, fetched)
                }
            }
        }
        match found {
            Located::Ram(loc) => Ok(Some(loc)),
            Located::Small(item) => match self.copy_in(hash, &item) {
                Ok(loc) => Ok(Some(loc)),
                Err(InsertError::Busy) => Err(Wait::Busy),
                // The gate drops the store's copy; unread log entries are
                // read first.
                Err(_) if may_read && self.needs_fetch(hash, fetched) => Err(Wait::Reads),
                Err(_) => Ok(None),
            },
            Located::Need if may_read => Err(Wait::Reads),
            Located::Log(_) | Located::Need | Located::Absent => Ok(None),
        }
    }

    /// After [`ram_item`](Self::ram_item) found no item for a change: drops
    /// the key's flash entries it could not reach (not read, or no room to
    /// copy), so that the key is a miss for every later command, not only
    /// for this one. Entries whose records were read and are other keys'
    /// stay. `ok`: the change passed the journal gate, whose tombstone
    /// covers them.
    pub(crate) fn drop_unreached(
        &mut self,
        key: &[u8],
        hash: u64,
        fetched: &Fetched,
        ok: &Allowed,
    ) {
        debug_assert_eq!(ok.hash, hash, "allowed for another key");
        for loc in self.flash_candidates(hash) {
            if fetched
                .item(loc)
                .is_none_or(|item| item::key_of(item) == key)
            {
                self.drop_flash_entry(hash, loc);
            }
        }
    }

    /// [`ram_item`](Self::ram_item) for a change that finds the item itself
    /// afterwards: when there is none, the records it could not reach are
    /// dropped under the journal's gate (a `replace` or `incr` that finds
    /// no item must not leave a value behind it).
    pub(crate) fn settle_for_change(
        &mut self,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<Option<Loc>, Wait> {
        let found = self.ram_item(key, hash, now, fetched, may_read)?;
        if found.is_none() {
            let ok = self.journal_gate(key, hash).ok_or(Wait::Busy)?;
            self.drop_unreached(key, hash, fetched, &ok);
        }
        Ok(found)
    }

    /// The flash entries under `key`'s tag whose fetched records are other
    /// keys' ([`LogPart::other_keys`]): a store of `key` may keep them
    /// ([`insert_keeping`](Self::insert_keeping)).
    pub fn other_keys_on_flash(&mut self, key: &[u8], hash: u64, fetched: &Fetched) -> Vec<Loc> {
        self.below.log.other_keys(&self.index, key, hash, fetched)
    }

    /// Whether a store of a key not in RAM should first read the flash
    /// records under its tag ([`LogPart::worth_verifying`]).
    pub fn worth_verifying(&mut self, hash: u64) -> bool {
        self.below.log.worth_verifying(&self.index, hash)
    }

    /// Whether `hash` has flash entries not fetched yet.
    pub fn needs_fetch(&self, hash: u64, fetched: &Fetched) -> bool {
        self.below.log.unread(&self.index, hash, fetched)
    }

    /// The flash log's part and what it may see of this shard.
    pub(super) fn log_and_entries(&mut self) -> (&mut LogPart, Entries<'_>) {
        let ram = Entries {
            index: &mut self.index,
            pool: &self.shared.pool,
            now: self.clock_now,
        };
        (&mut self.below.log, ram)
    }

    /// A read served from flash: remember the hit (reclaim reinserts hit
    /// items) and copy the item back to RAM if the promotion policy says so.
    pub fn flash_hit(&mut self, hash: u64, loc: Loc, item_bytes: &[u8]) {
        use crate::flash::tier::Promote;
        self.stats.flash_hits += 1;
        let promote = self.below.log.tier().map(|f| f.params().promote);
        let was_hit = self.index.hit(hash, loc) == Some(true);
        match promote {
            Some(Promote::Always) => {}
            Some(Promote::Second) if was_hit && self.below.log.promotions_pay() => {}
            _ => {
                if was_hit && promote == Some(Promote::Second) {
                    self.stats.promote_declined += 1;
                }
                // Not to RAM: it may be copied to the other class.
                let (log, ram) = self.log_and_entries();
                let hit = Hit {
                    hash,
                    loc,
                    item_bytes,
                };
                log.hit_stays(ram, hit);
                return;
            }
        }
        // Best effort: when RAM is not to be had, the item stays on flash.
        if self.promote(hash, loc, item_bytes).is_err() {
            self.index.set_hit(hash, loc);
        }
    }

    /// Copies a fetched flash item back into RAM (before a request that
    /// changes it, or when the promotion policy says so).
    pub fn promote(&mut self, hash: u64, loc: Loc, item_bytes: &[u8]) -> Result<Loc, InsertError> {
        if !self.index.contains(hash, loc) {
            return Err(InsertError::NoMemory);
        }
        let h = Header::read(item_bytes);
        let size = h.size();
        let q = self.policy.insert_queue(hash);
        let new = self.alloc(q, size)?;
        let o = new.off as usize;
        let len = HEADER + h.klen as usize + h.vlen as usize;
        let seg = self.seg_mut(new.seg);
        seg.data[o..o + len].copy_from_slice(&item_bytes[..len]);
        seg.data[o + item::OFF_BITS] =
            (h.bits & !item::FREQ_MASK) | item::FETCHED | item::FLASH_COPY;
        // Allocation cannot reclaim flash (the flusher needs this shard's
        // lock), but stay safe: without the entry the copy is dead space.
        if !self.index.contains(hash, loc) {
            self.update_bits(new, item::DEAD, 0);
            return Err(InsertError::NoMemory);
        }
        self.seg_mut(new.seg).gain(h.exptime);
        self.index.relocate(hash, loc, new);
        self.below.log.release(loc);
        self.stats.flash_items -= 1;
        self.stats.promoted += 1;
        self.stats.bytes += size as u64;
        Ok(new)
    }

    /// A live record of a flash segment being reclaimed
    /// ([`LogPart::reclaim`]: reinserted when it was hit or moved to the
    /// capacity class, else its entry dropped), counted. False, with
    /// nothing changed: the move found no write buffer free and `may_wait`
    /// asked to be told (the flusher frees one and asks again).
    pub fn reclaim_flash(
        &mut self,
        hash: u64,
        loc: Loc,
        item_bytes: &[u8],
        reinsert: bool,
        may_wait: bool,
    ) -> bool {
        let record = Hit {
            hash,
            loc,
            item_bytes,
        };
        let now = self.clock_now;
        let done = (self.below.log).reclaim(&mut self.index, now, record, (reinsert, may_wait));
        match done {
            Reclaimed::Kept => return true,
            Reclaimed::Moved => {
                self.stats.reinserted += 1;
                return true;
            }
            Reclaimed::Wait => return false,
            Reclaimed::Expired => self.stats.reclaimed += 1,
            Reclaimed::Evicted { unfetched } => {
                self.stats.evictions += 1;
                self.stats.evicted_unfetched += u64::from(unfetched);
            }
        }
        self.stats.curr_items -= 1;
        self.stats.flash_items -= 1;
        true
    }
}
