//! String commands: GET, SET and its options, the SET/GET variants, MGET,
//! MSET, APPEND, ranges and the counters, with Redis 7's replies. Each
//! parses its arguments, runs against [`Db`](super::super::db::Db) and
//! encodes its reply side by side.

use super::args::{self, float, fmt_float, int, is, NOT_INT, OVERFLOW, SYNTAX, WRONGTYPE};
use super::Call;
use crate::protocol::resp::db::{exptime_at, now_ms, Change, Failed, Item, Kind};
use tiercache_engine::command::{ArithResult, Mode, StoreResult};

/// Redis's largest string (`proto-max-bulk-len`), for SETRANGE.
const MAX_STRING: u64 = 512 * 1024 * 1024;

/// An expiry option's deadline in unix ms, checked as Redis checks it
/// (`ERR invalid expire time in '<cmd>' command`).
pub fn deadline(c: &Call<'_>, opt: &[u8], val: &[u8]) -> Result<u64, String> {
    let v = int(val).ok_or(NOT_INT)?;
    let bad = || format!("ERR invalid expire time in '{}' command", c.name());
    if v <= 0 {
        return Err(bad());
    }
    let v = v as u64;
    let now = now_ms();
    let ms = match () {
        _ if is(opt, "EX") => v.checked_mul(1000).and_then(|m| m.checked_add(now)),
        _ if is(opt, "PX") => v.checked_add(now),
        _ if is(opt, "EXAT") => v.checked_mul(1000),
        _ => Some(v),
    };
    ms.filter(|&m| m <= i64::MAX as u64).ok_or_else(bad)
}

/// A string's value, or WRONGTYPE for a hash.
fn string(old: Option<&Item>) -> Result<Option<&[u8]>, &'static str> {
    match old {
        Some(i) if i.kind() != Kind::String => Err(WRONGTYPE),
        Some(i) => Ok(Some(&i.value)),
        None => Ok(None),
    }
}

pub fn get(c: &mut Call<'_>) {
    let out = &mut *c.out;
    let found = c.db.with(c.args[1], |v, kind| match kind {
        Kind::String => out.bulk(v),
        _ => out.err(WRONGTYPE),
    });
    c.count_get(found.is_some());
    if found.is_none() {
        c.out.null();
    }
}

#[derive(Clone, Copy, PartialEq)]
enum When {
    Always,
    Nx,
    Xx,
}

/// SET key value [NX|XX] [GET] [EX|PX|EXAT|PXAT t|KEEPTTL].
pub fn set(c: &mut Call<'_>) {
    let (mut when, mut get, mut keepttl, mut expire) = (When::Always, false, false, None);
    let mut i = 3;
    while i < c.args.len() {
        let a = c.args[i];
        let next = c.args.get(i + 1).copied();
        if is(a, "NX") && when != When::Xx {
            when = When::Nx;
        } else if is(a, "XX") && when != When::Nx {
            when = When::Xx;
        } else if is(a, "GET") {
            get = true;
        } else if is(a, "KEEPTTL") && expire.is_none() {
            keepttl = true;
        } else if ["EX", "PX", "EXAT", "PXAT"].iter().any(|o| is(a, o))
            && !keepttl
            && expire.is_none()
            && next.is_some()
        {
            match deadline(c, a, next.unwrap_or_default()) {
                Ok(d) => expire = Some(d),
                Err(e) => return c.out.err(&e),
            }
            i += 1;
        } else {
            return c.out.err(SYNTAX);
        }
        i += 1;
    }
    let (key, value) = (c.args[1], c.args[2]);
    let exptime = match expire {
        Some(d) => exptime_at(d, now_ms()),
        None => Some(0),
    };
    // The plain forms store at once; the others read the old item.
    if !get && !keepttl && exptime.is_some() {
        let mode = match when {
            When::Always => Mode::Set,
            When::Nx => Mode::Add,
            When::Xx => Mode::Replace,
        };
        let e = exptime.unwrap_or(0);
        return match c.db.store(mode, key, value, Kind::String, e, 0) {
            Ok(StoreResult::Stored { .. }) => c.out.ok(),
            Ok(_) => c.out.null(),
            Err(f) => c.out.err(f.text()),
        };
    }
    let r = c.db.update(key, |old| {
        let prev = match (get, string(old)) {
            (true, Err(e)) => return (Change::Keep, Err(e)),
            (_, prev) => prev.ok().flatten().map(<[u8]>::to_vec),
        };
        let go = match when {
            When::Always => true,
            When::Nx => old.is_none(),
            When::Xx => old.is_some(),
        };
        if !go {
            return (Change::Keep, Ok((false, prev)));
        }
        let change = match exptime {
            None => Change::Delete,
            Some(e) => Change::Put {
                value: value.to_vec(),
                kind: Kind::String,
                exptime: match keepttl {
                    true => old.map_or(0, |o| o.exptime),
                    false => e,
                },
            },
        };
        (change, Ok((true, prev)))
    });
    match r {
        Err(f) => c.out.err(f.text()),
        Ok(Err(e)) => c.out.err(e),
        Ok(Ok((_, prev))) if get => c.out.opt_bulk(prev.as_deref()),
        Ok(Ok((true, _))) => c.out.ok(),
        Ok(Ok((false, _))) => c.out.null(),
    }
}

pub fn setnx(c: &mut Call<'_>) {
    match c
        .db
        .store(Mode::Add, c.args[1], c.args[2], Kind::String, 0, 0)
    {
        Ok(StoreResult::Stored { .. }) => c.out.int(1),
        Ok(_) => c.out.int(0),
        Err(f) => c.out.err(f.text()),
    }
}

/// SETEX (seconds) and PSETEX (milliseconds).
pub fn setex(c: &mut Call<'_>) {
    let unit: &[u8] = if c.name() == "setex" { b"EX" } else { b"PX" };
    let d = match deadline(c, unit, c.args[2]) {
        Ok(d) => d,
        Err(e) => return c.out.err(&e),
    };
    let e = exptime_at(d, now_ms()).unwrap_or(1);
    match c
        .db
        .store(Mode::Set, c.args[1], c.args[3], Kind::String, e, 0)
    {
        Ok(_) => c.out.ok(),
        Err(f) => c.out.err(f.text()),
    }
}

/// GETSET, GETDEL, GETEX: the old value, and a change (in one update:
/// nobody changes the key between the read and the write).
pub fn getset(c: &mut Call<'_>) {
    let name = c.name();
    let mut expire: Option<Option<u32>> = None;
    if name == "getex" {
        let a = &c.args[2..];
        match a {
            [] => {}
            [p] if is(p, "PERSIST") => expire = Some(Some(0)),
            [o, v] if ["EX", "PX", "EXAT", "PXAT"].iter().any(|x| is(o, x)) => {
                match deadline(c, o, v) {
                    Ok(d) => expire = Some(exptime_at(d, now_ms())),
                    Err(e) => return c.out.err(&e),
                }
            }
            _ => return c.out.err(SYNTAX),
        }
    }
    let args = c.args;
    let r = c.db.update(args[1], |old| {
        let prev = match string(old) {
            Err(e) => return (Change::Keep, Err(e)),
            Ok(p) => p.map(<[u8]>::to_vec),
        };
        let change = match (name, old) {
            // GETSET stores whatever was there (a miss included).
            ("getset", _) => Change::Put {
                value: args[2].to_vec(),
                kind: Kind::String,
                exptime: 0,
            },
            (_, None) => Change::Keep,
            ("getdel", _) => Change::Delete,
            ("getex", Some(o)) => match expire {
                None => Change::Keep,
                Some(None) => Change::Delete,
                Some(Some(e)) if e == o.exptime => Change::Keep,
                Some(Some(e)) => Change::Put {
                    value: o.value.clone(),
                    kind: Kind::String,
                    exptime: e,
                },
            },
            _ => Change::Keep,
        };
        (change, Ok(prev))
    });
    match r {
        Err(f) => c.out.err(f.text()),
        Ok(Err(e)) => c.out.err(e),
        Ok(Ok(prev)) => c.out.opt_bulk(prev.as_deref()),
    }
}

pub fn mget(c: &mut Call<'_>) {
    c.out.array(c.args.len() - 1);
    for k in &c.args[1..] {
        let out = &mut *c.out;
        let found = c.db.with(k, |v, kind| match kind {
            Kind::String => out.bulk(v),
            _ => out.null(),
        });
        c.count_get(found.is_some());
        if found.is_none() {
            c.out.null();
        }
    }
}

/// MSET and MSETNX, atomic as Redis's: the shards of all their keys are
/// held while they are checked (MSETNX) and stored (`Db::with_all_held`:
/// one lock hold per shard, not one per key), so another client sees all
/// of them or none, and MSETNX's check and stores are one step. A value
/// over the item size limit is refused before anything is stored. An
/// item larger than a segment takes memory from every shard, which the
/// hold cannot give: then the keys are stored one by one, as before.
pub fn mset(c: &mut Call<'_>) {
    if c.args.len().is_multiple_of(2) {
        return c.arity_error();
    }
    let nx = c.name() == "msetnx";
    let pairs = &c.args[1..];
    let r = c.db.with_all_held(pairs.iter().step_by(2).copied(), |db| {
        if !pairs.chunks(2).all(|kv| db.fits(kv[0], kv[1].len())) {
            return None;
        }
        if nx && pairs.chunks(2).any(|kv| db.len_kind(kv[0]).is_some()) {
            return Some(Ok(false));
        }
        for kv in pairs.chunks(2) {
            if let Err(f) = db.store(Mode::Set, kv[0], kv[1], Kind::String, 0, 0) {
                return Some(Err(f));
            }
        }
        Some(Ok(true))
    });
    let r = match r {
        None if c.db.stopped() => return,
        Some(Some(r)) => r,
        // Jumbo items (or an item over the limit): without the hold.
        _ => mset_one_by_one(c, pairs, nx),
    };
    match (r, nx) {
        (Err(f), _) => c.out.err(f.text()),
        (Ok(stored), true) => c.out.int(i64::from(stored)),
        (Ok(_), false) => c.out.ok(),
    }
}

/// MSET's pairs stored key by key (items larger than a segment). In EXEC
/// (its shards held) each store says itself what does not fit.
fn mset_one_by_one(c: &mut Call<'_>, pairs: &[&[u8]], nx: bool) -> Result<bool, Failed> {
    if c.db.held.is_none() && !pairs.chunks(2).all(|kv| c.db.fits(kv[0], kv[1].len())) {
        return Err(Failed::TooLarge);
    }
    if nx && pairs.chunks(2).any(|kv| c.db.len_kind(kv[0]).is_some()) {
        return Ok(false);
    }
    for kv in pairs.chunks(2) {
        c.db.store(Mode::Set, kv[0], kv[1], Kind::String, 0, 0)?;
    }
    Ok(true)
}

/// A read-modify-write of a string that keeps its TTL: `f` gets the old
/// value (None: missing) and returns the new value and the reply's datum,
/// or None to change nothing (with the datum), or an error.
fn rewrite<T>(
    c: &mut Call<'_>,
    mut f: impl FnMut(Option<&[u8]>) -> Result<(Option<Vec<u8>>, T), &'static str>,
) -> Result<Result<T, &'static str>, crate::protocol::resp::db::Failed> {
    c.db.update(c.args[1], |old| {
        let r = string(old).and_then(&mut f);
        match r {
            Err(e) => (Change::Keep, Err(e)),
            Ok((None, t)) => (Change::Keep, Ok(t)),
            Ok((Some(value), t)) => {
                let exptime = old.map_or(0, |o| o.exptime);
                let kind = Kind::String;
                (
                    Change::Put {
                        value,
                        kind,
                        exptime,
                    },
                    Ok(t),
                )
            }
        }
    })
}

pub fn append(c: &mut Call<'_>) {
    let add = c.args[2];
    let r = rewrite(c, |v| {
        let mut value = v.unwrap_or_default().to_vec();
        value.extend_from_slice(add);
        let len = value.len();
        Ok((Some(value), len))
    });
    c.int_reply(r);
}

pub fn strlen(c: &mut Call<'_>) {
    match c.db.len_kind(c.args[1]) {
        Some((_, Kind::Hash, _)) => c.out.err(WRONGTYPE),
        Some((n, _, _)) => c.out.int(n as i64),
        None => c.out.int(0),
    }
}

pub fn getrange(c: &mut Call<'_>) {
    let (Some(mut s), Some(mut e)) = (int(c.args[2]), int(c.args[3])) else {
        return c.out.err(NOT_INT);
    };
    let v = match c.db.get(c.args[1]) {
        Some(i) if i.kind() != Kind::String => return c.out.err(WRONGTYPE),
        Some(i) => i.value,
        None => return c.out.bulk(b""),
    };
    let n = v.len() as i64;
    if s < 0 && e < 0 && s > e {
        return c.out.bulk(b"");
    }
    if s < 0 {
        s = (n + s).max(0);
    }
    if e < 0 {
        e = (n + e).max(0);
    }
    e = e.min(n - 1);
    if s > e || n == 0 {
        return c.out.bulk(b"");
    }
    c.out.bulk(&v[s as usize..=e as usize]);
}

pub fn setrange(c: &mut Call<'_>) {
    let Some(off) = int(c.args[2]) else {
        return c.out.err(NOT_INT);
    };
    if off < 0 {
        return c.out.err("ERR offset is out of range");
    }
    let data = c.args[3];
    if off as u64 + data.len() as u64 > MAX_STRING {
        return c
            .out
            .err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
    let off = off as usize;
    let r = rewrite(c, |v| {
        let mut value = v.unwrap_or_default().to_vec();
        if data.is_empty() {
            return Ok((None, value.len()));
        }
        if value.len() < off + data.len() {
            value.resize(off + data.len(), 0);
        }
        value[off..off + data.len()].copy_from_slice(data);
        let len = value.len();
        Ok((Some(value), len))
    });
    c.int_reply(r);
}

/// INCR, DECR, INCRBY, DECRBY: signed 64-bit, Redis's overflow errors.
pub fn incr(c: &mut Call<'_>) {
    let name = c.name();
    let by = match name {
        "incr" => 1,
        "decr" => -1,
        _ => match int(c.args[2]) {
            None => return c.out.err(NOT_INT),
            Some(i64::MIN) if name == "decrby" => return c.out.err("ERR decrement would overflow"),
            Some(d) if name == "decrby" => -d,
            Some(d) => d,
        },
    };
    match c.db.incr(c.args[1], by) {
        Err(f) => c.out.err(f.text()),
        Ok(ArithResult::Ok { value, .. }) => c.out.int(value as i64),
        Ok(ArithResult::Overflow) => c.out.err(OVERFLOW),
        // Not an integer: a hash is the wrong type (a hash's value never
        // parses as one); read again to say which.
        Ok(_) => match c.db.len_kind(c.args[1]) {
            Some((_, Kind::Hash, _)) => c.out.err(WRONGTYPE),
            _ => c.out.err(NOT_INT),
        },
    }
}

pub fn incrbyfloat(c: &mut Call<'_>) {
    let Some(by) = float(c.args[2]) else {
        return c.out.err(args::NOT_FLOAT);
    };
    let r = rewrite(c, |v| {
        let cur = match v {
            None => 0.0,
            Some(v) => float(v).ok_or(args::NOT_FLOAT)?,
        };
        let n = cur + by;
        if !n.is_finite() {
            return Err("ERR increment would produce NaN or Infinity");
        }
        let s = fmt_float(n);
        Ok((Some(s.clone().into_bytes()), s))
    });
    match r {
        Err(f) => c.out.err(f.text()),
        Ok(Err(e)) => c.out.err(e),
        Ok(Ok(s)) => c.out.bulk_str(&s),
    }
}
