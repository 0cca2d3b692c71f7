//! memcached's `-o key=value` options: the parser of each one into the
//! configuration (flash `ext_*`, TLS `ssl_*` through `access.rs`, the
//! server's own), the memcached options accepted with no effect (each named
//! in the log with why), and the size and device syntax they use
//! (`512k`, `path:64G:class`).

use super::{Config, SMALL_MAX_LIMIT};
use anyhow::{bail, Context, Result};
use tiercache_engine::flash::tier::DeviceClass;

/// The `-o` keys, grouped as `--help` lists them; every one is matched in
/// [`Config::apply_extended`] (`config/tests.rs` checks that each is).
pub const OPTION_GROUPS: &[(&str, &[&str])] = &[
    (
        "server",
        &[
            "idle_timeout",
            "maintenance_nice",
            "max_get_line",
            "metrics_port",
            "metrics_addr",
            "watcher_logbuf_size",
            "maxconns_fast",
        ],
    ),
    ("cache", &["policy", "segment_size", "shards", "hashpower"]),
    ("Redis (RESP) front end", &["redis_port", "redis_listen"]),
    (
        "flash (ext_path=none: RAM only)",
        &[
            "ext_path",
            "ext_page_size",
            "ext_wbuf_count",
            "ext_item_size",
            "ext_threads",
            "ext_read_depth",
            "ext_reinsert",
            "ext_write_budget",
            "ext_wipe",
            "ext_avg_item_size",
            "ext_promote",
            "ext_low_ttl",
            "ext_max_write_wait",
            "ext_io",
            "ext_crash_safe",
            "ext_nhc",
            "ext_nhc_feedback",
            "ext_nhc_copies",
            "ext_small_max",
            "ext_small_share",
            "ext_small_flush_duty",
            "ext_small_background",
            "ext_small_first",
            "ext_small_threshold",
            "ext_small_log",
        ],
    ),
    (
        "TLS (with -Z)",
        &[
            "ssl_chain_cert",
            "ssl_key",
            "ssl_ca_cert",
            "ssl_verify_mode",
            "ssl_min_version",
            "ssl_keyformat",
            "ssl_wbuf_size",
            "ssl_session_cache",
        ],
    ),
    (
        "memcached's, accepted with no effect (logged at start with why)",
        &[
            "hash_algorithm",
            "worker_logbuf_size",
            "track_sizes",
            "no_hashexpand",
            "no_maxconns_fast",
            "slab_chunk_max",
            "slab_reassign",
            "no_slab_reassign",
            "slab_automove",
            "no_slab_automove",
            "slab_automove_ratio",
            "slab_automove_window",
            "slab_automove_freeratio",
            "slab_sizes",
            "no_chunked_items",
            "modern",
            "no_modern",
            "lru_crawler",
            "no_lru_crawler",
            "lru_maintainer",
            "no_lru_maintainer",
            "lru_crawler_sleep",
            "lru_crawler_tocrawl",
            "tail_repair_time",
            "hot_lru_pct",
            "warm_lru_pct",
            "hot_max_factor",
            "warm_max_factor",
            "temporary_ttl",
            "inline_ascii_resp",
            "no_inline_ascii_resp",
            "read_buf_mem_limit",
            "drop_privileges",
            "no_drop_privileges",
            "ext_wbuf_size",
            "ext_io_threadcount",
            "ext_io_depth",
            "ext_item_age",
            "ext_max_frag",
            "ext_compact_under",
            "ext_drop_under",
            "ext_recache_rate",
            "ext_drop_unread",
            "ext_max_sleep",
        ],
    ),
    (
        "memcached's, refused with the reason",
        &["ssl_ciphers", "ssl_kernel_tls", "sock_cookie_id"],
    ),
];

/// Parses `path:size` (memcached's ext_path); the size may be left out for
/// a block device.
pub fn parse_ext_path(v: &str) -> Result<(std::path::PathBuf, u64)> {
    parse_ext_spec(v).map(|(p, s, _)| (p, s))
}

/// Parses `path:size:class`; the class (see [`FlashSection::paths`]) may be
/// left out (fast).
pub fn parse_ext_spec(v: &str) -> Result<(std::path::PathBuf, u64, DeviceClass)> {
    let (v, class) = match v.rsplit_once(':') {
        Some((rest, c))
            // A word is a class; what starts with a digit is meant as a
            // size (`:1Z` is a bad size, not an unknown class).
            if c.starts_with(|ch: char| ch.is_ascii_alphabetic()) =>
        {
            let class = DeviceClass::parse(c).with_context(|| {
                format!("-o ext_path={v}: '{c}' is not a device class (fast or capacity; memcached's default, lowttl, compact, coldcompact, old)")
            })?;
            (rest, class)
        }
        _ => (v, DeviceClass::Fast),
    };
    let (path, size) = parse_path_size(v)?;
    Ok((path, size, class))
}

fn parse_path_size(v: &str) -> Result<(std::path::PathBuf, u64)> {
    let (path, size) = match v.rsplit_once(':') {
        Some((p, s)) if !p.is_empty() => (p, parse_size(s).with_context(|| {
            format!("-o ext_path={v}: the size after ':' is not a size (example: ext_path=/data/flash:64G)")
        })? as u64),
        _ => (v, 0),
    };
    if path.is_empty() {
        bail!("-o ext_path needs a path, for example ext_path=/data/flash:64G");
    }
    Ok((std::path::PathBuf::from(path), size))
}

/// Parses sizes like `1m`, `512k`, `4MiB`, `1048576`.
pub fn parse_size(s: &str) -> Result<usize> {
    let t = s.trim();
    let lower = t.to_ascii_lowercase();
    let (num, mult) = [
        ("gib", 1usize << 30),
        ("mib", 1 << 20),
        ("kib", 1 << 10),
        ("gb", 1 << 30),
        ("mb", 1 << 20),
        ("kb", 1 << 10),
        ("g", 1 << 30),
        ("m", 1 << 20),
        ("k", 1 << 10),
        ("b", 1),
    ]
    .iter()
    .find_map(|(suf, m)| lower.strip_suffix(suf).map(|n| (n.trim().to_string(), *m)))
    .unwrap_or((lower.clone(), 1));
    let n: usize = num
        .parse()
        .with_context(|| format!("'{s}' is not a size (examples: 1048576, 512k, 1m)"))?;
    n.checked_mul(mult)
        .with_context(|| format!("size '{s}' is too large"))
}

impl Config {
    /// One `-o` option, `key=value` or a bare `key`.
    pub(super) fn apply_extended(&mut self, opt: &str) -> Result<()> {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
        if self.apply_ssl_option(k, v)? {
            return Ok(());
        }
        let num = |v: &str| -> Result<usize> {
            v.parse()
                .with_context(|| format!("-o {k}: '{v}' is not a number"))
        };
        match k {
            "hashpower" => self.cache.hash_power = num(v)? as u32,
            "policy" | "eviction" => self.cache.policy = v.to_string(),
            "segment_size" => self.cache.segment_size = parse_size(v)?,
            "shards" => self.cache.shards = num(v)?,
            "max_get_line" => self.server.max_get_line = parse_size(v)?,
            "maintenance_nice" => {
                self.server.maintenance_nice = v.parse().with_context(|| {
                    format!("-o maintenance_nice: '{v}' is not a nice value (-20 to 19)")
                })?
            }
            "idle_timeout" => {
                self.server.idle_timeout = v.parse().with_context(|| {
                    format!("-o idle_timeout: '{v}' is not a number of seconds")
                })?
            }
            "metrics_port" => {
                self.server.metrics_port = v
                    .parse()
                    .with_context(|| format!("-o metrics_port: '{v}' is not a port number"))?
            }
            "redis_port" => {
                self.redis.port = v
                    .parse()
                    .with_context(|| format!("-o redis_port: '{v}' is not a port number"))?
            }
            "redis_listen" => self.redis.listen = v.to_string(),
            "metrics_addr" => {
                v.parse::<std::net::IpAddr>()
                    .with_context(|| format!("-o metrics_addr: '{v}' is not an IP address"))?;
                self.server.metrics_addr = v.to_string();
            }
            "ext_path" if v == "none" => self.flash.paths.clear(),
            "ext_path" => {
                parse_ext_path(v)?;
                self.flash.paths.push(v.to_string());
            }
            "ext_page_size" => self.flash.page_size = num(v)? << 20,
            "ext_wbuf_count" => self.flash.tier.write_buffers = num(v)?,
            "ext_item_size" => self.flash.tier.min_value_size = num(v)?,
            "ext_threads" => self.flash.engine.read_threads = num(v)?,
            "ext_read_depth" => self.flash.engine.read_depth = num(v)?,
            "ext_reinsert" => self.flash.tier.reinsert_hits = flag(k, v)?,
            "ext_write_budget" => self.flash.tier.write_budget = parse_size(v)? as u64,
            "ext_wipe" => self.flash.tier.wipe = true,
            "ext_avg_item_size" => self.flash.engine.avg_item_size = parse_size(v)?,
            "ext_promote" => self.flash.promote = v.to_string(),
            "ext_small_max" => {
                let n = parse_size(v)?;
                if n > SMALL_MAX_LIMIT {
                    bail!("ext_small_max={v}: at most {SMALL_MAX_LIMIT} bytes of key and value fit a 4 KiB set of the small-object store");
                }
                self.flash.engine.small_max = n;
            }
            "ext_small_share" => {
                let n: u64 = num(v)? as u64;
                if !(1..=90).contains(&n) {
                    bail!("ext_small_share={v}: a percent of the first flash device, 1 to 90");
                }
                self.flash.engine.small_percent = n;
            }
            "ext_small_flush_duty" => self.flash.engine.small_flush_duty = num(v)? as u32,
            "ext_small_threshold" => {
                let n = num(v)?;
                if !(1..=8).contains(&n) {
                    bail!("ext_small_threshold={v}: log objects of one set needed to move them into it, 1 to 8");
                }
                self.flash.engine.small_threshold = n;
            }
            "ext_small_log" => {
                let n = num(v)? as u64;
                if !(1..=50).contains(&n) {
                    bail!("ext_small_log={v}: a percent of the small-object store for its log, 1 to 50");
                }
                self.flash.engine.small_log_percent = n;
            }
            "ext_low_ttl" => self.flash.tier.low_ttl = num(v)? as u32,
            "ext_max_write_wait" => {
                self.flash.tier.max_write_wait =
                    std::time::Duration::from_millis(num(v)? as u64)
            }
            "ext_io" => self.flash.io = v.to_string(),
            "ext_nhc" => self.flash.tier.nhc = flag(k, v)?,
            "ext_nhc_feedback" => self.flash.nhc_feedback = v.to_string(),
            "ext_nhc_copies" => self.flash.nhc_copies = v.to_string(),
            "ext_small_background" => self.flash.engine.small_background = flag(k, v)?,
            "ext_small_first" => self.flash.engine.small_first = flag(k, v)?,
            "ext_crash_safe" => self.flash.tier.crash_journal = flag(k, v)?,
            // memcached options with no counterpart here: accepted, so that
            // memcached command lines run, and named in the log with why.
            "ext_wbuf_size" | "ext_io_threadcount" | "ext_max_frag" | "ext_compact_under"
            | "ext_drop_under" | "ext_recache_rate" | "ext_drop_unread"
            | "ext_max_sleep" => self.notes.push(format!(
                "-o {k} has no effect: tiercache's flash tier writes whole segments (one per write buffer, ext_page_size) and reclaims them whole, without memcached's compaction"
            )),
            "slab_chunk_max" | "slab_reassign" | "no_slab_reassign" | "slab_automove"
            | "no_slab_automove" | "slab_automove_ratio" | "slab_automove_window"
            | "slab_automove_freeratio" | "slab_sizes" | "no_chunked_items" | "modern"
            | "no_modern" => self.notes.push(format!(
                "-o {k} has no effect: tiercache has no slab classes to size or rebalance"
            )),
            "lru_crawler" | "no_lru_crawler" | "lru_maintainer" | "no_lru_maintainer"
            | "lru_crawler_sleep" | "lru_crawler_tocrawl" | "tail_repair_time" | "hot_lru_pct"
            | "warm_lru_pct" | "hot_max_factor" | "warm_max_factor" => self.notes.push(format!(
                "-o {k} has no effect: tiercache has no LRU maintainer; expired items are freed by a once-a-second sweep and the eviction policy (-o policy) picks victims"
            )),
            "temporary_ttl" => self.notes.push(
                "-o temporary_ttl has no effect: short-TTL items are not kept apart in RAM (on flash, -o ext_low_ttl groups them)".into(),
            ),
            "maxconns_fast" => self.notes.push(
                "-o maxconns_fast: always on (a connection over -c is told so and closed at once)".into(),
            ),
            "no_maxconns_fast" => self.notes.push(
                "-o no_maxconns_fast has no effect: a connection over -c is always told so and closed at once (maxconns_fast)".into(),
            ),
            "hash_algorithm" => self.notes.push(format!(
                "-o hash_algorithm={v} has no effect: tiercache hashes keys with xxh3"
            )),
            "watcher_logbuf_size" => self.server.watcher_logbuf_size = num(v)? << 10,
            "worker_logbuf_size" => self.notes.push(
                "-o worker_logbuf_size has no effect: tiercache's workers put `watch` lines straight into each watcher's buffer (watcher_logbuf_size)".into(),
            ),
            "track_sizes" => self.notes.push(
                "-o track_sizes has no effect: `stats sizes` is not kept".into(),
            ),
            "no_hashexpand" => self.notes.push(
                "-o no_hashexpand has no effect: tiercache's index resizes itself without a pause".into(),
            ),
            "inline_ascii_resp" | "no_inline_ascii_resp" | "read_buf_mem_limit" => {
                self.notes.push(format!(
                    "-o {k} has no effect: tiercache's connection buffers are its own, bounded per connection (README, Connections and their memory)"
                ))
            }
            "drop_privileges" | "no_drop_privileges" => self.notes.push(format!(
                "-o {k} has no effect: tiercache installs no system call filter of its own (run it under systemd's SystemCallFilter)"
            )),
            "ext_io_depth" => self.notes.push(
                "-o ext_io_depth has no effect: memcached's reads per IO thread; tiercache's workers read flash through io_uring with up to -o ext_read_depth reads of a device in the kernel, all workers together (default 64), or through the pread pool of ext_threads".into(),
            ),
            "ext_item_age" => self.notes.push(
                "-o ext_item_age has no effect: items move to flash when the eviction policy takes them out of RAM, whatever their idle time".into(),
            ),
            "sock_cookie_id" => bail!(
                "-o sock_cookie_id is not supported: tiercache does not mark its sockets (SO_MARK) for firewall rules; remove the option, or mark the traffic by port in the firewall"
            ),
            _ => bail!(
                "unknown extended option '-o {k}': tiercache --help lists the keys ({})",
                OPTION_GROUPS
                    .iter()
                    .flat_map(|(_, keys)| keys.iter().copied())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
        Ok(())
    }
}

/// The one parser of `-o` booleans: `1`, `true`, `yes`, `on` (or the bare
/// `-o name`, as memcached's switches) or `0`, `false`, `no`, `off`.
pub fn flag(k: &str, v: &str) -> Result<bool> {
    match v {
        "" | "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => bail!("{k} takes 1 or 0, not '{v}'"),
    }
}
