//! Key dumps as memcached 1.6.18 gives them: `lru_crawler metadump`
//! (all, hash, class lists, refusals), `stats cachedump`, a dump larger
//! than the connection's output bound (streamed, every key once), and the
//! real tools against the binary next to Debian's memcached with the same
//! keys: `memcached-tool HOST:PORT keys` and `dump`, and libmemcached's
//! `memcdump` (tests/interop/install.sh installs them; a test without them
//! says so and passes).
//!
//! Cost: about 2 s (two servers, three tool runs, a 20 000-key dump).

mod common;

use common::memcached::Memcached;
use common::process::Proc;
use common::{server, server_with, tx, Client};
use std::collections::BTreeSet;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// The `key=... exp=...` lines of a metadump, without `END`.
fn metadump(c: &mut Client, which: &str) -> Vec<String> {
    let got = tx(
        &mut c.s,
        &format!("lru_crawler metadump {which}\r\n"),
        "END\r\n",
    );
    assert!(got.ends_with("\nEND\r\n") || got == "END\r\n", "{got:?}");
    // Item lines end with a bare \n, as memcached's.
    assert!(!got.contains("\r\nkey="), "{got:?}");
    got.lines()
        .filter(|l| *l != "END")
        .map(str::to_string)
        .collect()
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    line.split(' ')
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
}

#[test]
fn metadump_lists_ram_items_as_memcached_does() {
    let h = server();
    let mut c = Client::new(&h);
    let t0 = now();
    let big = "y".repeat(3000);
    let set = format!(
        "set foo 5 0 3\r\nbar\r\nset sp%ce 1 100 1\r\nx\r\nset big 0 0 3000\r\n{big}\r\n\
         set gone 0 0 1\r\nz\r\ndelete gone\r\nget foo\r\n"
    );
    c.tx(set.as_bytes());
    let all = metadump(&mut c, "all");
    assert_eq!(all.len(), 3, "{all:?}");
    let by_key = |k: &str| {
        all.iter()
            .find(|l| field(l, "key") == k)
            .unwrap_or_else(|| panic!("{k} not in {all:?}"))
            .clone()
    };
    let foo = by_key("foo");
    assert_eq!(field(&foo, "exp"), "-1");
    assert_eq!(field(&foo, "fetch"), "yes");
    assert_eq!(field(&foo, "cls"), "1");
    let la: u64 = field(&foo, "la").parse().unwrap();
    assert!(la >= t0 && la <= now(), "la {la}");
    // URI-encoded key, absolute expiry, not fetched.
    let space = by_key("sp%25ce");
    let exp: u64 = field(&space, "exp").parse().unwrap();
    assert!((t0 + 99..=now() + 100).contains(&exp), "exp {exp}");
    assert_eq!(field(&space, "fetch"), "no");
    let b = by_key("big");
    assert!(field(&b, "size").parse::<u64>().unwrap() >= 3000);
    let cas: Vec<u64> = ["foo", "sp%25ce", "big"]
        .iter()
        .map(|k| field(&by_key(k), "cas").parse().unwrap())
        .collect();
    assert!(cas[0] < cas[1] && cas[1] < cas[2], "{cas:?}");

    // hash and class 1 list the same; another valid class lists nothing.
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(sorted(metadump(&mut c, "hash")), sorted(all.clone()));
    assert_eq!(sorted(metadump(&mut c, "1,2")), sorted(all.clone()));
    assert!(metadump(&mut c, "2").is_empty());

    // Refusals, each as memcached 1.6.18 answers.
    for (req, want) in [
        ("lru_crawler metadump 0", "BADCLASS invalid class id\r\n"),
        ("lru_crawler metadump 64", "BADCLASS invalid class id\r\n"),
        ("lru_crawler metadump 1,x", "BADCLASS invalid class id\r\n"),
        ("lru_crawler metadump", "ERROR\r\n"),
        ("lru_crawler metadump all extra", "ERROR\r\n"),
        ("lru_crawler mgdump all", "ERROR\r\n"),
        ("lru_crawler", "ERROR\r\n"),
        ("lru_crawler crawl all", "OK\r\n"),
        ("lru_crawler crawl 99", "BADCLASS invalid class id\r\n"),
        (
            "lru_crawler crawl hash",
            "ERROR an unknown error happened\r\n",
        ),
        ("lru_crawler tocrawl 10", "OK\r\n"),
        (
            "lru_crawler sleep x",
            "CLIENT_ERROR bad command line format\r\n",
        ),
        (
            "lru_crawler enable",
            "ERROR failed to start lru crawler thread\r\n",
        ),
        ("lru_crawler disable", "OK\r\n"),
        (
            "lru_crawler metadump all",
            "CLIENT_ERROR lru crawler disabled\r\n",
        ),
        ("lru_crawler enable", "OK\r\n"),
        ("stats cachedump 1", "CLIENT_ERROR bad command line\r\n"),
        (
            "stats cachedump x 0",
            "CLIENT_ERROR bad command line format\r\n",
        ),
        ("stats cachedump 64 0", "CLIENT_ERROR Illegal slab id\r\n"),
        ("stats cachedump 2 0", "END\r\n"),
    ] {
        assert_eq!(c.tx_str(format!("{req}\r\n").as_bytes()), want, "{req}");
    }
    assert_eq!(metadump(&mut c, "all").len(), 3);

    // stats cachedump: raw key, value bytes, absolute expiry (0 = never).
    let cd = c.tx_str(b"stats cachedump 1 0\r\n");
    let items: BTreeSet<&str> = cd.lines().collect();
    let want = format!("ITEM sp%ce [1 b; {exp} s]");
    for line in [
        "ITEM foo [3 b; 0 s]",
        "ITEM big [3000 b; 0 s]",
        &want,
        "END",
    ] {
        assert!(items.contains(line), "{line} not in {cd:?}");
    }
    assert_eq!(c.tx_str(b"stats cachedump 1 2\r\n").lines().count(), 3);
}

/// 20 000 keys are about 1.3 MB of metadump, twenty times the output bound:
/// the dump is streamed as the client reads, and lists each key once.
#[test]
fn a_dump_larger_than_the_output_bound_lists_every_key_once() {
    let h = server_with(|c| c.server.max_pending_output = 16 << 10);
    let mut c = Client::new(&h);
    let n = 20_000;
    let mut batch = String::new();
    for i in 0..n {
        batch.push_str(&format!("set key:{i} 0 0 2 noreply\r\nvv\r\n"));
        if batch.len() > 60_000 {
            c.tx(batch.as_bytes());
            batch.clear();
        }
    }
    c.tx(batch.as_bytes());
    let lines = metadump(&mut c, "all");
    let keys: BTreeSet<&str> = lines.iter().map(|l| field(l, "key")).collect();
    assert_eq!(lines.len(), n, "a key listed twice");
    assert_eq!(keys.len(), n);
    assert!(keys.contains("key%3A0") && keys.contains("key%3A19999"));
    // The connection is usable afterwards.
    assert_eq!(
        c.tx_str(b"get key:7\r\n"),
        "VALUE key:7 0 2\r\nvv\r\nEND\r\n"
    );
}

const TOOL: &str = "/usr/share/memcached/scripts/memcached-tool";

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// `memcached-tool keys` lines with `la` and `cas` dropped (they differ by
/// server), and `size` (memcached's item header is larger), sorted.
fn tool_keys(addr: &str) -> Vec<String> {
    let mut v: Vec<String> = run(TOOL, &[addr, "keys"])
        .lines()
        .map(|l| {
            format!(
                "{} {} {}",
                field(l, "key"),
                field(l, "exp"),
                field(l, "fetch")
            )
        })
        .collect();
    v.sort();
    v
}

/// `memcached-tool dump`'s `add` blocks, sorted.
fn tool_dump(addr: &str) -> Vec<String> {
    let out = run(TOOL, &[addr, "dump"]);
    let mut v: Vec<String> = out
        .split("\r\n")
        .collect::<Vec<_>>()
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| format!("{} | {}", c[0], c[1]))
        .collect();
    v.sort();
    v
}

fn memcdump(addr: &str) -> Vec<String> {
    let mut v: Vec<String> = run("memcdump", &[&format!("--servers={addr}")])
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

#[test]
fn memcached_tool_and_memcdump_see_what_they_see_on_memcached() {
    let Some(mc) = Memcached::start() else {
        eprintln!("skipped: /usr/bin/memcached absent (run tests/interop/install.sh)");
        return;
    };
    let tc = Proc::start(&["-m", "32"]);
    let exp = now() + 3600;
    let data = format!(
        "set plain 3 0 5\r\nhello\r\nset with%20space 0 {exp} 2\r\nhi\r\n\
         set k:ü 7 0 4\r\nümm\r\nset read 0 0 1\r\nr\r\nget read\r\n"
    );
    let mc_addr = mc.addr();
    let tc_addr = tc.addr.to_string();
    for addr in [&mc_addr, &tc_addr] {
        let mut s = TcpStream::connect(addr.as_str()).unwrap();
        let got = tx(&mut s, &data, "END\r\n");
        assert_eq!(got.matches("STORED").count(), 4, "{addr}: {got:?}");
    }
    if Path::new(TOOL).exists() {
        let keys = tool_keys(&tc_addr);
        assert_eq!(keys.len(), 4, "{keys:?}");
        assert_eq!(keys, tool_keys(&mc_addr));
        let dump = tool_dump(&tc_addr);
        assert!(
            dump.contains(&"add plain 3 0 5 | hello".to_string()),
            "{dump:?}"
        );
        assert_eq!(dump, tool_dump(&mc_addr));
    } else {
        eprintln!("skipped memcached-tool: {TOOL} absent (Debian's memcached ships it)");
    }
    if Command::new("memcdump").arg("--help").output().is_ok() {
        // memcdump prints a key up to its first non-graphic byte ("k:").
        let keys = memcdump(&tc_addr);
        assert_eq!(keys, ["k:", "plain", "read", "with%20space"]);
        // memcached's cachedump walks only the COLD LRU: a key fetched
        // since it was stored (in WARM) may be missing there. tiercache
        // lists every RAM item.
        let theirs = memcdump(&mc_addr);
        assert!(theirs.iter().all(|k| keys.contains(k)), "{theirs:?}");
        assert!(theirs.len() >= 3, "{theirs:?}");
    } else {
        eprintln!("skipped memcdump: absent (libmemcached-tools; tests/interop/install.sh)");
    }
}
