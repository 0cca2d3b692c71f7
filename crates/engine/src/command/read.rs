//! The read path, once for every front end: a get (RAM, then the verified
//! flash records the caller fetched), the probe that says which records to
//! fetch, and the blocking loop of both for callers that may wait on the
//! device (the simulator, the engine's tests). The server runs the same
//! steps with its asynchronous reader: [`Engine::get_with`] answers or asks
//! for reads ([`Wait::Reads`]); [`Engine::probe`] lists them.

use super::{Found, ItemView, Wait};
use crate::flash::{Fetched, ReadReq};
use crate::shard::Shard;
use crate::store::{Located, CHAIN};
use crate::Engine;

/// Rounds of reads a blocking get does before it calls the key a miss (a
/// record can move between a probe and its read; it settles in one or two).
const READ_ROUNDS: usize = 8;

impl Engine {
    /// `get` of one key: `f` with where the item was found and the item,
    /// the hit recorded (frequency, access time, a flash hit's promotion).
    /// A key in neither RAM nor `fetched` whose flash records were not all
    /// read is [`Wait::Reads`] while `may_read` (probe and read them, then
    /// ask again), else a miss.
    pub fn get_with<R>(
        &self,
        key: &[u8],
        now: u32,
        fetched: &Fetched,
        may_read: bool,
        f: impl FnOnce(Found, ItemView<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        self.lookup(key, now, fetched, may_read, true, f)
    }

    /// [`get_with`](Self::get_with); `update` false is a peek (nothing
    /// about the item changes).
    fn lookup<R>(
        &self,
        key: &[u8],
        now: u32,
        fetched: &Fetched,
        may_read: bool,
        update: bool,
        f: impl FnOnce(Found, ItemView<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        let (hash, mut s) = self.lock_key(key, now);
        Self::lookup_in(&mut s, hash, key, now, fetched, may_read, update, f)
    }

    /// [`lookup`](Self::lookup) in the key's shard, held by the caller.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn lookup_in<R>(
        s: &mut Shard,
        hash: u64,
        key: &[u8],
        now: u32,
        fetched: &Fetched,
        may_read: bool,
        update: bool,
        f: impl FnOnce(Found, ItemView<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        match s.locate(key, hash, now, fetched, &CHAIN) {
            Located::Ram(mut loc) => {
                if update {
                    loc = s.hit(hash, loc, now);
                }
                Ok(Some(f(
                    Found::Ram,
                    ItemView::new(s.header(loc), s.value(loc)),
                )))
            }
            Located::Log(loc) => {
                let item = fetched.item(loc).expect("looked up");
                if update {
                    s.flash_hit(hash, loc, item);
                }
                Ok(Some(f(Found::Flash, ItemView::of_bytes(item))))
            }
            Located::Small(item) => {
                if update {
                    s.small_hit(hash, &item);
                }
                Ok(Some(f(Found::Flash, ItemView::of_bytes(&item))))
            }
            Located::Need if may_read => Err(Wait::Reads),
            Located::Need | Located::Absent => Ok(None),
        }
    }

    /// The key's flash records that a command on it needs: records still in
    /// write buffers are copied into `fetched` at once, the others get a
    /// read pushed to `reads` (the caller submits them and completes them
    /// into `fetched`). Changes nothing the key's readers see.
    pub fn probe(&self, key: &[u8], now: u32, fetched: &mut Fetched, reads: &mut Vec<ReadReq>) {
        let hash = Engine::hash(key);
        self.lock(hash, now).probe(key, hash, now, fetched, reads);
    }

    /// The item of `key` in RAM, without recording an access (`me`).
    pub fn peek_ram<R>(
        &self,
        key: &[u8],
        now: u32,
        f: impl FnOnce(ItemView<'_>) -> R,
    ) -> Option<R> {
        let (hash, mut s) = self.lock_key(key, now);
        let loc = s.find(key, hash, now)?;
        Some(f(ItemView::new(s.header(loc), s.value(loc))))
    }

    /// Runs a command to its end on the calling thread, for callers that
    /// may block on the device (the simulator, the engine's tests): when it
    /// asks for the key's flash records ([`Wait::Reads`]), they are probed
    /// and read here and it runs again (`cmd` gets the records read so far
    /// and whether it may still ask). [`Wait::Busy`] goes back to the
    /// caller, who chooses how to wait. The server does the same with its
    /// asynchronous reader.
    pub fn run_blocking<R>(
        &self,
        key: &[u8],
        now: u32,
        mut cmd: impl FnMut(&Fetched, bool) -> Result<R, Wait>,
    ) -> Result<R, Wait> {
        let mut fetched = Fetched::default();
        let mut reads = Vec::new();
        for round in 0.. {
            match cmd(&fetched, round < READ_ROUNDS) {
                Err(Wait::Reads) => {
                    self.probe(key, now, &mut fetched, &mut reads);
                    if let Some(flash) = self.flash() {
                        flash.read_blocking(&mut fetched, &mut reads);
                    }
                }
                r => return r,
            }
        }
        unreachable!("the last round may not ask for reads")
    }

    /// A get for callers that may block on the device: [`get_with`](Self::get_with)
    /// through [`run_blocking`](Self::run_blocking). `update`: record the
    /// hit as a server get does; false is a peek.
    pub fn get_blocking<R>(
        &self,
        key: &[u8],
        now: u32,
        update: bool,
        f: impl FnOnce(Found, ItemView<'_>) -> R,
    ) -> Option<R> {
        let mut f = Some(f);
        self.run_blocking(key, now, |fetched, may_read| {
            let run = |found, item: ItemView<'_>| (f.take().expect("once"))(found, item);
            self.lookup(key, now, fetched, may_read, update, run)
        })
        .unwrap_or(None)
    }
}
