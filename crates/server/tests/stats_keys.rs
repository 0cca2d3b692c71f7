//! `stats` groups against Debian's memcached 1.6.18, and the parse the
//! Prometheus memcached_exporter (v0.11) does.
//!
//! - `*_key_sets_match_memcached`: starts memcached and tiercache side by
//!   side with the same options, stores and reads one key in both, and
//!   compares the key sets (not the values) of `stats`, `stats slabs`,
//!   `stats items`, `stats settings` and `stats conns`. Every difference
//!   must be listed below, with its reason, and every listed difference
//!   must still be one (so the lists stay true). Skipped, with a message,
//!   when memcached is not installed (tests/interop/install.sh installs it).
//! - `exporter_*`: the exporter's client (grobie/gomemcache) splits
//!   `stats`, `stats slabs` and `stats items` lines by their colons into
//!   global, per-class and per-class item maps, and the exporter then
//!   parses the keys it exports as floats (`rusage_*` as seconds.micros)
//!   and fails the whole scrape (`memcached_up 0`) when `cmd_set`, the
//!   `cas_*` counters or a per-class `cmd_set`, `cas_hits`, `cas_badval`
//!   is missing, or any key it reads is not a number. Here every key it
//!   reads must be present and numeric (absent keys it would skip, which
//!   loses series, so they count as failures too, except those listed).
//!
//! Cost: each test starts one or two servers, well under a second each;
//! the crawler test waits 1 to 3 s for the expiry sweep.

mod common;

use common::free_port;
use common::process::Proc;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Keys memcached 1.6.18 gives and tiercache does not: (group, keys, why).
const ONLY_MEMCACHED: &[(&str, &[&str], &str)] = &[
    ("stats", &["libevent"], "tiercache's event loops are mio (epoll), not libevent"),
    (
        "stats",
        &[
            "response_obj_oom",
            "response_obj_count",
            "response_obj_bytes",
            "read_buf_count",
            "read_buf_bytes",
            "read_buf_bytes_free",
            "read_buf_oom",
        ],
        "memcached's pooled response objects and read buffers; tiercache's buffers belong to \
         their connection and are bounded per connection (README, Connections and their memory)",
    ),
    (
        "stats",
        &[
            "slab_reassign_rescues",
            "slab_reassign_chunk_rescues",
            "slab_reassign_evictions_nomem",
            "slab_reassign_inline_reclaim",
            "slab_reassign_busy_items",
            "slab_reassign_busy_deletes",
            "slab_reassign_running",
            "slabs_moved",
        ],
        "no slab classes, so no page moves between them: memory is taken and reclaimed a segment at a time",
    ),
    (
        "stats",
        &[
            "lru_crawler_running",
            "lru_maintainer_juggles",
            "crawler_items_checked",
            "lrutail_reflocked",
            "moves_to_cold",
            "moves_to_warm",
            "moves_within_lru",
            "direct_reclaims",
            "lru_bumps_dropped",
            "evicted_active",
        ],
        "memcached's segmented LRU with its maintainer and crawler threads; tiercache evicts \
         whole segments by its policy (S3-FIFO by default); its counterpart of the crawler \
         is a once-a-second expiry sweep (lru_crawler_starts, crawler_reclaimed), which \
         does not count the items it checks",
    ),
    (
        "stats",
        &["malloc_fails"],
        "item memory is preallocated segments; a set that finds none counts in store_no_memory",
    ),
    (
        "stats",
        &["unexpected_napi_ids", "round_robin_fallback"],
        "no NAPI-id thread assignment (memcached -o napi_ids)",
    ),
    (
        "stats+flash",
        &["extstore_objects_evicted", "extstore_bytes_evicted"],
        "not counted yet: the flash tier counts the segments it reclaims (extstore_page_evictions), \
         not the items and bytes dropped with them",
    ),
    (
        "stats+flash",
        &["extstore_bytes_used", "extstore_bytes_fragmented"],
        "live bytes per flash segment are not tracked (extstore_objects_used counts the items)",
    ),
    (
        "stats+flash",
        &["get_aborted_extstore", "get_oom_extstore"],
        "a flash read is never abandoned for want of memory: it reads into the worker's own \
         buffers; failed reads count in flash_read_errors",
    ),
    (
        "items",
        &[
            "number_hot",
            "number_warm",
            "number_cold",
            "age_hot",
            "age_warm",
            "hits_to_hot",
            "hits_to_warm",
            "hits_to_cold",
            "hits_to_temp",
            "moves_to_cold",
            "moves_to_warm",
            "moves_within_lru",
            "direct_reclaims",
            "evicted_active",
            "crawler_items_checked",
        ],
        "memcached's segmented LRU (hot, warm, cold, temp) and its crawler; tiercache's \
         segments have no such sub-queues (`age` is the oldest RAM segments' least recent access)",
    ),
    (
        "items",
        &["evicted_nonzero", "evicted_time"],
        "not counted yet: evictions take a segment at a time, and its items' TTLs and last \
         access times are not summed",
    ),
    (
        "settings",
        &[
            "chunk_size",
            "growth_factor",
            "slab_chunk_max",
            "slab_reassign",
            "slab_automove",
            "slab_automove_ratio",
            "slab_automove_window",
            "slab_automove_freeratio",
        ],
        "slab allocator settings: tiercache has one size-independent segment log (segment_size)",
    ),
    (
        "settings",
        &[
            "lru_crawler",
            "lru_crawler_sleep",
            "lru_crawler_tocrawl",
            "lru_maintainer_thread",
            "lru_segmented",
            "hot_lru_pct",
            "warm_lru_pct",
            "hot_max_factor",
            "warm_max_factor",
            "temp_lru",
            "temporary_ttl",
            "tail_repair_time",
            "oldest",
        ],
        "segmented LRU, maintainer and crawler settings (tiercache: eviction_policy)",
    ),
    (
        "settings",
        &[
            "ext_compact_under",
            "ext_drop_under",
            "ext_max_frag",
            "ext_max_sleep",
            "ext_recache_rate",
            "ext_item_age",
        ],
        "extstore compaction and recache tunables: tiercache reclaims whole flash segments \
         and promotes by -o ext_promote",
    ),
    (
        "settings",
        &["worker_logbuf_size"],
        "no per-worker log buffers: `watch` lines go straight into each watcher's \
         bounded buffer (watcher_logbuf_size)",
    ),
    (
        "settings",
        &["reqs_per_event"],
        "tiercache runs every request a read brought (no -R yield; conn_yields is 0)",
    ),
    ("settings", &["num_threads_per_udp"], "no UDP (-U 0 only)"),
    (
        "settings",
        &["inline_ascii_response", "read_buf_mem_limit"],
        "memcached's response buffer internals",
    ),
    (
        "settings",
        &["num_napi_ids", "memory_file"],
        "no NAPI ids; no restartable memory file (tiercache restarts from its snapshot)",
    ),
];

/// Keys tiercache gives and memcached does not: (group, keys, why).
const ONLY_TIERCACHE: &[(&str, &[&str], &str)] = &[
    (
        "stats",
        &[
            "tiercache_version",
            "segment_size",
            "segments_allocated",
            "segments_in_use",
            "reinserted",
            "shards",
            "dram_overhead_per_item",
            "conn_output_stalls",
            "flash_reads_ahead",
            "index_*",
            "sla_*",
            "segment_evacuat*",
            "sweep_segments_*",
            "shard_lock_*",
            "malloc_trim*",
        ],
        "tiercache's own figures (README): `version` is the memcached protocol level, \
         `tiercache_version` the server's; index_* describe the compact index; sla_* the \
         SLA view (docs/SLA.md); segment_evacuat* the lock held while a RAM segment \
         leaves; shard_lock_* the shards' lock holds by cause; malloc_trim* the heap given back to the OS (docs/ARCHITECTURE.md)",
    ),
    (
        "stats+flash",
        &["extstore_page_size", "extstore_pages_queued"],
        "the flash segment size and the sealed segments waiting to be written",
    ),
    (
        "stats+flash",
        &["flash_*"],
        "tiercache's flash tier figures (README, The flash tier)",
    ),
    (
        "settings",
        &["interface", "eviction_policy", "segment_size"],
        "`interface` is the name tiercache used before `inter` (kept for dashboards); the \
         policy and the segment size are tiercache's own",
    ),
];

/// The listed keys of `group`; a key ending in `*` is a prefix.
fn listed(list: &[(&str, &[&str], &str)], group: &str) -> Vec<String> {
    list.iter()
        .filter(|(g, _, why)| *g == group && !why.is_empty())
        .flat_map(|(_, keys, _)| keys.iter().map(|k| k.to_string()))
        .collect()
}

fn covered(patterns: &[String], key: &str) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => key.starts_with(prefix),
        None => p == key,
    })
}

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

/// One client's view of a server: the reply to a command, up to `END`.
struct Client(TcpStream);

impl Client {
    fn new(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client(s)
    }

    fn until(&mut self, cmd: &str, end: &str) -> String {
        common::tx(&mut self.0, cmd, end)
    }

    /// `stats <group>` as (key, value) lines, in order.
    fn stats(&mut self, group: &str) -> Vec<(String, String)> {
        let cmd = if group.is_empty() {
            "stats\r\n".to_string()
        } else {
            format!("stats {group}\r\n")
        };
        self.until(&cmd, "END\r\n")
            .lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .map(|l| {
                let (k, v) = l.split_once(' ').unwrap_or((l, ""));
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    /// A key stored and read, so that per-class groups have a class.
    fn prime(&mut self) {
        assert_eq!(self.until("set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
        assert!(self
            .until("get k\r\n", "END\r\n")
            .starts_with("VALUE k 0 1"));
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

    let Some(bin) = memcached_bin() else {
        return skip("memcached is not installed");
    };
    let mc = Memcached::start(&bin, &[]);
    let s = scrape(mc.addr).expect("the client's parse");
    let bad = exporter_check(&s);
    assert!(bad.is_empty(), "memcached:\n{}", bad.join("\n"));
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
