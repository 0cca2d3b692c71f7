//! A run of commands on one shard with its lock held between them: what a
//! front end's transaction (Redis MULTI/EXEC) needs to be isolated from
//! every other command on the shard's keys, whichever port or thread sends
//! them. The commands are those of the command API (get, store, delete,
//! `md`), with the same outcomes; a key of another shard is refused
//! ([`Held::owns`]): the caller checks first. Hold it briefly: every
//! command on the shard's keys waits meanwhile. The flash records its
//! commands need are best fetched before ([`Engine::probe`]); a record
//! that moved can be probed under the hold ([`Held::probe`]).

use super::{Found, ItemView, MetaDeleted, Store, Wait};
use crate::flash::{Fetched, ReadReq};
use crate::ops::StoreResult;
use crate::shard::hold::ShardGuard;
use crate::Engine;

/// One shard, locked.
pub struct Held<'a> {
    s: ShardGuard<'a>,
    shard: usize,
    now: u32,
}

impl Engine {
    /// The shard a key belongs to (in 0..the shard count).
    pub fn shard_of(&self, key: &[u8]) -> usize {
        self.shard_index(Engine::hash(key))
    }

    /// Locks the shard of `key` until the [`Held`] is dropped.
    pub fn hold(&self, key: &[u8], now: u32) -> Held<'_> {
        let hash = Engine::hash(key);
        Held {
            s: self.lock(hash, now),
            shard: self.shard_index(hash),
            now,
        }
    }
}

impl Held<'_> {
    /// Whether `key` is in the held shard (the others' are refused).
    pub fn owns(&self, engine: &Engine, key: &[u8]) -> bool {
        engine.shard_of(key) == self.shard
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
        if !self.owns(engine, key) {
            return Ok(None);
        }
        let hash = Engine::hash(key);
        Engine::lookup_in(&mut self.s, hash, key, self.now, fetched, may_read, true, f)
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
        if !self.owns(engine, st.key) {
            return Ok(StoreResult::NotStored);
        }
        let a = st.args();
        Engine::store_in(&mut self.s, &a, st, self.now, fetched, may_read)
    }

    /// [`Engine::delete`] in the held shard.
    pub fn delete(
        &mut self,
        engine: &Engine,
        key: &[u8],
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<bool, Wait> {
        if !self.owns(engine, key) {
            return Ok(false);
        }
        let hash = Engine::hash(key);
        Engine::delete_in(&mut self.s, hash, key, self.now, fetched, may_read)
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
        if !self.owns(engine, key) {
            return Ok(MetaDeleted::NotFound);
        }
        let hash = Engine::hash(key);
        let now = self.now;
        Engine::meta_delete_in(
            &mut self.s,
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
        if self.owns(engine, key) {
            let hash = Engine::hash(key);
            self.s.probe(key, hash, self.now, fetched, reads);
        }
    }
}
