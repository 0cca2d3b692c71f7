//! The Prometheus endpoint's HTTP side (`-o metrics_port=N`): its listener
//! thread, `GET /metrics`, and the text it serves (every numeric `stats`
//! line as a gauge, and the histograms of [`super::metrics`]).

use crate::ctx::Ctx;
use crate::shared::Shared;
use crate::stats::WorkerStats;
use prometheus::{Encoder, Gauge, Opts, Registry, TextEncoder};
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
