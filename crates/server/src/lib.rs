//! tiercache-server: the network front end over the engine, in floors;
//! each module imports only from the floors below it.
//!
//! 1. [`server`], [`worker`] (top): start/stop and threads; one event loop
//!    per worker thread over a shared listener.
//! 2. [`conn`]: per-connection buffers, pipelining, back-pressure, and the
//!    flash reads of pipelined requests ([`conn::prefetch`],
//!    [`conn::flights`]).
//! 3. [`protocol`]: the wire codecs. Memcached (text and meta parsed by
//!    tiercache-proto, [`protocol::binary`], [`protocol::sasl`]);
//!    [`protocol::execute`] routes each request to the admin or the data
//!    commands. Redis's RESP is [`protocol::resp`]: its codec and its own
//!    commands over the engine; its connections are [`conn::resp`].
//! 4. [`admin`]: commands and views about the server: `stats`, `watch`,
//!    `lru_crawler` / `stats cachedump`, `version`, `verbosity`,
//!    `shutdown`, `cache_memlimit`, `refresh_certs`; the Prometheus
//!    endpoint, the SLA view, the connection registry, `stats detail`.
//!    Its command modules (`control`, `stats`, `crawler`, `endpoint`) sit
//!    here; its state modules (`watch`, `sla`, `registry`, `detail`,
//!    `metrics`) import nothing above [`stats`] and [`transport`], since
//!    [`shared`] holds them. They sit in `admin/` although they are a floor
//!    below its commands; `admin::sla` and [`stats`] import each other (a
//!    worker's counters hold its latency recorder, which reads them).
//! 5. [`commands`]: data commands (get/set/delete/arith/touch/meta...)
//!    run against the engine, replies byte for byte as memcached's.
//! 6. [`ctx`], [`shared`]: what every request runs with ([`ctx::Ctx`]) and
//!    the state shared by all workers.
//! 7. [`stats`]: the per-worker counters and the `stats` lines' writers.
//! 8. [`config`]: memcached-compatible flags, TOML file, effective config.
//! 9. [`transport`] (bottom): TCP, unix socket (`-s`) and TLS (`-Z`)
//!    streams; ASCII authentication (`-Y`). Beside it [`logging`],
//!    [`daemon`], [`heap_trim`].

pub mod admin;
pub mod commands;
pub mod config;
pub mod conn;
pub mod ctx;
pub mod daemon;
pub mod heap_trim;
pub mod logging;
pub mod protocol;
pub mod server;
pub mod shared;
pub mod stats;
pub mod transport;
pub mod worker;

/// The version `version` and `stats` report: the memcached protocol level
/// tiercache implements, alone, because clients parse it as a version
/// number to decide what the server supports (a semver parser read
/// `1.6.18-tiercache-0.1.0` as 0.1.0, which made the Node client treat the
/// server as ancient). tiercache's own version is `stats`
/// `tiercache_version` and `tiercache --version`.
pub const VERSION: &str = "1.6.18";

/// tiercache's own version.
pub const TIERCACHE_VERSION: &str = env!("CARGO_PKG_VERSION");
