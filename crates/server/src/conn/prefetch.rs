//! Before a request runs: the engine decides which of its keys need their
//! flash records read ([`Engine::prefetch`](tiercache_engine::Engine::prefetch));
//! this file hands it the request and the connection's read list, and asks
//! the crash journal ahead for the changes pipelined behind a waiting one.

use crate::ctx::Ctx;
pub use tiercache_engine::command::{asks_for_reads, Prep};
use tiercache_engine::flash::{Fetched, ReadReq};
use tiercache_proto::{Request, StoreMode};

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
    ctx.shared
        .engine
        .prefetch(req, ctx.now, fetched, reads, after_miss)
}

/// A get queued behind a request that waits for flash: the engine reads
/// ahead the records of its keys that are on flash now.
pub fn read_ahead(
    req: &Request<'_>,
    ctx: &Ctx<'_>,
    fetched: &mut Fetched,
    reads: &mut Vec<ReadReq>,
) {
    ctx.shared.engine.read_ahead(req, ctx.now, fetched, reads);
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
            let set = matches!(&request, Request::Store(s) if s.mode == StoreMode::Set);
            engine.prepare_change(key, ctx.now, replaces_key(&request), set);
        }
        buf = &buf[consumed..];
    }
}
