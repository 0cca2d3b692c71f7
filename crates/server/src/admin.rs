//! The admin floor: commands and views about the server rather than the
//! data — `stats` and its sections, `watch`, `lru_crawler` / `stats
//! cachedump`, the Prometheus endpoint, the SLA view, the connection
//! registry and `stats detail`.

pub mod access_stats;
pub mod class_stats;
pub mod control;
pub mod crawler;
pub mod detail;
pub mod endpoint;
pub mod metrics;
pub mod registry;
pub mod sla;
pub mod small_stats;
pub mod stats;
pub mod watch;
