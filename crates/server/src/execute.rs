//! Executes decoded requests against the engine and composes the replies,
//! byte for byte as memcached 1.6 answers them.

use crate::shared::Shared;
use crate::stats::{add, bump, WorkerStats};
use std::cell::{Cell, RefCell};
use tiercache_engine::clock::absolute_exptime;
use tiercache_engine::command::{MetaDeleted, Wait};
use tiercache_engine::flash::io::Reader;
use tiercache_engine::flash::Fetched;
use tiercache_engine::item::{Header, HEADER};
use tiercache_engine::item::{FETCHED, KEY_BINARY, STALE, TOKEN_SENT};
use tiercache_engine::ops::{self, ArithResult, Mode, StoreArgs, StoreResult};
use tiercache_engine::shard::{InsertError, Shard};
use tiercache_engine::{Engine, NewItem};
use tiercache_proto::request::errors;
use tiercache_proto::response as resp;
use tiercache_proto::{Get, MetaFlags, Request, Store, StoreMode};

/// What the connection does after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// Close once pending output is written (`quit`).
    Close,
    /// Stop the server (`shutdown`, when enabled).
    Shutdown,
}

/// Per-request context.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub stats: &'a WorkerStats,
    pub now: u32,
    /// Set when a request changed nothing because the flash tier is behind
    /// (back-pressure): the connection drops its reply and runs it again later.
    pub retry: Cell<bool>,
    /// Set when a get missed in RAM but its key may be on flash, or a plain
    /// set wants its tag's flash records read first: the connection drops
    /// the reply, reads the records and runs the request again.
    pub need_flash: Cell<bool>,
    /// Set by the connection for a plain set's first run (see
    /// `prefetch::verifies_first`): a set whose key has flash entries under
    /// its tag, while reading them has been paying, asks for the reads
    /// (`need_flash`) instead of storing. Found in the store's own lock hold,
    /// so a set with nothing on flash locks its shard once.
    pub verify_first: Cell<bool>,
    /// Set by the connection while a delete that missed may still have its
    /// key's flash records read again (its key moved to flash between the
    /// reads and the run); after a few such runs the delete drops every
    /// entry under the key's tag instead of reading again.
    pub refetch: Cell<bool>,
    /// Output length at which a multiget stops after the key it is at
    /// (the connection's output bound; `usize::MAX`: never).
    pub out_limit: Cell<usize>,
    /// Set by a multiget that stopped at `out_limit`: the offset in its
    /// keys of the first key not answered. It wrote no `END`; the
    /// connection runs the rest of its keys once the output has drained.
    pub get_stopped: Cell<Option<usize>>,
    /// The worker's flash reader, when there is a flash tier.
    pub reader: Option<&'a RefCell<Box<dyn Reader>>>,
}

impl Ctx<'_> {
    fn engine(&self) -> &Engine {
        &self.shared.engine
    }
    fn exptime(&self, e: i32) -> u32 {
        absolute_exptime(i64::from(e), self.now)
    }
}

fn reply(out: &mut Vec<u8>, noreply: bool, line: &[u8]) {
    if !noreply {
        resp::line(out, line);
    }
}

/// Executes one request, appending its reply to `out`. `fetched` holds the
/// verified flash records of its keys (see `prefetch`).
pub fn execute(req: Request<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, fetched: &Fetched) -> Outcome {
    match req {
        Request::Get(g) => get(&g, out, ctx, fetched),
        Request::Store(s) => store(&s, out, ctx, fetched),
        Request::Delete { key, noreply } => {
            let found = match ctx
                .engine()
                .delete(key, ctx.now, fetched, ctx.refetch.get())
            {
                Ok(found) => found,
                Err(w) => return wait(w, ctx),
            };
            ctx.shared.detail.record_delete(key);
            if found {
                bump(&ctx.stats.delete_hits);
                reply(out, noreply, b"DELETED");
            } else {
                bump(&ctx.stats.delete_misses);
                reply(out, noreply, b"NOT_FOUND");
            }
        }
        Request::Arith {
            incr,
            key,
            delta,
            noreply,
        } => arith(incr, key, delta, noreply, out, ctx),
        Request::Touch {
            key,
            exptime,
            noreply,
        } => {
            let found = match ctx.engine().touch(key, ctx.exptime(exptime), ctx.now) {
                Ok(found) => found,
                Err(w) => return wait(w, ctx),
            };
            bump(&ctx.stats.cmd_touch);
            if found {
                bump(&ctx.stats.touch_hits);
                reply(out, noreply, b"TOUCHED");
            } else {
                bump(&ctx.stats.touch_misses);
                reply(out, noreply, b"NOT_FOUND");
            }
        }
        Request::FlushAll { delay, noreply } => {
            if !ctx.engine().flush_gate() {
                ctx.retry.set(true);
                return Outcome::Continue;
            }
            bump(&ctx.stats.cmd_flush);
            ctx.engine().flush_all(i64::from(delay), ctx.now);
            reply(out, noreply, b"OK");
        }
        Request::Version => {
            out.extend_from_slice(b"VERSION ");
            resp::line(out, crate::VERSION.as_bytes());
        }
        Request::Verbosity { noreply } => reply(out, noreply, b"OK"),
        Request::Quit => return Outcome::Close,
        Request::Stats(args) => crate::shared::stats_command(args, out, ctx),
        Request::Shutdown { .. } => {
            if !ctx.shared.config.server.enable_shutdown {
                resp::line(out, b"ERROR: shutdown not enabled");
            } else {
                return Outcome::Shutdown;
            }
        }
        Request::CacheMemlimit { megabytes, noreply } => {
            if megabytes < 8 {
                reply(
                    out,
                    noreply,
                    b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
                );
            } else {
                reply(
                    out,
                    noreply,
                    b"MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust",
                );
            }
        }
        Request::MetaGet { key, flags } => meta_get(&key, &flags, out, ctx),
        Request::MetaSet { key, data, flags } => meta_set(&key, data, &flags, out, ctx, fetched),
        Request::MetaDelete { key, flags } => meta_delete(&key, &flags, out, ctx),
        Request::MetaArith { key, flags } => meta_arith(&key, &flags, out, ctx),
        Request::MetaNoop => resp::line(out, b"MN"),
        Request::MetaDebug { key } => meta_debug(&key, out, ctx),
        Request::StoreRefused {
            key,
            classic,
            remove_existing,
            reply: r,
            noreply,
        } => {
            if classic {
                ctx.shared.detail.record_set(&key);
            }
            bump(&ctx.stats.store_too_large);
            if remove_existing {
                if let Err(w) = ctx.engine().remove_refused(&key, ctx.now) {
                    return wait(w, ctx);
                }
            }
            reply(out, noreply, r.line());
        }
        Request::Error { reply: r, noreply } => reply(out, noreply, r.line()),
        Request::GetKeyTooLong => resp::line(out, errors::BAD_FORMAT.as_bytes()),
        Request::HttpHangup => return Outcome::Close,
    }
    Outcome::Continue
}

/// An engine command that changed nothing: run the request again once the
/// journal commits, or once the key's flash records are read.
fn wait(w: Wait, ctx: &Ctx<'_>) -> Outcome {
    match w {
        Wait::Journal => ctx.retry.set(true),
        Wait::Reads => ctx.need_flash.set(true),
    }
    Outcome::Continue
}

/// `VALUE key flags bytes [cas]`, the value and its line end.
fn value_reply(out: &mut Vec<u8>, key: &[u8], h: &Header, value: &[u8], return_cas: bool) {
    resp::value_header(out, key, h.flags, value.len(), return_cas.then_some(h.cas));
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

fn get(g: &Get<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, fetched: &Fetched) {
    let touch = g.touch.map(|t| ctx.exptime(t));
    let (mut hits, mut misses) = (0u64, 0u64);
    // For `stats detail`, counted once the get is not run again.
    let detail = ctx.shared.detail.enabled();
    let mut looked_up: Vec<(&[u8], bool)> = Vec::new();
    for key in g.keys() {
        if hits + misses > 0 && out.len() >= ctx.out_limit.get() {
            let at = key.as_ptr() as usize - g.keys.as_ptr() as usize;
            ctx.get_stopped.set(Some(at));
            break;
        }
        if let Some(e) = touch {
            let reply = |h: &Header, v: &[u8]| value_reply(out, key, h, v, g.return_cas);
            match ctx.engine().touch_with(key, e, ctx.now, reply) {
                Err(w) => {
                    wait(w, ctx);
                    return;
                }
                Ok(found) => {
                    if found.is_some() {
                        hits += 1;
                    } else {
                        misses += 1;
                    }
                    if detail {
                        looked_up.push((key, found.is_some()));
                    }
                    continue;
                }
            }
        }
        let hash = Engine::hash(key);
        let mut s = ctx.engine().lock(hash, ctx.now);
        if let Some(loc) = s.find(key, hash, ctx.now) {
            let loc = s.hit(hash, loc, ctx.now);
            value_reply(out, key, &s.header(loc), s.value(loc), g.return_cas);
            hits += 1;
            if detail {
                looked_up.push((key, true));
            }
            continue;
        }
        if let Some(loc) = s.flash_lookup(key, hash, ctx.now, fetched) {
            let item = fetched.item(loc).expect("looked up");
            s.flash_hit(hash, loc, item);
            drop(s);
            let h = Header::read(item);
            let k = HEADER + h.klen as usize;
            value_reply(out, key, &h, &item[k..k + h.vlen as usize], g.return_cas);
            hits += 1;
            if detail {
                looked_up.push((key, true));
            }
            continue;
        }
        if s.needs_fetch(hash, fetched) {
            ctx.need_flash.set(true);
        }
        misses += 1;
        if detail {
            looked_up.push((key, false));
        }
    }
    if ctx.get_stopped.get().is_none() {
        out.extend_from_slice(b"END\r\n");
    }
    // A get that must read flash first runs again: count it once, then.
    if ctx.need_flash.get() {
        return;
    }
    for (key, hit) in looked_up {
        ctx.shared.detail.record_get(key, hit);
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
}

fn mode_of(m: StoreMode) -> Mode {
    match m {
        StoreMode::Set => Mode::Set,
        StoreMode::Add => Mode::Add,
        StoreMode::Replace => Mode::Replace,
        StoreMode::Append => Mode::Append,
        StoreMode::Prepend => Mode::Prepend,
        StoreMode::Cas => Mode::Cas,
    }
}

/// Runs a store. `fetched` may hold the flash records under the key's tag
/// (read by `prefetch`): those of other keys are kept.
/// Stores, or returns None when a plain set's first run finds same-tag
/// entries on flash worth reading first (`Ctx::verify_first`).
fn run_store(a: &StoreArgs<'_>, ctx: &Ctx<'_>, fetched: &Fetched) -> Option<StoreResult> {
    let mut s = ctx.engine().lock(a.hash, ctx.now);
    if ctx.verify_first.get() && fetched.is_empty() && s.worth_verifying(a.hash) {
        ctx.need_flash.set(true);
        return None;
    }
    let keep = s.other_keys_on_flash(a.key, a.hash, fetched);
    let r = ops::store_keeping(&mut s, a, ctx.now, &keep);
    drop(s);
    if r == StoreResult::Busy {
        ctx.retry.set(true);
        return Some(r);
    }
    bump(&ctx.stats.cmd_set);
    if a.mode == Mode::Cas {
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
    Some(r)
}

fn store(s: &Store<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>, fetched: &Fetched) {
    let a = StoreArgs {
        mode: mode_of(s.mode),
        key: s.key,
        hash: Engine::hash(s.key),
        flags: s.flags,
        exptime: ctx.exptime(s.exptime),
        data: s.data,
        compare_cas: s.cas,
        new_cas: 0,
        set_stale: false,
        binary_key: false,
    };
    let Some(r) = run_store(&a, ctx, fetched) else {
        return;
    };
    if r != StoreResult::Busy {
        ctx.shared.detail.record_set(s.key);
    }
    let line: &[u8] = match r {
        StoreResult::Stored { .. } => b"STORED",
        StoreResult::NotStored => b"NOT_STORED",
        StoreResult::Exists => b"EXISTS",
        StoreResult::NotFound => b"NOT_FOUND",
        // memcached refuses an append/prepend that outgrows the item limit as NOT_STORED.
        StoreResult::TooLarge if matches!(s.mode, StoreMode::Append | StoreMode::Prepend) => {
            b"NOT_STORED"
        }
        StoreResult::TooLarge => errors::TOO_LARGE.as_bytes(),
        StoreResult::NoMemory | StoreResult::Busy => errors::OUT_OF_MEMORY.as_bytes(),
    };
    reply(out, s.noreply, line);
}

fn arith(incr: bool, key: &[u8], delta: u64, noreply: bool, out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    let hash = Engine::hash(key);
    let r = ops::arith(
        &mut ctx.engine().lock(hash, ctx.now),
        key,
        hash,
        incr,
        delta,
        0,
        ctx.now,
    );
    if r == ArithResult::Busy {
        ctx.retry.set(true);
    }
    let (hits, misses) = if incr {
        (&ctx.stats.incr_hits, &ctx.stats.incr_misses)
    } else {
        (&ctx.stats.decr_hits, &ctx.stats.decr_misses)
    };
    match r {
        ArithResult::Ok { value, .. } => {
            bump(hits);
            if !noreply {
                resp::number(out, value);
                out.extend_from_slice(b"\r\n");
            }
        }
        ArithResult::NotFound => {
            bump(misses);
            reply(out, noreply, b"NOT_FOUND");
        }
        ArithResult::NonNumeric => reply(out, noreply, errors::NON_NUMERIC.as_bytes()),
        ArithResult::CasMismatch => reply(out, noreply, b"EXISTS"),
        ArithResult::NoMemory | ArithResult::Busy => {
            reply(out, noreply, b"SERVER_ERROR out of memory")
        }
    }
}

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

fn meta_get(key: &[u8], flags: &MetaFlags<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    bump(&ctx.stats.cmd_meta);
    let hash = Engine::hash(key);
    let now = ctx.now;
    // mg T changes the item's exptime: the lock comes with the permission.
    let (mut s, allowed) = if flags.order.iter().any(|t| t[0] == b'T') {
        match ctx.engine().lock_to_change(key, now) {
            Ok((s, ok)) => (s, Some(ok)),
            Err(w) => {
                wait(w, ctx);
                return;
            }
        }
    } else {
        (ctx.engine().lock(hash, now), None)
    };
    let mut created = false;
    let mut loc = s.find(key, hash, now);
    if loc.is_none() {
        if let Some(n) = flags.vivify {
            let new = NewItem {
                exptime: ctx.exptime(n),
                bits: if flags.base64_key { KEY_BINARY } else { 0 },
                ..Default::default()
            };
            match s.insert(key, hash, new, &[]) {
                Ok(l) => {
                    loc = Some(l);
                    created = true;
                }
                Err(InsertError::Busy) => {
                    ctx.retry.set(true);
                    return;
                }
                Err(_) => {}
            }
        }
    }
    let Some(loc) = loc else {
        drop(s);
        bump(&ctx.stats.cmd_get);
        bump(&ctx.stats.get_misses);
        if !flags.quiet {
            out.extend_from_slice(b"EN");
            echo_opaque_and_key(out, flags, key, flags.base64_key);
            out.extend_from_slice(b"\r\n");
        }
        return;
    };
    let before = s.header(loc);
    let vlen = before.vlen as u64;
    if flags.value {
        out.extend_from_slice(b"VA ");
        resp::number(out, vlen);
    } else {
        out.extend_from_slice(b"HD");
    }
    let mut won = false;
    let mut ttl_set = false;
    for tok in &flags.order {
        match tok[0] {
            b'T' => {
                ttl_set = true;
                let ok = allowed.as_ref().expect("gated above");
                s.set_exptime(loc, ctx.exptime(flags.ttl.unwrap_or(0)), ok);
            }
            b'N' if created => won = true,
            b'R' => {
                let h = s.header(loc);
                let recache = ctx.exptime(flags.recache.unwrap_or(0));
                if h.bits & TOKEN_SENT == 0 && !created && h.exptime != 0 && h.exptime < recache {
                    won = true;
                }
            }
            b's' => resp::meta_num(out, b's', vlen),
            b't' => {
                let e = s.header(loc).exptime;
                out.extend_from_slice(b" t");
                if e == 0 {
                    out.extend_from_slice(b"-1");
                } else {
                    resp::number(out, u64::from(e.wrapping_sub(now)));
                }
            }
            b'c' => resp::meta_num(out, b'c', s.header(loc).cas),
            b'f' => resp::meta_num(out, b'f', u64::from(before.flags)),
            b'l' => resp::meta_num(
                out,
                b'l',
                u64::from((now as u16).wrapping_sub(before.atime)),
            ),
            b'h' => resp::meta_num(out, b'h', u64::from(before.bits & FETCHED != 0)),
            b'O' => resp::meta_token(out, tok),
            b'k' => resp::meta_key(out, key, before.bits & KEY_BINARY != 0),
            _ => {}
        }
    }
    let bits = s.header(loc).bits;
    if bits & TOKEN_SENT != 0 {
        out.extend_from_slice(b" Z");
    }
    if bits & STALE != 0 {
        out.extend_from_slice(b" X");
        if bits & TOKEN_SENT == 0 {
            won = true;
        }
    }
    if won {
        out.extend_from_slice(b" W");
        s.mark_token_sent(loc);
    }
    out.extend_from_slice(b"\r\n");
    if flags.value {
        out.extend_from_slice(s.value(loc));
        out.extend_from_slice(b"\r\n");
    }
    if !flags.no_update {
        s.hit(hash, loc, now);
    }
    drop(s);
    if ttl_set {
        bump(&ctx.stats.cmd_touch);
        bump(&ctx.stats.touch_hits);
    } else {
        bump(&ctx.stats.cmd_get);
        bump(&ctx.stats.get_hits);
    }
}

fn meta_set(
    key: &[u8],
    data: &[u8],
    flags: &MetaFlags<'_>,
    out: &mut Vec<u8>,
    ctx: &Ctx<'_>,
    fetched: &Fetched,
) {
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
    let a = StoreArgs {
        mode,
        key,
        hash: Engine::hash(key),
        flags: flags.client_flags,
        exptime: flags.ttl.map(|t| ctx.exptime(t)).unwrap_or(0),
        data,
        compare_cas: flags.compare_cas.unwrap_or(0),
        new_cas: 0,
        set_stale: flags.invalidate && mode == Mode::Cas,
        binary_key: flags.base64_key,
    };
    let Some(r) = run_store(&a, ctx, fetched) else {
        return;
    };
    bump(&ctx.stats.cmd_meta);
    let code: &[u8] = match r {
        StoreResult::Stored { .. } => {
            if flags.quiet {
                return;
            }
            b"HD"
        }
        StoreResult::NotStored => b"NS",
        StoreResult::Exists => b"EX",
        StoreResult::NotFound => b"NF",
        StoreResult::TooLarge => return resp::line(out, errors::TOO_LARGE.as_bytes()),
        StoreResult::NoMemory | StoreResult::Busy => {
            return resp::line(out, errors::OUT_OF_MEMORY.as_bytes())
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
}

fn meta_delete(key: &[u8], flags: &MetaFlags<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    bump(&ctx.stats.cmd_meta);
    let invalidate = flags.invalidate.then(|| flags.ttl.map(|t| ctx.exptime(t)));
    let code: &[u8] = match ctx
        .engine()
        .meta_delete(key, ctx.now, flags.compare_cas, invalidate)
    {
        Err(w) => {
            wait(w, ctx);
            return;
        }
        Ok(MetaDeleted::NotFound) => {
            bump(&ctx.stats.delete_misses);
            b"NF"
        }
        Ok(MetaDeleted::Exists) => {
            bump(&ctx.stats.delete_misses);
            b"EX"
        }
        Ok(done) => {
            if done == MetaDeleted::Deleted {
                bump(&ctx.stats.delete_hits);
            }
            if flags.quiet {
                return;
            }
            b"HD"
        }
    };
    out.extend_from_slice(code);
    echo_opaque_and_key(out, flags, key, flags.base64_key);
    out.extend_from_slice(b"\r\n");
}

fn meta_arith(key: &[u8], flags: &MetaFlags<'_>, out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    bump(&ctx.stats.cmd_meta);
    let incr = !matches!(flags.mode, Some(b'D' | b'd' | b'-'));
    let hash = Engine::hash(key);
    let now = ctx.now;
    let mut s = ctx.engine().lock(hash, now);
    let mut created = false;
    let r = ops::arith(
        &mut s,
        key,
        hash,
        incr,
        flags.delta,
        flags.compare_cas.unwrap_or(0),
        now,
    );
    let (hits, misses) = if incr {
        (&ctx.stats.incr_hits, &ctx.stats.incr_misses)
    } else {
        (&ctx.stats.decr_hits, &ctx.stats.decr_misses)
    };
    let (value, loc) = match r {
        ArithResult::Busy => {
            ctx.retry.set(true);
            return;
        }
        ArithResult::Ok { value, loc, .. } => {
            bump(hits);
            (value, loc)
        }
        ArithResult::NotFound if flags.vivify.is_some() => {
            let digits = flags.initial.to_string();
            let new = NewItem {
                bits: if flags.base64_key { KEY_BINARY } else { 0 },
                ..Default::default()
            };
            match s.insert(key, hash, new, &[digits.as_bytes()]) {
                Ok(loc) => {
                    created = true;
                    (flags.initial, loc)
                }
                Err(InsertError::Busy) => {
                    ctx.retry.set(true);
                    return;
                }
                Err(_) => {
                    return resp::line(out, b"SERVER_ERROR Out of memory allocating new item")
                }
            }
        }
        ArithResult::NonNumeric => return resp::line(out, errors::NON_NUMERIC.as_bytes()),
        ArithResult::NoMemory => return resp::line(out, b"SERVER_ERROR out of memory"),
        ArithResult::NotFound | ArithResult::CasMismatch => {
            drop(s);
            out.extend_from_slice(if r == ArithResult::NotFound {
                bump(misses);
                b"NF"
            } else {
                b"EX"
            });
            echo_opaque_and_key(out, flags, key, flags.base64_key);
            out.extend_from_slice(b"\r\n");
            return;
        }
    };
    // The change above passed the journal gate in this lock hold, so asking
    // again is immediate (never a retry, which would apply the change
    // twice); T and N change the exptime under it.
    let ok = s.journal_gate(key, hash);
    let set_ttl = |s: &mut Shard, t: u8| match (t, &ok) {
        (b'T', Some(ok)) => s.set_exptime(loc, ctx.exptime(flags.ttl.unwrap_or(0)), ok),
        (b'N', Some(ok)) if created => {
            s.set_exptime(loc, ctx.exptime(flags.vivify.unwrap_or(0)), ok)
        }
        _ => {}
    };
    if flags.quiet {
        for tok in &flags.order {
            set_ttl(&mut s, tok[0]);
        }
        return;
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
            b'c' => resp::meta_num(out, b'c', s.header(loc).cas),
            b't' => {
                let e = s.header(loc).exptime;
                out.extend_from_slice(b" t");
                if e == 0 {
                    out.extend_from_slice(b"-1");
                } else {
                    resp::number(out, u64::from(e.wrapping_sub(now)));
                }
            }
            b'T' | b'N' => set_ttl(&mut s, tok[0]),
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
}

fn meta_debug(key: &[u8], out: &mut Vec<u8>, ctx: &Ctx<'_>) {
    bump(&ctx.stats.cmd_meta);
    let hash = Engine::hash(key);
    let now = ctx.now;
    let s = &mut ctx.engine().lock(hash, now);
    let Some(loc) = s.find(key, hash, now) else {
        resp::line(out, b"EN");
        return;
    };
    let h = s.header(loc);
    out.extend_from_slice(b"ME ");
    if h.bits & KEY_BINARY != 0 {
        let mut k = Vec::new();
        resp::meta_key(&mut k, key, true);
        out.extend_from_slice(&k[2..k.len() - 2]);
    } else {
        out.extend_from_slice(key);
    }
    let exp: i64 = if h.exptime == 0 {
        -1
    } else {
        i64::from(now) - i64::from(h.exptime)
    };
    let line = format!(
        " exp={} la={} cas={} fetch={} cls=1 size={}\r\n",
        exp,
        (now as u16).wrapping_sub(h.atime),
        h.cas,
        if h.bits & FETCHED != 0 { "yes" } else { "no" },
        h.size()
    );
    out.extend_from_slice(line.as_bytes());
}

/// Counts bytes read from clients.
pub fn count_read(stats: &WorkerStats, n: usize) {
    add(&stats.bytes_read, n as u64);
}
