//! Connection and server commands: PING, ECHO, QUIT, RESET, AUTH, HELLO,
//! SELECT, FLUSHDB/FLUSHALL, INFO, CONFIG, CLIENT, COMMAND, TIME and
//! MULTI/EXEC/DISCARD.

use super::args::{int, is, NOT_INT, SYNTAX};
use super::keys::glob;
use super::{Call, COMMANDS};
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// The Redis version reported (HELLO, INFO): the one whose replies and
/// errors tiercache follows.
pub const REDIS_VERSION: &str = "7.0.15";

pub fn ping(c: &mut Call<'_>) {
    match c.args.len() {
        1 => c.out.simple("PONG"),
        2 => c.out.bulk(c.args[1]),
        _ => c.arity_error(),
    }
}

pub fn echo(c: &mut Call<'_>) {
    c.out.bulk(c.args[1]);
}

pub fn quit(c: &mut Call<'_>) {
    c.out.ok();
    c.sess.close = true;
}

pub fn reset(c: &mut Call<'_>) {
    c.sess.multi = None;
    c.sess.multi_failed = false;
    c.sess.name.clear();
    c.sess.authed = !c.env.needs_auth();
    c.out.resp3 = false;
    c.out.simple("RESET");
}

/// Checks a password (`-Y` file; one argument is user `default`).
fn check(c: &mut Call<'_>, user: &[u8], pass: &[u8]) -> Result<(), &'static str> {
    let Some(a) = &c.env.shared.auth else {
        return Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?");
    };
    match a.check(user, pass) {
        true => {
            c.sess.authed = true;
            Ok(())
        }
        false => Err("WRONGPASS invalid username-password pair or user is disabled."),
    }
}

pub fn auth(c: &mut Call<'_>) {
    let r = match c.args {
        [_, p] => check(c, b"default", p),
        [_, u, p] => check(c, u, p),
        _ => return c.out.err(SYNTAX),
    };
    match r {
        Ok(()) => c.out.ok(),
        Err(e) => c.out.err(e),
    }
}

/// HELLO [protover [AUTH user pass] [SETNAME name]].
pub fn hello(c: &mut Call<'_>) {
    let mut resp3 = c.out.resp3;
    if let Some(v) = c.args.get(1) {
        match int(v) {
            None => {
                return c
                    .out
                    .err("ERR Protocol version is not an integer or out of range")
            }
            Some(2) => resp3 = false,
            Some(3) => resp3 = true,
            Some(_) => return c.out.err("NOPROTO unsupported protocol version"),
        }
    }
    let mut i = 2;
    let mut name = None;
    while i < c.args.len() {
        let more = c.args.len() - i - 1;
        if is(c.args[i], "AUTH") && more >= 2 {
            let (u, p) = (c.args[i + 1], c.args[i + 2]);
            if let Err(e) = check(c, u, p) {
                return c.out.err(e);
            }
            i += 3;
        } else if is(c.args[i], "SETNAME") && more >= 1 {
            name = Some(c.args[i + 1]);
            i += 2;
        } else {
            let a = String::from_utf8_lossy(c.args[i]);
            return c
                .out
                .err(&format!("ERR Syntax error in HELLO option '{a}'"));
        }
    }
    if !c.sess.authed {
        return c.out.err("NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time");
    }
    if let Some(n) = name {
        if !valid_name(n) {
            return c.out.err(BAD_NAME);
        }
        c.sess.name = n.to_vec();
    }
    c.out.resp3 = resp3;
    let o = &mut *c.out;
    o.map(7);
    o.bulk_str("server");
    o.bulk_str("redis");
    o.bulk_str("version");
    o.bulk_str(REDIS_VERSION);
    o.bulk_str("proto");
    o.int(if resp3 { 3 } else { 2 });
    o.bulk_str("id");
    o.int(c.sess.id as i64);
    o.bulk_str("mode");
    o.bulk_str("standalone");
    o.bulk_str("role");
    o.bulk_str("master");
    o.bulk_str("modules");
    o.array(0);
}

pub fn select(c: &mut Call<'_>) {
    match int(c.args[1]) {
        Some(0) => c.out.ok(),
        Some(_) => c.out.err("ERR DB index is out of range"),
        None => c.out.err(NOT_INT),
    }
}

/// FLUSHDB, FLUSHALL [ASYNC|SYNC]: both empty the cache at once.
pub fn flush(c: &mut Call<'_>) {
    match c.args {
        [_] => {}
        [_, m] if is(m, "ASYNC") || is(m, "SYNC") => {}
        _ => return c.out.err(SYNTAX),
    }
    match c.db.flush() {
        true => c.out.ok(),
        false => c.out.err("ERR the flash tier is busy, try again"),
    }
}

/// INFO [section...]: server, clients, memory, stats, keyspace, tiercache.
pub fn info(c: &mut Call<'_>) {
    let want = |s: &str| {
        c.args.len() == 1
            || c.args[1..]
                .iter()
                .any(|a| is(a, s) || is(a, "all") || is(a, "everything") || is(a, "default"))
    };
    let sh = &c.env.shared;
    let now = tiercache_engine::clock::unix_now();
    let e = sh.engine.stats(now);
    let up = sh.started.elapsed().as_secs();
    let mut t = String::new();
    if want("server") {
        let _ = write!(
            t,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_mode:standalone\r\nos:{}\r\narch_bits:64\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\ntiercache_version:{}\r\n\r\n",
            std::env::consts::OS,
            std::process::id(),
            sh.config.redis.port,
            up / 86400,
            crate::TIERCACHE_VERSION
        );
    }
    if want("clients") {
        let n = c.env.clients().len();
        let _ = write!(
            t,
            "# Clients\r\nconnected_clients:{n}\r\nmaxclients:{}\r\n\r\n",
            sh.config.server.max_connections
        );
    }
    if want("memory") {
        let _ = write!(
            t,
            "# Memory\r\nused_memory:{}\r\nmaxmemory:{}\r\nmaxmemory_policy:allkeys-lru\r\n\r\n",
            e.segments_allocated * e.segment_size + e.index_bytes,
            e.memory_limit
        );
    }
    if want("stats") {
        let s = &e.shard;
        let _ = write!(
            t,
            "# Stats\r\nevicted_keys:{}\r\nexpired_keys:{}\r\ntotal_items_written:{}\r\n\r\n",
            s.evictions, s.get_expired, s.total_items
        );
    }
    if want("keyspace") {
        t.push_str("# Keyspace\r\n");
        if e.shard.curr_items > 0 {
            let _ = write!(t, "db0:keys={},expires=0,avg_ttl=0\r\n", e.shard.curr_items);
        }
        t.push_str("\r\n");
    }
    if want("tiercache") {
        let s = &e.shard;
        let _ = write!(
            t,
            "# Tiercache\r\nflash_items:{}\r\nflash_hits:{}\r\ndemoted:{}\r\npromoted:{}\r\n",
            s.flash_items, s.flash_hits, s.demoted, s.promoted
        );
        if let Some(f) = sh.engine.flash_stats() {
            let _ = write!(
                t,
                "flash_capacity:{}\r\nflash_segments_free:{}\r\nflash_segments_sealed:{}\r\nflash_bytes_written:{}\r\nflash_bytes_read:{}\r\nflash_objects_read:{}\r\nflash_read_errors:{}\r\nflash_verify_failures:{}\r\n",
                f.capacity,
                f.segments_free,
                f.segments_sealed,
                f.bytes_written,
                f.bytes_read,
                f.objects_read,
                f.read_errors,
                f.verify_failures
            );
        }
        t.push_str("\r\n");
    }
    let t = t.strip_suffix("\r\n").unwrap_or(&t);
    c.out.verbatim(t);
}

/// Parses a size as CONFIG SET does (`100mb`, `1gb`, bytes).
fn size(v: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(v).ok()?.to_ascii_lowercase();
    let (num, mul) = [
        ("kb", 1 << 10),
        ("mb", 1 << 20),
        ("gb", 1 << 30),
        ("k", 1000),
        ("m", 1_000_000),
        ("g", 1_000_000_000),
    ]
    .iter()
    .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n.to_string(), *m)))
    .unwrap_or((s.clone(), 1));
    num.parse::<u64>().ok()?.checked_mul(mul)
}

/// CONFIG GET pattern... | SET param value... | RESETSTAT.
pub fn config(c: &mut Call<'_>) {
    let sh = &c.env.shared;
    let sub = c.args[1];
    if is(sub, "GET") && c.args.len() >= 3 {
        let params: [(&str, String); 7] = [
            ("maxmemory", sh.engine.memory_limit().to_string()),
            ("maxclients", sh.config.server.max_connections.to_string()),
            ("timeout", sh.config.server.idle_timeout.to_string()),
            ("maxmemory-policy", "allkeys-lru".into()),
            ("databases", "1".into()),
            ("save", String::new()),
            ("appendonly", "no".into()),
        ];
        let hits: Vec<_> = params
            .iter()
            .filter(|(n, _)| {
                c.args[2..]
                    .iter()
                    .any(|p| glob(&p.to_ascii_lowercase(), n.as_bytes()))
            })
            .collect();
        c.out.map(hits.len());
        for (n, v) in hits {
            c.out.bulk_str(n);
            c.out.bulk_str(v);
        }
    } else if is(sub, "SET") && c.args.len() >= 4 && c.args.len().is_multiple_of(2) {
        for pv in c.args[2..].chunks(2) {
            let ok = match () {
                _ if is(pv[0], "maxmemory") => size(pv[1])
                    .filter(|&b| b > 0)
                    .is_some_and(|b| sh.engine.set_memory_limit(b as usize).is_ok()),
                _ => {
                    let p = String::from_utf8_lossy(pv[0]);
                    return c.out.err(&format!(
                        "ERR Unknown option or number of arguments for CONFIG SET - '{p}'"
                    ));
                }
            };
            if !ok {
                let (p, v) = (
                    String::from_utf8_lossy(pv[0]),
                    String::from_utf8_lossy(pv[1]),
                );
                return c.out.err(&format!(
                    "ERR CONFIG SET failed (possibly related to argument '{p}') - argument couldn't be parsed into an integer or is out of range ('{v}')"
                ));
            }
        }
        c.out.ok();
    } else if is(sub, "RESETSTAT") && c.args.len() == 2 {
        c.out.ok();
    } else {
        let s = String::from_utf8_lossy(sub);
        c.out
            .err(&format!("ERR unknown subcommand '{s}'. Try CONFIG HELP."));
    }
}

const BAD_NAME: &str = "ERR Client names cannot contain spaces, newlines or special characters.";

fn valid_name(n: &[u8]) -> bool {
    n.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

/// One CLIENT LIST line.
fn client_line(id: u64, e: &crate::protocol::resp::ClientEntry) -> String {
    format!(
        "id={id} addr={} laddr={} fd=-1 name={} age={} idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 cmd={} user=default redir=-1 resp={}\n",
        e.addr,
        e.laddr,
        String::from_utf8_lossy(&e.name),
        e.created.elapsed().as_secs(),
        e.last_cmd,
        e.resp
    )
}

/// CLIENT ID | SETNAME | GETNAME | INFO | LIST | KILL.
pub fn client(c: &mut Call<'_>) {
    let sub = c.args[1];
    let n = c.args.len();
    c.env.update(c.sess, c.out.resp3);
    if is(sub, "ID") && n == 2 {
        c.out.int(c.sess.id as i64);
    } else if is(sub, "SETNAME") && n == 3 {
        if !valid_name(c.args[2]) {
            return c.out.err(BAD_NAME);
        }
        c.sess.name = c.args[2].to_vec();
        c.out.ok();
    } else if is(sub, "GETNAME") && n == 2 {
        match c.sess.name.is_empty() {
            true => c.out.null(),
            false => c.out.bulk(&c.sess.name.clone()),
        }
    } else if is(sub, "INFO") && n == 2 {
        let line = c
            .env
            .clients()
            .get(&c.sess.id)
            .map(|e| client_line(c.sess.id, e))
            .unwrap_or_default();
        c.out.verbatim(&line);
    } else if is(sub, "LIST") && n == 2 {
        let all: String = c
            .env
            .clients()
            .iter()
            .map(|(id, e)| client_line(*id, e))
            .collect();
        c.out.verbatim(&all);
    } else if is(sub, "KILL") && n >= 3 {
        kill(c);
    } else {
        let s = String::from_utf8_lossy(sub);
        c.out
            .err(&format!("ERR unknown subcommand '{s}'. Try CLIENT HELP."));
    }
}

/// CLIENT KILL addr, or CLIENT KILL [ID id] [ADDR addr] [SKIPME yes|no].
fn kill(c: &mut Call<'_>) {
    let old_form = c.args.len() == 3;
    let (mut id, mut addr, mut skipme) = (None, None, true);
    if old_form {
        addr = Some(c.args[2]);
    } else {
        for pv in c.args[2..].chunks(2) {
            let [p, v] = pv else {
                return c.out.err(SYNTAX);
            };
            match () {
                _ if is(p, "ID") => match int(v) {
                    Some(i) if i > 0 => id = Some(i as u64),
                    _ => return c.out.err("ERR client-id should be greater than 0"),
                },
                _ if is(p, "ADDR") => addr = Some(*v),
                _ if is(p, "SKIPME") => skipme = is(v, "yes"),
                _ => return c.out.err(SYNTAX),
            }
        }
    }
    let mut killed = 0;
    for (cid, e) in c.env.clients().iter() {
        let hit = id.is_none_or(|i| i == *cid)
            && addr.is_none_or(|a| a == e.addr.as_bytes())
            && !(skipme && *cid == c.sess.id && !old_form);
        if hit {
            killed += 1;
            e.kill.store(true, Ordering::Relaxed);
            if *cid == c.sess.id {
                c.sess.close = true;
            } else if let Some(s) = &e.stream {
                let _ = s.shutdown(std::net::Shutdown::Read);
            }
        }
    }
    match (old_form, killed) {
        (true, 0) => c.out.err("ERR No such client"),
        (true, _) => c.out.ok(),
        (false, n) => c.out.int(n),
    }
}

fn command_info(c: &mut Call<'_>, s: &super::Spec) {
    let o = &mut *c.out;
    o.array(10);
    o.bulk_str(s.name);
    o.int(i64::from(s.arity));
    o.set(1);
    o.simple(if s.write { "write" } else { "readonly" });
    o.int(i64::from(s.first_key));
    o.int(i64::from(s.last_key));
    o.int(i64::from(s.step));
    for _ in 0..4 {
        o.array(0);
    }
}

/// COMMAND, COMMAND COUNT | INFO name... | DOCS [name...] | LIST.
pub fn command(c: &mut Call<'_>) {
    let sub = c.args.get(1).copied();
    match sub {
        None => {
            c.out.array(COMMANDS.len());
            for s in COMMANDS {
                command_info(c, s);
            }
        }
        Some(s) if is(s, "COUNT") && c.args.len() == 2 => c.out.int(COMMANDS.len() as i64),
        Some(s) if is(s, "LIST") && c.args.len() == 2 => {
            c.out.array(COMMANDS.len());
            for s in COMMANDS {
                c.out.bulk_str(s.name);
            }
        }
        Some(s) if is(s, "INFO") => {
            let names = &c.args[2..];
            c.out.array(names.len());
            for n in names {
                match super::lookup(n) {
                    Some(s) => command_info(c, s),
                    None => c.out.null(),
                }
            }
        }
        // Documentation is not served: clients take an empty map as "no
        // hints" (redis-cli asks at start).
        Some(s) if is(s, "DOCS") => c.out.map(0),
        Some(s) => {
            let s = String::from_utf8_lossy(s);
            c.out
                .err(&format!("ERR unknown subcommand '{s}'. Try COMMAND HELP."));
        }
    }
}

pub fn time(c: &mut Call<'_>) {
    let us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros())
        .unwrap_or(0);
    c.out.array(2);
    c.out.bulk_str(&(us / 1_000_000).to_string());
    c.out.bulk_str(&(us % 1_000_000).to_string());
}

pub fn multi(c: &mut Call<'_>) {
    if c.sess.multi.is_some() {
        return c.out.err("ERR MULTI calls can not be nested");
    }
    c.sess.multi = Some(Vec::new());
    c.sess.multi_failed = false;
    c.out.ok();
}

pub fn discard(c: &mut Call<'_>) {
    match c.sess.multi.take() {
        None => c.out.err("ERR DISCARD without MULTI"),
        Some(_) => c.out.ok(),
    }
}

/// EXEC: the queued commands in order, their replies in one array,
/// isolated: the engine shards of all their keys are held while they run
/// (`Engine::hold_all`, locked in ascending order), so no other command on
/// those keys (either port, any worker) runs between them.
/// With a flash tier the keys' records are read first (the run stops once
/// for that, see `db`), so that no read waits under the hold.
pub fn exec(c: &mut Call<'_>) {
    let Some(q) = c.sess.multi.take() else {
        return c.out.err("ERR EXEC without MULTI");
    };
    if std::mem::take(&mut c.sess.multi_failed) {
        return c
            .out
            .err("EXECABORT Transaction discarded because of previous errors.");
    }
    let run = c.db.run;
    let engine = c.db.engine;
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for cmd in &q {
        let a: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
        super::for_each_key(&a, c.sess, &mut |key| keys.push(key.to_vec()));
    }
    if !keys.is_empty() && engine.flash().is_some() && run.may_read && !run.probed {
        // The connection probes the queued keys, reads their records and
        // runs EXEC again.
        run.stop(tiercache_engine::command::Wait::Reads);
    }
    if run.stopped().is_none() {
        let now = tiercache_engine::clock::unix_now();
        let held = (!keys.is_empty())
            .then(|| std::cell::RefCell::new(engine.hold_all(keys.iter().map(Vec::as_slice), now)));
        c.out.array(q.len());
        for cmd in &q {
            let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
            let h = held
                .as_ref()
                .map(|h| h as &dyn crate::protocol::resp::db::HeldShard);
            super::dispatch_in(&args, c.out, c.sess, c.env, run, h);
            if run.stopped().is_some() {
                break;
            }
        }
    }
    if run.stopped().is_some() {
        // Runs again once the flash records are read: queued as before.
        c.sess.multi = Some(q);
    }
}
