//! A run of commands on some shards with their locks held between them:
//! what a front end's transaction (Redis MULTI/EXEC) needs to be isolated
//! from every other command on its keys, whichever port or thread sends
//! them. The shards are those of the keys named when the hold is taken,
//! locked in ascending order (two holds never wait for each other, and
//! nothing else in the engine holds two shard locks at once). The commands
//! are those of the command API (get, store, delete, `md`), with the same
//! outcomes; a key of a shard not held is refused ([`Held::owns`]): the
//! caller names every key first. Hold it briefly: every command on the held
//! shards' keys waits meanwhile. The flash records its commands need are
//! best fetched before ([`Engine::probe`]); a record that moved can be
//! probed under the hold ([`Held::probe`]).

use super::{Arith, ArithResult, Found, ItemView, MetaDeleted, Store, Wait};
use crate::flash::{Fetched, ReadReq};
use crate::ops;
use crate::ops::StoreResult;
use crate::shard::hold::ShardGuard;
use crate::Engine;

/// Shards, locked: (shard number, its guard), in ascending order; the
/// first apart, so that holding one key's shard (a read-modify-write)
/// allocates nothing.
pub struct Held<'a> {
    first: Option<(usize, ShardGuard<'a>)>,
    rest: Vec<(usize, ShardGuard<'a>)>,
    now: u32,
}

impl Engine {
    /// The shard a key belongs to (in 0..the shard count).
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_index(Engine::hash(key))
    }

    /// Locks the shard of `key` until the [`Held`] is dropped.
    pub fn hold(&self, key: &[u8], now: u32) -> Held<'_> {
        let i = self.shard_of(key);
        Held {
            first: self.lock_nth(i, now).map(|g| (i, g)),
            rest: Vec::new(),
            now,
        }
    }

    /// Locks the shards of all `keys`, in ascending order, until the
    /// [`Held`] is dropped.
    pub fn hold_all<'k>(&self, keys: impl IntoIterator<Item = &'k [u8]>, now: u32) -> Held<'_> {
        let mut shards: Vec<usize> = keys.into_iter().map(|k| self.shard_of(k)).collect();
        shards.sort_unstable();
        shards.dedup();
        let mut held = shards
            .into_iter()
            .filter_map(|i| Some((i, self.lock_nth(i, now)?)));
        Held {
            first: held.next(),
            rest: held.collect(),
            now,
        }
    }
}

impl<'a> Held<'a> {
    /// Whether `key` is in a held shard (the others' are refused).
    pub fn owns(&self, engine: &Engine, key: &[u8]) -> bool {
        let s = engine.shard_of(key);
        self.first.iter().chain(&self.rest).any(|(i, _)| *i == s)
    }

    /// The held shard of `key`.
    fn shard(&mut self, engine: &Engine, key: &[u8]) -> Option<&mut ShardGuard<'a>> {
        let s = engine.shard_of(key);
        self.first
            .iter_mut()
            .chain(&mut self.rest)
            .find(|(i, _)| *i == s)
            .map(|(_, g)| g)
    }

    /// Whether [`store`](Self::store) can store an item of this key,
    /// value length and flags in its held shard: it fits
    /// ([`Engine::fits`]) and is not larger than a segment (a jumbo item's
    /// memory comes from every shard, which the hold cannot give). False
    /// for a key of a shard not held.
    pub fn fits(&mut self, engine: &Engine, key: &[u8], vlen: usize, flags: u32) -> bool {
        let size = crate::item::stored_size(key.len(), vlen);
        let seg = engine.shared.pool.seg_size();
        self.shard(engine, key)
            .is_some_and(|s| size <= seg && s.fits(key.len(), vlen, flags))
    }

    /// [`Engine::get_with`] in the held shard; a key of another shard is
    /// a miss.
    pub fn get_with<R>(
        &mut self,
        engine: &Engine,
        key: &[u8],
        fetched: &Fetched,
        may_read: bool,
        f: impl FnOnce(Found, ItemView<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        let now = self.now;
        let Some(s) = self.shard(engine, key) else {
            return Ok(None);
        };
        let hash = Engine::hash(key);
        Engine::lookup_in(s, hash, key, now, fetched, may_read, true, f)
    }

    /// [`Engine::store`] in the held shard (a jumbo item gets no memory
    /// from the other shards); a key of another shard is not stored.
    pub fn store(
        &mut self,
        engine: &Engine,
        st: &Store<'_>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait> {
        let now = self.now;
        let Some(s) = self.shard(engine, st.key) else {
            return Ok(StoreResult::NotStored);
        };
        let a = st.args();
        Engine::store_in(s, &a, st, now, fetched, may_read)
    }

    /// [`Engine::arith`] in the held shard; a key of another shard is not
    /// found.
    pub fn arith(
        &mut self,
        engine: &Engine,
        key: &[u8],
        op: Arith,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<ArithResult, Wait> {
        let now = self.now;
        let Some(s) = self.shard(engine, key) else {
            return Ok(ArithResult::NotFound);
        };
        let hash = Engine::hash(key);
        let found = s.settle_for_change(key, hash, now, fetched, may_read)?;
        match ops::arith(s, key, hash, found, op, 0, now) {
            ArithResult::Busy => Err(Wait::Busy),
            r => Ok(r),
        }
    }

    /// [`Engine::delete`] in the held shard.
    pub fn delete(
        &mut self,
        engine: &Engine,
        key: &[u8],
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<bool, Wait> {
        let now = self.now;
        let Some(s) = self.shard(engine, key) else {
            return Ok(false);
        };
        let hash = Engine::hash(key);
        Engine::delete_in(s, hash, key, now, fetched, may_read)
    }

    /// [`Engine::meta_delete`] in the held shard.
    pub fn meta_delete(
        &mut self,
        engine: &Engine,
        key: &[u8],
        compare_cas: Option<u64>,
        invalidate: Option<Option<u32>>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<MetaDeleted, Wait> {
        let now = self.now;
        let Some(s) = self.shard(engine, key) else {
            return Ok(MetaDeleted::NotFound);
        };
        let hash = Engine::hash(key);
        Engine::meta_delete_in(
            s,
            hash,
            key,
            now,
            compare_cas,
            invalidate,
            fetched,
            may_read,
        )
    }

    /// [`Engine::probe`] in the held shard.
    pub fn probe(
        &mut self,
        engine: &Engine,
        key: &[u8],
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) {
        let now = self.now;
        if let Some(s) = self.shard(engine, key) {
            let hash = Engine::hash(key);
            s.probe(key, hash, now, fetched, reads);
        }
    }
}
