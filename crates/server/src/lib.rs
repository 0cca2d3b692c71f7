//! tiercache-server: the network front end over the engine.
//!
//! - [`config`]: memcached-compatible flags, TOML file, effective config.
//! - [`server`]: start/stop, threads.
//! - [`worker`]: one event loop per thread, shared listener.
//! - [`conn`]: per-connection buffers, pipelining, back-pressure.
//! - [`binary`]: binary protocol requests, run as their text equivalents.
//! - [`execute`]: requests to engine calls to replies.
//! - [`crawler`]: `lru_crawler` and `stats cachedump` (key dumps).
//! - [`stats`], [`shared`]: counters and the `stats` command.
//! - [`metrics`]: the Prometheus endpoint (`-o metrics_port`).
//! - [`sla`]: the SLA view (p99 per minute, unavailable minutes; `stats sla`).
//! - [`transport`], [`tls`], [`auth`]: TCP, unix socket (`-s`) and TLS
//!   (`-Z`) streams; ASCII authentication (`-Y`).

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
