//! Executes decoded requests against the engine's command API and composes
//! the replies, byte for byte as memcached 1.6 answers them. The meta
//! commands are in [`meta`].
//!
//! A request that cannot run yet says so in its [`Outcome`]: it changed
//! nothing and wrote nothing ([`Outcome::Wait`]), or, a multiget, it
//! answered its keys up to an offset and resumes there
//! ([`Outcome::Stopped`]): keys already answered are not run again.

mod meta;

use crate::ctx::{Attempt, Ctx, Outcome};
use crate::stats::{add, bump, WorkerStats};
use tiercache_engine::command::{Arith, ArithResult, MetaDeleted};
use tiercache_engine::command::{ItemView, Mode, Store as StoreCmd, StoreResult, Wait};
use tiercache_proto::reply;
use tiercache_proto::request::errors;
use tiercache_proto::{ErrorReply, Get, MetaCode, Reply, Request, Store};

pub(crate) fn reply(out: &mut Vec<u8>, noreply: bool, r: Reply<'_>) {
    if !noreply {
        r.encode(out);
    }
}

/// Executes one data request, appending its reply to `out` (admin requests
/// run in [`crate::admin::control`]; [`crate::protocol::execute`] routes).
pub fn execute(req: Request<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    match req {
        Request::Get(g) => return get(&g, out, ctx, at),
        Request::Store(s) => return store(&s, out, ctx, at),
        Request::Delete { key, noreply } => {
            let found = match ctx.engine().delete(key, ctx.now, at.fetched, at.may_read) {
                Ok(found) => found,
                Err(w) => return Outcome::Wait(w),
            };
            ctx.shared.detail.record_delete(key);
            ctx.shared.watch.fetched(key, found.then_some(0));
            if found {
                bump(&ctx.stats.delete_hits);
                reply(out, noreply, Reply::Deleted);
            } else {
                bump(&ctx.stats.delete_misses);
                reply(out, noreply, Reply::NotFound);
            }
        }
        Request::Arith {
            incr,
            key,
            delta,
            noreply,
        } => return arith(incr, key, delta, noreply, out, ctx, at),
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            let size = |item: ItemView<'_>| item.value().len();
            let found = match ctx.engine().touch_with(
                key,
                ctx.exptime(exptime),
                ctx.now,
                at.fetched,
                at.may_read,
                size,
            ) {
                Ok(found) => found,
                Err(w) => return Outcome::Wait(w),
            };
            ctx.shared.watch.fetched(key, found);
            bump(&ctx.stats.cmd_touch);
            if found.is_some() {
                bump(&ctx.stats.touch_hits);
                reply(out, noreply, Reply::Touched);
            } else {
                bump(&ctx.stats.touch_misses);
                reply(out, noreply, Reply::NotFound);
            }
        }
        Request::FlushAll { noreply, .. } if ctx.shared.config.server.disable_flush_all => {
            // -F: counted, refused, as memcached (noreply keeps it back).
            bump(&ctx.stats.cmd_flush);
            if !noreply {
                out.extend_from_slice(b"CLIENT_ERROR flush_all not allowed\r\n");
            }
        }
        Request::FlushAll { delay, noreply } => {
            if let Err(w) = ctx.engine().flush(i64::from(delay), ctx.now) {
                return Outcome::Wait(w);
            }
            bump(&ctx.stats.cmd_flush);
            reply(out, noreply, Reply::Ok);
        }
        Request::MetaGet { key, flags } => return meta::get(&key, &flags, out, ctx, at),
        Request::MetaSet { key, data, flags } => {
            return meta::set(&key, data, &flags, out, ctx, at)
        }
        Request::MetaDelete { key, flags } => return meta::delete(&key, &flags, out, ctx, at),
        Request::MetaArith { key, flags } => return meta::arith(&key, &flags, out, ctx, at),
        Request::MetaNoop => Reply::meta(MetaCode::Mn, &[]).encode(out),
        Request::MetaDebug { key } => return meta::debug(&key, out, ctx, at),
        Request::StoreRefused {
            key,
            classic,
            remove_existing,
            reply: r,
            noreply,
        } => {
            if remove_existing {
                if let Err(w) = ctx.engine().remove_refused(&key, ctx.now) {
                    return Outcome::Wait(w);
                }
            }
            if classic {
                ctx.shared.detail.record_set(&key);
            }
            ctx.shared.watch.stored(&key, "too_large", "set", 0, 0);
            bump(&ctx.stats.store_too_large);
            reply(out, noreply, r.into());
        }
        Request::Error { reply: r, noreply } => reply(out, noreply, r.into()),
        Request::GetKeyTooLong => Reply::from(ErrorReply::Client(errors::BAD_FORMAT)).encode(out),
        Request::HttpHangup => return Outcome::Close,
        Request::Version
        | Request::Verbosity { .. }
        | Request::Quit
        | Request::Stats(_)
        | Request::LruCrawler(_)
        | Request::Shutdown { .. }
        | Request::CacheMemlimit { .. }
        | Request::Watch { .. }
        | Request::RefreshCerts { .. } => {
            unreachable!("admin requests run in admin::control (protocol::execute routes them)")
        }
    }
    Outcome::Continue
}

/// `VALUE key flags bytes [cas]`, the value and its line end.
fn value_reply(out: &mut Vec<u8>, key: &[u8], item: &ItemView<'_>, return_cas: bool) {
    let cas = return_cas.then_some(item.cas());
    reply::value(out, key, item.flags(), cas, item.value());
}

/// get, gets, gat, gats: each key in turn, stopping at the output bound or
/// at a key whose flash records must be read or whose change must wait
/// (the keys before it keep their replies; the rest resume there).
fn get(g: &Get<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    let touch = g.touch.map(|t| ctx.exptime(t));
    let (mut hits, mut misses) = (0u64, 0u64);
    let detail = ctx.shared.detail.enabled();
    let mut stopped = None;
    for key in g.keys() {
        let offset = key.as_ptr() as usize - g.keys.as_ptr() as usize;
        if hits + misses > 0 && out.len() >= at.out_limit {
            stopped = Some(Outcome::Stopped {
                at: offset,
                wait: None,
            });
            break;
        }
        let r = match touch {
            Some(e) => {
                let reply = |item: ItemView<'_>| {
                    value_reply(out, key, &item, g.return_cas);
                    item.value().len()
                };
                ctx.engine()
                    .touch_with(key, e, ctx.now, at.fetched, at.may_read, reply)
            }
            None => {
                let reply = |_, item: ItemView<'_>| {
                    value_reply(out, key, &item, g.return_cas);
                    item.value().len()
                };
                ctx.engine()
                    .get_with(key, ctx.now, at.fetched, at.may_read, reply)
            }
        };
        let hit = match r {
            Ok(found) => {
                ctx.shared.watch.fetched(key, found);
                found.is_some()
            }
            Err(w) => {
                stopped = Some(Outcome::Stopped {
                    at: offset,
                    wait: Some(w),
                });
                break;
            }
        };
        if hit {
            hits += 1;
        } else {
            misses += 1;
        }
        if detail {
            ctx.shared.detail.record_get(key, hit);
        }
    }
    let (cmd, hit, miss) = if touch.is_some() {
        (
            &ctx.stats.cmd_touch,
            &ctx.stats.touch_hits,
            &ctx.stats.touch_misses,
        )
    } else {
        (
            &ctx.stats.cmd_get,
            &ctx.stats.get_hits,
            &ctx.stats.get_misses,
        )
    };
    add(cmd, hits + misses);
    add(hit, hits);
    add(miss, misses);
    stopped.unwrap_or_else(|| {
        Reply::End.encode(out);
        Outcome::Continue
    })
}

/// Runs a storage command and counts it (`cmd_set`, the cas and refusal
/// counters); a command that must wait is not counted.
fn run_store(st: &StoreCmd<'_>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Result<StoreResult, Wait> {
    let r = ctx.engine().store(st, ctx.now, at.fetched, at.may_read)?;
    bump(&ctx.stats.cmd_set);
    if ctx.shared.watch.on(crate::admin::watch::MUTATIONS) {
        watch_store(st, &r, ctx);
    }
    if st.mode == Mode::Cas {
        match r {
            StoreResult::Stored { .. } => bump(&ctx.stats.cas_hits),
            StoreResult::Exists => bump(&ctx.stats.cas_badval),
            StoreResult::NotFound => bump(&ctx.stats.cas_misses),
            _ => {}
        }
    }
    match r {
        StoreResult::TooLarge => bump(&ctx.stats.store_too_large),
        StoreResult::NoMemory => bump(&ctx.stats.store_no_memory),
        _ => {}
    }
    Ok(r)
}

/// `watch mutations`: a store's line, with memcached's names.
#[cold]
fn watch_store(st: &StoreCmd<'_>, r: &StoreResult, ctx: &Ctx<'_>) {
    let status = match r {
        StoreResult::Stored { .. } => "stored",
        StoreResult::NotStored => "not_stored",
        StoreResult::Exists => "exists",
        StoreResult::NotFound => "not_found",
        StoreResult::TooLarge => "too_large",
        StoreResult::NoMemory | StoreResult::Busy => "no_memory",
    };
    let cmd = match st.mode {
        Mode::Set => "set",
        Mode::Add => "add",
        Mode::Replace => "replace",
        Mode::Append => "append",
        Mode::Prepend => "prepend",
        Mode::Cas => "cas",
    };
    // memcached prints the seconds left, 0 for an item without a limit.
    let ttl = match st.exptime {
        0 => 0,
        e => e.saturating_sub(ctx.now),
    };
    let w = &ctx.shared.watch;
    w.stored(st.key, status, cmd, ttl, st.data.len());
}

fn store(s: &Store<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    let st = StoreCmd {
        mode: s.mode,
        key: s.key,
        flags: s.flags,
        exptime: ctx.exptime(s.exptime),
        data: s.data,
        compare_cas: s.cas,
        set_stale: false,
        binary_key: false,
    };
    let r = match run_store(&st, ctx, at) {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    ctx.shared.detail.record_set(s.key);
    let r = match r {
        StoreResult::Stored { .. } => Reply::Stored,
        StoreResult::NotStored => Reply::NotStored,
        StoreResult::Exists => Reply::Exists,
        StoreResult::NotFound => Reply::NotFound,
        // memcached refuses an append/prepend that outgrows the item limit as NOT_STORED.
        StoreResult::TooLarge if matches!(s.mode, Mode::Append | Mode::Prepend) => Reply::NotStored,
        StoreResult::TooLarge => ErrorReply::Server(errors::TOO_LARGE).into(),
        StoreResult::NoMemory | StoreResult::Busy => {
            ErrorReply::Server(errors::OUT_OF_MEMORY).into()
        }
    };
    reply(out, s.noreply, r);
    Outcome::Continue
}

fn arith(
    incr: bool,
    key: &[u8],
    delta: u64,
    noreply: bool,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
    at: &Attempt<'_>,
) -> Outcome {
    let r = match ctx.engine().arith(
        key,
        ctx.now,
        Arith::Unsigned { incr, delta },
        at.fetched,
        at.may_read,
    ) {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    let (hits, misses) = if incr {
        (&ctx.stats.incr_hits, &ctx.stats.incr_misses)
    } else {
        (&ctx.stats.decr_hits, &ctx.stats.decr_misses)
    };
    if ctx.shared.watch.on(crate::admin::watch::FETCHERS) {
        let size = match &r {
            ArithResult::NotFound => None,
            ArithResult::Ok { value, .. } => Some(value.to_string().len()),
            _ => Some(0),
        };
        ctx.shared.watch.fetched(key, size);
    }
    match r {
        ArithResult::Ok { value, .. } => {
            bump(hits);
            reply(out, noreply, Reply::Number(value));
        }
        ArithResult::NotFound => {
            bump(misses);
            reply(out, noreply, Reply::NotFound);
        }
        ArithResult::NonNumeric | ArithResult::Overflow => {
            reply(out, noreply, ErrorReply::Client(errors::NON_NUMERIC).into())
        }
        ArithResult::CasMismatch => reply(out, noreply, Reply::Exists),
        ArithResult::NoMemory | ArithResult::Busy => {
            reply(out, noreply, Reply::ServerError(b"out of memory"))
        }
    }
    Outcome::Continue
}

/// `md`'s result (`meta::delete` counts and formats it).
fn meta_deleted(ctx: &Ctx<'_>, r: MetaDeleted) {
    match r {
        MetaDeleted::NotFound | MetaDeleted::Exists => bump(&ctx.stats.delete_misses),
        MetaDeleted::Deleted => bump(&ctx.stats.delete_hits),
        MetaDeleted::Invalidated => {}
    }
}

/// Counts bytes read from clients.
pub fn count_read(stats: &WorkerStats, n: usize) {
    add(&stats.bytes_read, n as u64);
}
