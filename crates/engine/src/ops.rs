//! memcached's command semantics on top of a shard's primitives: the storage
//! modes (set/add/replace/append/prepend/cas, with meta's stale-setting CAS),
//! incr/decr with memcached's wrap and padding rules.

use crate::index::Loc;
use crate::item;
use crate::shard::{InsertError, NewItem, Shard};
use tiercache_proto::number::{parse_i64_exact, parse_u64, Digits};

/// Which storage command: the protocol's own type, one vocabulary from the
/// wire to the engine.
pub use tiercache_proto::StoreMode as Mode;

/// A storage request, exptime already absolute.
#[derive(Debug, Clone, Copy)]
pub struct StoreArgs<'a> {
    pub mode: Mode,
    pub key: &'a [u8],
    pub hash: u64,
    pub flags: u32,
    pub exptime: u32,
    pub data: &'a [u8],
    /// The CAS to compare (cas, meta C); 0 = none.
    pub compare_cas: u64,
    /// An explicit new CAS (meta E); 0 = next.
    pub new_cas: u64,
    /// Meta `I` with a CAS: a lower CAS may still store, marked stale.
    pub set_stale: bool,
    pub binary_key: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreResult {
    Stored {
        cas: u64,
    },
    NotStored,
    Exists,
    NotFound,
    TooLarge,
    NoMemory,
    /// The flash tier is behind; nothing changed, retry later.
    Busy,
}

impl From<InsertError> for StoreResult {
    fn from(e: InsertError) -> Self {
        match e {
            InsertError::TooLarge => StoreResult::TooLarge,
            InsertError::NoMemory => StoreResult::NoMemory,
            InsertError::Busy => StoreResult::Busy,
        }
    }
}

/// Executes a storage command, keeping the flash entries in `keep` (other keys' records
/// under the same tag: see [`Shard::other_keys_on_flash`]).
pub fn store_keeping(shard: &mut Shard, a: &StoreArgs<'_>, now: u32, keep: &[Loc]) -> StoreResult {
    let old = shard.find(a.key, a.hash, now);
    let key_bits = if a.binary_key { item::KEY_BINARY } else { 0 };
    let mut new = NewItem {
        flags: a.flags,
        exptime: a.exptime,
        cas: a.new_cas,
        bits: key_bits,
    };
    match (a.mode, old) {
        (Mode::Add, Some(loc)) => {
            shard.hit(a.hash, loc, now);
            return StoreResult::NotStored;
        }
        (Mode::Replace | Mode::Append | Mode::Prepend, None) => return StoreResult::NotStored,
        (Mode::Cas, None) => return StoreResult::NotFound,
        (Mode::Cas, Some(loc)) => {
            let h = shard.header(loc);
            if h.cas == a.compare_cas {
                // stores below
            } else if a.set_stale && a.compare_cas < h.cas {
                new.exptime = h.exptime;
                new.bits |= item::STALE | (h.bits & item::TOKEN_SENT);
            } else {
                return StoreResult::Exists;
            }
        }
        (Mode::Append | Mode::Prepend, Some(loc)) => {
            let h = shard.header(loc);
            if a.compare_cas != 0 && a.compare_cas != h.cas {
                return StoreResult::Exists;
            }
            new.flags = h.flags;
            new.exptime = h.exptime;
            new.bits = h.bits & item::KEY_BINARY;
            // Copy the old value out: the insert may evict the segment it lives in.
            let old_value = shard.value(loc).to_vec();
            let parts: [&[u8]; 2] = if a.mode == Mode::Append {
                [&old_value, a.data]
            } else {
                [a.data, &old_value]
            };
            return insert(shard, a, new, &parts, keep);
        }
        _ => {}
    }
    insert(shard, a, new, &[a.data], keep)
}

fn insert(
    shard: &mut Shard,
    a: &StoreArgs<'_>,
    new: NewItem,
    parts: &[&[u8]],
    keep: &[Loc],
) -> StoreResult {
    match shard.insert_keeping(a.key, a.hash, new, parts, keep) {
        Ok(loc) => StoreResult::Stored {
            cas: shard.header(loc).cas,
        },
        Err(e) => e.into(),
    }
}

/// A counter's arithmetic: memcached's or Redis's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arith {
    /// memcached's incr/decr: unsigned 64-bit (memcached's `strtoull`
    /// rules), incr wraps at 2^64, decr stops at 0; a missing key is not
    /// found; a result no longer than the old value is written in place,
    /// padded with spaces.
    Unsigned { incr: bool, delta: u64 },
    /// Redis's INCRBY (INCR, DECR, DECRBY): signed 64-bit in Redis's exact
    /// form (`string2ll`), an overflow changes nothing
    /// ([`ArithResult::Overflow`]); a missing key counts from 0 and is
    /// created (flags 0, no expiry). In place only when the digits keep
    /// their length (no padding: Redis reads the value as a string).
    Signed { by: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithResult {
    /// New value and the item's CAS. For [`Arith::Signed`] `value` holds
    /// the i64's bits (`value as i64`).
    Ok {
        value: u64,
        cas: u64,
        loc: Loc,
    },
    NotFound,
    NonNumeric,
    /// [`Arith::Signed`] would leave i64: nothing changed.
    Overflow,
    CasMismatch,
    NoMemory,
    /// The flash tier is behind; nothing changed, retry later.
    Busy,
}

/// incr/decr (memcached's) or INCRBY (Redis's), see [`Arith`]: the new
/// digits overwrite the old ones in place when they fit (the item is in
/// RAM, found in this lock hold, and has passed the journal's gate, so a
/// record of it on flash is covered by a tombstone), else a new item
/// replaces it. `found`: the key's item in RAM ([`Shard::ram_item`]).
#[allow(clippy::too_many_arguments)]
pub fn arith(
    shard: &mut Shard,
    key: &[u8],
    hash: u64,
    found: Option<Loc>,
    op: Arith,
    compare_cas: u64,
    now: u32,
) -> ArithResult {
    let Some(loc) = found else {
        return match op {
            Arith::Signed { by } => create(shard, key, hash, by),
            Arith::Unsigned { .. } => ArithResult::NotFound,
        };
    };
    if shard.journal_gate(key, hash).is_none() {
        return ArithResult::Busy;
    }
    let h = shard.header(loc);
    if compare_cas != 0 && compare_cas != h.cas {
        return ArithResult::CasMismatch;
    }
    let (value, digits, pad) = match op {
        Arith::Unsigned { incr, delta } => {
            let Some(cur) = parse_u64(shard.value(loc)) else {
                return ArithResult::NonNumeric;
            };
            let value = match incr {
                true => cur.wrapping_add(delta),
                false => cur.saturating_sub(delta),
            };
            (value, Digits::unsigned(value), true)
        }
        Arith::Signed { by } => {
            let Some(cur) = parse_i64_exact(shard.value(loc)) else {
                return ArithResult::NonNumeric;
            };
            let Some(value) = cur.checked_add(by) else {
                return ArithResult::Overflow;
            };
            (value as u64, Digits::signed(value), false)
        }
    };
    let digits = digits.as_bytes();
    let vlen = h.vlen as usize;
    let cas = shard.shared().next_cas();
    if digits.len() == vlen || (pad && digits.len() < vlen) {
        shard.overwrite_value_padded(loc, digits, b' ');
        shard.set_cas(loc, cas);
        // A hit may move the item (LRU-like policies): report where it is.
        let loc = shard.hit(hash, loc, now);
        return ArithResult::Ok { value, cas, loc };
    }
    let new = NewItem {
        flags: h.flags,
        exptime: h.exptime,
        cas,
        bits: h.bits & item::KEY_BINARY,
    };
    match shard.insert(key, hash, new, &[digits]) {
        Ok(loc) => ArithResult::Ok { value, cas, loc },
        Err(InsertError::Busy) => ArithResult::Busy,
        Err(_) => ArithResult::NoMemory,
    }
}

/// [`Arith::Signed`] of a missing key: `by` counted from 0, a new item.
fn create(shard: &mut Shard, key: &[u8], hash: u64, by: i64) -> ArithResult {
    let digits = Digits::signed(by);
    let cas = shard.shared().next_cas();
    let new = NewItem {
        cas,
        ..NewItem::default()
    };
    match shard.insert(key, hash, new, &[digits.as_bytes()]) {
        Ok(loc) => ArithResult::Ok {
            value: by as u64,
            cas,
            loc,
        },
        Err(InsertError::Busy) => ArithResult::Busy,
        Err(_) => ArithResult::NoMemory,
    }
}
