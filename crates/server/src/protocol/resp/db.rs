//! The engine as RESP commands see it: whole items (value, type, expiry,
//! CAS) read and written through the engine's command API, its flash
//! reads done on the calling thread ([`Engine::run_blocking`]) and a busy
//! flash tier waited out, and read-modify-write commands (INCR, APPEND,
//! SET ... GET, HSET...) as a compare-and-swap loop, so that no update is
//! lost between two clients (on either port).
//!
//! Types: a Redis string is any item whose memcached flags are not
//! [`HASH_FLAGS`] (memcached-port items are strings); a hash is an item
//! with those flags (see [`super::hash`] for its value's layout).
//!
//! Expiry: the engine keeps absolute unix seconds. A Redis deadline in
//! milliseconds is rounded up to the next second, so an item never expires
//! early and lives at most 999 ms longer than asked.

use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tiercache_engine::command::{Mode, Store, StoreResult, Wait};
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
    /// No memory even after eviction, or the flash tier stayed busy.
    NoMemory,
}

impl Failed {
    /// The error reply.
    pub fn text(self) -> &'static str {
        match self {
            Failed::TooLarge => "ERR string exceeds maximum allowed size (item size limit, -I)",
            Failed::NoMemory => "OOM command not allowed when used memory > 'maxmemory'.",
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

/// The engine, for one command.
pub struct Db<'a> {
    pub engine: &'a Engine,
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
        tiercache_engine::clock::unix_now()
    }

    /// The key's item, its access recorded (as a get).
    pub fn get(&self, key: &[u8]) -> Option<Item> {
        self.engine
            .get_blocking(key, self.now(), true, |_, v| Item {
                value: v.value().to_vec(),
                flags: v.flags(),
                exptime: v.exptime(),
                cas: v.cas(),
            })
    }

    /// `f` with the key's value and type, read in place (GET, MGET).
    pub fn with<R>(&self, key: &[u8], f: impl FnOnce(&[u8], Kind) -> R) -> Option<R> {
        self.engine.get_blocking(key, self.now(), true, |_, v| {
            f(v.value(), Kind::of_flags(v.flags()))
        })
    }

    /// The key's value length and type, without copying the value.
    pub fn len_kind(&self, key: &[u8]) -> Option<(usize, Kind, u32)> {
        self.engine.get_blocking(key, self.now(), true, |_, v| {
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
        let now = self.now();
        let r = patient(|| {
            self.engine.run_blocking(key, now, |fetched, may_read| {
                self.engine.store(&st, now, fetched, may_read)
            })
        });
        match r {
            Ok(StoreResult::TooLarge) => Err(Failed::TooLarge),
            Ok(StoreResult::NoMemory | StoreResult::Busy) | Err(_) => Err(Failed::NoMemory),
            Ok(r) => Ok(r),
        }
    }

    /// Deletes the key; true if it was there.
    pub fn delete(&self, key: &[u8]) -> bool {
        let now = self.now();
        patient(|| {
            self.engine.run_blocking(key, now, |fetched, may_read| {
                self.engine.delete(key, now, fetched, may_read)
            })
        })
        .unwrap_or(false)
    }

    /// Deletes the key if its CAS is still `cas`; true if deleted.
    fn delete_cas(&self, key: &[u8], cas: u64) -> bool {
        use tiercache_engine::command::MetaDeleted;
        let now = self.now();
        let r = patient(|| {
            self.engine.run_blocking(key, now, |fetched, may_read| {
                self.engine
                    .meta_delete(key, now, Some(cas), None, fetched, may_read)
            })
        });
        matches!(r, Ok(MetaDeleted::Deleted))
    }

    /// Empties the cache (FLUSHALL).
    pub fn flush(&self) -> bool {
        let now = self.now();
        patient(|| self.engine.flush(0, now)).is_ok()
    }

    /// Reads the item, lets `f` decide, applies its change only if nobody
    /// changed the item meanwhile (else reads again and asks `f` again).
    pub fn update<R>(
        &self,
        key: &[u8],
        mut f: impl FnMut(Option<&Item>) -> (Change, R),
    ) -> Result<R, Failed> {
        loop {
            let old = self.get(key);
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
