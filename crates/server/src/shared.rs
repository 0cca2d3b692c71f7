//! State shared by all workers: the engine, the configuration, the counters,
//! and the shutdown flag.

use crate::config::Config;
use crate::stats::{ConnStats, Totals, WorkerStats};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;
use tiercache_engine::Engine;

pub struct Shared {
    pub engine: Engine,
    pub config: Config,
    pub conns: ConnStats,
    pub workers: Vec<Arc<WorkerStats>>,
    pub started: Instant,
    pub start_unix: u64,
    pub shutdown: Arc<AtomicBool>,
    /// `stats detail`: per key-prefix counts.
    pub detail: crate::admin::detail::Detail,
    /// Open connections and listeners (`stats conns`, idle timeout).
    pub registry: crate::admin::registry::Registry,
    /// Descriptors kept for the server's own use (`reserved_fds`).
    pub reserved_fds: u64,
    /// `lru_crawler enable|disable` (metadump is refused while disabled).
    pub crawler_enabled: AtomicBool,
    /// Latency histograms, when the metrics endpoint is on.
    pub metrics: Option<crate::admin::metrics::Metrics>,
    /// The SLA view: p99 per minute, unavailable minutes (`stats sla`).
    pub sla: crate::admin::sla::Sla,
    /// TLS listeners' configuration (`-Z`).
    pub tls: Option<crate::transport::tls::TlsSetup>,
    /// The ASCII auth file (`-Y`): connections start unauthenticated.
    pub auth: Option<crate::transport::auth::Auth>,
    /// Set by SIGHUP: the maintenance thread reads the auth file again.
    pub reload: Arc<AtomicBool>,
    /// `watch` log streams.
    pub watch: Arc<crate::admin::watch::Watch>,
}

impl Shared {
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for w in &self.workers {
            w.add_to(&mut t);
        }
        t
    }
}
