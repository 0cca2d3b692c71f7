//! The native Prometheus endpoint (`-o metrics_port=N`, off by default):
//! `GET /metrics` on its own small HTTP listener thread, in the Prometheus
//! text format, with every numeric `stats` line as a gauge named
//! `tiercache_<stat>` and server-side latency histograms per command and
//! outcome (`tiercache_request_duration_seconds{command, outcome}`: RAM
//! hit, flash hit, miss, store, other), timed from the request's first
//! run to its reply, flash reads and waits included. Stats in µs are
//! exported in seconds (`_seconds`), and so are the SLA view's counts of
//! minutes (`sla_unavailable_minutes` is `tiercache_sla_unavailable_seconds`,
//! the seed's unavailable time).
//!
//! Encoding and histograms come from the `prometheus` crate (tikv's
//! rust-prometheus, the client most Rust servers use, kept up to date,
//! classic text format that `promtool check metrics` validates; without
//! default features it pulls in no protobuf and no HTTP stack). The HTTP
//! side is a few lines over std: one GET per connection, then close.

use crate::ctx::Ctx;
use crate::shared::Shared;
use crate::stats::WorkerStats;
use prometheus::{Encoder, Gauge, HistogramOpts, HistogramVec, Opts, Registry, TextEncoder};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_proto::Request;

/// The latency histograms, shared by the workers.
pub struct Metrics {
    latency: HistogramVec,
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

    fn observe(&self, command: &str, outcome: &str, secs: f64) {
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
    pub fn done(&mut self, ctx: &Ctx<'_>, command: &'static str, reply: &[u8]) {
        let Some((_, t)) = self.started.take() else {
            return;
        };
        let took = t.elapsed();
        ctx.stats.latency.record(took);
        let Some(m) = &ctx.shared.metrics else {
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

/// Binds the endpoint (before the server reports that it listens, so a
/// port in use is an error at start) and serves it on its own thread.
pub fn start(shared: Arc<Shared>, addr: SocketAddr) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr)?;
    let bound = listener.local_addr()?;
    std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                if shared.shutdown.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(c) = conn {
                    if let Err(e) = answer(c, &shared) {
                        tracing::debug!(error = %e, "metrics request failed");
                    }
                }
            }
        })?;
    Ok(bound)
}

/// One HTTP request: `GET /metrics` gets the metrics, anything else 404.
fn answer(mut c: TcpStream, shared: &Shared) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut req = Vec::new();
    let mut buf = [0u8; 4096];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16384 {
        let n = c.read(&mut buf)?;
        if n == 0 {
            break;
        }
        req.extend_from_slice(&buf[..n]);
    }
    let line = req.split(|&b| b == b'\r').next().unwrap_or(b"");
    let mut words = line.split(|&b| b == b' ');
    let (method, path) = (words.next().unwrap_or(b""), words.next().unwrap_or(b""));
    let path = path.split(|&b| b == b'?').next().unwrap_or(b"");
    let (status, ctype, body) = if method == b"GET" && path == b"/metrics" {
        let body = render(shared);
        ("200 OK", TextEncoder::new().format_type().to_string(), body)
    } else {
        let body = b"only GET /metrics is served here\n".to_vec();
        ("404 Not Found", "text/plain".to_string(), body)
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(&body)
}

/// A metric name from a stat name: `[a-zA-Z0-9_]`, others become `_`.
fn metric_name(stat: &str) -> String {
    let clean: String = stat
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("tiercache_{clean}")
}

/// Every numeric `stats` line as a gauge, and the histograms.
pub fn render(shared: &Shared) -> Vec<u8> {
    let scratch = WorkerStats::default();
    let ctx = Ctx {
        shared,
        stats: &scratch,
        now: tiercache_engine::clock::unix_now(),
        reader: None,
    };
    let mut text = Vec::new();
    crate::admin::stats::stats_command(b"", &mut text, &ctx);
    let registry = Registry::new();
    for line in String::from_utf8_lossy(&text).lines() {
        let mut parts = line.splitn(3, ' ');
        let (Some("STAT"), Some(name), Some(value)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        let help = format!("memcached-style stat {name} (`stats`)");
        // Prometheus names units in full, in base units: µs and the SLA
        // view's minutes (of `sla_interval_ms`) in seconds.
        let (metric, v) = if let Some(base) = name.strip_suffix("_us") {
            (format!("{}_seconds", metric_name(base)), v / 1e6)
        } else if let Some(base) = name.strip_suffix("_minutes") {
            let minute = shared.sla.interval().as_secs_f64();
            (format!("{}_seconds", metric_name(base)), v * minute)
        } else {
            (metric_name(name), v)
        };
        if let Ok(g) = Gauge::with_opts(Opts::new(metric, help)) {
            g.set(v);
            // A name seen twice keeps its first value.
            let _ = registry.register(Box::new(g));
        }
    }
    if let Some(m) = &shared.metrics {
        let _ = registry.register(Box::new(m.latency.clone()));
    }
    let mut out = Vec::new();
    let _ = TextEncoder::new().encode(&registry.gather(), &mut out);
    out
}
