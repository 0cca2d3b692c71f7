//! Storage commands and incr/decr as commands: one lock hold each, the
//! crash journal's gate and every item bit decided inside (see
//! [`ops`](crate::ops) for memcached's semantics of each mode).

use super::Wait;
use crate::flash::Fetched;
use crate::ops::{self, Arith, ArithResult, Mode, StoreArgs, StoreResult};
use crate::shard::Shard;
use crate::Engine;

/// A storage command: set, add, replace, append, prepend, cas, and meta
/// set's variants. `exptime` is absolute (see [`crate::clock`]).
#[derive(Debug, Clone, Copy)]
pub struct Store<'a> {
    pub mode: Mode,
    pub key: &'a [u8],
    pub flags: u32,
    pub exptime: u32,
    pub data: &'a [u8],
    /// The CAS to compare (cas, meta C); 0 = none.
    pub compare_cas: u64,
    /// Meta `I` with a CAS: a lower CAS may still store, marked stale.
    pub set_stale: bool,
    /// The key was given in base64 (meta `b`).
    pub binary_key: bool,
}

impl<'a> Store<'a> {
    /// As the store layer takes it.
    pub(super) fn args(&self) -> StoreArgs<'a> {
        StoreArgs {
            mode: self.mode,
            key: self.key,
            hash: Engine::hash(self.key),
            flags: self.flags,
            exptime: self.exptime,
            data: self.data,
            compare_cas: self.compare_cas,
            new_cas: 0,
            set_stale: self.set_stale,
            binary_key: self.binary_key,
        }
    }

    /// A plain set replaces the key's item whatever it was: it need not
    /// promote it from flash, only keep other keys' records under its tag.
    pub fn is_plain_set(&self) -> bool {
        self.mode == Mode::Set && self.compare_cas == 0 && !self.set_stale
    }
}

impl Engine {
    /// Runs a storage command. `fetched`: the flash records under the key's
    /// tag, when the caller read them (those of other keys are kept). A
    /// plain set with none read, whose tag has entries on flash while
    /// reading them has been paying, is [`Wait::Reads`] while `may_read`
    /// (read them with [`probe`](Self::probe), then run it again);
    /// otherwise it stores at once. [`Wait::Busy`]: nothing changed.
    pub fn store(
        &self,
        st: &Store<'_>,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait> {
        let r = self.store_once(st, now, fetched, may_read);
        let size = crate::item::stored_size(st.key.len(), st.data.len());
        if matches!(r, Ok(StoreResult::NoMemory)) && size > self.shared.pool.seg_size() {
            // A jumbo item needs more memory than its shard had to give:
            // the other shards give back their oldest segments, then once
            // more (an append's item is larger than its data: not retried).
            if self.free_ram_for(size, now) {
                return self.store_once(st, now, fetched, may_read);
            }
        }
        r
    }

    /// Has the shards give back their oldest segments, one each per round,
    /// until the pool has room for a jumbo buffer of `len` bytes or they
    /// have nothing more to give. True if the room is there.
    pub(crate) fn free_ram_for(&self, len: usize, now: u32) -> bool {
        let pool = &self.shared.pool;
        loop {
            let mut gave = false;
            for i in 0.. {
                if pool.has_room_for(len) {
                    return true;
                }
                let Some(mut s) = self.lock_nth(i, now) else {
                    break;
                };
                gave |= s.give_back_segment(1).unwrap_or(false);
            }
            if !gave {
                return pool.has_room_for(len);
            }
        }
    }

    fn store_once(
        &self,
        st: &Store<'_>,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait> {
        let a = st.args();
        let mut s = self.lock(a.hash, now);
        Self::store_in(&mut s, &a, st, now, fetched, may_read)
    }

    /// A storage command's work in the key's shard, held by the caller.
    pub(super) fn store_in(
        s: &mut Shard,
        a: &StoreArgs<'_>,
        st: &Store<'_>,
        now: u32,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait> {
        if st.is_plain_set() {
            if may_read && fetched.is_empty() && s.worth_verifying(a.hash) {
                return Err(Wait::Reads);
            }
        } else {
            // The modes that look at the old item see it in RAM.
            s.settle_for_change(a.key, a.hash, now, fetched, may_read)?;
        }
        // A key the small store's filter says it may hold (a false
        // positive, for a new key) has its blocks read first, like a get's,
        // rather than wait for an invalidation job (issue 32). The last
        // round, which may not ask for reads, still clears the key with the
        // blocks the rounds before it read.
        if s.small_check_needs_reads(a.key, fetched) && may_read {
            return Err(Wait::Reads);
        }
        let keep = s.other_keys_on_flash(a.key, a.hash, fetched);
        match ops::store_keeping(s, a, now, &keep) {
            StoreResult::Busy => Err(Wait::Busy),
            r => Ok(r),
        }
    }

    /// memcached's `incr`/`decr` or Redis's INCRBY ([`Arith`]), in one
    /// lock hold, the digits overwritten in place when they fit. `fetched`,
    /// `may_read`: as for [`touch`](Self::touch).
    pub fn arith(
        &self,
        key: &[u8],
        now: u32,
        op: Arith,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<ArithResult, Wait> {
        let (hash, mut s) = self.lock_key(key, now);
        let found = s.settle_for_change(key, hash, now, fetched, may_read)?;
        match ops::arith(&mut s, key, hash, found, op, 0, now) {
            ArithResult::Busy => Err(Wait::Busy),
            r => Ok(r),
        }
    }
}
