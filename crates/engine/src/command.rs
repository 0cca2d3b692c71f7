//! The engine's command API: every protocol command on a key as the engine
//! runs it, each in one shard lock hold with the crash journal's gate, CAS,
//! promotion and every item bit decided inside, returning a typed outcome.
//! A front end (the server, the simulator, the tests) parses, calls these
//! and formats the outcome; it never locks a shard or changes an item.
//!
//! A command that cannot run yet changes nothing and says why ([`Wait`]):
//! the flash tier is behind (run it again when its waker fires), or the
//! key's flash records must be read first ([`Engine::probe`], then run it
//! again with them).
//!
//! - this file: delete, touch, gat, `md`, refused stores, flush_all;
//! - [`read`]: get, probe, the blocking get;
//! - [`prefetch`]: which keys of a request need their flash records read;
//! - [`store`]: the storage modes, incr/decr;
//! - [`meta`]: `mg` and `ma`, whose replies read the item in flag order;
//! - [`view`]: the item as a reply sees it;
//! - [`dump`]: the keys in RAM, walked a segment at a time;
//! - [`held`]: a run of commands on one shard, held between them.

mod dump;
mod held;
mod meta;
mod prefetch;
mod read;
mod store;
mod view;

pub use crate::ops::{Arith, ArithResult, Mode, StoreResult};
pub use crate::wait::Wait;
pub use dump::{DumpCursor, DumpedKey};
pub use held::Held;
pub use meta::{ArithFailed, MetaArith, MetaGet, MetaItem, Token};
pub use prefetch::{asks_for_reads, Prep};
pub use store::Store;
pub use view::ItemView;

use crate::flash::Fetched;
use crate::shard::Shard;
use crate::store::{Located, Lower};
use crate::Engine;

/// Where a get found its item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    Ram,
    Flash,
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
        let (hash, mut s) = self.lock_key(key, now);
        Self::delete_in(&mut s, hash, key, now, fetched, may_read)
    }

    /// [`delete`](Self::delete) in the key's shard, held by the caller.
    pub(super) fn delete_in(
        s: &mut Shard,
        hash: u64,
        key: &[u8],
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<bool, Wait> {
        let ok = s.journal_gate(key, hash).ok_or(Wait::Busy)?;
        // The small store is not asked: the gate dropped its copy, and
        // says whether there was one.
        match s.locate(key, hash, now, fetched, &[Lower::Log]) {
            Located::Ram(loc) => {
                s.unlink(hash, loc, &ok);
                Ok(true)
            }
            Located::Log(loc) => {
                s.unlink_flash(hash, loc, &ok);
                Ok(true)
            }
            _ if ok.small_found => Ok(true),
            Located::Need if may_read => Err(Wait::Reads),
            Located::Need => {
                s.purge_flash(hash, &ok);
                Ok(false)
            }
            Located::Small(_) | Located::Absent => Ok(false),
        }
    }

    /// `touch`: a new exptime for the key's item, copied back to RAM from
    /// its record in `fetched` when it is on flash. True if found. The
    /// commands below that work on the item in RAM take `fetched` and
    /// `may_read` as [`delete`](Self::delete) does: a key whose flash
    /// records were not all read is [`Wait::Reads`] while `may_read`, else
    /// its unread entries are dropped (they are covered by the change's
    /// tombstone) and the key is a miss.
    pub fn touch(
        &self,
        key: &[u8],
        exptime: u32,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<bool, Wait> {
        self.touch_with(key, exptime, now, fetched, may_read, |_| ())
            .map(|found| found.is_some())
    }

    /// `gat`/`gats` for one key: [`touch`](Self::touch), then `f` with the
    /// item's header and value under the same lock (the hit is recorded).
    pub fn touch_with<R>(
        &self,
        key: &[u8],
        exptime: u32,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        let (hash, mut s) = self.lock_key(key, now);
        let found = s.ram_item(key, hash, now, fetched, may_read)?;
        let ok = s.journal_gate(key, hash).ok_or(Wait::Busy)?;
        if found.is_none() {
            s.drop_unreached(key, hash, fetched, &ok);
        }
        let Some(loc) = found else {
            return Ok(None);
        };
        s.set_exptime(loc, exptime, &ok);
        let loc = s.hit(hash, loc, now);
        Ok(Some(f(ItemView::new(s.header(loc), s.value(loc)))))
    }

    /// `md`: deletes the key, or with `invalidate` marks it stale (with the
    /// new exptime given, if any). `compare_cas`: only if the item's CAS is
    /// this one. `fetched`, `may_read`: as for [`touch`](Self::touch).
    pub fn meta_delete(
        &self,
        key: &[u8],
        now: u32,
        compare_cas: Option<u64>,
        invalidate: Option<Option<u32>>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<MetaDeleted, Wait> {
        let (hash, mut s) = self.lock_key(key, now);
        Self::meta_delete_in(
            &mut s,
            hash,
            key,
            now,
            compare_cas,
            invalidate,
            fetched,
            may_read,
        )
    }

    /// [`meta_delete`](Self::meta_delete) in the key's shard, held by the
    /// caller.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn meta_delete_in(
        s: &mut Shard,
        hash: u64,
        key: &[u8],
        now: u32,
        compare_cas: Option<u64>,
        invalidate: Option<Option<u32>>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<MetaDeleted, Wait> {
        let found = s.ram_item(key, hash, now, fetched, may_read)?;
        let ok = s.journal_gate(key, hash).ok_or(Wait::Busy)?;
        let Some(loc) = found else {
            s.drop_unreached(key, hash, fetched, &ok);
            // The gate may have found the key (and dropped its record) in
            // the small-object store when RAM had no room for it.
            return Ok(
                match ok.small_found && compare_cas.is_none() && invalidate.is_none() {
                    true => MetaDeleted::Deleted,
                    false => MetaDeleted::NotFound,
                },
            );
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
        let (hash, mut s) = self.lock_key(key, now);
        let ok = s.journal_gate(key, hash).ok_or(Wait::Busy)?;
        s.remove_key(key, hash, now, &ok);
        s.purge_flash(hash, &ok);
        Ok(())
    }

    /// `flush_all`: with a flash tier, the crash journal first raises its
    /// floor over every segment so far (a crash must not bring flushed
    /// items back); [`Wait::Busy`] until that is durable.
    pub fn flush(&self, delay: i64, now: u32) -> Result<(), Wait> {
        if !self.flush_gate() {
            return Err(Wait::Busy);
        }
        self.flush_all(delay, now);
        if delay <= 0 {
            // Each shard drops its items now: the small-object store's
            // floor is durable before flush_all is answered.
            (0..).map_while(|i| self.lock_nth(i, now)).for_each(drop);
        }
        Ok(())
    }

    /// Asks the crash journal now for the tombstone a coming change of
    /// `key` will need, so that one commit serves many changes (the server
    /// does it for the changes pipelined behind one that waits). Harmless
    /// if the change never comes: a tombstone only drops records.
    /// `replaces`: the change replaces or deletes the key whatever it held
    /// (the small store may drop its copy ahead); `overwrite`: it is a
    /// plain set (the small store asks the journal for a tombstone rather
    /// than an invalidation job).
    pub fn prepare_change(&self, key: &[u8], now: u32, replaces: bool, overwrite: bool) {
        let (hash, mut s) = self.lock_key(key, now);
        let _ = s.journal_gate_ahead(key, hash);
        if replaces {
            s.small_prepare(key, overwrite);
        }
    }
}
