//! The native Prometheus endpoint (`-o metrics_port=N`, off by default):
//! `GET /metrics` on its own small HTTP listener thread, in the Prometheus
//! text format, with every numeric `stats` line as a counter
//! (`tiercache_<stat>_total`) or a gauge (`tiercache_<stat>`), as
//! [`crate::stats::kinds`] declares, and server-side latency histograms per command and
//! outcome (`tiercache_request_duration_seconds{command, outcome}`: RAM
//! hit, flash hit, miss, store, other), timed from the request's first
//! run to its reply, flash reads and waits included. Stats in µs (and
//! sums of µs, `_us_sum`) are exported in seconds (`_seconds`), and so are the SLA view's counts of
//! minutes (`sla_unavailable_minutes` is `tiercache_sla_unavailable_seconds`,
//! the seed's unavailable time).
//!
//! Encoding and histograms come from the `prometheus` crate (tikv's
//! rust-prometheus, the client most Rust servers use, kept up to date,
//! classic text format that `promtool check metrics` validates; without
//! default features it pulls in no protobuf and no HTTP stack). The HTTP
//! side is a few lines over std: one GET per connection, then close
//! ([`super::endpoint`]). Here: the histograms and the request timer.

use crate::stats::WorkerStats;
use prometheus::{HistogramOpts, HistogramVec};
use tiercache_engine::clock::Instant;
use tiercache_proto::Request;

/// The latency histograms, shared by the workers.
pub struct Metrics {
    pub(super) latency: HistogramVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let opts = HistogramOpts::new(
            "tiercache_request_duration_seconds",
            "Server-side request latency, from the request's first run to its reply.",
        )
        // 10 us to about 0.65 s.
        .buckets(prometheus::exponential_buckets(1e-5, 2.0, 17).expect("buckets"));
        Metrics {
            latency: HistogramVec::new(opts, &["command", "outcome"]).expect("histogram"),
        }
    }

    /// One request's latency (the RESP port records its commands here).
    pub fn observe(&self, command: &str, outcome: &str, secs: f64) {
        self.latency
            .with_label_values(&[command, outcome])
            .observe(secs);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// The command label of a request.
pub fn command(req: &Request<'_>) -> &'static str {
    match req {
        Request::Get(g) if g.touch.is_some() => "gat",
        Request::Get(_) => "get",
        Request::Store(_) | Request::StoreRefused { .. } => "set",
        Request::Delete { .. } => "delete",
        Request::Arith { .. } => "incr_decr",
        Request::Touch { .. } => "touch",
        Request::MetaGet { .. } => "mg",
        Request::MetaSet { .. } => "ms",
        Request::MetaDelete { .. } => "md",
        Request::MetaArith { .. } => "ma",
        Request::FlushAll { .. } => "flush_all",
        _ => "other",
    }
}

/// Times the request at the head of a connection.
#[derive(Debug, Default)]
pub struct HeadTimer {
    /// Input position of the timed request and when it first ran.
    started: Option<(u64, Instant)>,
    /// It waited for flash reads.
    read_flash: bool,
}

impl HeadTimer {
    /// The request at input position `pos` runs (again).
    pub fn run(&mut self, pos: u64) {
        if self.started.is_none_or(|(p, _)| p != pos) {
            self.started = Some((pos, Instant::now()));
            self.read_flash = false;
        }
    }

    /// It waits for flash reads.
    pub fn flash_read(&mut self) {
        self.read_flash = true;
    }

    /// It is answered (`reply`: what it wrote, in the text protocol): its
    /// latency goes to the worker's SLA recorder and, with the endpoint
    /// on, to the histograms.
    pub fn done(
        &mut self,
        stats: &WorkerStats,
        metrics: Option<&Metrics>,
        command: &'static str,
        reply: &[u8],
    ) {
        let Some((_, t)) = self.started.take() else {
            return;
        };
        let took = t.elapsed();
        stats.latency.record(took);
        let Some(m) = metrics else {
            return;
        };
        let hit = reply.starts_with(b"VALUE") || reply.starts_with(b"VA ");
        let outcome = match command {
            "get" | "gat" | "mg" if hit && self.read_flash => "flash_hit",
            "get" | "gat" | "mg" if hit => "ram_hit",
            "get" | "gat" | "mg" => "miss",
            "set" | "ms" => "store",
            _ => "other",
        };
        m.observe(command, outcome, took.as_secs_f64());
    }
}
