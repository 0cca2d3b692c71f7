//! The parse the Prometheus memcached_exporter (v0.11) does of `stats`:
//! the exporter's client (grobie/gomemcache) splits `stats`, `stats slabs`
//! and `stats items` lines by their colons into global, per-class and
//! per-class item maps, and the exporter then parses the keys it exports
//! as floats (`rusage_*` as seconds.micros) and fails the whole scrape
//! (`memcached_up 0`) when `cmd_set`, the `cas_*` counters or a per-class
//! `cmd_set`, `cas_hits`, `cas_badval` is missing, or any key it reads is
//! not a number. Here every key it reads must be present and numeric
//! (absent keys it would skip, which loses series, so they count as
//! failures too, except those listed).
//!
//! Cost: each test starts one or two servers, well under a second each.

mod common;

use common::memcached::Memcached;
use common::process::Proc;
use common::stats_client::Client;
use common::stats_differences::{listed, ONLY_MEMCACHED};
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The stats maps the exporter's client builds: global, per class
/// (`stats slabs`), per class items (`stats items`), and settings.
#[derive(Default, Debug)]
struct Scrape {
    global: BTreeMap<String, String>,
    slabs: BTreeMap<i64, BTreeMap<String, String>>,
    items: BTreeMap<i64, BTreeMap<String, String>>,
    settings: BTreeMap<String, String>,
}

/// What grobie/gomemcache does with the lines: a line counts only when it
/// splits on single spaces into exactly `STAT key value`; the key split on
/// colons is global (1 part), per class (2: the class must be an integer,
/// or the whole scrape fails) or per class items (3: the middle one an
/// integer). `stats settings` lines must have a key and a value.
fn scrape(addr: SocketAddr) -> Result<Scrape, String> {
    let mut c = Client::new(addr);
    c.prime();
    let mut s = Scrape::default();
    for g in ["stats\r\n", "stats slabs\r\n", "stats items\r\n"] {
        for line in c.until(g, "END\r\n").split("\r\n") {
            let parts: Vec<&str> = line.split(' ').collect();
            if parts.len() != 3 || parts[0] != "STAT" {
                continue;
            }
            let f: Vec<&str> = parts[1].split(':').collect();
            let v = parts[2].trim().to_string();
            match f.len() {
                1 => {
                    s.global.insert(f[0].into(), v);
                }
                2 => {
                    let n = f[0].parse().map_err(|_| format!("bad class in {line:?}"))?;
                    s.slabs.entry(n).or_default().insert(f[1].into(), v);
                }
                3 => {
                    let n = f[1].parse().map_err(|_| format!("bad class in {line:?}"))?;
                    s.items.entry(n).or_default().insert(f[2].into(), v);
                }
                _ => {}
            }
        }
    }
    for line in c.until("stats settings\r\n", "END\r\n").split("\r\n") {
        if line == "END" || line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.splitn(3, ' ').collect();
        if parts.len() != 3 || parts[0] != "STAT" {
            return Err(format!("unexpected stats settings line {line:?}"));
        }
        s.settings.insert(parts[1].into(), parts[2].trim().into());
    }
    Ok(s)
}

/// The keys the exporter (v0.11, pkg/exporter/exporter.go) reads from
/// `stats`; those marked `true` make the scrape fail when absent.
const EXPORTER_GLOBAL: &[(&str, bool)] = &[
    ("get_hits", false),
    ("get_misses", false),
    ("delete_hits", false),
    ("delete_misses", false),
    ("incr_hits", false),
    ("incr_misses", false),
    ("decr_hits", false),
    ("decr_misses", false),
    ("cas_hits", true),
    ("cas_misses", true),
    ("touch_hits", false),
    ("touch_misses", false),
    ("uptime", false),
    ("time", false),
    ("cas_badval", true),
    ("cmd_flush", false),
    ("cmd_set", true),
    ("bytes", false),
    ("limit_maxbytes", false),
    ("curr_items", false),
    ("total_items", false),
    ("bytes_read", false),
    ("bytes_written", false),
    ("curr_connections", false),
    ("total_connections", false),
    ("rejected_connections", false),
    ("conn_yields", false),
    ("listen_disabled_num", false),
    ("evictions", false),
    ("reclaimed", false),
    ("lru_crawler_starts", false),
    ("crawler_items_checked", false),
    ("crawler_reclaimed", false),
    ("moves_to_cold", false),
    ("moves_to_warm", false),
    ("moves_within_lru", false),
    // From `stats slabs`: its class-less lines land in the global map.
    ("total_malloced", false),
    ("accepting_conns", false),
];

/// Read when `extstore_limit_maxbytes` is present.
const EXPORTER_EXTSTORE: &[&str] = &[
    "extstore_compact_lost",
    "extstore_compact_rescues",
    "extstore_compact_skipped",
    "extstore_page_allocs",
    "extstore_page_evictions",
    "extstore_page_reclaims",
    "extstore_pages_used",
    "extstore_objects_evicted",
    "extstore_objects_read",
    "extstore_objects_written",
    "extstore_objects_used",
    "extstore_bytes_evicted",
    "extstore_bytes_written",
    "extstore_bytes_read",
    "extstore_bytes_used",
    "extstore_bytes_fragmented",
    "extstore_limit_maxbytes",
];

/// Per class from `stats slabs`; cmd_set, cas_hits and cas_badval are
/// required.
const EXPORTER_SLABS: &[&str] = &[
    "get_hits",
    "delete_hits",
    "incr_hits",
    "decr_hits",
    "cas_hits",
    "touch_hits",
    "cas_badval",
    "cmd_set",
    "chunk_size",
    "chunks_per_page",
    "total_pages",
    "total_chunks",
    "used_chunks",
    "free_chunks",
    "free_chunks_end",
    "mem_requested",
];

/// Per class from `stats items`.
const EXPORTER_ITEMS: &[&str] = &[
    "number",
    "age",
    "hits_to_hot",
    "hits_to_warm",
    "hits_to_cold",
    "hits_to_temp",
    "crawler_reclaimed",
    "evicted",
    "evicted_nonzero",
    "evicted_time",
    "evicted_unfetched",
    "expired_unfetched",
    "outofmemory",
    "reclaimed",
    "tailrepairs",
    "mem_requested",
    "moves_to_cold",
    "moves_to_warm",
    "moves_within_lru",
    "number_hot",
    "number_warm",
    "number_cold",
    "number_temp",
    "age_hot",
    "age_warm",
];

/// Keys the exporter reads that tiercache leaves out (ONLY_MEMCACHED says
/// why), and the one memcached 1.6.18 itself gives elsewhere
/// (`mem_requested` is in `stats items`, not `stats slabs`;
/// `number_temp` only with a temp LRU).
fn exporter_may_skip(group: &str, key: &str) -> bool {
    let listed = |g: &str| listed(ONLY_MEMCACHED, g).iter().any(|k| k == key);
    match group {
        "stats" => listed("stats") || listed("stats+flash"),
        "slabs" => key == "mem_requested",
        "items" => listed("items") || key == "number_temp",
        _ => false,
    }
}

/// The exporter's checks: every key present (unless it may be skipped),
/// numeric; rusage as seconds.micros; the settings it reads.
fn exporter_check(s: &Scrape) -> Vec<String> {
    let mut bad = Vec::new();
    let num = |bad: &mut Vec<String>,
               group: &str,
               map: &BTreeMap<String, String>,
               key: &str,
               required: bool| {
        match map.get(key) {
            None if required || !exporter_may_skip(group, key) => {
                bad.push(format!("{group}: {key} missing"))
            }
            None => {}
            Some(v) if v.parse::<f64>().is_err() => {
                bad.push(format!("{group}: {key} = {v:?} is not a number"))
            }
            Some(_) => {}
        }
    };
    for (k, required) in EXPORTER_GLOBAL {
        num(&mut bad, "stats", &s.global, k, *required);
    }
    if s.global.contains_key("extstore_limit_maxbytes") {
        for k in EXPORTER_EXTSTORE {
            num(&mut bad, "stats", &s.global, k, false);
        }
    }
    for k in ["rusage_user", "rusage_system"] {
        match s.global.get(k).and_then(|v| v.split_once('.')) {
            Some((a, b)) if a.parse::<f64>().is_ok() && b.parse::<f64>().is_ok() => {}
            _ => bad.push(format!(
                "stats: {k} is not seconds.micros: {:?}",
                s.global.get(k)
            )),
        }
    }
    if s.global.get("version").is_none_or(|v| v.is_empty()) {
        bad.push("stats: no version".into());
    }
    if s.slabs.is_empty() || s.items.is_empty() {
        bad.push("no class in stats slabs or stats items".into());
    }
    // The exporter makes one series (memcached_slab_mem_requested_bytes,
    // by class) from `mem_requested` in either group: given in both, the
    // series is collected twice and the scrape fails.
    for (n, m) in &s.slabs {
        if m.contains_key("mem_requested")
            && s.items
                .get(n)
                .is_some_and(|i| i.contains_key("mem_requested"))
        {
            bad.push(format!(
                "class {n}: mem_requested in both stats slabs and stats items"
            ));
        }
    }
    for m in s.slabs.values() {
        for k in EXPORTER_SLABS {
            let required = matches!(*k, "cmd_set" | "cas_hits" | "cas_badval");
            num(&mut bad, "slabs", m, k, required);
        }
    }
    for m in s.items.values() {
        for k in EXPORTER_ITEMS {
            num(&mut bad, "items", m, k, false);
        }
    }
    num(&mut bad, "settings", &s.settings, "maxconns", true);
    if s.settings.get("lru_crawler").map(String::as_str) == Some("yes") {
        for k in [
            "lru_crawler_sleep",
            "lru_crawler_tocrawl",
            "hot_lru_pct",
            "warm_lru_pct",
            "hot_max_factor",
            "warm_max_factor",
        ] {
            num(&mut bad, "settings", &s.settings, k, true);
        }
        if !matches!(
            s.settings.get("lru_maintainer_thread").map(String::as_str),
            Some("yes" | "no")
        ) {
            bad.push("settings: lru_maintainer_thread is not yes/no".into());
        }
    }
    bad
}

#[test]
fn exporter_scrape_parses_ram_only_and_flash() {
    let p = Proc::start(&[]);
    let s = scrape(p.addr).expect("the client's parse");
    let bad = exporter_check(&s);
    assert!(bad.is_empty(), "RAM only:\n{}", bad.join("\n"));
    // The keys that used to fail the scrape ("Failed to parse set").
    assert_eq!(s.slabs[&1]["cmd_set"], "1");
    assert_eq!(s.slabs[&1]["get_hits"], "1");

    let dir = std::env::temp_dir().join(format!("ops-exporter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ext = format!("ext_path={}:64M", dir.join("tc.flash").display());
    let f = Proc::start(&["-o", &ext]);
    let s = scrape(f.addr).expect("the client's parse");
    assert!(s.global.contains_key("extstore_limit_maxbytes"));
    let bad = exporter_check(&s);
    assert!(bad.is_empty(), "with flash:\n{}", bad.join("\n"));
    drop(f);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The check itself passes on memcached (so it tests what the exporter
/// needs, not what tiercache happens to give), and fails on a reply that
/// lacks what made the exporter report tiercache down.
#[test]
fn exporter_check_passes_on_memcached_and_fails_without_slab_cmd_set() {
    let mut s = Scrape::default();
    s.global.insert("cmd_set".into(), "1".into());
    s.slabs.insert(1, BTreeMap::new());
    let bad = exporter_check(&s);
    assert!(bad.iter().any(|b| b == "slabs: cmd_set missing"), "{bad:?}");
    assert!(
        bad.iter().any(|b| b == "stats: cas_hits missing"),
        "{bad:?}"
    );
    for g in [&mut s.slabs, &mut s.items] {
        g.entry(1)
            .or_default()
            .insert("mem_requested".into(), "1".into());
    }
    let bad = exporter_check(&s);
    assert!(
        bad.iter().any(|b| b.contains("mem_requested in both")),
        "{bad:?}"
    );

    let Some(mc) = Memcached::start() else {
        eprintln!("skipped: memcached is not installed (tests/interop/install.sh installs it)");
        return;
    };
    let s = scrape(mc.addr().parse().unwrap()).expect("the client's parse");
    let bad = exporter_check(&s);
    assert!(bad.is_empty(), "memcached:\n{}", bad.join("\n"));
}
