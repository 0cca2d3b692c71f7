//! `stats` groups against Debian's memcached 1.6.18.
//!
//! - `*_key_sets_match_memcached`: starts memcached and tiercache side by
//!   side with the same options, stores and reads one key in both, and
//!   compares the key sets (not the values) of `stats`, `stats slabs`,
//!   `stats items`, `stats settings` and `stats conns`. Every difference
//!   must be listed below, with its reason, and every listed difference
//!   must still be one (so the lists stay true). Skipped, with a message,
//!   when memcached is not installed (tests/interop/install.sh installs it).
//! - The Prometheus memcached_exporter's parse is in `stats_exporter.rs`.
//!
//! Cost: each test starts one or two servers, well under a second each;
//! the crawler test waits 1 to 3 s for the expiry sweep.

mod common;

use common::free_port;
use common::process::Proc;
use common::stats_client::Client;
use common::stats_differences::{covered, listed, ONLY_MEMCACHED, ONLY_TIERCACHE};
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The memcached binary, or None (then the caller skips).
fn memcached_bin() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("memcached"))
        .find(|p| p.is_file())
}

fn skip(why: &str) {
    eprintln!("skipped: {why} (tests/interop/install.sh installs memcached)");
}

/// A memcached child, killed on drop.
struct Memcached {
    child: Child,
    addr: SocketAddr,
}

impl Memcached {
    fn start(bin: &std::path::Path, extra: &[&str]) -> Memcached {
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.args(common::as_root());
        let child = cmd.spawn().expect("run memcached");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let t = Instant::now();
        while TcpStream::connect(addr).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "memcached did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Memcached { child, addr }
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The key set of each group; per-class and per-connection numbers
/// (`1:`, `items:1:`, `<fd>:`) are dropped so that sets compare.
fn key_sets(addr: SocketAddr) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut c = Client::new(addr);
    c.prime();
    // A second, idle connection, so that `stats conns` shows one of each.
    let _idle = Client::new(addr);
    std::thread::sleep(Duration::from_millis(50));
    let mut out = BTreeMap::new();
    for g in ["", "slabs", "items", "settings", "conns"] {
        let keys = c
            .stats(g)
            .into_iter()
            .map(|(k, _)| {
                let k = k.strip_prefix("items:").unwrap_or(&k).to_string();
                match k.split_once(':') {
                    Some((n, rest)) if n.parse::<u32>().is_ok() => rest.to_string(),
                    _ => k,
                }
            })
            .collect();
        out.insert(if g.is_empty() { "stats" } else { g }, keys);
    }
    out
}

/// Compares the key sets of both servers, group by group, against the
/// lists above; `flash`: both run with a flash tier (extstore).
fn compare(mc: SocketAddr, tc: SocketAddr, flash: bool) {
    let m = key_sets(mc);
    let t = key_sets(tc);
    let mut problems = Vec::new();
    for (group, mkeys) in &m {
        let tkeys = &t[group];
        let mut only_mc = listed(ONLY_MEMCACHED, group);
        let mut only_tc = listed(ONLY_TIERCACHE, group);
        if flash && *group == "stats" {
            only_mc.extend(listed(ONLY_MEMCACHED, "stats+flash"));
            only_tc.extend(listed(ONLY_TIERCACHE, "stats+flash"));
        }
        for k in mkeys.difference(tkeys) {
            if !covered(&only_mc, k) {
                problems.push(format!(
                    "{group}: memcached has {k}, tiercache does not (not listed)"
                ));
            }
        }
        for k in tkeys.difference(mkeys) {
            if !covered(&only_tc, k) {
                problems.push(format!(
                    "{group}: tiercache has {k}, memcached does not (not listed)"
                ));
            }
        }
        for k in &only_mc {
            if tkeys.contains(k) {
                problems.push(format!(
                    "{group}: {k} is listed as memcached's only but tiercache has it"
                ));
            } else if !mkeys.contains(k) {
                problems.push(format!(
                    "{group}: {k} is listed but memcached does not give it"
                ));
            }
        }
        for p in &only_tc {
            if !tkeys.iter().any(|k| covered(std::slice::from_ref(p), k)) {
                problems.push(format!(
                    "{group}: {p} is listed as tiercache's only but it does not give it"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn ram_only_key_sets_match_memcached() {
    let Some(bin) = memcached_bin() else {
        return skip("memcached is not installed");
    };
    let mc = Memcached::start(&bin, &["-o", "idle_timeout=600"]);
    let tc = Proc::start(&["-o", "idle_timeout=600"]);
    compare(mc.addr, tc.addr, false);
}

#[test]
fn flash_key_sets_match_memcached_with_extstore() {
    let Some(bin) = memcached_bin() else {
        return skip("memcached is not installed");
    };
    let dir = std::env::temp_dir().join(format!("ops-stats-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mcf = format!("ext_path={}:64m", dir.join("mc.flash").display());
    let tcf = format!("ext_path={}:64M", dir.join("tc.flash").display());
    let mc = Memcached::start(&bin, &["-o", &mcf]);
    let tc = Proc::start(&["-o", &tcf]);
    compare(mc.addr, tc.addr, true);
    drop(tc);
    drop(mc);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The values behind the crawler keys: the once-a-second expiry sweep runs
/// (`lru_crawler_starts` grows) and frees an expired item without a read
/// (`crawler_reclaimed`, in `stats` and `stats items`). 1 to 3 s: the
/// item's TTL is 1 s and the sweep runs once a second.
#[test]
fn the_expiry_sweep_is_counted_as_memcacheds_crawler() {
    let p = Proc::start(&[]);
    let mut c = Client::new(p.addr);
    assert_eq!(c.until("set gone 0 1 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(c.until("set stays 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    let get = |c: &mut Client, g: &str, k: &str| -> u64 {
        c.stats(g)
            .into_iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or_else(|| panic!("no {k} in stats {g}"))
    };
    let t = Instant::now();
    while get(&mut c, "", "crawler_reclaimed") == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(6),
            "the sweep freed nothing"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(get(&mut c, "", "crawler_reclaimed"), 1);
    assert!(get(&mut c, "", "lru_crawler_starts") >= 1);
    assert_eq!(get(&mut c, "items", "items:1:crawler_reclaimed"), 1);
    assert_eq!(get(&mut c, "", "curr_items"), 1);
}

/// memcached's own `memcached-tool` (Debian ships it with memcached) reads
/// `stats items` and `stats slabs` for `display`, and `stats` and
/// `stats settings` for the others: each runs against tiercache and shows
/// the one class, the counters and the settings. Skipped, with a message,
/// without memcached's package. Under a second.
#[test]
fn memcached_tool_display_stats_and_settings_work() {
    let tool = std::path::Path::new("/usr/share/memcached/scripts/memcached-tool");
    if !tool.is_file() {
        return skip("memcached-tool is not installed (Debian's memcached package has it)");
    }
    let p = Proc::start(&[]);
    Client::new(p.addr).prime();
    let run = |cmd: &str| -> String {
        let out = Command::new("perl")
            .arg(tool)
            .arg(p.addr.to_string())
            .arg(cmd)
            .stdin(Stdio::null())
            .output()
            .expect("run perl");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.is_empty(), "{cmd}: {err}");
        String::from_utf8(out.stdout).unwrap()
    };
    let display = run("display");
    let class: Vec<&str> = display
        .lines()
        .find(|l| l.trim_start().starts_with("1 "))
        .unwrap_or_else(|| panic!("no class 1 row: {display}"))
        .split_whitespace()
        .collect();
    // #, Item_Size, Max_age, Pages, Count, ...: one page, one item.
    assert_eq!((class[3], class[4]), ("1", "1"), "{display}");
    let stats = run("stats");
    assert!(
        stats
            .lines()
            .any(|l| l.split_whitespace().eq(["cmd_set", "1"])),
        "{stats}"
    );
    let settings = run("settings");
    assert!(
        settings
            .lines()
            .any(|l| l.split_whitespace().next() == Some("inter")),
        "{settings}"
    );
}
