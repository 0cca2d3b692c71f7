//! Server-side view: a separate connection polls `stats` at a fixed interval
//! during a run; the deltas between snapshots give the server's own rates
//! (cmd_get, cmd_set, hits, misses, bytes, CPU time), to set beside what the
//! client measured.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tiercache_proto::client::{parse_reply, Reply};

/// One `stats` reply, taken `t_ns` after the run's start.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub t_ns: i64,
    pub stats: BTreeMap<String, String>,
}

impl Snapshot {
    fn num(&self, name: &str) -> Option<f64> {
        self.stats.get(name).and_then(|v| v.parse().ok())
    }
}

/// Counters reported as per-second rates.
pub const RATE_STATS: [&str; 8] = [
    "cmd_get",
    "cmd_set",
    "get_hits",
    "get_misses",
    "bytes_read",
    "bytes_written",
    "total_connections",
    "evictions",
];

/// Sends `stats` and reads the reply up to `END`.
pub fn fetch(stream: &mut TcpStream) -> Result<BTreeMap<String, String>> {
    stream.write_all(b"stats\r\n")?;
    let mut buf = Vec::with_capacity(8192);
    let mut chunk = [0u8; 8192];
    let mut out = BTreeMap::new();
    let mut pos = 0;
    loop {
        while let Some((reply, used)) =
            parse_reply(&buf[pos..]).map_err(|e| anyhow::anyhow!("bad stats reply: {e:?}"))?
        {
            pos += used;
            match reply {
                Reply::Line(b"END") => return Ok(out),
                Reply::Line(l) if l.starts_with(b"STAT ") => {
                    let l = String::from_utf8_lossy(&l[5..]);
                    if let Some((k, v)) = l.split_once(' ') {
                        out.insert(k.to_string(), v.to_string());
                    }
                }
                other => bail!("unexpected reply to stats: {other:?}"),
            }
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            bail!("server closed the stats connection");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A running sampler thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<Snapshot>>,
}

impl Sampler {
    /// Connects, checks that `stats` works, and starts polling every
    /// `interval` from `t0` (the run's start) on.
    pub fn start(addr: SocketAddr, interval: Duration, t0: Instant) -> Result<Self> {
        let mut stream = TcpStream::connect(addr).context("stats connection")?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        fetch(&mut stream).context("initial stats")?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let rel = move || {
            let now = Instant::now();
            if now >= t0 {
                (now - t0).as_nanos() as i64
            } else {
                -((t0 - now).as_nanos() as i64)
            }
        };
        let handle = std::thread::Builder::new()
            .name("stats-sampler".into())
            .spawn(move || {
                let mut snaps = Vec::new();
                crate::throughput::sleep_until(t0);
                let mut next = t0;
                loop {
                    while Instant::now() < next && !stop2.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(5).min(interval));
                    }
                    let stopping = stop2.load(Ordering::Relaxed);
                    let before = rel();
                    match fetch(&mut stream) {
                        Ok(stats) => snaps.push(Snapshot {
                            t_ns: before + (rel() - before) / 2,
                            stats,
                        }),
                        Err(e) => {
                            eprintln!("warning: stats sampler stopped: {e:#}");
                            break;
                        }
                    }
                    if stopping {
                        break;
                    }
                    next += interval;
                }
                snaps
            })?;
        Ok(Sampler { stop, handle })
    }

    /// Takes a final snapshot and returns all of them.
    pub fn finish(self) -> Vec<Snapshot> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

/// The server's rates over one interval.
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    pub t_s: f64,
    pub rates: BTreeMap<String, f64>,
}

/// Which server and version answered: tiercache says its own version in
/// `tiercache_version` (its `version` is the memcached protocol level it
/// speaks, which clients parse); memcached its `version`.
fn server_name(stats: &BTreeMap<String, String>) -> Option<String> {
    match (stats.get("tiercache_version"), stats.get("version")) {
        (Some(t), Some(v)) => Some(format!("tiercache {t} (memcached {v} protocol)")),
        (Some(t), None) => Some(format!("tiercache {t}")),
        (None, Some(v)) => Some(format!("memcached {v}")),
        (None, None) => None,
    }
}

/// What the server says about the run.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    pub version: Option<String>,
    pub threads: Option<String>,
    /// Seconds between the first and last snapshot.
    pub window_s: f64,
    /// Per-second rates over the whole window.
    pub rates: BTreeMap<String, f64>,
    /// get_hits / (get_hits + get_misses) over the window.
    pub hit_ratio: Option<f64>,
    /// Server CPU time (user + system) per wall second over the window.
    pub cpu_utilisation: Option<f64>,
    /// Highest `curr_connections` seen (includes the sampler's own).
    pub curr_connections: Option<f64>,
    pub curr_items: Option<f64>,
    pub intervals: Vec<Interval>,
}

fn rates_between(a: &Snapshot, b: &Snapshot) -> BTreeMap<String, f64> {
    let dt = (b.t_ns - a.t_ns) as f64 / 1e9;
    let mut out = BTreeMap::new();
    if dt <= 0.0 {
        return out;
    }
    for name in RATE_STATS {
        if let (Some(x), Some(y)) = (a.num(name), b.num(name)) {
            out.insert(name.to_string(), (y - x) / dt);
        }
    }
    out
}

fn cpu(s: &Snapshot) -> Option<f64> {
    Some(s.num("rusage_user")? + s.num("rusage_system")?)
}

/// Summarises the snapshots of one run.
pub fn report(snaps: &[Snapshot]) -> Option<ServerReport> {
    let (first, last) = (snaps.first()?, snaps.last()?);
    if snaps.len() < 2 {
        return None;
    }
    let window_s = (last.t_ns - first.t_ns) as f64 / 1e9;
    let rates = rates_between(first, last);
    let dh = last.num("get_hits").zip(first.num("get_hits"));
    let dm = last.num("get_misses").zip(first.num("get_misses"));
    let hit_ratio = match (dh, dm) {
        (Some((h1, h0)), Some((m1, m0))) if (h1 - h0) + (m1 - m0) > 0.0 => {
            Some((h1 - h0) / ((h1 - h0) + (m1 - m0)))
        }
        _ => None,
    };
    let cpu_utilisation = match (cpu(first), cpu(last)) {
        (Some(a), Some(b)) if window_s > 0.0 => Some((b - a) / window_s),
        _ => None,
    };
    let intervals = snaps
        .windows(2)
        .map(|w| {
            let mut rates = rates_between(&w[0], &w[1]);
            if let (Some(a), Some(b)) = (cpu(&w[0]), cpu(&w[1])) {
                let dt = (w[1].t_ns - w[0].t_ns) as f64 / 1e9;
                if dt > 0.0 {
                    rates.insert("cpu".into(), (b - a) / dt);
                }
            }
            Interval {
                t_s: w[1].t_ns as f64 / 1e9,
                rates,
            }
        })
        .collect();
    Some(ServerReport {
        version: server_name(&last.stats),
        threads: last.stats.get("threads").cloned(),
        window_s,
        rates,
        hit_ratio,
        cpu_utilisation,
        curr_connections: snaps
            .iter()
            .filter_map(|s| s.num("curr_connections"))
            .reduce(f64::max),
        curr_items: last.num("curr_items"),
        intervals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(t_s: f64, pairs: &[(&str, &str)]) -> Snapshot {
        Snapshot {
            t_ns: (t_s * 1e9) as i64,
            stats: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn rates_from_deltas() {
        let s = [
            snap(
                0.0,
                &[
                    ("cmd_get", "100"),
                    ("get_hits", "90"),
                    ("get_misses", "10"),
                    ("rusage_user", "1.0"),
                    ("rusage_system", "0.5"),
                ],
            ),
            snap(
                1.0,
                &[
                    ("cmd_get", "1100"),
                    ("get_hits", "890"),
                    ("get_misses", "210"),
                    ("rusage_user", "1.5"),
                    ("rusage_system", "0.7"),
                ],
            ),
            snap(
                2.0,
                &[
                    ("cmd_get", "2100"),
                    ("get_hits", "1890"),
                    ("get_misses", "210"),
                    ("rusage_user", "2.0"),
                    ("rusage_system", "0.8"),
                    ("version", "1.6.18"),
                ],
            ),
        ];
        let r = report(&s).unwrap();
        assert_eq!(r.window_s, 2.0);
        assert_eq!(r.rates["cmd_get"], 1000.0);
        assert!((r.hit_ratio.unwrap() - 1800.0 / 2000.0).abs() < 1e-12);
        assert!((r.cpu_utilisation.unwrap() - 0.65).abs() < 1e-9);
        assert_eq!(r.intervals.len(), 2);
        assert_eq!(r.intervals[1].rates["get_misses"], 0.0);
        assert_eq!(r.version.as_deref(), Some("memcached 1.6.18"));
        let mut t = s.clone();
        let last = t.last_mut().unwrap();
        last.stats
            .insert("tiercache_version".into(), "0.1.0".into());
        assert_eq!(
            report(&t).unwrap().version.as_deref(),
            Some("tiercache 0.1.0 (memcached 1.6.18 protocol)")
        );
    }
}
