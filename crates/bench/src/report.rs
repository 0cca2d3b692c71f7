//! Results: turns merged measurements into the JSON structures, prints the
//! human summary, and writes raw samples as CSV.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::record::{Recorder, CATEGORIES};
use crate::sla::SlaReport;
use crate::stats_sampler::ServerReport;

/// Percentiles of one histogram, in microseconds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub p9999_us: f64,
    pub max_us: f64,
    /// `[percentile, µs]` points, log-spaced towards 100, for plotting.
    pub curve: Vec<[f64; 2]>,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

pub fn summarize<T: hdrhistogram::Counter>(h: &Histogram<T>) -> Option<LatencySummary> {
    if h.is_empty() {
        return None;
    }
    let q = |p: f64| us(h.value_at_quantile(p));
    // "nines": x = log10(1 / (1 - q)); step 0.05 up to the resolution the
    // sample count supports, then the max
    let max_nines = (h.len() as f64).log10().max(1.0);
    let mut curve = Vec::new();
    let mut x = 0.0;
    while x < max_nines {
        let qq = 1.0 - 10f64.powf(-x);
        curve.push([qq * 100.0, q(qq)]);
        x += 0.05;
    }
    curve.push([100.0, us(h.max())]);
    Some(LatencySummary {
        count: h.len(),
        min_us: us(h.min()),
        mean_us: h.mean() / 1000.0,
        p50_us: q(0.5),
        p90_us: q(0.9),
        p99_us: q(0.99),
        p999_us: q(0.999),
        p9999_us: q(0.9999),
        max_us: us(h.max()),
        curve,
    })
}

/// One interval of the run.
#[derive(Debug, Clone, Serialize)]
pub struct TimelinePoint {
    /// End of the interval, seconds since the start.
    pub t_s: f64,
    /// Requests completed (replies received) in the interval, per second.
    pub ops_per_sec: f64,
    /// Requests intended to be sent in the interval, per second; the
    /// latency percentiles below are over these requests.
    pub sent_per_sec: f64,
    pub hit_ratio: Option<f64>,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// Everything about one measured run (or the preload).
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub name: String,
    pub mode: String,
    pub target_rate: Option<f64>,
    pub elapsed_s: f64,
    pub connections: u64,
    pub ops: u64,
    pub gets: u64,
    pub sets: u64,
    pub keys: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub unanswered: u64,
    pub hit_ratio: Option<f64>,
    pub ops_per_sec: f64,
    pub keys_per_sec: f64,
    pub gets_per_sec: f64,
    pub sets_per_sec: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub value_bytes_received: u64,
    pub sent_mb_per_sec: f64,
    pub received_mb_per_sec: f64,
    /// What the latency numbers mean in this mode.
    pub latency_kind: String,
    /// `all`, `get`, and each of `get_hit`, `get_miss`, `set`, `error`,
    /// `unanswered` that has samples.
    pub latency: BTreeMap<String, LatencySummary>,
    /// Actual minus intended send time (open loop only).
    pub send_lag: Option<LatencySummary>,
    pub timeline: Vec<TimelinePoint>,
    /// Seed 002's SLA view of the run (`--sla-interval` minutes).
    pub sla: SlaReport,
    pub server: Option<ServerReport>,
    pub first_error: Option<String>,
    pub warnings: Vec<String>,
}

impl RunResult {
    pub fn build(
        name: String,
        mode: &str,
        target_rate: Option<f64>,
        elapsed_s: f64,
        connections: u64,
        rec: &Recorder,
        server: Option<ServerReport>,
    ) -> Self {
        let c = &rec.counters;
        let per_s = |n: u64| {
            if elapsed_s > 0.0 {
                n as f64 / elapsed_s
            } else {
                0.0
            }
        };
        let mut latency = BTreeMap::new();
        if let Some(s) = summarize(&rec.all_hist()) {
            latency.insert("all".to_string(), s);
        }
        if let Some(s) = summarize(&rec.gets_hist()) {
            latency.insert("get".to_string(), s);
        }
        for (i, name) in CATEGORIES.iter().enumerate() {
            if let Some(s) = summarize(&rec.hists[i]) {
                latency.insert(name.to_string(), s);
            }
        }
        let open = mode == "latency";
        let send_lag = if open { summarize(&rec.send_lag) } else { None };
        let interval_s = rec.interval_ns as f64 / 1e9;
        let timeline = rec
            .timeline
            .iter()
            .enumerate()
            .map(|(i, b)| TimelinePoint {
                t_s: (i as f64 + 1.0) * interval_s,
                ops_per_sec: b.completed as f64 / interval_s,
                sent_per_sec: b.ops as f64 / interval_s,
                hit_ratio: (b.hits + b.misses > 0)
                    .then(|| b.hits as f64 / (b.hits + b.misses) as f64),
                p50_us: if b.ops > 0 {
                    us(b.hist.value_at_quantile(0.5))
                } else {
                    0.0
                },
                p99_us: if b.ops > 0 {
                    us(b.hist.value_at_quantile(0.99))
                } else {
                    0.0
                },
                max_us: us(b.hist.max()),
            })
            .collect();
        let mut warnings = Vec::new();
        if c.errors > 0 {
            warnings.push(format!(
                "{} errors; first error reply: {}",
                c.errors,
                rec.first_error.as_deref().unwrap_or("?")
            ));
        }
        if c.unanswered > 0 {
            warnings.push(format!(
                "{} requests unanswered at the end of the drain timeout \
                 (in the histograms at their lower bound)",
                c.unanswered
            ));
        }
        if let (Some(rate), true) = (target_rate, open) {
            let achieved = per_s(c.ops);
            if achieved < 0.95 * rate {
                warnings.push(format!(
                    "achieved {achieved:.0} ops/s, below the target {rate:.0}: \
                     the server (or client) could not keep up"
                ));
            }
            if let Some(lag) = &send_lag {
                if lag.p99_us > 1000.0 {
                    warnings.push(format!(
                        "client fell behind its schedule: send lag p99 {:.0} us, \
                         max {:.0} us (counted in latency)",
                        lag.p99_us, lag.max_us
                    ));
                }
            }
        }
        RunResult {
            name,
            mode: mode.to_string(),
            target_rate,
            elapsed_s,
            connections,
            ops: c.ops,
            gets: c.gets,
            sets: c.sets,
            keys: c.keys,
            hits: c.hits,
            misses: c.misses,
            errors: c.errors,
            unanswered: c.unanswered,
            hit_ratio: (c.hits + c.misses > 0).then(|| c.hits as f64 / (c.hits + c.misses) as f64),
            ops_per_sec: per_s(c.ops),
            keys_per_sec: per_s(c.keys),
            gets_per_sec: per_s(c.gets),
            sets_per_sec: per_s(c.sets),
            bytes_sent: c.bytes_sent,
            bytes_received: c.bytes_received,
            value_bytes_received: c.value_bytes,
            sent_mb_per_sec: per_s(c.bytes_sent) / 1e6,
            received_mb_per_sec: per_s(c.bytes_received) / 1e6,
            latency_kind: if open {
                "open loop: reply time minus intended send time (no coordinated omission)"
            } else {
                "closed loop: service time from actual send (hides queueing; use latency mode)"
            }
            .to_string(),
            latency,
            send_lag,
            timeline,
            sla: SlaReport::build(&rec.sla, elapsed_s),
            server,
            first_error: rec.first_error.clone(),
            warnings,
        }
    }
}

/// Thousands separators for the human summary.
pub fn commas(v: f64) -> String {
    let n = v.round() as i128;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

fn fmt_us(v: f64) -> String {
    if v >= 100_000.0 {
        format!("{:.0}", v)
    } else if v >= 100.0 {
        format!("{:.1}", v)
    } else {
        format!("{:.2}", v)
    }
}

/// The human summary of one run.
pub fn human(r: &RunResult) -> String {
    let mut s = String::new();
    let rate = r
        .target_rate
        .map(|x| format!(", target {} ops/s", commas(x)))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "== {} ({} mode{rate}): {} connections, {:.2} s",
        r.name, r.mode, r.connections, r.elapsed_s
    );
    let _ = writeln!(
        s,
        "ops     {:>14}  {:>12} ops/s   (gets {}, sets {})",
        commas(r.ops as f64),
        commas(r.ops_per_sec),
        commas(r.gets as f64),
        commas(r.sets as f64)
    );
    let hr = r.hit_ratio.map_or("-".to_string(), |h| format!("{h:.4}"));
    let _ = writeln!(
        s,
        "keys    {:>14}  {:>12} keys/s  hit ratio {hr} (hits {}, misses {})",
        commas(r.keys as f64),
        commas(r.keys_per_sec),
        commas(r.hits as f64),
        commas(r.misses as f64)
    );
    let _ = writeln!(
        s,
        "bytes   sent {:.1} MB ({:.1} MB/s), received {:.1} MB ({:.1} MB/s), values {:.1} MB",
        r.bytes_sent as f64 / 1e6,
        r.sent_mb_per_sec,
        r.bytes_received as f64 / 1e6,
        r.received_mb_per_sec,
        r.value_bytes_received as f64 / 1e6
    );
    let _ = writeln!(s, "errors  {}   unanswered {}", r.errors, r.unanswered);
    let _ = writeln!(s, "latency (us), {}:", r.latency_kind);
    let _ = writeln!(
        s,
        "  {:<11}{:>11}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "", "count", "min", "p50", "p90", "p99", "p99.9", "max", "mean"
    );
    let mut rows: Vec<(&str, &LatencySummary)> = Vec::new();
    for name in [
        "all",
        "get",
        "get_hit",
        "get_miss",
        "set",
        "error",
        "unanswered",
    ] {
        if let Some(l) = r.latency.get(name) {
            rows.push((name, l));
        }
    }
    if let Some(l) = &r.send_lag {
        rows.push(("send lag", l));
    }
    for (name, l) in rows {
        let _ = writeln!(
            s,
            "  {:<11}{:>11}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            name,
            commas(l.count as f64),
            fmt_us(l.min_us),
            fmt_us(l.p50_us),
            fmt_us(l.p90_us),
            fmt_us(l.p99_us),
            fmt_us(l.p999_us),
            fmt_us(l.max_us),
            fmt_us(l.mean_us)
        );
    }
    if let Some(sv) = &r.server {
        let g = |k: &str| sv.rates.get(k).copied().unwrap_or(0.0);
        let _ = writeln!(
            s,
            "server  {} over {:.2} s: cmd_get {}/s, cmd_set {}/s, get_hits {}/s, get_misses {}/s, \
             hit ratio {}, read {:.1} MB/s, written {:.1} MB/s, cpu {}, curr_connections {}",
            sv.version.as_deref().unwrap_or("?"),
            sv.window_s,
            commas(g("cmd_get")),
            commas(g("cmd_set")),
            commas(g("get_hits")),
            commas(g("get_misses")),
            sv.hit_ratio.map_or("-".into(), |h| format!("{h:.4}")),
            g("bytes_read") / 1e6,
            g("bytes_written") / 1e6,
            sv.cpu_utilisation
                .map_or("-".into(), |c| format!("{c:.2} cores")),
            sv.curr_connections
                .map_or("-".into(), |c| format!("{c:.0}")),
        );
    }
    sla_line(&mut s, &r.sla);
    for w in &r.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    s
}

/// The SLA view in two lines: each minute's p99 (`*` unavailable, `~`
/// partial, `-` no requests), then the daily level and the count.
fn sla_line(s: &mut String, r: &SlaReport) {
    let shown = 30;
    let mut p99s: Vec<String> = r
        .minutes
        .iter()
        .take(shown)
        .map(|m| {
            let v = m.p99_us.map_or("-".to_string(), fmt_us);
            let mark = if m.unavailable { "*" } else { "" };
            let part = if m.partial { "~" } else { "" };
            format!("{part}{v}{mark}")
        })
        .collect();
    if r.minutes.len() > shown {
        p99s.push(format!(
            "... ({} more in the JSON)",
            r.minutes.len() - shown
        ));
    }
    let _ = writeln!(
        s,
        "sla     p99 (us) per {} s minute: {}",
        r.interval_s,
        p99s.join(" ")
    );
    let level = r
        .daily_level_us
        .map_or("none yet".into(), |v| format!("{} us", fmt_us(v)));
    let _ = writeln!(
        s,
        "        daily level {level} (the first minute sets it), unavailable minutes {} \
         (seed 002 tiers; * unavailable, ~ partial)",
        r.unavailable_minutes
    );
}

/// The sweep table: one line per rate.
pub fn sweep_table(runs: &[RunResult]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>12}{:>12}{:>10}{:>10}{:>10}{:>10}{:>10}",
        "target/s", "achieved/s", "p50 us", "p90 us", "p99 us", "p99.9 us", "max us"
    );
    for r in runs {
        if let Some(l) = r.latency.get("all") {
            let _ = writeln!(
                s,
                "{:>12}{:>12}{:>10}{:>10}{:>10}{:>10}{:>10}",
                commas(r.target_rate.unwrap_or(0.0)),
                commas(r.ops_per_sec),
                fmt_us(l.p50_us),
                fmt_us(l.p90_us),
                fmt_us(l.p99_us),
                fmt_us(l.p999_us),
                fmt_us(l.max_us)
            );
        }
    }
    s
}

/// Writes every raw sample of the runs as CSV (times in µs since each run's
/// start; `done_us` and `latency_us` empty for unanswered requests).
pub fn write_samples(path: &Path, runs: &[(String, &Recorder)]) -> Result<()> {
    let f = std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut w = BufWriter::new(f);
    writeln!(
        w,
        "run,conn,op,hits,misses,errors,intended_us,sent_us,done_us,latency_us"
    )?;
    for (name, rec) in runs {
        for smp in rec.samples.iter().flatten() {
            let op = if smp.set { "set" } else { "get" };
            write!(
                w,
                "{name},{},{op},{},{},{},{:.3},{:.3},",
                smp.conn,
                smp.hits,
                smp.misses,
                smp.errors,
                smp.intended_ns as f64 / 1e3,
                smp.sent_ns as f64 / 1e3
            )?;
            if smp.done_ns == u64::MAX {
                writeln!(w, ",")?;
            } else {
                writeln!(
                    w,
                    "{:.3},{:.3}",
                    smp.done_ns as f64 / 1e3,
                    smp.done_ns.saturating_sub(smp.intended_ns) as f64 / 1e3
                )?;
            }
        }
    }
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_keeps_the_max() {
        let mut h = crate::hist::new_hist();
        for _ in 0..10_000 {
            h.record(10_000).unwrap();
        }
        h.record(5_000_000_000).unwrap();
        let s = summarize(&h).unwrap();
        assert_eq!(s.count, 10_001);
        assert!((s.p50_us - 10.0).abs() < 0.1);
        assert!((s.p99_us - 10.0).abs() < 0.1);
        assert!(s.max_us > 4_990_000.0);
        assert_eq!(s.curve.last().unwrap()[0], 100.0);
        assert!(s.curve.windows(2).all(|w| w[0][0] < w[1][0]));
    }

    #[test]
    fn commas_format() {
        assert_eq!(commas(1234567.4), "1,234,567");
        assert_eq!(commas(999.0), "999");
        assert_eq!(commas(0.0), "0");
    }
}
