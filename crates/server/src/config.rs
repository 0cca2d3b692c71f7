//! Configuration: memcached's command-line flags (so a memcached command line
//! works unchanged), a TOML file, and the merged effective settings, which
//! `--print-config` prints as TOML.

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};

/// Command-line flags, memcached-compatible where memcached has the flag.
#[derive(Parser, Debug, Default)]
#[command(
    name = "tiercache",
    version,
    about = "memcached-compatible cache server with a flash tier",
    disable_help_flag = true
)]
pub struct Args {
    /// TCP port to listen on (memcached -p).
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// Interface to listen on (memcached -l), default 127.0.0.1.
    #[arg(short = 'l', long = "listen")]
    pub listen: Option<String>,
    /// Number of worker threads (memcached -t).
    #[arg(short = 't', long = "threads")]
    pub threads: Option<usize>,
    /// Max simultaneous connections (memcached -c).
    #[arg(short = 'c', long = "conn-limit")]
    pub max_connections: Option<usize>,
    /// Item memory in megabytes (memcached -m).
    #[arg(short = 'm', long = "memory-limit")]
    pub memory_mb: Option<usize>,
    /// Max item size, with k/m suffix (memcached -I).
    #[arg(short = 'I', long = "max-item-size")]
    pub max_item_size: Option<String>,
    /// Verbose logging; repeat for more (memcached -v, -vv).
    #[arg(short = 'v', action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Extended options, comma separated key=value (memcached -o).
    #[arg(short = 'o', long = "extended")]
    pub extended: Vec<String>,
    /// UDP port (memcached -U); only 0 (disabled) is supported.
    #[arg(short = 'U', long = "udp-port")]
    pub udp_port: Option<u16>,
    /// User to run as (memcached -u); accepted and ignored.
    #[arg(short = 'u', long = "user")]
    pub user: Option<String>,
    /// Enable the `shutdown` command (memcached -A).
    #[arg(short = 'A', long = "enable-shutdown")]
    pub enable_shutdown: bool,
    /// TOML configuration file; flags override it.
    #[arg(long = "config")]
    pub config: Option<std::path::PathBuf>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long = "print-config")]
    pub print_config: bool,
    /// Print help.
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// Network and process settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    pub listen: String,
    pub port: u16,
    pub threads: usize,
    pub max_connections: usize,
    pub verbosity: u8,
    pub enable_shutdown: bool,
    /// Longest multiget line accepted, bytes.
    pub max_get_line: usize,
    /// Pending output per connection after which its input is not read.
    pub max_pending_output: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: "127.0.0.1".into(),
            port: 11211,
            threads: 4,
            max_connections: 1024,
            verbosity: 0,
            enable_shutdown: false,
            max_get_line: 1 << 20,
            max_pending_output: 4 << 20,
        }
    }
}

/// Cache settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// Memory for items and their index, MiB (`-m`).
    pub memory_mb: usize,
    /// Max item size in bytes (`-I`).
    pub max_item_size: usize,
    /// Eviction policy: s3fifo, clock, lru, fifo.
    pub policy: String,
    /// Segment size in bytes (0 = the max item size, at least 1 MiB).
    pub segment_size: usize,
    /// log2 of index buckets (0 = from memory).
    pub hash_power: u32,
    /// Shards (0 = from memory).
    pub shards: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            memory_mb: 64,
            max_item_size: 1 << 20,
            policy: "s3fifo".into(),
            segment_size: 0,
            hash_power: 0,
            shards: 0,
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub cache: CacheConfig,
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
    /// Builds the effective configuration: defaults, then the file, then flags.
    pub fn load(args: &Args) -> Result<Config> {
        let mut cfg = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?;
                toml::from_str(&text)
                    .with_context(|| format!("invalid config file {}", path.display()))?
            }
            None => Config::default(),
        };
        let s = &mut cfg.server;
        if let Some(p) = args.port {
            s.port = p;
        }
        if let Some(l) = &args.listen {
            s.listen = l.clone();
        }
        if let Some(t) = args.threads {
            s.threads = t;
        }
        if let Some(c) = args.max_connections {
            s.max_connections = c;
        }
        if args.verbose > 0 {
            s.verbosity = args.verbose;
        }
        if args.enable_shutdown {
            s.enable_shutdown = true;
        }
        if let Some(u) = args.udp_port {
            if u != 0 {
                bail!("UDP is not supported: use -U 0 or leave it out");
            }
        }
        let c = &mut cfg.cache;
        if let Some(m) = args.memory_mb {
            c.memory_mb = m;
        }
        if let Some(i) = &args.max_item_size {
            c.max_item_size = parse_size(i)?;
        }
        for group in &args.extended {
            for opt in group.split(',').filter(|o| !o.is_empty()) {
                cfg.apply_extended(opt)?;
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn apply_extended(&mut self, opt: &str) -> Result<()> {
        let (k, v) = opt.split_once('=').unwrap_or((opt, ""));
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
            // memcached options that have no meaning here but are harmless.
            "modern" | "no_modern" | "slab_reassign" | "slab_automove" | "lru_crawler"
            | "lru_maintainer" | "maxconns_fast" | "hash_algorithm" | "no_lru_crawler"
            | "no_lru_maintainer" | "idle_timeout" | "watcher_logbuf_size"
            | "worker_logbuf_size" | "track_sizes" | "no_hashexpand" => {}
            _ => bail!(
                "unknown extended option '-o {k}': supported are hashpower, policy, segment_size, shards, max_get_line"
            ),
        }
        Ok(())
    }

    fn validate(&self) -> Result<()> {
        if self.server.threads == 0 || self.server.threads > 256 {
            bail!("-t must be between 1 and 256 (got {})", self.server.threads);
        }
        if self.server.max_connections < 2 {
            bail!("-c must be at least 2");
        }
        if self.cache.max_item_size < 1024 || self.cache.max_item_size > 8 << 20 {
            bail!(
                "-I must be between 1k and 8m (got {} bytes)",
                self.cache.max_item_size
            );
        }
        if self.cache.memory_mb == 0 {
            bail!("-m must be at least 1");
        }
        if tiercache_policy::by_name(&self.cache.policy).is_none() {
            bail!(
                "unknown policy '{}': choose one of {}",
                self.cache.policy,
                tiercache_policy::POLICY_NAMES.join(", ")
            );
        }
        Ok(())
    }

    /// Segment size actually used: large enough for the biggest item.
    pub fn effective_segment_size(&self) -> usize {
        let min = self.cache.max_item_size.max(1 << 20);
        if self.cache.segment_size == 0 {
            min
        } else {
            self.cache.segment_size.max(min)
        }
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(argv: &[&str]) -> Result<Config> {
        let mut full = vec!["tiercache"];
        full.extend_from_slice(argv);
        Config::load(&Args::try_parse_from(full)?)
    }

    #[test]
    fn memcached_command_line_works() {
        let c = load(&[
            "-p",
            "22122",
            "-l",
            "0.0.0.0",
            "-t",
            "8",
            "-c",
            "4096",
            "-m",
            "1024",
            "-I",
            "2m",
            "-v",
            "-U",
            "0",
            "-o",
            "hashpower=20,modern",
        ])
        .unwrap();
        assert_eq!(c.server.port, 22122);
        assert_eq!(c.server.listen, "0.0.0.0");
        assert_eq!(c.server.threads, 8);
        assert_eq!(c.server.max_connections, 4096);
        assert_eq!(c.cache.memory_mb, 1024);
        assert_eq!(c.cache.max_item_size, 2 << 20);
        assert_eq!(c.cache.hash_power, 20);
        assert_eq!(c.server.verbosity, 1);
    }

    #[test]
    fn bad_values_are_explained() {
        let e = load(&["-I", "lots"]).unwrap_err().to_string();
        assert!(e.contains("not a size"), "{e}");
        let e = load(&["-o", "frobnicate=1"]).unwrap_err().to_string();
        assert!(e.contains("unknown extended option"), "{e}");
        let e = load(&["-t", "0"]).unwrap_err().to_string();
        assert!(e.contains("-t must be"), "{e}");
        assert!(load(&["-U", "11211"]).is_err());
    }

    #[test]
    fn toml_round_trip() {
        let c = load(&["-m", "128"]).unwrap();
        let back: Config = toml::from_str(&c.to_toml()).unwrap();
        assert_eq!(back.cache.memory_mb, 128);
        assert!(toml::from_str::<Config>("[cache]\nbogus = 1\n").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("1m").unwrap(), 1 << 20);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("x").is_err());
    }
}
