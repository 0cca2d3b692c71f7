//! tiercache-server: the network front end over the engine.
//!
//! - [`config`]: memcached-compatible flags, TOML file, effective config.
//! - [`server`]: start/stop, threads.
//! - [`worker`]: one event loop per thread, shared listener.
//! - [`conn`]: per-connection buffers, pipelining, back-pressure.
//! - [`execute`]: requests to engine calls to replies.
//! - [`stats`], [`shared`]: counters and the `stats` command.

pub mod config;
pub mod conn;
pub mod detail;
pub mod execute;
pub mod flights;
pub mod prefetch;
pub mod server;
pub mod shared;
pub mod stats;
pub mod worker;

/// The version string `version` and `stats` report: the memcached protocol
/// level first (clients and tools such as memccapable parse it), then ours.
pub const VERSION: &str = concat!("1.6.18-tiercache-", env!("CARGO_PKG_VERSION"));
