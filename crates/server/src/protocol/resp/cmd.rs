//! The RESP command table and dispatch: each command's name, arity (as
//! Redis counts it: positive exact, negative at least), whether it writes,
//! its key positions (for `COMMAND INFO`), and the function that parses,
//! runs and encodes it. The commands live by family: [`strings`],
//! [`keys`], [`hashes`], [`server`] (connection and server commands,
//! MULTI/EXEC). Authentication and MULTI queueing are decided here before
//! a command runs.

pub mod args;
pub mod hashes;
pub mod keys;
pub mod server;
pub mod strings;

use super::db::{Db, Failed, HeldShard, Run};
use super::reply::Out;
use super::{Env, Session};
use crate::stats::add;
use std::sync::OnceLock;

/// One command's entry.
pub struct Spec {
    pub name: &'static str,
    /// Its `command` label in the latency histograms (`redis_<name>`).
    pub label: &'static str,
    pub arity: i32,
    pub write: bool,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub run: fn(&mut Call<'_>),
}

/// A command being run: its arguments (`args[0]` is its name), the
/// connection's output and session, the engine.
pub struct Call<'a> {
    pub args: &'a [&'a [u8]],
    pub out: &'a mut Out,
    pub sess: &'a mut Session,
    pub env: &'a Env,
    pub db: Db<'a>,
    pub spec: &'static Spec,
}

impl Call<'_> {
    /// The command's name, lowercase.
    pub fn name(&self) -> &'static str {
        self.spec.name
    }
    pub fn arity_error(&mut self) {
        let n = self.name();
        self.out
            .err(&format!("ERR wrong number of arguments for '{n}' command"));
    }
    /// A get of one key, in memcached's counters (`cmd_get`, hits, misses).
    pub fn count_get(&self, hit: bool) {
        if self.db.stopped() {
            return;
        }
        let s = &self.sess.stats;
        add(&s.cmd_get, 1);
        add(if hit { &s.get_hits } else { &s.get_misses }, 1);
    }

    /// An integer reply, or the error of a failed write or of the command.
    pub fn int_reply<T: TryInto<i64>>(&mut self, r: Result<Result<T, &str>, Failed>) {
        match r {
            Err(f) => self.out.err(f.text()),
            Ok(Err(e)) => self.out.err(e),
            Ok(Ok(n)) => self.out.int(n.try_into().unwrap_or(i64::MAX)),
        }
    }
}

macro_rules! spec {
    ($name:literal, $arity:expr, $write:expr, $f:expr, $l:expr, $s:expr, $run:path) => {
        Spec {
            name: $name,
            label: concat!("redis_", $name),
            arity: $arity,
            write: $write,
            first_key: $f,
            last_key: $l,
            step: $s,
            run: $run,
        }
    };
}

/// Every command served.
pub static COMMANDS: &[Spec] = &[
    // strings
    spec!("get", 2, false, 1, 1, 1, strings::get),
    spec!("set", -3, true, 1, 1, 1, strings::set),
    spec!("setnx", 3, true, 1, 1, 1, strings::setnx),
    spec!("setex", 4, true, 1, 1, 1, strings::setex),
    spec!("psetex", 4, true, 1, 1, 1, strings::setex),
    spec!("getset", 3, true, 1, 1, 1, strings::getset),
    spec!("getdel", 2, true, 1, 1, 1, strings::getset),
    spec!("getex", -2, true, 1, 1, 1, strings::getset),
    spec!("mget", -2, false, 1, -1, 1, strings::mget),
    spec!("mset", -3, true, 1, -1, 2, strings::mset),
    spec!("msetnx", -3, true, 1, -1, 2, strings::mset),
    spec!("append", 3, true, 1, 1, 1, strings::append),
    spec!("strlen", 2, false, 1, 1, 1, strings::strlen),
    spec!("getrange", 4, false, 1, 1, 1, strings::getrange),
    spec!("substr", 4, false, 1, 1, 1, strings::getrange),
    spec!("setrange", 4, true, 1, 1, 1, strings::setrange),
    spec!("incr", 2, true, 1, 1, 1, strings::incr),
    spec!("decr", 2, true, 1, 1, 1, strings::incr),
    spec!("incrby", 3, true, 1, 1, 1, strings::incr),
    spec!("decrby", 3, true, 1, 1, 1, strings::incr),
    spec!("incrbyfloat", 3, true, 1, 1, 1, strings::incrbyfloat),
    // keys
    spec!("del", -2, true, 1, -1, 1, keys::del),
    spec!("unlink", -2, true, 1, -1, 1, keys::del),
    spec!("exists", -2, false, 1, -1, 1, keys::exists),
    spec!("touch", -2, false, 1, -1, 1, keys::exists),
    spec!("type", 2, false, 1, 1, 1, keys::type_),
    spec!("expire", -3, true, 1, 1, 1, keys::expire),
    spec!("pexpire", -3, true, 1, 1, 1, keys::expire),
    spec!("expireat", -3, true, 1, 1, 1, keys::expire),
    spec!("pexpireat", -3, true, 1, 1, 1, keys::expire),
    spec!("ttl", 2, false, 1, 1, 1, keys::ttl),
    spec!("pttl", 2, false, 1, 1, 1, keys::ttl),
    spec!("expiretime", 2, false, 1, 1, 1, keys::ttl),
    spec!("pexpiretime", 2, false, 1, 1, 1, keys::ttl),
    spec!("persist", 2, true, 1, 1, 1, keys::persist),
    spec!("dbsize", 1, false, 0, 0, 0, keys::dbsize),
    spec!("scan", -2, false, 0, 0, 0, keys::scan),
    spec!("randomkey", 1, false, 0, 0, 0, keys::randomkey),
    // hashes
    spec!("hset", -4, true, 1, 1, 1, hashes::hset),
    spec!("hmset", -4, true, 1, 1, 1, hashes::hset),
    spec!("hsetnx", 4, true, 1, 1, 1, hashes::hset),
    spec!("hget", 3, false, 1, 1, 1, hashes::hget),
    spec!("hmget", -3, false, 1, 1, 1, hashes::hget),
    spec!("hexists", 3, false, 1, 1, 1, hashes::hget),
    spec!("hdel", -3, true, 1, 1, 1, hashes::hdel),
    spec!("hgetall", 2, false, 1, 1, 1, hashes::hgetall),
    spec!("hkeys", 2, false, 1, 1, 1, hashes::hgetall),
    spec!("hvals", 2, false, 1, 1, 1, hashes::hgetall),
    spec!("hlen", 2, false, 1, 1, 1, hashes::hgetall),
    spec!("hincrby", 4, true, 1, 1, 1, hashes::hincrby),
    // server and connection
    spec!("ping", -1, false, 0, 0, 0, server::ping),
    spec!("echo", 2, false, 0, 0, 0, server::echo),
    spec!("quit", -1, false, 0, 0, 0, server::quit),
    spec!("reset", 1, false, 0, 0, 0, server::reset),
    spec!("auth", -2, false, 0, 0, 0, server::auth),
    spec!("hello", -1, false, 0, 0, 0, server::hello),
    spec!("select", 2, false, 0, 0, 0, server::select),
    spec!("flushdb", -1, true, 0, 0, 0, server::flush),
    spec!("flushall", -1, true, 0, 0, 0, server::flush),
    spec!("info", -1, false, 0, 0, 0, server::info),
    spec!("config", -2, false, 0, 0, 0, server::config),
    spec!("client", -2, false, 0, 0, 0, server::client),
    spec!("command", -1, false, 0, 0, 0, server::command),
    spec!("time", 1, false, 0, 0, 0, server::time),
    spec!("multi", 1, false, 0, 0, 0, server::multi),
    spec!("exec", 1, false, 0, 0, 0, server::exec),
    spec!("discard", 1, false, 0, 0, 0, server::discard),
];

/// A command name of at most 15 bytes, lowercase, and its length as one
/// number (0 for a longer name: no command has one).
fn pack(name: &[u8]) -> u128 {
    if name.is_empty() || name.len() > 15 {
        return 0;
    }
    let mut b = [0u8; 16];
    b[..name.len()].copy_from_slice(name);
    b[..15].make_ascii_lowercase();
    b[15] = name.len() as u8;
    u128::from_le_bytes(b)
}

/// Slots of the command table (a power of two, over twice the commands).
const SLOTS: usize = 256;

/// A packed name's first slot.
fn slot(p: u128) -> usize {
    let x = (p as u64) ^ ((p >> 64) as u64).rotate_left(29);
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize % SLOTS
}

/// The entry of a command name, any case: a packed name looked up in an
/// open-addressing table (every request names one: no string hashing).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    static TABLE: OnceLock<Vec<(u128, Option<&'static Spec>)>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = vec![(0u128, None); SLOTS];
        for spec in COMMANDS {
            let p = pack(spec.name.as_bytes());
            let mut i = slot(p);
            while t[i].1.is_some() {
                i = (i + 1) % SLOTS;
            }
            t[i] = (p, Some(spec));
        }
        t
    });
    let p = pack(name);
    if p == 0 {
        return None;
    }
    let mut i = slot(p);
    loop {
        match table[i] {
            (_, None) => return None,
            (q, found) if q == p => return found,
            _ => i = (i + 1) % SLOTS,
        }
    }
}

/// Redis's reply to a command it does not know.
pub fn unknown(out: &mut Out, args: &[&[u8]]) {
    let mut s = format!(
        "ERR unknown command '{}', with args beginning with: ",
        printable(args[0], 128)
    );
    for a in &args[1..] {
        if s.len() >= 128 {
            break;
        }
        s.push_str(&format!("'{}' ", printable(a, 128 - s.len().min(128))));
    }
    out.err(&s);
}

/// Text for an error reply: at most `max` bytes, line ends and controls
/// as spaces (an error line cannot hold them).
fn printable(b: &[u8], max: usize) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(max)]);
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// The keys of a command as its entry places them (EXEC: those of the
/// commands queued), each given to `f`.
pub fn for_each_key(args: &[&[u8]], sess: &Session, f: &mut dyn FnMut(&[u8])) {
    let Some(spec) = lookup(args[0]) else {
        return;
    };
    if spec.name == "exec" {
        for q in sess.multi.iter().flatten() {
            let a: Vec<&[u8]> = q.iter().map(Vec::as_slice).collect();
            for_each_key(&a, sess, f);
        }
        return;
    }
    if spec.first_key <= 0 {
        return;
    }
    let n = args.len() as i32;
    let last = if spec.last_key < 0 {
        n + spec.last_key
    } else {
        spec.last_key.min(n - 1)
    };
    let mut i = spec.first_key;
    while i <= last {
        f(args[i as usize]);
        i += spec.step.max(1);
    }
}

/// A command queued in MULTI may name keys of any shards (EXEC holds
/// them all), but not be one that works on every shard: EXEC would have
/// to hold the whole cache.
fn queueable(spec: &Spec) -> Result<(), String> {
    if matches!(
        spec.name,
        "flushdb" | "flushall" | "dbsize" | "scan" | "randomkey" | "info"
    ) {
        return Err(format!(
            "CROSSSHARD '{}' works on every shard and cannot run in a MULTI/EXEC transaction",
            spec.name
        ));
    }
    Ok(())
}

/// Commands a connection may send before it has authenticated.
fn before_auth(name: &str) -> bool {
    matches!(name, "auth" | "hello" | "quit" | "reset")
}

/// Runs one command (`args` non-empty), appending its reply to `out`.
/// When `run` stops (it waits for flash, see [`super::db`]) the reply is
/// incomplete: the caller drops it and runs the command again later.
pub fn dispatch(args: &[&[u8]], out: &mut Out, sess: &mut Session, env: &Env, run: &Run<'_>) {
    dispatch_in(args, out, sess, env, run, None)
}

/// [`dispatch`], with the shard EXEC holds (its keys are in that shard).
pub fn dispatch_in(
    args: &[&[u8]],
    out: &mut Out,
    sess: &mut Session,
    env: &Env,
    run: &Run<'_>,
    held: Option<&dyn HeldShard>,
) {
    let Some(spec) = lookup(args[0]) else {
        if sess.multi.is_some() {
            sess.multi_failed = true;
        }
        return unknown(out, args);
    };
    if !sess.authed && !before_auth(spec.name) {
        return out.err("NOAUTH Authentication required.");
    }
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || n < -spec.arity {
        if sess.multi.is_some() {
            sess.multi_failed = true;
        }
        let name = spec.name;
        return out.err(&format!(
            "ERR wrong number of arguments for '{name}' command"
        ));
    }
    if sess.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "multi" | "quit" | "reset")
    {
        if let Err(e) = queueable(spec) {
            sess.multi_failed = true;
            return out.err(&e);
        }
        if let Some(q) = &mut sess.multi {
            q.push(args.iter().map(|a| a.to_vec()).collect());
        }
        return out.simple("QUEUED");
    }
    sess.last_cmd = spec.name;
    let started = run.started;
    let mark = out.buf.len();
    let mut call = Call {
        args,
        out,
        sess,
        env,
        db: Db {
            engine: &env.shared.engine,
            run,
            held,
        },
        spec,
    };
    (spec.run)(&mut call);
    if run.stopped().is_some() {
        return;
    }
    if spec.write {
        add(&sess.stats.cmd_set, 1);
    }
    let end = tiercache_engine::clock::Instant::now();
    run.finish(end);
    let took = end.saturating_duration_since(started);
    sess.stats.latency.record(took);
    if let Some(m) = &env.shared.metrics {
        let reply = &out.buf[mark..];
        let outcome = match spec.name {
            _ if reply.starts_with(b"-") => "error",
            "get" | "hget" if reply.starts_with(b"$-1") || reply.starts_with(b"_") => "miss",
            "get" | "hget" => "hit",
            "set" | "hset" | "mset" => "store",
            _ => "other",
        };
        m.observe(spec.label, outcome, took.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_finds_every_command_in_any_case_and_nothing_else() {
        for spec in COMMANDS {
            assert!(spec.name.len() <= 15, "{}", spec.name);
            let upper = spec.name.to_ascii_uppercase();
            for n in [spec.name.as_bytes(), upper.as_bytes()] {
                assert!(std::ptr::eq(lookup(n).expect(spec.name), spec));
            }
        }
        for n in [
            &b""[..],
            b"ge",
            b"gett",
            b"get\0",
            b"\0get",
            b"getgetgetgetgetget",
            b"nosuchcommand",
            b"\xff\xfe",
        ] {
            assert!(lookup(n).is_none(), "{n:?}");
        }
    }
}
