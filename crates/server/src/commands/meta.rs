//! The meta commands (`mg`, `ms`, `md`, `ma`, `me`): the engine runs each
//! and hands back the item; the return flags are written here in the
//! client's order, as memcached writes them.

use super::{meta_deleted, run_store, Attempt, Ctx, Outcome};
use crate::stats::bump;
use tiercache_engine::command::{ArithFailed, MetaArith, MetaGet, MetaItem, Mode};
use tiercache_engine::command::{Store as StoreCmd, StoreResult};
use tiercache_proto::reply::{meta_debug, MetaDebug};
use tiercache_proto::request::errors;
use tiercache_proto::{ErrorReply, MetaCode, MetaFlag, MetaFlags, MetaWriter, Reply};

/// `code` with the opaque and key flags, the only ones echoed on misses and
/// by md/ms (and `c`, for ms, when `cas` is given).
fn echo(out: &mut Vec<u8>, code: MetaCode, flags: &MetaFlags<'_>, key: &[u8], cas: Option<u64>) {
    let mut w = MetaWriter::new(out, code);
    for tok in &flags.order {
        match (tok[0], cas) {
            (b'O', _) => w.flag(&MetaFlag::Opaque(&tok[1..])),
            (b'k', _) => w.flag(&MetaFlag::key(key, flags.base64_key)),
            (b'c', Some(cas)) => w.flag(&MetaFlag::Cas(cas)),
            _ => &mut w,
        };
    }
    w.finish();
}

/// `t`: seconds left, or -1 (None) for an item that never expires.
fn ttl_left(exptime: u32, now: u32) -> MetaFlag<'static> {
    MetaFlag::Ttl((exptime != 0).then(|| u64::from(exptime.wrapping_sub(now))))
}

/// `HD`, or `VA <len>` when the value is asked for.
fn start(out: &mut Vec<u8>, value: Option<usize>) -> MetaWriter<'_> {
    match value {
        Some(len) => MetaWriter::value(out, len),
        None => MetaWriter::new(out, MetaCode::Hd),
    }
}

fn error(out: &mut Vec<u8>, e: ErrorReply) {
    Reply::from(e).encode(out);
}

/// `mg`.
pub(super) fn get(
    key: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
    at: &Attempt<'_>,
) -> Outcome {
    let now = ctx.now;
    let opts = MetaGet {
        ttl: flags.order.iter().any(|t| t[0] == b'T'),
        vivify: flags.vivify.map(|n| ctx.exptime(n)),
        binary_key: flags.base64_key,
        no_update: flags.no_update,
    };
    let reply = |item: &mut MetaItem<'_>| {
        // What `T` and `R` do not change, as it was.
        let v = item.view();
        let vlen = v.value().len();
        let (client_flags, idle, fetched, binary) =
            (v.flags(), v.idle_seconds(now), v.fetched(), v.binary_key());
        let mut w = start(out, flags.value.then_some(vlen));
        for tok in &flags.order {
            let f = match tok[0] {
                b'T' => {
                    item.set_exptime(ctx.exptime(flags.ttl.unwrap_or(0)));
                    continue;
                }
                b'R' => {
                    item.recache(ctx.exptime(flags.recache.unwrap_or(0)));
                    continue;
                }
                b's' => MetaFlag::Size(vlen as u64),
                b't' => ttl_left(item.view().exptime(), now),
                b'c' => MetaFlag::Cas(item.view().cas()),
                b'f' => MetaFlag::Flags(client_flags),
                b'l' => MetaFlag::LastAccess(u64::from(idle)),
                b'h' => MetaFlag::Hit(fetched),
                b'O' => MetaFlag::Opaque(&tok[1..]),
                b'k' => MetaFlag::key(key, binary),
                _ => continue,
            };
            w.flag(&f);
        }
        let token = item.token();
        for (set, f) in [
            (token.sent_before, MetaFlag::TokenSent),
            (token.stale, MetaFlag::Stale),
            (token.won, MetaFlag::Win),
        ] {
            if set {
                w.flag(&f);
            }
        }
        match flags.value {
            true => w.finish_value(item.view().value()),
            false => w.finish(),
        }
        vlen
    };
    let r = match ctx
        .engine()
        .meta_get(key, now, &opts, at.fetched, at.may_read, reply)
    {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    ctx.shared.watch.fetched(key, r);
    match r {
        Some(_) => {
            if opts.ttl {
                bump(&ctx.stats.cmd_touch);
                bump(&ctx.stats.touch_hits);
            } else {
                bump(&ctx.stats.cmd_get);
                bump(&ctx.stats.get_hits);
            }
        }
        None => {
            bump(&ctx.stats.cmd_get);
            bump(&ctx.stats.get_misses);
            if !flags.quiet {
                echo(out, MetaCode::En, flags, key, None);
            }
        }
    }
    Outcome::Continue
}

/// `ms`.
pub(super) fn set(
    key: &[u8],
    data: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
    at: &super::Attempt<'_>,
) -> Outcome {
    let mut mode = match flags.mode.map(|m| m.to_ascii_uppercase()) {
        Some(b'E') => Mode::Add,
        Some(b'A') => Mode::Append,
        Some(b'P') => Mode::Prepend,
        Some(b'R') => Mode::Replace,
        _ => Mode::Set,
    };
    if flags.compare_cas.is_some() && matches!(mode, Mode::Set | Mode::Replace) {
        mode = Mode::Cas;
    }
    let st = StoreCmd {
        mode,
        key,
        flags: flags.client_flags,
        exptime: flags.ttl.map(|t| ctx.exptime(t)).unwrap_or(0),
        data,
        compare_cas: flags.compare_cas.unwrap_or(0),
        set_stale: flags.invalidate && mode == Mode::Cas,
        binary_key: flags.base64_key,
    };
    let r = match run_store(&st, ctx, at) {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    let (code, cas) = match r {
        StoreResult::Stored { cas } => {
            if flags.quiet {
                return Outcome::Continue;
            }
            (MetaCode::Hd, cas)
        }
        StoreResult::NotStored => (MetaCode::Ns, 0),
        StoreResult::Exists => (MetaCode::Ex, 0),
        StoreResult::NotFound => (MetaCode::Nf, 0),
        StoreResult::TooLarge => {
            error(out, ErrorReply::Server(errors::TOO_LARGE));
            return Outcome::Continue;
        }
        StoreResult::NoMemory | StoreResult::Busy => {
            error(out, ErrorReply::Server(errors::OUT_OF_MEMORY));
            return Outcome::Continue;
        }
    };
    echo(out, code, flags, key, Some(cas));
    Outcome::Continue
}

/// `md`.
pub(super) fn delete(
    key: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
    at: &Attempt<'_>,
) -> Outcome {
    let invalidate = flags.invalidate.then(|| flags.ttl.map(|t| ctx.exptime(t)));
    let r = match ctx.engine().meta_delete(
        key,
        ctx.now,
        flags.compare_cas,
        invalidate,
        at.fetched,
        at.may_read,
    ) {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    meta_deleted(ctx, r);
    let found = !matches!(r, tiercache_engine::command::MetaDeleted::NotFound);
    ctx.shared.watch.fetched(key, found.then_some(0));
    use tiercache_engine::command::MetaDeleted;
    let code = match r {
        MetaDeleted::NotFound => MetaCode::Nf,
        MetaDeleted::Exists => MetaCode::Ex,
        MetaDeleted::Deleted | MetaDeleted::Invalidated => {
            if flags.quiet {
                return Outcome::Continue;
            }
            MetaCode::Hd
        }
    };
    echo(out, code, flags, key, None);
    Outcome::Continue
}

/// `ma`.
pub(super) fn arith(
    key: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
    at: &Attempt<'_>,
) -> Outcome {
    let now = ctx.now;
    let a = MetaArith {
        incr: !matches!(flags.mode, Some(b'D' | b'd' | b'-')),
        delta: flags.delta,
        compare_cas: flags.compare_cas.unwrap_or(0),
        vivify: flags.vivify.map(|_| flags.initial),
        binary_key: flags.base64_key,
    };
    let reply = |value: u64, item: &mut MetaItem<'_>| {
        let set_ttl = |item: &mut MetaItem<'_>, t: u8| match t {
            b'T' => item.set_exptime(ctx.exptime(flags.ttl.unwrap_or(0))),
            b'N' if item.created() => item.set_exptime(ctx.exptime(flags.vivify.unwrap_or(0))),
            _ => {}
        };
        if flags.quiet {
            for tok in &flags.order {
                set_ttl(item, tok[0]);
            }
            return item.created();
        }
        let digits = value.to_string();
        let digits = digits.as_bytes();
        let mut w = start(out, flags.value.then_some(digits.len()));
        for tok in &flags.order {
            let f = match tok[0] {
                b'c' => MetaFlag::Cas(item.view().cas()),
                b't' => ttl_left(item.view().exptime(), now),
                b'T' | b'N' => {
                    set_ttl(item, tok[0]);
                    continue;
                }
                b'O' => MetaFlag::Opaque(&tok[1..]),
                b'k' => MetaFlag::key(key, flags.base64_key),
                _ => continue,
            };
            w.flag(&f);
        }
        match flags.value {
            true => w.finish_value(digits),
            false => w.finish(),
        }
        item.created()
    };
    let r = match ctx
        .engine()
        .meta_arith(key, now, &a, at.fetched, at.may_read, reply)
    {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    // A value made by `N` was not found.
    let found = !matches!(r, Ok(true) | Err(ArithFailed::NotFound));
    ctx.shared.watch.fetched(key, found.then_some(0));
    let (hits, misses) = if a.incr {
        (&ctx.stats.incr_hits, &ctx.stats.incr_misses)
    } else {
        (&ctx.stats.decr_hits, &ctx.stats.decr_misses)
    };
    let failed = match r {
        Ok(created) => {
            // A value made by `N` is neither a hit nor a miss.
            if !created {
                bump(hits);
            }
            return Outcome::Continue;
        }
        Err(f) => f,
    };
    match failed {
        ArithFailed::NonNumeric => error(out, ErrorReply::Client(errors::NON_NUMERIC)),
        ArithFailed::NoMemory => Reply::ServerError(b"out of memory").encode(out),
        ArithFailed::NoMemoryForNew => {
            Reply::ServerError(b"Out of memory allocating new item").encode(out)
        }
        ArithFailed::NotFound => {
            bump(misses);
            echo(out, MetaCode::Nf, flags, key, None);
        }
        ArithFailed::CasMismatch => echo(out, MetaCode::Ex, flags, key, None),
    }
    Outcome::Continue
}

/// `me`.
pub(super) fn debug(key: &[u8], out: &mut Vec<u8>, ctx: &Ctx<'_>, at: &Attempt<'_>) -> Outcome {
    let now = ctx.now;
    // A look that records nothing (`u`); an item on flash is copied back.
    let opts = MetaGet {
        no_update: true,
        ..MetaGet::default()
    };
    let found = ctx
        .engine()
        .meta_get(key, now, &opts, at.fetched, at.may_read, |m| {
            let item = m.view();
            let exp = match item.exptime() {
                0 => -1,
                e => i64::from(now) - i64::from(e),
            };
            let d = MetaDebug {
                key,
                binary: item.binary_key(),
                exp,
                la: u64::from(item.idle_seconds(now)),
                cas: item.cas(),
                fetch: item.fetched(),
                cls: 1,
                size: item.stored_size() as u64,
            };
            meta_debug(out, &d);
        });
    let found = match found {
        Ok(found) => found,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    if found.is_none() {
        Reply::meta(MetaCode::En, &[]).encode(out);
    }
    Outcome::Continue
}
