//! The engine as RESP commands see it: whole items (value, type, expiry,
//! CAS) read and written through the engine's command API, and
//! read-modify-write commands (INCR, APPEND, SET ... GET, HSET...) as a
//! compare-and-swap loop, so that no update is lost between two clients
//! (on either port).
//!
//! Flash: a command runs on a worker, which must not wait for the device.
//! Each run of a command has a [`Run`]: the flash records the connection
//! has read for it so far. When an engine call answers that it needs
//! records not read yet ([`Wait::Reads`]) or that the flash tier is behind
//! ([`Wait::Busy`]), and the command has changed nothing yet, the run
//! *stops*: every later call of the command fails at once, the connection
//! drops its reply, reads the records asynchronously (or waits for the
//! flash tier's waker), then runs the command again from the start. Once a
//! command has changed an item it cannot be run again: a later wait (a
//! record that moved between the probe and the run, rare) is waited out
//! on the calling thread, as before the workers served RESP.
//!
//! Types: a Redis string is any item whose memcached flags are not
//! [`HASH_FLAGS`] (memcached-port items are strings); a hash is an item
//! with those flags (see [`super::hash`] for its value's layout).
//!
//! Expiry: the engine keeps absolute unix seconds. A Redis deadline in
//! milliseconds is rounded up to the next second, so an item never expires
//! early and lives at most 999 ms longer than asked.

use std::cell::{Cell, RefCell};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tiercache_engine::command::{Arith, ArithResult, Found, Held, ItemView, MetaDeleted};
use tiercache_engine::command::{Mode, Store, StoreResult, Wait};
use tiercache_engine::flash::{Fetched, ReadReq};
use tiercache_engine::Engine;

/// The memcached flags that mark an item as a Redis hash.
pub const HASH_FLAGS: u32 = 0x7463_6801;

/// How long a command waits for a busy flash tier before it fails.
const BUSY_WAIT: Duration = Duration::from_secs(5);

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The engine's exptime for a deadline in unix ms (None: already past).
pub fn exptime_at(deadline_ms: u64, now_ms: u64) -> Option<u32> {
    if deadline_ms <= now_ms {
        return None;
    }
    Some(deadline_ms.div_ceil(1000).min(u64::from(u32::MAX)) as u32)
}

/// Redis's types, as TYPE names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    String,
    Hash,
}

impl Kind {
    pub fn of_flags(flags: u32) -> Kind {
        match flags {
            HASH_FLAGS => Kind::Hash,
            _ => Kind::String,
        }
    }
    pub fn flags(self) -> u32 {
        match self {
            Kind::Hash => HASH_FLAGS,
            Kind::String => 0,
        }
    }
}

/// An item read whole.
#[derive(Debug, Clone)]
pub struct Item {
    pub value: Vec<u8>,
    pub flags: u32,
    /// Absolute unix seconds; 0: none.
    pub exptime: u32,
    pub cas: u64,
}

impl Item {
    pub fn kind(&self) -> Kind {
        Kind::of_flags(self.flags)
    }
}

/// Why a write failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failed {
    /// Larger than the item size limit (`-I`).
    TooLarge,
    /// In EXEC, after an earlier command of it changed an item: the flash
    /// tier is behind, this command changed nothing.
    Busy,
    /// No memory even after eviction, or the flash tier stayed busy.
    NoMemory,
    /// The run stopped to wait for flash (see the module doc): the reply
    /// is dropped and the command runs again.
    Stopped,
}

impl Failed {
    /// The error reply.
    pub fn text(self) -> &'static str {
        match self {
            Failed::TooLarge => "ERR string exceeds maximum allowed size (item size limit, -I)",
            Failed::NoMemory => "OOM command not allowed when used memory > 'maxmemory'.",
            Failed::Stopped => "ERR stopped (not sent)",
            Failed::Busy => "TRYAGAIN the flash tier is busy; this command changed nothing",
        }
    }
}

/// What a read-modify-write does with the item it read.
pub enum Change {
    Keep,
    Delete,
    Put {
        value: Vec<u8>,
        kind: Kind,
        exptime: u32,
    },
}

/// One run of a command: the flash records read for it, whether an
/// engine call may still ask for more, and whether the run stopped or
/// changed an item (see the module doc).
pub struct Run<'a> {
    pub fetched: &'a Fetched,
    pub may_read: bool,
    /// When the request first ran (its latency includes its waits).
    pub started: tiercache_engine::clock::Instant,
    /// The engine's clock for this run (unix seconds): the worker's, read
    /// once per pass of its event loop, as the memcached port's requests
    /// use it (no clock read per engine call).
    pub now: u32,
    /// The request's keys were probed and their records read (EXEC runs
    /// only then: its shard is held while it runs, no read may wait).
    pub probed: bool,
    stopped: Cell<Option<Wait>>,
    changed: Cell<bool>,
    finished: Cell<Option<tiercache_engine::clock::Instant>>,
}

impl<'a> Run<'a> {
    pub fn new(
        fetched: &'a Fetched,
        may_read: bool,
        started: tiercache_engine::clock::Instant,
        now: u32,
    ) -> Run<'a> {
        Run {
            fetched,
            may_read,
            started,
            now,
            probed: false,
            stopped: Cell::new(None),
            changed: Cell::new(false),
            finished: Cell::new(None),
        }
    }

    /// Why the run stopped, if it did.
    pub fn stopped(&self) -> Option<Wait> {
        self.stopped.get()
    }

    /// Whether the run changed an item (then it is not run again).
    pub fn changed(&self) -> bool {
        self.changed.get()
    }

    /// When the command's latency was taken (its end), if it was.
    pub fn finished(&self) -> Option<tiercache_engine::clock::Instant> {
        self.finished.get()
    }

    /// Records the command's end (see [`finished`](Self::finished)).
    pub fn finish(&self, at: tiercache_engine::clock::Instant) {
        self.finished.set(Some(at));
    }

    /// Stops the run (nothing changed yet): it runs again after `w`.
    pub fn stop(&self, w: Wait) {
        self.stopped.set(Some(w));
    }
}

/// The engine, for one command: its key's shard held by EXEC, or not.
pub struct Db<'a> {
    pub engine: &'a Engine,
    pub run: &'a Run<'a>,
    pub held: Option<&'a dyn HeldShard>,
}

/// The shard EXEC holds, as [`Db`] uses it: a trait object, so that a
/// `Db`'s lifetime need not be the hold's.
pub trait HeldShard {
    fn get(
        &self,
        engine: &Engine,
        key: &[u8],
        fetched: &Fetched,
        may_read: bool,
        f: &mut dyn FnMut(ItemView<'_>),
    ) -> Result<(), Wait>;
    fn store(
        &self,
        engine: &Engine,
        st: &Store<'_>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait>;
    /// `md` with `cas`, else a delete.
    fn delete(
        &self,
        engine: &Engine,
        key: &[u8],
        cas: Option<u64>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<MetaDeleted, Wait>;
    fn arith(
        &self,
        engine: &Engine,
        key: &[u8],
        op: Arith,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<ArithResult, Wait>;
    fn probe(&self, engine: &Engine, key: &[u8], fetched: &mut Fetched, reads: &mut Vec<ReadReq>);
    /// Whether `store` can store this item in the held shard.
    fn fits(&self, engine: &Engine, key: &[u8], vlen: usize, flags: u32) -> bool;
}

impl HeldShard for RefCell<Held<'_>> {
    fn get(
        &self,
        engine: &Engine,
        key: &[u8],
        fetched: &Fetched,
        may_read: bool,
        f: &mut dyn FnMut(ItemView<'_>),
    ) -> Result<(), Wait> {
        self.borrow_mut()
            .get_with(engine, key, fetched, may_read, |_, v| f(v))
            .map(|_| ())
    }
    fn store(
        &self,
        engine: &Engine,
        st: &Store<'_>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait> {
        self.borrow_mut().store(engine, st, fetched, may_read)
    }
    fn delete(
        &self,
        engine: &Engine,
        key: &[u8],
        cas: Option<u64>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<MetaDeleted, Wait> {
        let mut h = self.borrow_mut();
        match cas {
            Some(_) => h.meta_delete(engine, key, cas, None, fetched, may_read),
            None => h.delete(engine, key, fetched, may_read).map(|d| match d {
                true => MetaDeleted::Deleted,
                false => MetaDeleted::NotFound,
            }),
        }
    }
    fn arith(
        &self,
        engine: &Engine,
        key: &[u8],
        op: Arith,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<ArithResult, Wait> {
        self.borrow_mut().arith(engine, key, op, fetched, may_read)
    }
    fn probe(&self, engine: &Engine, key: &[u8], fetched: &mut Fetched, reads: &mut Vec<ReadReq>) {
        self.borrow_mut().probe(engine, key, fetched, reads);
    }
    fn fits(&self, engine: &Engine, key: &[u8], vlen: usize, flags: u32) -> bool {
        self.borrow_mut().fits(engine, key, vlen, flags)
    }
}

/// Runs `f` again while the flash tier is busy (up to [`BUSY_WAIT`]).
fn patient<R>(mut f: impl FnMut() -> Result<R, Wait>) -> Result<R, Wait> {
    let start = std::time::Instant::now();
    loop {
        match f() {
            Err(Wait::Busy) if start.elapsed() < BUSY_WAIT => {
                std::thread::sleep(Duration::from_micros(500))
            }
            r => return r,
        }
    }
}

impl Db<'_> {
    fn now(&self) -> u32 {
        self.run.now
    }

    /// Whether the run stopped (every call fails at once then).
    pub fn stopped(&self) -> bool {
        self.run.stopped.get().is_some()
    }

    /// Runs an engine call on `key` (`write`: it changes the item when it
    /// succeeds). A wait stops the run while it has changed nothing;
    /// otherwise it is waited out here ([`Engine::run_blocking`], a busy
    /// flash tier for up to [`BUSY_WAIT`]).
    fn call<R>(
        &self,
        key: &[u8],
        write: bool,
        mut cmd: impl FnMut(&Fetched, bool) -> Result<R, Wait>,
    ) -> Result<R, Wait> {
        let run = self.run;
        if let Some(w) = run.stopped.get() {
            return Err(w);
        }
        let r = match cmd(run.fetched, run.may_read) {
            Err(w) if !run.changed.get() => {
                run.stopped.set(Some(w));
                return Err(w);
            }
            Err(_) if self.held.is_some() => self.held_blocking(key, &mut cmd),
            Err(_) => {
                // A wait on this thread may be long: a fresh clock.
                let now = tiercache_engine::clock::unix_now();
                patient(|| self.engine.run_blocking(key, now, &mut cmd))
            }
            r => r,
        };
        if write && r.is_ok() {
            run.changed.set(true);
        }
        r
    }

    /// [`Engine::run_blocking`] in the held shard (its probe must not
    /// lock it again); a busy flash tier is not waited for under the hold.
    fn held_blocking<R>(
        &self,
        key: &[u8],
        cmd: &mut impl FnMut(&Fetched, bool) -> Result<R, Wait>,
    ) -> Result<R, Wait> {
        let (mut fetched, mut reads) = (Fetched::default(), Vec::new());
        for round in 0..8 {
            match cmd(&fetched, round < 7) {
                Err(Wait::Reads) => {
                    if let Some(h) = self.held {
                        h.probe(self.engine, key, &mut fetched, &mut reads);
                    }
                    if let Some(f) = self.engine.flash() {
                        f.read_blocking(&mut fetched, &mut reads);
                    }
                }
                r => return r,
            }
        }
        Err(Wait::Reads)
    }

    fn eng_get<R>(
        &self,
        key: &[u8],
        fetched: &Fetched,
        may_read: bool,
        f: impl FnOnce(Found, ItemView<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        match self.held {
            Some(h) => {
                let (mut f, mut got) = (Some(f), None);
                h.get(self.engine, key, fetched, may_read, &mut |v| {
                    got = f.take().map(|f| f(Found::Ram, v));
                })?;
                Ok(got)
            }
            None => self.engine.get_with(key, self.now(), fetched, may_read, f),
        }
    }

    fn eng_store(
        &self,
        st: &Store<'_>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<StoreResult, Wait> {
        match self.held {
            Some(h) => h.store(self.engine, st, fetched, may_read),
            None => self.engine.store(st, self.now(), fetched, may_read),
        }
    }

    fn eng_delete(
        &self,
        key: &[u8],
        cas: Option<u64>,
        fetched: &Fetched,
        may_read: bool,
    ) -> Result<MetaDeleted, Wait> {
        let e = self.engine;
        let deleted = |d| match d {
            true => MetaDeleted::Deleted,
            false => MetaDeleted::NotFound,
        };
        match (self.held, cas) {
            (Some(h), _) => h.delete(e, key, cas, fetched, may_read),
            (None, Some(_)) => e.meta_delete(key, self.now(), cas, None, fetched, may_read),
            (None, None) => e.delete(key, self.now(), fetched, may_read).map(deleted),
        }
    }

    /// The key's item, its access recorded (as a get).
    pub fn get(&self, key: &[u8]) -> Option<Item> {
        self.with_item(key, |v| Item {
            value: v.value().to_vec(),
            flags: v.flags(),
            exptime: v.exptime(),
            cas: v.cas(),
        })
    }

    /// `f` with the key's item, read in place, its access recorded.
    fn with_item<R>(
        &self,
        key: &[u8],
        f: impl FnOnce(tiercache_engine::command::ItemView<'_>) -> R,
    ) -> Option<R> {
        let mut f = Some(f);
        self.call(key, false, |fetched, may_read| {
            let run = |_, v: ItemView<'_>| (f.take().expect("once"))(v);
            self.eng_get(key, fetched, may_read, run)
        })
        .ok()
        .flatten()
    }

    /// `f` with the key's value and type, read in place (GET, MGET).
    pub fn with<R>(&self, key: &[u8], f: impl FnOnce(&[u8], Kind) -> R) -> Option<R> {
        self.with_item(key, |v| f(v.value(), Kind::of_flags(v.flags())))
    }

    /// The key's value length and type, without copying the value.
    pub fn len_kind(&self, key: &[u8]) -> Option<(usize, Kind, u32)> {
        self.with_item(key, |v| {
            (v.value().len(), Kind::of_flags(v.flags()), v.exptime())
        })
    }

    /// Stores `value` (`mode` Set, Add, Replace; or Cas with `cas`).
    pub fn store(
        &self,
        mode: Mode,
        key: &[u8],
        value: &[u8],
        kind: Kind,
        exptime: u32,
        cas: u64,
    ) -> Result<StoreResult, Failed> {
        let st = Store {
            mode,
            key,
            flags: kind.flags(),
            exptime,
            data: value,
            compare_cas: cas,
            set_stale: false,
            binary_key: false,
        };
        let r = self.call(key, true, |fetched, may_read| {
            self.eng_store(&st, fetched, may_read)
        });
        match r {
            Ok(StoreResult::TooLarge) => Err(Failed::TooLarge),
            Ok(StoreResult::NoMemory | StoreResult::Busy) => Err(Failed::NoMemory),
            Err(_) if self.stopped() => Err(Failed::Stopped),
            Err(Wait::Busy) if self.held.is_some() => Err(Failed::Busy),
            Err(_) => Err(Failed::NoMemory),
            Ok(r) => Ok(r),
        }
    }

    /// Redis's INCRBY on the key ([`Arith::Signed`]): one engine call, in
    /// one lock hold, the digits overwritten in place when their length
    /// stays. `Ok` of [`ArithResult::Ok`] (the new value), `NonNumeric`
    /// (not an integer, or a hash), `Overflow`.
    pub fn incr(&self, key: &[u8], by: i64) -> Result<ArithResult, Failed> {
        let op = Arith::Signed { by };
        let r = self.call(key, true, |fetched, may_read| match self.held {
            Some(h) => h.arith(self.engine, key, op, fetched, may_read),
            None => self.engine.arith(key, self.now(), op, fetched, may_read),
        });
        match r {
            Ok(ArithResult::NoMemory | ArithResult::Busy) => Err(Failed::NoMemory),
            Err(_) if self.stopped() => Err(Failed::Stopped),
            Err(Wait::Busy) if self.held.is_some() => Err(Failed::Busy),
            Err(_) => Err(Failed::NoMemory),
            Ok(r) => Ok(r),
        }
    }

    /// Runs `f` with the shards of all `keys` held (EXEC's hold, in EXEC):
    /// no other command on those keys, from any connection of either
    /// port, runs in between `f`'s calls. With a flash tier the run first
    /// stops once, so that the connection probes the keys and reads their
    /// records before the hold (no read waits under it, as for EXEC).
    /// None: the run stopped.
    pub fn with_all_held<'k, R>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
        f: impl FnOnce(&Db<'_>) -> R,
    ) -> Option<R> {
        if self.stopped() {
            return None;
        }
        if self.held.is_some() {
            return Some(f(self));
        }
        let run = self.run;
        if self.engine.flash().is_some() && run.may_read && !run.probed {
            run.stop(Wait::Reads);
            return None;
        }
        let held = RefCell::new(self.engine.hold_all(keys, self.now()));
        let db = Db {
            engine: self.engine,
            run,
            held: Some(&held),
        };
        Some(f(&db))
    }

    /// Whether [`store`](Self::store) can store this string: it fits the
    /// item size limit, and in a held shard, needs no other shard's memory.
    pub fn fits(&self, key: &[u8], vlen: usize) -> bool {
        let flags = Kind::String.flags();
        match self.held {
            Some(h) => h.fits(self.engine, key, vlen, flags),
            None => self.engine.fits(key.len(), vlen),
        }
    }

    /// Deletes the key; true if it was there.
    pub fn delete(&self, key: &[u8]) -> bool {
        let r = self.call(key, true, |fetched, may_read| {
            self.eng_delete(key, None, fetched, may_read)
        });
        matches!(r, Ok(MetaDeleted::Deleted))
    }

    /// Deletes the key if its CAS is still `cas`; true if deleted.
    fn delete_cas(&self, key: &[u8], cas: u64) -> bool {
        let r = self.call(key, true, |fetched, may_read| {
            self.eng_delete(key, Some(cas), fetched, may_read)
        });
        matches!(r, Ok(MetaDeleted::Deleted))
    }

    /// Empties the cache (FLUSHALL).
    pub fn flush(&self) -> bool {
        let now = self.now();
        self.call(b"", true, |_, _| self.engine.flush(0, now))
            .is_ok()
    }

    /// Reads the item, lets `f` decide, applies its change only if nobody
    /// changed the item meanwhile (else reads again and asks `f` again).
    /// Outside EXEC the key's shard is held from the read to the write:
    /// one lock hold, and nobody can change the item in between. A write
    /// that finds no memory there (a jumbo item, which needs the other
    /// shards to give back memory) is done again without the hold.
    pub fn update<R>(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> Result<R, Failed> {
        if self.held.is_none() && !self.stopped() {
            let held = RefCell::new(self.engine.hold(key, self.now()));
            let db = Db {
                engine: self.engine,
                run: self.run,
                held: Some(&held),
            };
            match db.update_loop(key, &mut f) {
                Err(Failed::NoMemory) if !self.run.changed() => {}
                r => return r,
            }
        }
        self.update_loop(key, &mut f)
    }

    /// [`update`](Self::update)'s compare-and-swap loop.
    fn update_loop<R>(
        &self,
        key: &[u8],
        f: &mut impl FnMut(Option<&Item>) -> (Change, R),
    ) -> Result<R, Failed> {
        loop {
            let old = self.get(key);
            if self.stopped() {
                return Err(Failed::Stopped);
            }
            let (change, r) = f(old.as_ref());
            let done = match change {
                Change::Keep => true,
                Change::Delete => match &old {
                    None => true,
                    Some(o) => self.delete_cas(key, o.cas),
                },
                Change::Put {
                    value,
                    kind,
                    exptime,
                } => {
                    let (mode, cas) = match &old {
                        Some(o) => (Mode::Cas, o.cas),
                        None => (Mode::Add, 0),
                    };
                    matches!(
                        self.store(mode, key, &value, kind, exptime, cas)?,
                        StoreResult::Stored { .. }
                    )
                }
            };
            if self.stopped() {
                return Err(Failed::Stopped);
            }
            if done {
                return Ok(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_round_up() {
        assert_eq!(exptime_at(1_000_500, 1_000_000), Some(1001));
        assert_eq!(exptime_at(1_001_000, 1_000_000), Some(1001));
        assert_eq!(exptime_at(1_000_000, 1_000_000), None);
    }
}
