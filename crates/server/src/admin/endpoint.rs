//! The Prometheus endpoint's HTTP side (`-o metrics_port=N`): its listener
//! thread, `GET /metrics`, and the text it serves (every numeric `stats`
//! line as a counter or a gauge, and the histograms of [`super::metrics`]).

use crate::ctx::Ctx;
use crate::shared::Shared;
use crate::stats::kinds;
use crate::stats::line::{Kind, Sink};
use crate::stats::WorkerStats;
use prometheus::{Counter, Encoder, Gauge, Opts, Registry, TextEncoder};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Serves the endpoint on its own thread, on the listener the server
/// bound before it made its flash files (so a port in use is an error at
/// start, and leaves nothing behind).
pub fn start(shared: Arc<Shared>, listener: TcpListener) -> std::io::Result<SocketAddr> {
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

/// The general `stats` lines with a number for a value, each with its
/// declared kind, in the reply's order.
#[derive(Default)]
struct Numeric(Vec<(String, Kind, f64)>);

impl Sink for Numeric {
    fn put(&mut self, name: &str, kind: Kind, v: &dyn std::fmt::Display) {
        if let Ok(x) = v.to_string().trim().parse::<f64>() {
            self.0.push((name.to_string(), kind, x));
        }
    }
}

/// The general `stats` lines as `/metrics` reads them: the numeric ones,
/// with the kind each declares.
fn numeric_stats(shared: &Shared, now: u32) -> Numeric {
    let scratch = WorkerStats::default();
    let parked = std::cell::Cell::new(false);
    let ctx = Ctx {
        shared,
        stats: &scratch,
        now,
        reader: None,
        parked: &parked,
    };
    let mut lines = Numeric::default();
    crate::admin::stats::general(&mut lines, &ctx);
    lines
}

/// The kind each numeric line of the general `stats` declares (for tests
/// that check `/metrics` against `stats`).
pub fn stat_kinds(shared: &Shared) -> BTreeMap<String, Kind> {
    numeric_stats(shared, tiercache_engine::clock::unix_now())
        .0
        .into_iter()
        .map(|(name, kind, _)| (name, kind))
        .collect()
}

/// Every numeric `stats` line as a counter or a gauge, as it declares
/// itself ([`crate::stats::kinds`] names it), and the histograms.
pub fn render(shared: &Shared) -> Vec<u8> {
    let now = tiercache_engine::clock::unix_now();
    let registry = Registry::new();
    let minute = shared.sla.interval().as_secs_f64();
    for (name, kind, v) in numeric_stats(shared, now).0 {
        let e = kinds::export(&name, kind, minute);
        let help = format!("memcached-style stat {name} (`stats`)");
        register(&registry, &e, help, v);
        if let Some(old) = kinds::legacy_gauge(&name, kind, minute) {
            let help = format!(
                "deprecated: gauge copy of tiercache_{} (stat {name}), kept for dashboards of 0.1",
                e.name
            );
            register(&registry, &old, help, v);
        }
    }
    if let Some(m) = &shared.metrics {
        let _ = registry.register(Box::new(m.latency.clone()));
    }
    let mut out = Vec::new();
    let _ = TextEncoder::new().encode(&registry.gather(), &mut out);
    let e = shared.engine.stats(now);
    out.extend_from_slice(crate::stats::locks::metrics_text(&e.holds, &e.waits).as_bytes());
    out
}

/// Registers one stat as the metric `e` says (a name seen twice keeps its
/// first value).
fn register(registry: &Registry, e: &kinds::Export, help: String, v: f64) {
    let opts = Opts::new(format!("tiercache_{}", e.name), help);
    let _ = if e.counter {
        Counter::with_opts(opts).map(|c| {
            c.inc_by((v * e.scale).max(0.0));
            registry.register(Box::new(c))
        })
    } else {
        Gauge::with_opts(opts).map(|g| {
            g.set(v * e.scale);
            registry.register(Box::new(g))
        })
    };
}
