//! The meta commands (`mg`, `ms`, `md`, `ma`, `me`): the engine runs each
//! and hands back the item; the return flags are written here in the
//! client's order, as memcached writes them.

use super::{meta_deleted, run_store, Ctx, Outcome};
use crate::stats::bump;
use tiercache_engine::command::{ArithFailed, MetaArith, MetaGet, MetaItem, Mode};
use tiercache_engine::command::{Store as StoreCmd, StoreResult};
use tiercache_proto::request::errors;
use tiercache_proto::response as resp;
use tiercache_proto::MetaFlags;

/// Appends the opaque and key flags, the only ones echoed on misses and by md/ms.
fn echo_opaque_and_key(out: &mut Vec<u8>, flags: &MetaFlags<'_>, key: &[u8], binary: bool) {
    for tok in &flags.order {
        match tok[0] {
            b'O' => resp::meta_token(out, tok),
            b'k' => resp::meta_key(out, key, binary),
            _ => {}
        }
    }
}

/// ` t<seconds left>`, or ` t-1` for an item that never expires.
fn ttl_flag(out: &mut Vec<u8>, exptime: u32, now: u32) {
    out.extend_from_slice(b" t");
    if exptime == 0 {
        out.extend_from_slice(b"-1");
    } else {
        resp::number(out, u64::from(exptime.wrapping_sub(now)));
    }
}

/// `mg`.
pub(super) fn get(key: &[u8], flags: &MetaFlags<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>) -> Outcome {
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
        let vlen = v.value().len() as u64;
        let (client_flags, idle, fetched, binary) =
            (v.flags(), v.idle_seconds(now), v.fetched(), v.binary_key());
        if flags.value {
            out.extend_from_slice(b"VA ");
            resp::number(out, vlen);
        } else {
            out.extend_from_slice(b"HD");
        }
        for tok in &flags.order {
            match tok[0] {
                b'T' => item.set_exptime(ctx.exptime(flags.ttl.unwrap_or(0))),
                b'R' => item.recache(ctx.exptime(flags.recache.unwrap_or(0))),
                b's' => resp::meta_num(out, b's', vlen),
                b't' => ttl_flag(out, item.view().exptime(), now),
                b'c' => resp::meta_num(out, b'c', item.view().cas()),
                b'f' => resp::meta_num(out, b'f', u64::from(client_flags)),
                b'l' => resp::meta_num(out, b'l', u64::from(idle)),
                b'h' => resp::meta_num(out, b'h', u64::from(fetched)),
                b'O' => resp::meta_token(out, tok),
                b'k' => resp::meta_key(out, key, binary),
                _ => {}
            }
        }
        let token = item.token();
        if token.sent_before {
            out.extend_from_slice(b" Z");
        }
        if token.stale {
            out.extend_from_slice(b" X");
        }
        if token.won {
            out.extend_from_slice(b" W");
        }
        out.extend_from_slice(b"\r\n");
        if flags.value {
            out.extend_from_slice(item.view().value());
            out.extend_from_slice(b"\r\n");
        }
    };
    let r = match ctx.engine().meta_get(key, now, &opts, reply) {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    match r {
        Some(()) => {
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
                out.extend_from_slice(b"EN");
                echo_opaque_and_key(out, flags, key, flags.base64_key);
                out.extend_from_slice(b"\r\n");
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
    let code: &[u8] = match r {
        StoreResult::Stored { .. } => {
            if flags.quiet {
                return Outcome::Continue;
            }
            b"HD"
        }
        StoreResult::NotStored => b"NS",
        StoreResult::Exists => b"EX",
        StoreResult::NotFound => b"NF",
        StoreResult::TooLarge => {
            resp::line(out, errors::TOO_LARGE.as_bytes());
            return Outcome::Continue;
        }
        StoreResult::NoMemory | StoreResult::Busy => {
            resp::line(out, errors::OUT_OF_MEMORY.as_bytes());
            return Outcome::Continue;
        }
    };
    out.extend_from_slice(code);
    for tok in &flags.order {
        match tok[0] {
            b'O' => resp::meta_token(out, tok),
            b'k' => resp::meta_key(out, key, flags.base64_key),
            b'c' => {
                let cas = match r {
                    StoreResult::Stored { cas } => cas,
                    _ => 0,
                };
                resp::meta_num(out, b'c', cas);
            }
            _ => {}
        }
    }
    out.extend_from_slice(b"\r\n");
    Outcome::Continue
}

/// `md`.
pub(super) fn delete(
    key: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
) -> Outcome {
    let invalidate = flags.invalidate.then(|| flags.ttl.map(|t| ctx.exptime(t)));
    let r = match ctx
        .engine()
        .meta_delete(key, ctx.now, flags.compare_cas, invalidate)
    {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
    meta_deleted(ctx, r);
    use tiercache_engine::command::MetaDeleted;
    let code: &[u8] = match r {
        MetaDeleted::NotFound => b"NF",
        MetaDeleted::Exists => b"EX",
        MetaDeleted::Deleted | MetaDeleted::Invalidated => {
            if flags.quiet {
                return Outcome::Continue;
            }
            b"HD"
        }
    };
    out.extend_from_slice(code);
    echo_opaque_and_key(out, flags, key, flags.base64_key);
    out.extend_from_slice(b"\r\n");
    Outcome::Continue
}

/// `ma`.
pub(super) fn arith(
    key: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
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
        if flags.value {
            out.extend_from_slice(b"VA ");
            resp::number(out, digits.len() as u64);
        } else {
            out.extend_from_slice(b"HD");
        }
        for tok in &flags.order {
            match tok[0] {
                b'c' => resp::meta_num(out, b'c', item.view().cas()),
                b't' => ttl_flag(out, item.view().exptime(), now),
                b'T' | b'N' => set_ttl(item, tok[0]),
                b'O' => resp::meta_token(out, tok),
                b'k' => resp::meta_key(out, key, flags.base64_key),
                _ => {}
            }
        }
        if flags.value {
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(digits.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        item.created()
    };
    let r = match ctx.engine().meta_arith(key, now, &a, reply) {
        Ok(r) => r,
        Err(w) => return Outcome::Wait(w),
    };
    bump(&ctx.stats.cmd_meta);
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
        ArithFailed::NonNumeric => resp::line(out, errors::NON_NUMERIC.as_bytes()),
        ArithFailed::NoMemory => resp::line(out, b"SERVER_ERROR out of memory"),
        ArithFailed::NoMemoryForNew => {
            resp::line(out, b"SERVER_ERROR Out of memory allocating new item")
        }
        ArithFailed::NotFound | ArithFailed::CasMismatch => {
            out.extend_from_slice(if failed == ArithFailed::NotFound {
                bump(misses);
                b"NF"
            } else {
                b"EX"
            });
            echo_opaque_and_key(out, flags, key, flags.base64_key);
            out.extend_from_slice(b"\r\n");
        }
    }
    Outcome::Continue
}

/// `me`.
pub(super) fn debug(key: &[u8], out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    bump(&ctx.stats.cmd_meta);
    let now = ctx.now;
    let found = ctx.engine().peek_ram(key, now, |item| {
        out.extend_from_slice(b"ME ");
        if item.binary_key() {
            let mut k = Vec::new();
            resp::meta_key(&mut k, key, true);
            out.extend_from_slice(&k[2..k.len() - 2]);
        } else {
            out.extend_from_slice(key);
        }
        let exp: i64 = if item.exptime() == 0 {
            -1
        } else {
            i64::from(now) - i64::from(item.exptime())
        };
        let line = format!(
            " exp={} la={} cas={} fetch={} cls=1 size={}\r\n",
            exp,
            item.idle_seconds(now),
            item.cas(),
            if item.fetched() { "yes" } else { "no" },
            item.stored_size()
        );
        out.extend_from_slice(line.as_bytes());
    });
    if found.is_none() {
        resp::line(out, b"EN");
    }
}
