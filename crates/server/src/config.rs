//! Configuration: memcached's command-line flags (so a memcached command line
//! works unchanged), a TOML file, and the merged effective settings, which
//! `--print-config` prints as TOML.

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::{Deserialize, Serialize};
use tiercache_engine::flash::tier::{DeviceClass, Promote};

mod access;
mod extended;
mod flash;
mod memcached;
mod summary;
mod toml_forms;
mod usage;
pub use access::{strip_notls, tls_version_name, TlsSection};
pub use extended::{parse_ext_path, parse_ext_spec, parse_size, OPTION_GROUPS};
pub use flash::{
    FlashSection, DEFAULT_FLASH, MAX_SEGMENT, MAX_SEGMENT_WITH_FLASH, SMALL_MAX_LIMIT,
};
pub use memcached::Protocol;
pub use usage::{parse_args, parse_from, Usage};

/// memcached's default per-watcher buffer (`watcher_logbuf_size`).
pub const DEFAULT_WATCH_BUF: usize = 256 << 10;

/// Command-line flags, memcached-compatible where memcached has the flag.
#[derive(Parser, Debug, Default)]
#[command(
    name = "tiercache",
    version,
    about = "memcached-compatible cache server with a flash tier",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true,
    after_help = usage::AFTER_HELP,
    after_long_help = usage::after_long_help()
)]
pub struct Args {
    /// TCP port to listen on (memcached -p; given twice, the last counts) [default: 11211]
    #[arg(
        short = 'p',
        long = "port",
        help_heading = "Network",
        value_name = "PORT"
    )]
    pub port: Option<u16>,
    /// Addresses to listen on (memcached -l) [default: 127.0.0.1]: repeat
    /// the flag or give a comma list (`-l 127.0.0.1,::1`); an entry may
    /// carry its own port (`127.0.0.1:11212`, `[::1]:11212`).
    #[arg(
        short = 'l',
        long = "listen",
        help_heading = "Network",
        value_name = "ADDR"
    )]
    pub listen: Vec<String>,
    /// Number of worker threads (memcached -t) [default: 4]
    #[arg(
        short = 't',
        long = "threads",
        help_heading = "Process",
        value_name = "N"
    )]
    pub threads: Option<usize>,
    /// Max simultaneous connections (memcached -c) [default: 1024]
    #[arg(
        short = 'c',
        long = "conn-limit",
        help_heading = "Network",
        value_name = "N"
    )]
    pub max_connections: Option<usize>,
    /// Item memory in megabytes, index included (memcached -m) [default: 64]
    #[arg(
        short = 'm',
        long = "memory-limit",
        help_heading = "Memory and items",
        value_name = "MB"
    )]
    pub memory_mb: Option<usize>,
    /// Max item size, with k/m suffix, 1k to 1g (memcached -I) [default: 1m]
    #[arg(
        short = 'I',
        long = "max-item-size",
        help_heading = "Memory and items",
        value_name = "SIZE"
    )]
    pub max_item_size: Option<String>,
    /// Verbose logging; repeat for more (memcached -v, -vv, -vvv)
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, help_heading = "Process")]
    pub verbose: u8,
    /// Extended options, comma separated key=value (memcached -o; the keys
    /// are listed below, `--help`)
    #[arg(
        short = 'o',
        long = "extended",
        help_heading = "Configuration",
        value_name = "KEY=VALUE,..."
    )]
    pub extended: Vec<String>,
    /// UDP port (memcached -U); only 0 (disabled) is supported [default: 0]
    #[arg(
        short = 'U',
        long = "udp-port",
        help_heading = "Network",
        value_name = "PORT"
    )]
    pub udp_port: Option<u16>,
    /// User to run as (memcached -u): started as root, tiercache binds its
    /// sockets and opens its devices, then switches to this user; as root
    /// it refuses to start without -u (`-u root` to stay root); started as
    /// another user, there is nothing to switch.
    #[arg(
        short = 'u',
        long = "user",
        help_heading = "Process",
        value_name = "USER"
    )]
    pub user: Option<String>,
    /// Run as a daemon (memcached -d): the command returns once the server
    /// listens (exit 0) or says why it could not start.
    #[arg(short = 'd', long = "daemon", help_heading = "Process")]
    pub daemonize: bool,
    /// Write the server's pid to this file once it listens; removed at a
    /// clean exit (memcached -P).
    #[arg(
        short = 'P',
        long = "pidfile",
        help_heading = "Process",
        value_name = "FILE"
    )]
    pub pidfile: Option<std::path::PathBuf>,
    /// Listen backlog (memcached -b) [default: 1024]
    #[arg(
        short = 'b',
        long = "listen-backlog",
        help_heading = "Network",
        value_name = "N"
    )]
    pub backlog: Option<i32>,
    /// Lock all memory so it is never paged out (memcached -k; needs the
    /// memlock limit or root).
    #[arg(short = 'k', long = "lock-memory", help_heading = "Process")]
    pub lock_memory: bool,
    /// Raise the core file size limit to its maximum (memcached -r).
    #[arg(short = 'r', long = "enable-coredumps", help_heading = "Process")]
    pub coredumps: bool,
    /// memcached's per-event request limit (-R): accepted, no effect (a
    /// note in the log says why).
    #[arg(
        short = 'R',
        long = "max-reqs-per-event",
        help_heading = "Accepted from memcached, no effect (logged at start)",
        value_name = "N"
    )]
    pub reqs_per_event: Option<u32>,
    /// memcached's slab growth factor (-f): accepted, no effect (logged).
    #[arg(
        short = 'f',
        long = "slab-growth-factor",
        help_heading = "Accepted from memcached, no effect (logged at start)",
        value_name = "FACTOR"
    )]
    pub growth_factor: Option<f64>,
    /// memcached's minimum slab chunk (-n): accepted, no effect (logged).
    #[arg(
        short = 'n',
        long = "slab-min-size",
        help_heading = "Accepted from memcached, no effect (logged at start)",
        value_name = "BYTES"
    )]
    pub slab_min_size: Option<usize>,
    /// memcached's large pages (-L): accepted, no effect (logged).
    #[arg(
        short = 'L',
        long = "enable-largepages",
        help_heading = "Accepted from memcached, no effect (logged at start)"
    )]
    pub large_pages: bool,
    /// memcached's NAPI ids (-N): accepted, no effect (logged).
    #[arg(
        short = 'N',
        long = "napi_ids",
        alias = "napi-ids",
        help_heading = "Accepted from memcached, no effect (logged at start)",
        value_name = "N"
    )]
    pub napi_ids: Option<String>,
    /// memcached's "no eviction" (-M): refused, tiercache always evicts.
    #[arg(
        short = 'M',
        long = "disable-evictions",
        help_heading = "Refused (memcached's, with the reason)"
    )]
    pub no_evictions: bool,
    /// memcached's "no CAS" (-C): refused, tiercache always keeps CAS.
    #[arg(
        short = 'C',
        long = "disable-cas",
        help_heading = "Refused (memcached's, with the reason)"
    )]
    pub no_cas: bool,
    /// memcached's restartable memory file (-e): refused, tiercache
    /// restarts from its shutdown snapshot instead.
    #[arg(
        short = 'e',
        long = "memory-file",
        help_heading = "Refused (memcached's, with the reason)",
        value_name = "FILE"
    )]
    pub memory_file: Option<std::path::PathBuf>,
    /// Refuse `flush_all` (memcached -F): it answers `CLIENT_ERROR
    /// flush_all not allowed`.
    #[arg(short = 'F', long = "disable-flush-all", help_heading = "Security")]
    pub disable_flush_all: bool,
    /// Refuse `stats cachedump` and `lru_crawler metadump` (memcached -X).
    #[arg(short = 'X', long = "disable-dumping", help_heading = "Security")]
    pub disable_dumping: bool,
    /// Refuse `watch` (memcached -W).
    #[arg(short = 'W', long = "disable-watch", help_heading = "Security")]
    pub disable_watch: bool,
    /// Protocol (memcached -B): auto (text, meta and binary by the first
    /// byte), ascii or binary [default: auto]
    #[arg(
        short = 'B',
        long = "protocol",
        help_heading = "Network",
        value_name = "auto|ascii|binary"
    )]
    pub protocol: Option<String>,
    /// Key prefix delimiter for `stats detail`; also turns detail on (memcached -D) [default: :]
    #[arg(short = 'D', help_heading = "Configuration", value_name = "CHAR")]
    pub prefix_delimiter: Option<String>,
    /// Serve TLS on the TCP listeners (memcached -Z); needs `-o
    /// ssl_chain_cert=FILE` (and `ssl_key=FILE`); `-l notls:ADDR:PORT`
    /// serves one listener without TLS.
    #[arg(short = 'Z', long = "enable-ssl", help_heading = "Security")]
    pub enable_ssl: bool,
    /// ASCII authentication (memcached -Y): a file of `user:password`
    /// lines; a connection must first send `set <any key> 0 0 <n>` with
    /// the data `user password`. Reloaded on SIGHUP. Disables the binary
    /// protocol, as in memcached.
    #[arg(
        short = 'Y',
        long = "auth-file",
        help_heading = "Security",
        value_name = "FILE"
    )]
    pub auth_file: Option<std::path::PathBuf>,
    /// Binary protocol SASL, mechanism PLAIN (memcached -S): checks the
    /// `user:password` file named by MEMCACHED_SASL_PWDB (the format of
    /// -Y's); serves the binary protocol only, as memcached does.
    #[arg(short = 'S', long = "enable-sasl", help_heading = "Security")]
    pub enable_sasl: bool,
    /// Listen on this unix socket instead of TCP (memcached -s: no TCP
    /// listener is opened).
    #[arg(
        short = 's',
        long = "unix-socket",
        help_heading = "Network",
        value_name = "PATH"
    )]
    pub unix_socket: Option<std::path::PathBuf>,
    /// The unix socket's access mask, octal as chmod (memcached -a) [default: 700]
    #[arg(
        short = 'a',
        long = "unix-mask",
        help_heading = "Network",
        value_name = "MASK"
    )]
    pub unix_mask: Option<String>,
    /// Enable the `shutdown` command (memcached -A).
    #[arg(short = 'A', long = "enable-shutdown", help_heading = "Security")]
    pub enable_shutdown: bool,
    /// TOML configuration file; flags override it.
    #[arg(long = "config", help_heading = "Configuration", value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Print the effective configuration as TOML and exit.
    #[arg(long = "print-config", help_heading = "Configuration")]
    pub print_config: bool,
    /// Print tiercache's license and exit (memcached -i).
    #[arg(short = 'i', long = "license", help_heading = "Configuration")]
    pub license: bool,
    /// Print tiercache's version and exit (memcached -V).
    #[arg(short = 'V', long = "version", action = clap::ArgAction::Version, help_heading = "Configuration")]
    pub version: Option<bool>,
    /// Print help (--help: with the -o keys).
    #[arg(short = 'h', long = "help", action = clap::ArgAction::Help, help_heading = "Configuration")]
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
    /// Pending output per connection after which its input is not read
    /// nor its requests run until it drains to half (see `conn.rs` for the
    /// whole per-connection memory bound).
    pub max_pending_output: usize,
    /// `stats detail` counts per key prefix from the start (`-D`).
    pub detail_enabled: bool,
    /// What ends a key's prefix for `stats detail` (`-D`, default `:`).
    #[serde(with = "toml_forms::delimiter")]
    pub detail_delimiter: u8,
    /// Close connections that sent nothing for this many seconds (0 = never;
    /// `-o idle_timeout`).
    pub idle_timeout: u32,
    /// The nice value of the threads that hold shard locks in the
    /// background: the evacuator, the maintenance sweep, the flash flusher
    /// (`-o maintenance_nice`, -20..=19, default -10; 0 = the process's).
    /// Fewer of their holds are cut by the scheduler (engine `priority.rs`).
    pub maintenance_nice: i32,
    /// Listen backlog (`-b`).
    pub backlog: i32,
    /// Lock all memory (`-k`, mlockall).
    pub lock_memory: bool,
    /// Raise the core file limit to its maximum (`-r`).
    pub coredumps: bool,
    /// Serve Prometheus `GET /metrics` on this port (0 = off;
    /// `-o metrics_port`), on `metrics_addr` or else the first `-l` address.
    pub metrics_port: u16,
    /// `-o metrics_addr`: the endpoint's IP address.
    pub metrics_addr: String,
    /// Unix socket path (`-s`; empty: none). With one, no TCP listener.
    pub unix_socket: String,
    /// The unix socket's permission bits (`-a`; octal, `"0700"`, as chmod).
    #[serde(with = "toml_forms::octal_mask")]
    pub unix_mask: u32,
    /// ASCII authentication file of `user:password` lines (`-Y`; empty: off).
    pub auth_file: String,
    /// Binary protocol SASL PLAIN (`-S`).
    pub sasl: bool,
    /// Its `user:password` file (memcached's `MEMCACHED_SASL_PWDB`, read from
    /// that environment variable when `-S` is given and this is empty).
    pub sasl_pwdb: String,
    /// Bytes of log lines a `watch` connection may hold before lines are
    /// dropped (`-o watcher_logbuf_size`, KiB as memcached's; default 256 KiB).
    pub watcher_logbuf_size: usize,
    /// `flush_all` answers `CLIENT_ERROR flush_all not allowed` (`-F`).
    pub disable_flush_all: bool,
    /// `stats cachedump` and `lru_crawler metadump` are refused (`-X`).
    pub disable_dumping: bool,
    /// `watch` is refused (`-W`).
    pub disable_watch: bool,
    /// Which protocols a connection may speak (`-B`: auto, ascii, binary).
    pub protocol: Protocol,
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
            max_pending_output: 64 << 10,
            detail_enabled: false,
            detail_delimiter: b':',
            idle_timeout: 0,
            maintenance_nice: tiercache_engine::priority::DEFAULT_NICE,
            backlog: 1024,
            lock_memory: false,
            coredumps: false,
            metrics_port: 0,
            metrics_addr: String::new(),
            unix_socket: String::new(),
            unix_mask: 0o700,
            auth_file: String::new(),
            sasl: false,
            sasl_pwdb: String::new(),
            watcher_logbuf_size: DEFAULT_WATCH_BUF,
            disable_flush_all: false,
            disable_dumping: false,
            disable_watch: false,
            protocol: Protocol::Auto,
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

/// The Redis (RESP) listener (`[redis]`, `-o redis_port`, `-o
/// redis_listen`): off unless a port is given.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisSection {
    /// Port of the RESP listener (0: none).
    pub port: u16,
    /// Addresses it listens on, comma-separated (empty: those of `-l`,
    /// without their ports).
    pub listen: String,
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub server: ServerConfig,
    pub cache: CacheConfig,
    pub flash: FlashSection,
    pub tls: TlsSection,
    pub redis: RedisSection,
    /// The flash tier is the default file ([`DEFAULT_FLASH`]), not one the
    /// operator gave: it is made smaller when `-m` is too small for it.
    #[serde(skip)]
    pub flash_is_default: bool,
    /// memcached options accepted that have no effect here, each with the
    /// reason; the binary logs them at start, so none is ignored silently.
    #[serde(skip)]
    pub notes: Vec<String>,
}

impl Config {
    /// Builds the effective configuration: defaults, then the file, then flags.
    pub fn load(args: &Args) -> Result<Config> {
        let mut cfg = match &args.config {
            None => Config {
                flash: FlashSection {
                    paths: vec![DEFAULT_FLASH.into()],
                    ..FlashSection::default()
                },
                flash_is_default: true,
                ..Config::default()
            },
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read config file {}", path.display()))?;
                toml::from_str(&text)
                    .map_err(unknown_flash_key_hint)
                    .with_context(|| format!("invalid config file {}", path.display()))?
            }
        };
        let mut default_paths = true;
        let s = &mut cfg.server;
        if let Some(p) = args.port {
            s.port = p;
        }
        if !args.listen.is_empty() {
            s.listen = args.listen.join(",");
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
        if let Some(b) = args.backlog {
            if b < 1 {
                bail!("-b (listen backlog) must be at least 1 (got {b})");
            }
            s.backlog = b;
        }
        s.lock_memory |= args.lock_memory;
        s.coredumps |= args.coredumps;
        if let Some(d) = &args.prefix_delimiter {
            // memcached takes the first byte of the argument.
            match d.as_bytes().first() {
                Some(&b) => s.detail_delimiter = b,
                None => bail!("-D needs a delimiter character"),
            }
            s.detail_enabled = true;
        }
        if let Some(u) = args.udp_port {
            if u != 0 {
                bail!("UDP is not supported: use -U 0 or leave it out");
            }
        }
        cfg.apply_access_flags(args)?;
        cfg.apply_memcached_flags(args)?;
        let c = &mut cfg.cache;
        if let Some(m) = args.memory_mb {
            c.memory_mb = m;
        }
        if let Some(i) = &args.max_item_size {
            c.max_item_size = parse_size(i)?;
        }
        for group in &args.extended {
            for opt in group.split(',').filter(|o| !o.is_empty()) {
                if opt.starts_with("ext_path=") && std::mem::take(&mut default_paths) {
                    cfg.flash.paths.clear();
                    cfg.flash_is_default = false;
                }
                cfg.apply_extended(opt)?;
            }
        }
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<()> {
        if self.server.threads == 0 || self.server.threads > 256 {
            bail!("-t must be between 1 and 256 (got {})", self.server.threads);
        }
        if self.server.max_connections < 2 {
            bail!("-c must be at least 2");
        }
        if !(-20..=19).contains(&self.server.maintenance_nice) {
            bail!(
                "-o maintenance_nice={}: a nice value is -20 to 19 (0: the process's own)",
                self.server.maintenance_nice
            );
        }
        if self.cache.max_item_size < 1024 || self.cache.max_item_size > 1 << 30 {
            bail!(
                "-I must be between 1k and 1g (got {} bytes)",
                self.cache.max_item_size
            );
        }
        if self.cache.memory_mb == 0 {
            bail!("-m must be at least 1");
        }
        if self.cache.segment_size > MAX_SEGMENT {
            bail!(
                "-o segment_size must be at most 8m (got {} bytes)",
                self.cache.segment_size
            );
        }
        if self.cache.max_item_size > (self.cache.memory_mb << 20) / 2 {
            bail!(
                "-I {} is more than half of -m {} (memcached's bound too): raise -m to at least {} or lower -I",
                self.cache.max_item_size,
                self.cache.memory_mb,
                (self.cache.max_item_size * 2).div_ceil(1 << 20)
            );
        }
        self.listen_addrs()?;
        self.validate_access()?;
        self.validate_protocol()?;
        for p in &self.flash.paths {
            parse_ext_path(p)?;
        }
        if !self.flash.paths.is_empty() {
            let page = self.flash_page_size();
            if page > 8 << 20 {
                bail!(
                    "with a flash tier, flash segments hold at most 8 MiB and must hold two RAM segments: lower -o segment_size to at most 3m (now {} bytes)",
                    self.effective_segment_size()
                );
            }
            if Promote::parse(&self.flash.promote).is_none() {
                bail!(
                    "-o ext_promote={}: choose never, second or always",
                    self.flash.promote
                );
            }
            self.nhc_feedback()?;
            self.nhc_copies()?;
            let t = &self.flash.tier;
            if t.write_buffers < 2 {
                bail!("-o ext_wbuf_count must be at least 2");
            }
            if t.low_ttl > 0 && t.write_buffers < 3 {
                bail!("-o ext_low_ttl (grouping by TTL) needs ext_wbuf_count of at least 3; or set ext_low_ttl=0");
            }
            let depth = self.flash.engine.read_depth;
            if !(1..=tiercache_engine::device::uring::MAX_DEPTH).contains(&depth) {
                bail!(
                    "-o ext_read_depth={depth}: reads of a device in the kernel, all workers together, 1 to {}",
                    tiercache_engine::device::uring::MAX_DEPTH
                );
            }
            self.io_mode()?;
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

    /// The addresses to listen on: `listen` split at commas, each entry a
    /// host (IPv4, IPv6 with or without brackets, or a name) with `port`,
    /// or `host:port` / `[v6]:port` with its own port, as memcached's `-l`;
    /// with `-Z` an entry written `notls:...` serves without TLS. Each
    /// entry: (host, port, serves TLS). None with `-s` (no TCP).
    pub fn listen_addrs(&self) -> Result<Vec<(String, u16, bool)>> {
        let mut out = Vec::new();
        if !self.server.unix_socket.is_empty() {
            return Ok(out);
        }
        for entry in self.server.listen.split(',').map(str::trim) {
            if entry.is_empty() {
                bail!(
                    "-l '{}': an empty address (write -l 127.0.0.1,::1, or repeat -l)",
                    self.server.listen
                );
            }
            let (entry, tls) = strip_notls(entry, &self.tls)?;
            let port_of = |p: &str| -> Result<u16> {
                p.parse()
                    .with_context(|| format!("-l {entry}: '{p}' is not a port number"))
            };
            let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
                let (h, tail) = rest
                    .split_once(']')
                    .with_context(|| format!("-l {entry}: no ']' after the IPv6 address"))?;
                match tail {
                    "" => (h, self.server.port),
                    t => match t.strip_prefix(':') {
                        Some(p) => (h, port_of(p)?),
                        None => bail!("-l {entry}: expected ':port' after ']'"),
                    },
                }
            } else if entry.matches(':').count() == 1 {
                let (h, p) = entry.split_once(':').unwrap_or((entry, ""));
                (h, port_of(p)?)
            } else {
                (entry, self.server.port)
            };
            if host.is_empty() {
                bail!("-l {entry}: no host before the port");
            }
            out.push((host.to_string(), port, tls));
        }
        Ok(out)
    }

    /// The scheduler's feedback (`ext_nhc_feedback`).
    pub fn nhc_feedback(&self) -> Result<tiercache_engine::flash::tier::Objective> {
        match tiercache_engine::flash::tier::Objective::parse(&self.flash.nhc_feedback) {
            Some(o) if o.name() != "latency" => Ok(o),
            _ => bail!(
                "-o ext_nhc_feedback={}: choose balance or throughput",
                self.flash.nhc_feedback
            ),
        }
    }

    /// Copies on the capacity class (`ext_nhc_copies`): None for `auto`.
    pub fn nhc_copies(&self) -> Result<Option<bool>> {
        match self.flash.nhc_copies.as_str() {
            "auto" => Ok(None),
            "always" => Ok(Some(true)),
            "never" => Ok(Some(false)),
            v => bail!("-o ext_nhc_copies={v}: choose auto, always or never"),
        }
    }

    /// The flash reader asked for (`ext_io`).
    pub fn io_mode(&self) -> Result<tiercache_engine::device::io::IoMode> {
        self.flash
            .io
            .parse()
            .map_err(|e: String| anyhow::anyhow!("-o {e}"))
    }

    /// Segment size actually used: large enough for the biggest item up to
    /// [`MAX_SEGMENT`] (3 MiB with a flash tier, whose segments must hold
    /// two); a larger item gets a jumbo segment of its own, kept in RAM.
    pub fn effective_segment_size(&self) -> usize {
        let cap = if self.flash.paths.is_empty() {
            MAX_SEGMENT
        } else {
            MAX_SEGMENT_WITH_FLASH
        };
        let min = self.cache.max_item_size.clamp(1 << 20, cap);
        if self.cache.segment_size == 0 {
            min
        } else {
            self.cache.segment_size.max(min)
        }
    }

    /// Flash segment size actually used.
    pub fn flash_page_size(&self) -> usize {
        let need = (2 * self.effective_segment_size() + (8 << 10)).next_power_of_two();
        if self.flash.page_size == 0 {
            need.max(4 << 20)
        } else {
            self.flash.page_size.max(need)
        }
    }

    /// Where a graceful shutdown writes its snapshot: next to the first
    /// flash device (`<path>.snapshot`).
    pub fn snapshot_path(&self) -> Result<Option<std::path::PathBuf>> {
        Ok(self.flash_paths()?.first().map(|(p, _)| {
            let mut s = p.clone().into_os_string();
            s.push(".snapshot");
            std::path::PathBuf::from(s)
        }))
    }

    /// Each flash device's class, in the order of the devices.
    pub fn flash_classes(&self) -> Result<Vec<DeviceClass>> {
        self.flash
            .paths
            .iter()
            .map(|p| parse_ext_spec(p).map(|(_, _, c)| c))
            .collect()
    }

    /// The flash devices as (path, bytes).
    pub fn flash_paths(&self) -> Result<Vec<(std::path::PathBuf, u64)>> {
        self.flash.paths.iter().map(|p| parse_ext_path(p)).collect()
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }
}

/// A TOML error, with the keys `[flash]` takes when it names an unknown
/// one: that section flattens the engine's own settings into it, and serde
/// cannot list a flattened section's fields (the other sections' errors
/// list theirs). The keys are those `--print-config` shows.
fn unknown_flash_key_hint(e: toml::de::Error) -> anyhow::Error {
    let msg = e.to_string();
    if !msg.contains("unknown field") || msg.contains("expected") {
        return e.into();
    }
    let keys = match toml::Value::try_from(FlashSection::default()) {
        Ok(toml::Value::Table(t)) => t.keys().cloned().collect::<Vec<_>>().join(", "),
        _ => return e.into(),
    };
    anyhow::anyhow!("{msg}the keys of [flash] are: {keys}")
}

#[cfg(test)]
mod tests;
