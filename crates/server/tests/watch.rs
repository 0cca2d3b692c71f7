//! `watch`: the log streams of memcached 1.6 (`watch.rs`).
//!
//! - end to end: a watcher gets `OK`, then one line per looked-up key and
//!   per store, in order, and no reply to anything it sends; `watch` alone
//!   is fetchers only; a watch pipelined behind another command, an unknown
//!   kind and a kind tiercache does not produce are refused as memcached
//!   refuses them; `stats` counts watchers and lines.
//! - `connevents`: a client's `conn_new` and `conn_close` with memcached's
//!   fields (its address and port, the transport, the reason: `normal` for
//!   a client that quits or closes, `idle_timeout` for one `-o
//!   idle_timeout` closed), and none for the watcher itself. About 3 s.
//!   At a stop (the handle's, as SIGTERM's, or `shutdown`), each client
//!   still open closes with `reason=shutdown`, the sender of `shutdown`
//!   too, and the watcher reads them before its end of stream.
//! - `sysevents`: one `lru_crawler` line per expiry sweep, memcached's
//!   fields, the items it reclaimed counted. About 3 s.
//! - `rawcmds` and the proxy's kinds: taken, and no line comes of them, as
//!   memcached 1.6.18 writes none.
//! - a watcher that does not read: the server answers at full speed, its
//!   lines beyond the buffer are dropped, counted, and announced with
//!   `skipped=N` once it reads again, and every line is accounted for.
//! - against memcached 1.6.18 (when installed; skipped with a message
//!   otherwise): the same commands, watched, give lines of the same types
//!   with the same field names, and the same key, status, cmd, ttl and
//!   size fields (timestamps, gids and fds aside).

mod common;

use common::memcached::Memcached;
use common::{server, server_with, stat_of, tx_mn, Client};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Opens a watcher of `kinds` on `addr` and waits for its `OK`.
fn watcher(addr: &str, kinds: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("watch {kinds}\r\n").trim_end().as_bytes())
        .unwrap();
    s.write_all(b"\r\n").unwrap();
    let mut ok = [0u8; 4];
    s.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"OK\r\n");
    s
}

/// Reads lines from a watcher until `n` have come or `within` passed.
fn lines(s: &mut TcpStream, n: usize, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    while got.iter().filter(|&&b| b == b'\n').count() < n && Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => got.extend_from_slice(&buf[..k]),
            Err(_) => {}
        }
    }
    String::from_utf8(got)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// A line's `name=value` fields.
fn fields(line: &str) -> BTreeMap<String, String> {
    line.split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The line's fields but those that differ between any two runs.
fn comparable(line: &str) -> Vec<(String, String)> {
    fields(line)
        .into_iter()
        .filter(|(k, _)| !matches!(k.as_str(), "ts" | "gid" | "cfd"))
        .collect()
}

#[test]
fn a_watcher_gets_a_line_per_key_and_per_store() {
    let h = server();
    let addr = h.addr.to_string();
    let mut w = watcher(&addr, "fetchers mutations");
    let mut plain = watcher(&addr, "");
    let mut c = Client::new(&h);
    c.tx(
        b"set foo 3 100 5\r\nhello\r\nget foo nope\r\ndelete foo\r\nadd a%b 0 0 1 noreply\r\nx\r\n",
    );
    let got = lines(&mut w, 5, Duration::from_secs(5));
    let want = [
        "type=item_store key=foo status=stored cmd=set ttl=100 clsid=1 size=5",
        "type=item_get key=foo status=found clsid=1 size=5",
        "type=item_get key=nope status=not_found clsid=0 size=0",
        "type=item_get key=foo status=found clsid=1 size=0",
        "type=item_store key=a%25b status=stored cmd=add ttl=0 clsid=1 size=1",
    ];
    assert_eq!(got.len(), want.len(), "{got:#?}");
    let mut gid = 0;
    for (line, want) in got.iter().zip(want) {
        let f = fields(line);
        let (sec, usec) = f["ts"].split_once('.').expect("ts=sec.usec");
        assert!(sec.parse::<u64>().is_ok() && usec.parse::<u32>().unwrap() < 1_000_000);
        let g: u64 = f["gid"].parse().unwrap();
        assert!(g > gid, "gids grow: {got:#?}");
        gid = g;
        assert!(f["cfd"].parse::<i32>().unwrap() > 0, "{line}");
        let rest: Vec<&str> = line
            .split(' ')
            .filter(|f| !f.starts_with("ts=") && !f.starts_with("gid=") && !f.starts_with("cfd="))
            .collect();
        assert_eq!(rest.join(" "), want.replace(" cfd=", ""));
    }
    // `watch` alone: fetchers only.
    let only_gets = lines(&mut plain, 3, Duration::from_secs(5));
    assert_eq!(only_gets.len(), 3, "{only_gets:#?}");
    assert!(only_gets.iter().all(|l| l.contains("type=item_get")));
    // A watcher runs no command: nothing but lines come back.
    w.write_all(b"version\r\n").unwrap();
    c.tx(b"get foo\r\n");
    let after = lines(&mut w, 1, Duration::from_secs(5));
    assert_eq!(after.len(), 1, "{after:#?}");
    assert!(after[0].contains("type=item_get key=foo status=not_found"));
    let stats = c.tx_str(b"stats\r\n");
    assert_eq!(stat_of(&stats, "log_watchers").as_deref(), Some("2"));
    assert_eq!(stat_of(&stats, "log_watcher_skipped").as_deref(), Some("0"));
    assert!(
        stat_of(&stats, "log_watcher_sent")
            .unwrap()
            .parse::<u64>()
            .unwrap()
            >= 9
    );
    // A watcher that closes is gone from the counts.
    drop(w);
    drop(plain);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let s = c.tx_str(b"stats\r\n");
        let watchers = stat_of(&s, "log_watchers");
        if watchers.as_deref() == Some("0")
            && stat_of(&s, "curr_connections").as_deref() == Some("1")
        {
            break;
        }
        assert!(Instant::now() < deadline, "watchers not closed: {s}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn refusals_are_memcacheds() {
    let h = server();
    let mut s = TcpStream::connect(h.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    // Another command's reply pending: refused, and the connection serves on.
    assert_eq!(
        tx_mn(&mut s, b"get a\r\nwatch\r\n"),
        "END\r\nERROR cannot pipeline other commands before watch\r\n"
    );
    assert_eq!(tx_mn(&mut s, b"watch bogus\r\n"), "ERROR\r\n");
    // A later memcached's kind: 1.6.18 does not know it.
    assert_eq!(tx_mn(&mut s, b"watch deletions\r\n"), "ERROR\r\n");
    // memcached's limit: 20 watchers.
    let addr = h.addr.to_string();
    let many: Vec<TcpStream> = (0..20).map(|_| watcher(&addr, "fetchers")).collect();
    assert_eq!(
        tx_mn(&mut s, b"watch\r\n"),
        "WATCHER_TOO_MANY log watcher limit reached\r\n"
    );
    drop(many);
}

#[test]
fn a_watcher_that_does_not_read_loses_lines_not_the_server_speed() {
    let h = server_with(|c| c.server.watcher_logbuf_size = 4096);
    let addr = h.addr;
    let mut w = common::process::connect_with_rcvbuf(addr, 4096);
    w.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    w.write_all(b"watch fetchers\r\n").unwrap();
    let mut ok = [0u8; 4];
    w.read_exact(&mut ok).unwrap();
    assert_eq!(&ok, b"OK\r\n");
    let mut c = Client::new(&h);
    let keys: Vec<String> = (0..100).map(|i| format!("key-{i:0>60}")).collect();
    let multiget = format!("get {}\r\n", keys.join(" "));
    let started = Instant::now();
    for _ in 0..200 {
        assert_eq!(c.tx(multiget.as_bytes()), b"END\r\n");
    }
    let took = started.elapsed();
    assert!(took < Duration::from_secs(20), "gets slowed down: {took:?}");
    let stats = c.tx_str(b"stats\r\n");
    let skipped: u64 = stat_of(&stats, "log_watcher_skipped")
        .unwrap()
        .parse()
        .unwrap();
    assert!(skipped > 0, "{stats}");
    // Read everything, then one more line carries the last `skipped=N`.
    let mut got = lines(&mut w, usize::MAX, Duration::from_secs(2));
    c.tx(b"get last\r\n");
    got.extend(lines(&mut w, 2, Duration::from_secs(5)));
    let seen = got.iter().filter(|l| l.contains("type=item_get")).count() as u64;
    let announced: u64 = got
        .iter()
        .filter_map(|l| l.strip_prefix("skipped="))
        .map(|n| n.parse::<u64>().unwrap())
        .sum();
    assert!(announced > 0, "no skipped= line");
    assert_eq!(
        seen + announced,
        200 * 100 + 1,
        "every line is sent or announced"
    );
    assert_eq!(announced, skipped);
}

/// The commands of the comparison with memcached: stores watched by
/// `mutations`, then retrievals watched by `fetchers` (memcached also logs
/// the lookup a store makes as a fetch; tiercache does not, so the two are
/// watched apart).
const STORES: &[u8] = b"set foo 5 0 3\r\nbar\r\nadd foo 0 0 1\r\nx\r\nreplace nope 0 0 1\r\nx\r\n\
cas foo 0 0 1 999\r\nx\r\nset n 0 100 1\r\n5\r\nms mk 2 T50\r\nhi\r\nset k%20x 1 0 2\r\nab\r\n";
const FETCHES: &[u8] =
    b"get foo\r\nget nope\r\ngets foo n nope\r\nmg mk v\r\nmg gone v\r\ntouch foo 10\r\n\
gat 10 n\r\nget k%20x\r\n";

fn watched(addr: &str) -> (Vec<String>, Vec<String>) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut w = watcher(addr, "mutations");
    tx_mn(&mut c, STORES);
    let stores = lines(&mut w, 7, Duration::from_secs(5));
    drop(w);
    let mut w = watcher(addr, "fetchers");
    tx_mn(&mut c, FETCHES);
    let fetches = lines(&mut w, 10, Duration::from_secs(5));
    (stores, fetches)
}

#[test]
fn lines_match_memcacheds() {
    let Some(mc) = Memcached::start() else {
        eprintln!("skipped the comparison: /usr/bin/memcached absent (tests/interop/install.sh)");
        return;
    };
    let h = server();
    let theirs = watched(&mc.addr());
    let ours = watched(&h.addr.to_string());
    for (t, o, n) in [(&theirs.0, &ours.0, 7), (&theirs.1, &ours.1, 10)] {
        assert_eq!(t.len(), n, "memcached: {t:#?}");
        assert_eq!(o.len(), t.len(), "memcached: {t:#?}\ntiercache: {o:#?}");
        let names = |l: &str| fields(l).into_keys().collect::<BTreeSet<_>>();
        for (tl, ol) in t.iter().zip(o) {
            assert_eq!(names(ol), names(tl), "field names\n{tl}\n{ol}");
            assert_eq!(comparable(ol), comparable(tl), "fields\n{tl}\n{ol}");
        }
    }
}

/// `watch evictions`: one `eviction` line per item evicted from RAM, with
/// memcached's fields (the same names as memcached 1.6.18's lines when it
/// is installed), `fetch`, `ttl` and `size` as the item had them, and as
/// many lines (or announced `skipped=`) as `stats` counts evictions.
#[test]
fn a_watcher_hears_of_each_eviction() {
    let h = server_with(|c| {
        c.cache.memory_mb = 8;
        c.flash.paths.clear();
        c.server.watcher_logbuf_size = 4 << 20;
    });
    let addr = h.addr.to_string();
    let mut w = watcher(&addr, "evictions");
    let mut c = Client::new(&h);
    let value = "v".repeat(2000);
    // Of the first 1000 keys, every tenth is read and every tenth + 1 has
    // a TTL; then enough to push them out.
    let mut load = Vec::new();
    for i in 0..12_000 {
        let ttl = if i < 1000 && i % 10 == 1 { 1000 } else { 0 };
        load.extend_from_slice(format!("set ev{i} 0 {ttl} 2000 noreply\r\n{value}\r\n").as_bytes());
        if i < 1000 && i % 10 == 0 {
            load.extend_from_slice(format!("mg ev{i} q\r\n").as_bytes());
        }
    }
    c.s.write_all(&load).unwrap();
    assert!(c.tx_str(b"mn\r\n").ends_with("MN\r\n"));
    // The evacuator thread may still be evicting what the last sets began
    // ahead: count once the figure has stopped moving.
    let mut stats = c.tx_str(b"stats\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        std::thread::sleep(Duration::from_millis(300));
        let again = c.tx_str(b"stats\r\n");
        let settled = stat_of(&again, "evictions") == stat_of(&stats, "evictions");
        stats = again;
        if settled || Instant::now() > deadline {
            break;
        }
    }
    let evictions: usize = stat_of(&stats, "evictions").unwrap().parse().unwrap();
    assert!(evictions > 5000, "{stats}");
    let got = lines(&mut w, evictions, Duration::from_secs(10));
    let evicted: Vec<_> = got
        .iter()
        .filter(|l| l.contains(" type=eviction "))
        .collect();
    let skipped: usize = got
        .iter()
        .filter_map(|l| l.strip_prefix("skipped="))
        .map(|n| n.parse::<usize>().unwrap())
        .sum();
    assert_eq!(evicted.len() + skipped, evictions, "one line per eviction");
    assert!(evicted.len() > evictions / 2, "{skipped} skipped");
    let mut kinds = [0; 4];
    for f in evicted.iter().map(|l| fields(l)) {
        let i: usize = f["key"].strip_prefix("ev").unwrap().parse().unwrap();
        let (read, timed) = (i < 1000 && i.is_multiple_of(10), i < 1000 && i % 10 == 1);
        assert_eq!(f["fetch"], if read { "yes" } else { "no" }, "{f:?}");
        assert_eq!(f["size"], "2000");
        let ttl: i64 = f["ttl"].parse().unwrap();
        if timed {
            assert!((990..=1000).contains(&ttl), "{f:?}");
        } else {
            assert_eq!(ttl, -1, "{f:?}");
        }
        kinds[usize::from(read) + 2 * usize::from(timed)] += 1;
    }
    assert!(
        kinds[0] > 0 && kinds[2] > 0,
        "plain and timed keys evicted: {kinds:?}"
    );
    let names = |l: &str| fields(l).into_keys().collect::<BTreeSet<_>>();
    let ours = names(evicted[0]);
    let want: BTreeSet<String> = [
        "ts", "gid", "type", "key", "fetch", "ttl", "la", "clsid", "size",
    ]
    .map(String::from)
    .into();
    assert_eq!(ours, want);
    // memcached's line for the same event, when it is here.
    let Some(mc) = Memcached::start_with(&["-m", "2"]) else {
        eprintln!("skipped the comparison: /usr/bin/memcached absent (tests/interop/install.sh)");
        return;
    };
    let mut w = watcher(&mc.addr(), "evictions");
    let mut m = TcpStream::connect(mc.addr()).unwrap();
    m.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut load = Vec::new();
    for i in 0..4000 {
        load.extend_from_slice(format!("set ev{i} 0 0 2000 noreply\r\n{value}\r\n").as_bytes());
    }
    tx_mn(&mut m, &load);
    let theirs = lines(&mut w, 1, Duration::from_secs(5));
    let line = theirs
        .iter()
        .find(|l| l.contains(" type=eviction "))
        .expect("memcached evicted");
    assert_eq!(names(line), ours, "memcached: {line}");
}

#[test]
fn connevents_give_each_clients_open_and_close_with_the_reason() {
    let h = server_with(|c| c.server.idle_timeout = 1);
    let addr = h.addr.to_string();
    let mut w = watcher(&addr, "connevents");
    // A client that quits, and one that closes after reading its reply.
    let mut quits = TcpStream::connect(&addr).unwrap();
    let quits_port = quits.local_addr().unwrap().port();
    quits.write_all(b"quit\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = quits.read_to_end(&mut rest);
    let mut closes = TcpStream::connect(&addr).unwrap();
    let closes_port = closes.local_addr().unwrap().port();
    assert_eq!(
        tx_mn(&mut closes, b"version\r\n").split(' ').next(),
        Some("VERSION")
    );
    drop(closes);
    // One that says nothing: closed for idle_timeout (1 s, checked each second).
    let idle = TcpStream::connect(&addr).unwrap();
    let idle_port = idle.local_addr().unwrap().port();
    let got = lines(&mut w, 6, Duration::from_secs(8));
    let of = |port: u16, kind: &str| -> Option<BTreeMap<String, String>> {
        got.iter()
            .map(|l| fields(l))
            .find(|f| f["type"] == kind && f["rport"] == port.to_string())
    };
    for (port, reason) in [
        (quits_port, "normal"),
        (closes_port, "normal"),
        (idle_port, "idle_timeout"),
    ] {
        let new = of(port, "conn_new").unwrap_or_else(|| panic!("no conn_new for {port}: {got:?}"));
        assert_eq!(new["rip"], "127.0.0.1");
        assert_eq!(new["transport"], "tcp");
        assert!(new["cfd"].parse::<i32>().unwrap() > 2);
        let close =
            of(port, "conn_close").unwrap_or_else(|| panic!("no conn_close for {port}: {got:?}"));
        assert_eq!(close["reason"], reason, "{port}: {got:?}");
        assert_eq!(close["cfd"], new["cfd"]);
    }
    assert_eq!(got.len(), 6, "one line each, none for the watcher: {got:?}");
    // memcached's field order.
    let close = got.iter().find(|l| l.contains("type=conn_close")).unwrap();
    let names: Vec<&str> = close
        .split(' ')
        .filter_map(|f| f.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(
        names,
        [
            "ts",
            "gid",
            "type",
            "rip",
            "rport",
            "transport",
            "reason",
            "cfd"
        ]
    );
    drop(idle);
}

/// `type=conn_close` lines of `got` for client `port`.
fn closes_of(got: &[String], port: u16) -> Vec<BTreeMap<String, String>> {
    got.iter()
        .map(|l| fields(l))
        .filter(|f| f["type"] == "conn_close" && f["rport"] == port.to_string())
        .collect()
}

#[test]
fn a_stop_closes_each_client_with_reason_shutdown() {
    for by_command in [false, true] {
        let h = server_with(|c| c.server.enable_shutdown = true);
        let addr = h.addr.to_string();
        let mut w = watcher(&addr, "connevents");
        let mut open = TcpStream::connect(&addr).unwrap();
        assert!(tx_mn(&mut open, b"version\r\n").starts_with("VERSION "));
        let open_port = open.local_addr().unwrap().port();
        let mut sender = TcpStream::connect(&addr).unwrap();
        let sender_port = sender.local_addr().unwrap().port();
        assert!(tx_mn(&mut sender, b"version\r\n").starts_with("VERSION "));
        if by_command {
            sender.write_all(b"shutdown\r\n").unwrap();
        } else {
            h.shutdown();
        }
        // Read to the end of stream: the watcher closes once its lines are out.
        let got = lines(&mut w, usize::MAX, Duration::from_secs(8));
        for port in [open_port, sender_port] {
            let closes = closes_of(&got, port);
            assert_eq!(closes.len(), 1, "by_command {by_command}, {port}: {got:#?}");
            assert_eq!(closes[0]["reason"], "shutdown", "{got:#?}");
        }
        assert_eq!(got.len(), 4, "two opens, two closes: {got:#?}");
        h.wait();
    }
}

#[test]
fn sysevents_give_a_line_per_expiry_sweep() {
    let h = server();
    let addr = h.addr.to_string();
    let mut w = watcher(&addr, "sysevents");
    let mut c = Client::new(&h);
    for i in 0..50 {
        assert_eq!(
            c.tx_str(format!("set k{i} 0 1 1 noreply\r\nx\r\n").as_bytes()),
            ""
        );
    }
    // memcached 1.6.18's line for a finished autocrawl, for its field names.
    let memcached = "ts=1795559882.899011 gid=2 type=lru_crawler crawler=1 lru=hot low_mark=1 \
                     next_reclaims=0 since_run=1 next_run=65 elapsed=0 examined=0 reclaimed=0";
    let names = |l: &str| -> Vec<String> {
        l.split(' ')
            .filter_map(|f| f.split_once('='))
            .map(|(k, _)| k.to_string())
            .collect()
    };
    // A sweep a second: the items (1 s to live) are reclaimed within ~3 s.
    let deadline = Instant::now() + Duration::from_secs(8);
    let (mut sweeps, mut reclaimed) = (0, 0);
    while reclaimed < 50 && Instant::now() < deadline {
        for line in lines(&mut w, 1, Duration::from_millis(1500)) {
            assert_eq!(names(&line), names(memcached), "{line}");
            let f = fields(&line);
            assert_eq!(
                (&*f["type"], &*f["crawler"], &*f["lru"], &*f["next_run"]),
                ("lru_crawler", "1", "na", "1"),
                "{line}"
            );
            let r: u64 = f["reclaimed"].parse().unwrap();
            assert!(f["examined"].parse::<u64>().unwrap() >= r, "{line}");
            reclaimed += r;
            sweeps += 1;
        }
    }
    assert_eq!(reclaimed, 50, "after {sweeps} sweeps");
    // A line per sweep, not per reclaim: the next sweep's, with none left.
    let next = lines(&mut w, 1, Duration::from_secs(3));
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!(fields(&next[0])["reclaimed"], "0", "{next:?}");
}

/// memcached 1.6.18 takes `rawcmds` and the proxy's kinds and never writes
/// a line of them; with another kind, that kind's lines come as usual.
#[test]
fn rawcmds_and_the_proxys_kinds_are_taken_and_silent() {
    let h = server();
    let addr = h.addr.to_string();
    let mut quiet: Vec<TcpStream> = [
        "rawcmds",
        "proxyreqs",
        "proxyevents",
        "proxyuser",
        "rawcmds proxyreqs proxyevents proxyuser",
    ]
    .iter()
    .map(|k| watcher(&addr, k))
    .collect();
    let mut fetchers = watcher(&addr, "rawcmds fetchers");
    let mut c = Client::new(&h);
    assert_eq!(
        c.tx_str(b"set a 0 0 1\r\nx\r\nget a\r\ndelete a\r\nversion\r\n")
            .lines()
            .next(),
        Some("STORED")
    );
    let got = lines(&mut fetchers, 2, Duration::from_secs(5));
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got.iter().all(|l| l.contains(" type=item_get key=a ")),
        "{got:?}"
    );
    for q in &mut quiet {
        assert_eq!(
            lines(q, 1, Duration::from_millis(300)),
            Vec::<String>::new()
        );
    }
    assert_eq!(
        stat_of(&c.tx_str(b"stats\r\n"), "log_watchers").as_deref(),
        Some("6")
    );
}
