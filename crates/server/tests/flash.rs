//! The flash tier end to end over real sockets: a server with a small RAM
//! tier and an O_DIRECT flash file serves every item it was given, through
//! multigets and pipelines, in order; overwrites, deletes and mutations of
//! flash items behave as on RAM items; `stats` reports the flash counters.

mod common;

use common::{server_with, tempdir, Client};
use std::io::{Read, Write};
use tiercache_server::server::ServerHandle;

fn flash_server(dir: &std::path::Path) -> ServerHandle {
    let path = dir.join("flash");
    server_with(|c| {
        c.cache.memory_mb = 48;
        c.flash.paths = vec![format!("{}:256M", path.display())];
        c.flash.tier.write_buffers = 3;
    })
}

fn stat_str(c: &mut Client, name: &str) -> String {
    let s = c.tx_str(b"stats\r\n");
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")).map(str::to_string))
        .unwrap_or_else(|| panic!("no stat {name}"))
}

fn value(i: usize) -> String {
    let mut v = format!("v{i}:");
    while v.len() < 2000 {
        v.push((b'a' + (i % 26) as u8) as char);
    }
    v
}

fn stat(c: &mut Client, name: &str) -> f64 {
    let s = c.tx_str(b"stats\r\n");
    s.lines()
        .find_map(|l| {
            let mut w = l.split(' ');
            (w.next() == Some("STAT") && w.next() == Some(name))
                .then(|| w.next().unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no stat {name}"))
}

/// Sets `{prefix}{i}` to `value(i)` for i in 0..n, `batch` sets per
/// pipelined write; the client flags are `i` when `index_flags`, else 0.
fn set_many(c: &mut Client, n: usize, batch: usize, prefix: &str, index_flags: bool) {
    for chunk in (0..n).collect::<Vec<_>>().chunks(batch) {
        let mut req = Vec::new();
        for &i in chunk {
            let v = value(i);
            let flags = if index_flags { i } else { 0 };
            req.extend_from_slice(
                format!("set {prefix}{i} {flags} 0 {}\r\n{v}\r\n", v.len()).as_bytes(),
            );
        }
        assert_eq!(c.tx_str(&req), "STORED\r\n".repeat(chunk.len()));
    }
}

#[test]
fn items_beyond_ram_are_served_from_flash_in_order() {
    let dir = tempdir("flash-e2e");
    let h = flash_server(&dir);
    let mut c = Client::new(&h);
    let n = 40_000;
    set_many(&mut c, n, 100, "key:", true);
    assert!(stat(&mut c, "flash_demoted") > 10_000.0);
    // Multigets of 50, pipelined in pairs: every value, in request order.
    let mut missing = 0;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let (a, b) = chunk.split_at(50);
        let mut req = String::new();
        for part in [a, b] {
            req.push_str("get");
            for i in part {
                req.push_str(&format!(" key:{i}"));
            }
            req.push_str("\r\n");
        }
        let got = c.tx_str(req.as_bytes());
        let mut expect = String::new();
        for part in [a, b] {
            for &i in part {
                let v = value(i);
                let line = format!("VALUE key:{i} {i} {}\r\n{v}\r\n", v.len());
                if got.contains(&line) {
                    expect.push_str(&line);
                } else {
                    missing += 1;
                }
            }
            expect.push_str("END\r\n");
        }
        assert!(got == expect, "replies out of order or corrupt");
    }
    // Every item fits: a set reads the flash records under its tag and
    // keeps other keys' (tag collisions drop nothing).
    assert_eq!(missing, 0, "{missing} of {n} missing");
    assert!(stat(&mut c, "extstore_objects_read") > 10_000.0);
    assert_eq!(stat(&mut c, "flash_verify_failures"), 0.0);
    assert_eq!(stat(&mut c, "flash_read_errors"), 0.0);
    let wa = stat(&mut c, "flash_write_amplification");
    assert!(wa > 0.9 && wa < 1.2, "write amplification {wa}");
    drop(c);
    h.shutdown();
    h.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn commands_on_flash_items_behave_as_on_ram_items() {
    let dir = tempdir("flash-cmds");
    let h = flash_server(&dir);
    let mut c = Client::new(&h);
    c.tx(b"set counter 0 0 2\r\n10\r\nset app 0 0 3\r\nabc\r\nset gone 0 0 1\r\nx\r\nset cas 0 0 1\r\nc\r\nset big 0 0 1\r\nb\r\n");
    let before = c.tx_str(b"gets cas\r\n");
    // Push the four items out to flash.
    for i in 0..30_000 {
        let v = value(i);
        c.tx(format!("set fill:{i} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes());
    }
    assert!(stat(&mut c, "flash_demoted") > 5_000.0);
    // A client that sends gets of flash items and closes its side at once
    // still gets every reply (the reads complete after its EOF).
    {
        let gets: String = (0..400).map(|i| format!("get fill:{i}\r\n")).collect();
        let want = c.tx_str(gets.as_bytes());
        assert!(want.matches("VALUE").count() > 300, "fill keys missing");
        let mut raw = std::net::TcpStream::connect(h.addr).unwrap();
        raw.write_all(gets.as_bytes()).unwrap();
        raw.shutdown(std::net::Shutdown::Write).unwrap();
        let mut got = String::new();
        raw.read_to_string(&mut got).unwrap();
        assert!(
            got == want,
            "a half-closed client lost replies: {} of {} bytes",
            got.len(),
            want.len()
        );
    }
    assert_eq!(c.tx_str(b"incr counter 5\r\n"), "15\r\n");
    // A store refused as too large removes the old item (as memcached
    // does), which for an item on flash waits for its tombstone: the reply
    // comes, and the old value is gone.
    let huge = "h".repeat(2 << 20);
    assert_eq!(
        c.tx_str(format!("set big 0 0 {}\r\n{huge}\r\n", huge.len()).as_bytes()),
        "SERVER_ERROR object too large for cache\r\n"
    );
    assert_eq!(
        c.tx_str(b"get big\r\n"),
        "END\r\n",
        "a refused set left the old value"
    );
    assert_eq!(c.tx_str(b"append app 0 0 3\r\ndef\r\n"), "STORED\r\n");
    assert_eq!(
        c.tx_str(b"get app\r\n"),
        "VALUE app 0 6\r\nabcdef\r\nEND\r\n"
    );
    assert_eq!(c.tx_str(b"delete gone\r\n"), "DELETED\r\n");
    assert_eq!(c.tx_str(b"get gone\r\n"), "END\r\n");
    assert_eq!(c.tx_str(b"delete gone\r\n"), "NOT_FOUND\r\n");
    assert_eq!(c.tx_str(b"add counter 0 0 1\r\n1\r\n"), "NOT_STORED\r\n");
    assert_eq!(c.tx_str(b"gets cas\r\n"), before, "CAS survives flash");
    let cas: u64 = before.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert_eq!(
        c.tx_str(format!("cas cas 0 0 1 {cas}\r\nd\r\n").as_bytes()),
        "STORED\r\n"
    );
    assert_eq!(c.tx_str(b"mg counter v t\r\n"), "VA 2 t-1\r\n15\r\n");
    let p = stat(&mut c, "flash_promoted");
    let hits = stat(&mut c, "flash_hits");
    assert!(
        p >= 2.0,
        "incr and append ran on flash items: promoted {p} hits {hits}"
    );
    drop(c);
    h.shutdown();
    h.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn both_flash_readers_serve_the_same_items() {
    let uring_ok = tiercache_engine::device::uring::available();
    for io in ["pool", "auto"] {
        let dir = tempdir(&format!("flash-io-{io}"));
        let path = dir.join("flash");
        let h = server_with(|c| {
            c.cache.memory_mb = 48;
            c.flash.paths = vec![format!("{}:256M", path.display())];
            c.flash.tier.write_buffers = 3;
            c.flash.io = io.into();
        });
        let mut c = Client::new(&h);
        let want = if io == "auto" && uring_ok {
            "uring"
        } else {
            "pool"
        };
        assert_eq!(stat_str(&mut c, "flash_io_backend"), want);
        let n = 30_000;
        set_many(&mut c, n, 200, "k", false);
        let mut hits = 0;
        for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
            let keys: Vec<String> = chunk.iter().map(|i| format!("k{i}")).collect();
            let got = c.tx_str(format!("get {}\r\n", keys.join(" ")).as_bytes());
            for &i in chunk {
                let v = value(i);
                if got.contains(&format!("VALUE k{i} 0 {}\r\n{v}\r\n", v.len())) {
                    hits += 1;
                }
            }
        }
        assert!(hits >= n - n / 400, "{io}: {hits} of {n}");
        assert!(stat(&mut c, "flash_hits") > 5_000.0, "{io}: few flash hits");
        assert_eq!(stat(&mut c, "flash_read_errors"), 0.0);
        assert_eq!(stat(&mut c, "flash_verify_failures"), 0.0);
        drop(c);
        h.shutdown();
        h.wait();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn pipelined_gets_behind_a_flash_read_are_read_ahead_and_answered_in_order() {
    let dir = tempdir("flash-ahead");
    let h = flash_server(&dir);
    let mut c = Client::new(&h);
    let n = 30_000;
    set_many(&mut c, n, 200, "p", false);
    assert!(stat(&mut c, "flash_demoted") > 10_000.0);
    // Pipelines of 40 requests over the oldest keys (on flash): mostly
    // gets, and among them changes to keys that a later get of the same
    // pipeline reads, which must see the change, not the record read ahead.
    let mut served = 0;
    let mut missing = 0;
    for base in (0..8_000).step_by(40) {
        let mut req = String::new();
        let mut expect: Vec<Option<String>> = Vec::new();
        for j in 0..40 {
            let i = base + j;
            match j % 10 {
                3 => {
                    // Overwrite the key read two requests later.
                    req.push_str(&format!("set p{} 0 0 3\r\nnew\r\n", i + 2));
                    expect.push(Some("STORED\r\n".into()));
                }
                5 => {
                    req.push_str(&format!("get p{i}\r\n"));
                    expect.push(Some(format!("VALUE p{i} 0 3\r\nnew\r\nEND\r\n")));
                }
                7 => {
                    // Delete the key read next.
                    req.push_str(&format!("delete p{}\r\n", i + 1));
                    expect.push(None);
                }
                8 => {
                    req.push_str(&format!("get p{i}\r\n"));
                    expect.push(Some("END\r\n".into()));
                }
                _ => {
                    req.push_str(&format!("get p{i} p{}\r\n", i + 20_000));
                    expect.push(None);
                }
            }
        }
        let got = c.tx_str(req.as_bytes());
        // Walk the replies in order.
        let mut rest = got.as_str();
        for (j, e) in expect.iter().enumerate() {
            let i = base + j;
            match e {
                Some(line) => {
                    assert!(
                        rest.starts_with(line.as_str()),
                        "request {j} of {base}: {rest:.80}"
                    );
                    rest = &rest[line.len()..];
                }
                None if j % 10 == 7 => {
                    let r = ["DELETED\r\n", "NOT_FOUND\r\n"]
                        .into_iter()
                        .find(|r| rest.starts_with(r))
                        .unwrap_or_else(|| panic!("delete {j}: {rest:.80}"));
                    rest = &rest[r.len()..];
                }
                None => {
                    for k in [i, i + 20_000] {
                        let v = value(k);
                        let line = format!("VALUE p{k} 0 {}\r\n{v}\r\n", v.len());
                        if rest.starts_with(&line) {
                            rest = &rest[line.len()..];
                            served += 1;
                        } else {
                            missing += 1;
                        }
                    }
                    assert!(rest.starts_with("END\r\n"), "get {j} of {base}: {rest:.80}");
                    rest = &rest[5..];
                }
            }
        }
        assert!(rest.is_empty(), "extra output: {rest:.80}");
    }
    assert!(
        missing <= served / 200,
        "{missing} missing, {served} served"
    );
    let ahead = stat(&mut c, "flash_reads_ahead");
    assert!(ahead > 1_000.0, "only {ahead} reads ahead");
    assert_eq!(stat(&mut c, "flash_verify_failures"), 0.0);
    drop(c);
    h.shutdown();
    h.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}
