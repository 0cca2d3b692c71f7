//! Before a request runs: the flash records its keys need. Keys whose items
//! are on flash are probed; records still in write buffers are copied at
//! once, others are read (all of a multiget's reads go out together) while
//! the request waits at the head of its connection's input, so replies stay
//! in order. Plain gets are served straight from the verified records; a
//! command that works on the item in RAM (a change, `mg`) copies it back
//! from them itself, in the same shard lock hold as its work, so nothing
//! can push it back to flash in between.

use crate::ctx::Ctx;
use std::borrow::Cow;
use tiercache_engine::flash::{Fetched, ReadReq};
use tiercache_proto::{Request, StoreMode};

/// Whether the request can run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prep {
    Ready,
    /// Reads were added to the list: run it when they complete.
    Wait,
}

/// What a request needs of its keys' flash records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Read them.
    Read,
    /// A plain set: its first run stores at once, unless its key has
    /// entries under its tag on flash and reading them has been paying (the
    /// engine's store says [`Wait::Reads`](tiercache_engine::command::Wait));
    /// then the records are read and the set runs again, keeping other
    /// keys' records instead of dropping them with the key's.
    Verify,
}

/// The key of a plain set (`set`, or `ms` in set mode without a CAS; `I`
/// without a CAS changes nothing, as the engine's `Store::is_plain_set`
/// says): it replaces the key's item whatever it was, so it
/// need not promote it, only keep other keys' flash records.
fn plain_set_key<'a>(req: &'a Request<'a>) -> Option<&'a [u8]> {
    match req {
        Request::Store(s) if s.mode == StoreMode::Set => Some(s.key),
        Request::MetaSet { key, flags, .. }
            if matches!(flags.mode, None | Some(b'S') | Some(b's'))
                && flags.compare_cas.is_none() =>
        {
            Some(&key[..])
        }
        _ => None,
    }
}

/// Whether a request may ask for its keys' flash records when it runs
/// (`Wait::Reads`): every command on keys (a record can move between its
/// probe and its run). Only those are kept to run again.
pub fn asks_for_reads(req: &Request<'_>) -> bool {
    matches!(
        req,
        Request::Get(_)
            | Request::Store(_)
            | Request::Delete { .. }
            | Request::Arith { .. }
            | Request::Touch { .. }
            | Request::MetaGet { .. }
            | Request::MetaSet { .. }
            | Request::MetaDelete { .. }
            | Request::MetaArith { .. }
            | Request::MetaDebug { .. }
    )
}

/// The keys a request touches and what it needs of them. Plain gets and
/// plain sets run first (`first_run`) and are probed only when the run asks
/// for it (a get missed in RAM, a set found its tag on flash), so requests
/// on keys that are not on flash cost nothing extra; the others are probed
/// before their first run.
fn keys_of<'a>(req: &'a Request<'a>, first_run: bool) -> (Vec<Cow<'a, [u8]>>, Need) {
    if let Some(key) = plain_set_key(req) {
        let keys = if first_run {
            Vec::new()
        } else {
            vec![Cow::Borrowed(key)]
        };
        return (keys, Need::Verify);
    }
    match req {
        Request::Get(g) if g.touch.is_none() && first_run => (Vec::new(), Need::Read),
        Request::Get(g) => (g.keys().map(Cow::Borrowed).collect(), Need::Read),
        Request::Store(s) => (vec![Cow::Borrowed(s.key)], Need::Read),
        Request::Delete { key, .. } | Request::Arith { key, .. } | Request::Touch { key, .. } => {
            (vec![Cow::Borrowed(*key)], Need::Read)
        }
        Request::MetaSet { key, .. }
        | Request::MetaGet { key, .. }
        | Request::MetaDelete { key, .. }
        | Request::MetaArith { key, .. }
        | Request::MetaDebug { key } => (vec![Cow::Borrowed(&key[..])], Need::Read),
        _ => (Vec::new(), Need::Read),
    }
}

/// Probes the request's keys; adds the reads it must wait for to `reads`.
/// `after_miss`: a plain get or set ran and asked for its keys' flash
/// records (`Outcome::Wait(Wait::Reads)`); probe them now.
pub fn prepare(
    req: &Request<'_>,
    ctx: &Ctx<'_>,
    fetched: &mut Fetched,
    reads: &mut Vec<ReadReq>,
    after_miss: bool,
) -> Prep {
    let engine = &ctx.shared.engine;
    if engine.flash().is_none() {
        return Prep::Ready;
    }
    let (keys, need) = keys_of(req, !after_miss);
    if need == Need::Verify && !fetched.is_empty() {
        // A retried set: its records were read on the first try.
        return Prep::Ready;
    }
    for key in &keys {
        engine.probe(key, ctx.now, fetched, reads);
    }
    if reads.is_empty() {
        Prep::Ready
    } else {
        Prep::Wait
    }
}

/// A get queued behind a request that waits for flash: reads the records of
/// its keys that are on flash now (no promotion, nothing changed), adding
/// the reads to `reads`. Other requests read nothing ahead.
pub fn read_ahead(
    req: &Request<'_>,
    ctx: &Ctx<'_>,
    fetched: &mut Fetched,
    reads: &mut Vec<ReadReq>,
) {
    let engine = &ctx.shared.engine;
    let mut probe = |key: &[u8]| engine.probe(key, ctx.now, fetched, reads);
    match req {
        Request::Get(g) => g.keys().for_each(&mut probe),
        Request::MetaGet { key, .. } => probe(key),
        _ => {}
    }
}

/// The key a request changes, if it is a change (for asking the crash
/// journal for tombstones ahead of time).
fn changed_key<'a>(req: &'a Request<'a>) -> Option<&'a [u8]> {
    match req {
        Request::Store(s) => Some(s.key),
        Request::Delete { key, .. } | Request::Arith { key, .. } | Request::Touch { key, .. } => {
            Some(key)
        }
        Request::MetaSet { key, .. }
        | Request::MetaDelete { key, .. }
        | Request::MetaArith { key, .. } => Some(&key[..]),
        _ => None,
    }
}

/// Whether a change replaces or deletes its key whatever it held (`set`,
/// `delete`, `md` without C or I): the small-object store may drop the
/// key's copy ahead of it. The others read the item first (add, cas, append, incr, `ms` with
/// a mode flag...), which a copy dropped early would change.
fn replaces_key(req: &Request<'_>) -> bool {
    match req {
        Request::Store(s) => s.mode == StoreMode::Set,
        Request::Delete { .. } => true,
        // `md` with a CAS to compare or `I` (mark stale) reads the item.
        Request::MetaDelete { flags, .. } => flags.compare_cas.is_none() && !flags.invalidate,
        _ => false,
    }
}

/// The request at the head of a connection waits for the crash journal:
/// asks now for the tombstones the changes pipelined behind it will need
/// (up to `AHEAD` requests), so that one journal commit serves them all
/// instead of one commit each. Asking early is harmless: a tombstone only
/// ever drops records, and these keys are about to change.
pub fn journal_ahead(mut buf: &[u8], limits: &tiercache_proto::Limits, ctx: &Ctx<'_>) {
    const AHEAD: usize = 64;
    let engine = &ctx.shared.engine;
    for _ in 0..AHEAD {
        let tiercache_proto::Parsed::Request { request, consumed } =
            tiercache_proto::parse(buf, limits)
        else {
            return;
        };
        if let Some(key) = changed_key(&request) {
            engine.prepare_change(key, ctx.now, replaces_key(&request));
        }
        buf = &buf[consumed..];
    }
}
