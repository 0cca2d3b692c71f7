//! Commands: the protocol's changes to one key as the engine runs them, each
//! in one shard lock hold with the crash journal's gate inside, returning a
//! typed outcome. A front end formats the outcome; it never takes the gate
//! or changes an item itself. (Storage commands and incr/decr are in
//! [`ops`](crate::ops); they take the gate inside too.)
//!
//! A command that cannot run yet changes nothing and says why ([`Wait`]):
//! the journal must first make a tombstone durable (run it again when the
//! flash tier's waker fires), or the key's flash records must be read
//! (again) first.

use crate::flash::Fetched;
use crate::item::{Header, HEADER};
use crate::shard::{Allowed, Probe, Shard};
use crate::Engine;
use parking_lot::MutexGuard;

/// Rounds of reads a blocking get does before it calls the key a miss (a
/// record can move between a probe and its read; it settles in one or two).
const READ_ROUNDS: usize = 8;

/// Where a get found its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Ram,
    Flash,
}

/// Why a command changed nothing and must run again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// A tombstone for the key's flash records is not durable yet.
    Journal,
    /// The key has flash entries whose records were not read: read them
    /// (the key moved to flash since), then run the command again.
    Reads,
}

/// What `md` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaDeleted {
    Deleted,
    /// `md ... I`: marked stale with a new CAS (and exptime, if given).
    Invalidated,
    NotFound,
    /// The CAS given did not match.
    Exists,
}

impl Engine {
    /// `delete`: removes the key from RAM, or its verified flash record
    /// among `fetched`. True if it was there. When the key may be on flash
    /// under entries not read yet: [`Wait::Reads`] while `may_read`, else
    /// every entry under its tag is dropped (each is covered by the
    /// tombstone just made durable; one may be the key) and the answer is
    /// false.
    pub fn delete(
        &self,
        key: &[u8],
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<bool, Wait> {
        let hash = Engine::hash(key);
        let mut s = self.lock(hash, now);
        let ok = s.journal_gate(key, hash).ok_or(Wait::Journal)?;
        if s.remove_key(key, hash, now, &ok) {
            return Ok(true);
        }
        if let Some(loc) = s.flash_lookup(key, hash, now, fetched) {
            s.unlink_flash(hash, loc, &ok);
            return Ok(true);
        }
        if s.needs_fetch(hash, fetched) {
            if may_read {
                return Err(Wait::Reads);
            }
            s.purge_flash(hash, &ok);
        }
        Ok(false)
    }

    /// `touch`: a new exptime for the key's item (in RAM: a request that
    /// changes an item has it promoted from flash first). True if found.
    pub fn touch(&self, key: &[u8], exptime: u32, now: u32) -> Result<bool, Wait> {
        self.touch_with(key, exptime, now, |_, _| ())
            .map(|found| found.is_some())
    }

    /// `gat`/`gats` for one key: [`touch`](Self::touch), then `f` with the
    /// item's header and value under the same lock (the hit is recorded).
    pub fn touch_with<R>(
        &self,
        key: &[u8],
        exptime: u32,
        now: u32,
        f: impl FnOnce(&Header, &[u8]) -> R,
    ) -> Result<Option<R>, Wait> {
        let hash = Engine::hash(key);
        let mut s = self.lock(hash, now);
        let ok = s.journal_gate(key, hash).ok_or(Wait::Journal)?;
        let Some(loc) = crate::ops::touch(&mut s, key, hash, exptime, now, &ok) else {
            return Ok(None);
        };
        let loc = s.hit(hash, loc, now);
        Ok(Some(f(&s.header(loc), s.value(loc))))
    }

    /// `md`: deletes the key, or with `invalidate` marks it stale (with the
    /// new exptime given, if any). `compare_cas`: only if the item's CAS is
    /// this one.
    pub fn meta_delete(
        &self,
        key: &[u8],
        now: u32,
        compare_cas: Option<u64>,
        invalidate: Option<Option<u32>>,
    ) -> Result<MetaDeleted, Wait> {
        let hash = Engine::hash(key);
        let mut s = self.lock(hash, now);
        let ok = s.journal_gate(key, hash).ok_or(Wait::Journal)?;
        let Some(loc) = s.find(key, hash, now) else {
            return Ok(MetaDeleted::NotFound);
        };
        if compare_cas.is_some_and(|c| c != s.header(loc).cas) {
            return Ok(MetaDeleted::Exists);
        }
        Ok(match invalidate {
            Some(exptime) => {
                s.invalidate(loc, exptime, &ok);
                MetaDeleted::Invalidated
            }
            None => {
                s.unlink(hash, loc, &ok);
                MetaDeleted::Deleted
            }
        })
    }

    /// A store refused as too large: memcached removes the key's old item
    /// (so a reader does not get the value the client meant to replace).
    pub fn remove_refused(&self, key: &[u8], now: u32) -> Result<(), Wait> {
        let hash = Engine::hash(key);
        let mut s = self.lock(hash, now);
        let ok = s.journal_gate(key, hash).ok_or(Wait::Journal)?;
        s.remove_key(key, hash, now, &ok);
        s.purge_flash(hash, &ok);
        Ok(())
    }

    /// A get for callers that may block on the device (the simulator, the
    /// engine's tests): probes the key, reads its flash records on this
    /// thread, and calls `f` with where it was found and the item's header
    /// and value. `update`: record the hit (frequency, access time, and a
    /// flash hit's promotion) as a server get does; false is a peek. The
    /// server does the same steps with its asynchronous reader.
    pub fn get_blocking<R>(
        &self,
        key: &[u8],
        now: u32,
        update: bool,
        f: impl FnOnce(Found, &Header, &[u8]) -> R,
    ) -> Option<R> {
        let hash = Engine::hash(key);
        let mut fetched = Fetched::default();
        let mut reads = Vec::new();
        for _ in 0..READ_ROUNDS {
            let mut s = self.lock(hash, now);
            match s.probe(key, hash, now, &mut fetched, &mut reads) {
                Probe::Ram => {
                    let mut loc = s.find(key, hash, now)?;
                    if update {
                        loc = s.hit(hash, loc, now);
                    }
                    return Some(f(Found::Ram, &s.header(loc), s.value(loc)));
                }
                Probe::Flash(loc) => {
                    let item = fetched.item(loc)?;
                    if update {
                        s.flash_hit(hash, loc, item);
                    }
                    let h = Header::read(item);
                    let at = HEADER + h.klen as usize;
                    return Some(f(Found::Flash, &h, &item[at..at + h.vlen as usize]));
                }
                Probe::Absent => return None,
                Probe::Need => {}
            }
            drop(s);
            self.flash()?.read_blocking(&mut fetched, &mut reads);
        }
        None
    }

    /// For a change the engine has no command for yet (`mg` with `T`): the
    /// key's shard, locked, with the permission to change the key, once the
    /// crash journal allows it.
    pub fn lock_to_change(
        &self,
        key: &[u8],
        now: u32,
    ) -> Result<(MutexGuard<'_, Shard>, Allowed), Wait> {
        let hash = Engine::hash(key);
        let mut s = self.lock(hash, now);
        let ok = s.journal_gate(key, hash).ok_or(Wait::Journal)?;
        Ok((s, ok))
    }
}
