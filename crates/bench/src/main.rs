//! tiercache-bench: load generator and latency sampler for any
//! memcached-protocol server. Throughput mode drives pipelined requests as
//! fast as possible; latency mode issues requests on a fixed-rate schedule and
//! measures from the intended send time (no coordinated omission). Every
//! sample lands in an HDR histogram; results come out as a human summary,
//! JSON, SVG plots and, optionally, raw samples.

mod conn;
mod dist;
mod hist;
mod latency;
mod plot;
mod record;
mod report;
mod runner;
mod schedule;
mod sla;
mod stats_sampler;
mod throughput;
mod workload;

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde::Serialize;

use dist::{KeyDist, SizeDist};
use report::{human, RunResult};
use runner::{run_phase, Opts, Phase, Target};
use workload::{Protocol, Workload};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
enum Mode {
    /// Closed loop, as fast as possible, `--pipeline` requests in flight per connection.
    Throughput,
    /// Open loop at `--rate` requests/s (or each rate of `--sweep`).
    Latency,
}

/// Parses `10s`, `500ms`, `2m`, `1.5s`, `250us`, or plain seconds.
fn parse_duration(s: &str) -> Result<Duration> {
    let s = s.trim();
    let (num, mult) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix("us") {
        (v, 1e-6)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else if let Some(v) = s.strip_suffix('h') {
        (v, 3600.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .with_context(|| format!("bad duration {s:?}"))?;
    if !(v >= 0.0 && v.is_finite()) {
        bail!("bad duration {s:?}");
    }
    Ok(Duration::from_secs_f64(v * mult))
}

/// Load generator and latency sampler for memcached-protocol servers.
///
/// Throughput mode (closed loop): every connection keeps --pipeline requests in
/// flight; reports ops/s, keys/s, hit ratio, bytes. Latency mode (open loop):
/// requests are sent at --rate per second on a fixed schedule spread over all
/// connections, pipelined without waiting for replies, and latency is measured
/// from the intended send time. --conns is per thread.
#[derive(Debug, Parser)]
#[command(name = "tiercache-bench", version, about, long_about)]
struct Cli {
    /// Server address, host:port.
    #[arg(long, short = 's', default_value = "127.0.0.1:11211")]
    server: String,
    /// Worker threads.
    #[arg(long, short = 't', default_value_t = 2)]
    threads: usize,
    /// Connections per thread (total = threads x conns).
    #[arg(long, short = 'c', default_value_t = 4)]
    conns: usize,
    /// Number of distinct keys (key:0 .. key:N-1).
    #[arg(long, short = 'k', default_value_t = 100_000)]
    keys: u64,
    /// Key prefix.
    #[arg(long, default_value = "key:")]
    key_prefix: String,
    /// Key popularity: uniform | zipf:SKEW (e.g. zipf:0.99).
    #[arg(long, default_value = "uniform", value_parser = KeyDist::parse)]
    dist: KeyDist,
    /// Value sizes in bytes: N | uniform:LO-HI | list:SIZE:WEIGHT,SIZE:WEIGHT,...
    #[arg(long, default_value = "32", value_parser = SizeDist::parse)]
    value_size: SizeDist,
    /// Fraction of requests that are gets (the rest are sets), 0..=1.
    #[arg(long, default_value_t = 0.9)]
    get_ratio: f64,
    /// Keys per get request (classic: one `get k1 .. kN`; meta: N `mg` lines).
    #[arg(long, default_value_t = 1)]
    multiget: u32,
    /// Requests in flight per connection in throughput mode.
    #[arg(long, short = 'p', default_value_t = 1)]
    pipeline: usize,
    /// Command family.
    #[arg(long, value_enum, default_value_t = Protocol::Classic)]
    protocol: Protocol,
    /// Measured duration of each run (10s, 500ms, 2m).
    #[arg(long, short = 'd', default_value = "10s", value_parser = parse_duration)]
    duration: Duration,
    /// Set every key once before measuring.
    #[arg(long)]
    preload: bool,
    /// throughput (closed loop) or latency (open loop, fixed rate).
    #[arg(long, value_enum, default_value_t = Mode::Throughput)]
    mode: Mode,
    /// Requests per second in latency mode (over all connections).
    #[arg(long, short = 'r', default_value_t = 10_000.0)]
    rate: f64,
    /// Comma-separated rates: one latency run per rate (implies --mode latency).
    #[arg(long, value_delimiter = ',')]
    sweep: Vec<f64>,
    /// Write results as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Write SVG plots into this directory.
    #[arg(long)]
    plot_dir: Option<PathBuf>,
    /// Write every sample (one line per request) as CSV to this file.
    #[arg(long)]
    samples: Option<PathBuf>,
    /// Seed for keys, sizes and values: the same seed replays the same
    /// request sequence on every connection.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How often to poll the server's `stats`.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    stats_interval: Duration,
    /// Do not poll the server's `stats`.
    #[arg(long)]
    no_stats: bool,
    /// How long to wait for outstanding replies after a run.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    drain_timeout: Duration,
    /// Timeline interval (default: 100ms for runs up to 10 s, else 1s).
    #[arg(long, value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Length of the SLA view's minutes (seed 002's tiers, as the server's
    /// `stats sla`): each one's p99, the daily level, unavailable minutes.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    sla_interval: Duration,
    /// Name for the runs in the output (default: the mode).
    #[arg(long)]
    name: Option<String>,
    /// No progress display.
    #[arg(long, short = 'q')]
    quiet: bool,
    /// Instead of running, draw comparison plots from earlier --json files
    /// (e.g. one sweep per server) into --plot-dir: NAME-sweep.svg and
    /// NAME-percentiles.svg, NAME from --name (default "overlay").
    #[arg(long, num_args = 1.., value_name = "JSON")]
    overlay: Vec<PathBuf>,
}

#[derive(Serialize)]
struct Machine {
    nproc: usize,
    cpu_model: Option<String>,
}

#[derive(Serialize)]
struct ConfigOut {
    server: String,
    threads: usize,
    conns_per_thread: usize,
    connections: usize,
    keys: u64,
    key_prefix: String,
    dist: String,
    value_size: String,
    value_size_mean: f64,
    get_ratio: f64,
    multiget: u32,
    pipeline: usize,
    protocol: Protocol,
    mode: Mode,
    duration_s: f64,
    rate: Option<f64>,
    sweep: Vec<f64>,
    preload: bool,
    seed: u64,
}

#[derive(Serialize)]
struct Output {
    tool: &'static str,
    version: &'static str,
    started_unix_s: u64,
    command: String,
    machine: Machine,
    config: ConfigOut,
    preload: Option<RunResult>,
    runs: Vec<RunResult>,
}

fn machine() -> Machine {
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    });
    Machine {
        nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
        cpu_model,
    }
}

fn resolve(server: &str) -> Result<SocketAddr> {
    server
        .to_socket_addrs()
        .with_context(|| format!("resolve {server}"))?
        .next()
        .with_context(|| format!("no address for {server}"))
}

fn main() {
    if let Err(e) = real_main() {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn real_main() -> Result<()> {
    let cli = Cli::parse();
    if !cli.overlay.is_empty() {
        let dir = cli
            .plot_dir
            .as_deref()
            .context("--overlay needs --plot-dir")?;
        let name = cli.name.as_deref().unwrap_or("overlay");
        return overlay(&cli.overlay, dir, name);
    }
    if cli.threads == 0 || cli.conns == 0 {
        bail!("--threads and --conns must be at least 1");
    }
    let mode = if cli.sweep.is_empty() {
        cli.mode
    } else {
        Mode::Latency
    };
    let rates: Vec<f64> = if cli.sweep.is_empty() {
        vec![cli.rate]
    } else {
        cli.sweep.clone()
    };
    if mode == Mode::Latency && rates.iter().any(|r| !(*r > 0.0 && r.is_finite())) {
        bail!("rates must be positive");
    }
    let addr = resolve(&cli.server)?;
    let wl = Arc::new(Workload::new(
        cli.keys,
        cli.key_prefix.clone(),
        cli.dist,
        cli.value_size.clone(),
        cli.get_ratio,
        cli.multiget,
        cli.protocol,
        cli.seed,
    )?);
    let target = Target {
        addr,
        threads: cli.threads,
        conns_per_thread: cli.conns,
        protocol: cli.protocol,
    };
    let interrupted = Arc::new(AtomicBool::new(false));
    // first Ctrl-C stops the run and reports; a second one exits
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, interrupted.clone())?;
        signal_hook::flag::register(sig, interrupted.clone())?;
    }
    let interval = cli
        .interval
        .unwrap_or(if cli.duration <= Duration::from_secs(10) {
            Duration::from_millis(100)
        } else {
            Duration::from_secs(1)
        });
    let base_name = cli.name.clone().unwrap_or_else(|| match mode {
        Mode::Throughput => "throughput".into(),
        Mode::Latency => "latency".into(),
    });
    let mut opts = Opts {
        seed: cli.seed,
        drain: cli.drain_timeout,
        interval_ns: interval.as_nanos().max(1) as u64,
        sla_interval_ns: cli.sla_interval.as_nanos().max(1) as u64,
        keep_samples: cli.samples.is_some(),
        stats_interval: (!cli.no_stats).then_some(cli.stats_interval),
        show_progress: !cli.quiet,
        label: String::new(),
    };
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    eprintln!(
        "tiercache-bench: {} | {} threads x {} conns | {} keys, {}, values {}, get ratio {}, multiget {}, {} protocol",
        cli.server,
        cli.threads,
        cli.conns,
        cli.keys,
        cli.dist.describe(),
        cli.value_size.describe(),
        cli.get_ratio,
        cli.multiget,
        match cli.protocol {
            Protocol::Classic => "classic",
            Protocol::Meta => "meta",
        },
    );

    let mut preload = None;
    if cli.preload {
        opts.label = "preload".into();
        let phase = Phase::Preload {
            pipeline: cli.pipeline.max(32),
        };
        let out = run_phase(&target, &wl, &phase, &opts, 0, &interrupted)?;
        let r = RunResult::build(
            "preload".into(),
            "preload",
            None,
            out.elapsed_s,
            target.total_conns() as u64,
            &out.rec,
            None,
        );
        eprintln!(
            "preload: {} keys set in {:.2} s ({} sets/s), {} errors",
            report::commas(r.sets as f64),
            r.elapsed_s,
            report::commas(r.ops_per_sec),
            r.errors
        );
        for w in &r.warnings {
            eprintln!("WARNING: {w}");
        }
        preload = Some(r);
    }

    let phases: Vec<(String, Phase, Option<f64>)> = match mode {
        Mode::Throughput => vec![(
            base_name.clone(),
            Phase::Closed {
                pipeline: cli.pipeline.max(1),
                duration: cli.duration,
            },
            None,
        )],
        Mode::Latency => rates
            .iter()
            .map(|&rate| {
                let name = if rates.len() > 1 {
                    format!("{base_name}@{rate}")
                } else {
                    base_name.clone()
                };
                (
                    name,
                    Phase::Open {
                        rate,
                        duration: cli.duration,
                    },
                    Some(rate),
                )
            })
            .collect(),
    };
    let mut runs = Vec::new();
    let mut recs = Vec::new();
    for (i, (name, phase, rate)) in phases.into_iter().enumerate() {
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        opts.label = name.clone();
        let out = run_phase(&target, &wl, &phase, &opts, i as u64 + 1, &interrupted)?;
        let server = stats_sampler::report(&out.snaps);
        let mode_s = match mode {
            Mode::Throughput => "throughput",
            Mode::Latency => "latency",
        };
        let r = RunResult::build(
            name.clone(),
            mode_s,
            rate,
            out.elapsed_s,
            target.total_conns() as u64,
            &out.rec,
            server,
        );
        println!("{}", human(&r));
        runs.push(r);
        if cli.samples.is_some() {
            recs.push((name, out.rec));
        }
    }
    if runs.len() > 1 {
        println!("{}", report::sweep_table(&runs));
    }

    if let Some(dir) = &cli.plot_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
        for r in &runs {
            let series: Vec<(String, &report::LatencySummary)> =
                ["all", "get_hit", "get_miss", "set", "error", "unanswered"]
                    .iter()
                    .filter_map(|k| r.latency.get(*k).map(|l| (k.to_string(), l)))
                    .collect();
            let title = format!(
                "{}: latency percentiles ({})",
                r.name,
                if r.mode == "latency" {
                    format!(
                        "open loop at {} ops/s",
                        report::commas(r.target_rate.unwrap_or(0.0))
                    )
                } else {
                    "closed loop service time".to_string()
                }
            );
            plot::percentiles(
                &dir.join(format!("{}-percentiles.svg", r.name)),
                &title,
                &series,
            )?;
            plot::timeline(&dir.join(format!("{}-timeline.svg", r.name)), r)?;
        }
        if runs.len() > 1 {
            plot::sweep(
                &dir.join(format!("{base_name}-sweep.svg")),
                &format!("{base_name}: throughput vs latency ({})", cli.server),
                &runs,
            )?;
            let series: Vec<(String, &report::LatencySummary)> = runs
                .iter()
                .filter_map(|r| {
                    r.latency.get("all").map(|l| {
                        (
                            format!("{} ops/s", report::commas(r.target_rate.unwrap_or(0.0))),
                            l,
                        )
                    })
                })
                .collect();
            plot::percentiles(
                &dir.join(format!("{base_name}-sweep-percentiles.svg")),
                &format!("{base_name}: latency percentiles per rate (open loop)"),
                &series,
            )?;
        }
        eprintln!("plots written to {}", dir.display());
    }
    if let Some(path) = &cli.samples {
        let refs: Vec<(String, &record::Recorder)> =
            recs.iter().map(|(n, r)| (n.clone(), r)).collect();
        report::write_samples(path, &refs)?;
        eprintln!("samples written to {}", path.display());
    }
    if let Some(path) = &cli.json {
        let out = Output {
            tool: "tiercache-bench",
            version: env!("CARGO_PKG_VERSION"),
            started_unix_s,
            command: std::env::args().collect::<Vec<_>>().join(" "),
            machine: machine(),
            config: ConfigOut {
                server: cli.server.clone(),
                threads: cli.threads,
                conns_per_thread: cli.conns,
                connections: target.total_conns(),
                keys: cli.keys,
                key_prefix: cli.key_prefix.clone(),
                dist: cli.dist.describe(),
                value_size: cli.value_size.describe(),
                value_size_mean: cli.value_size.mean(),
                get_ratio: cli.get_ratio,
                multiget: cli.multiget,
                pipeline: cli.pipeline,
                protocol: cli.protocol,
                mode,
                duration_s: cli.duration.as_secs_f64(),
                rate: (mode == Mode::Latency && cli.sweep.is_empty()).then_some(cli.rate),
                sweep: cli.sweep.clone(),
                preload: cli.preload,
                seed: cli.seed,
            },
            preload,
            runs,
        };
        let f =
            std::fs::File::create(path).with_context(|| format!("create {}", path.display()))?;
        serde_json::to_writer_pretty(std::io::BufWriter::new(f), &out)?;
        eprintln!("results written to {}", path.display());
    }
    Ok(())
}

/// Draws several earlier results on the same axes.
fn overlay(files: &[PathBuf], dir: &Path, name: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut lines = Vec::new();
    let mut curves: Vec<(String, report::LatencySummary)> = Vec::new();
    for f in files {
        let file = std::fs::File::open(f).with_context(|| format!("open {}", f.display()))?;
        let v: serde_json::Value = serde_json::from_reader(std::io::BufReader::new(file))
            .with_context(|| format!("parse {}", f.display()))?;
        let runs = v["runs"]
            .as_array()
            .with_context(|| format!("{} has no runs", f.display()))?;
        let stem = f
            .file_stem()
            .map_or("?".into(), |s| s.to_string_lossy().into_owned());
        let label = runs
            .first()
            .and_then(|r| r["name"].as_str())
            .and_then(|n| n.split('@').next())
            .filter(|n| !n.is_empty())
            .map_or(stem, String::from);
        let mut points = Vec::new();
        for r in runs {
            if r["latency"]["all"].is_null() {
                continue;
            }
            let lat: report::LatencySummary =
                serde_json::from_value(r["latency"]["all"].clone())
                    .with_context(|| format!("latency in {}", f.display()))?;
            points.push((r["ops_per_sec"].as_f64().unwrap_or(0.0), lat));
        }
        if let (Some((achieved, l)), Some(r)) = (points.last(), runs.last()) {
            let rate = r["target_rate"].as_f64().unwrap_or(*achieved);
            curves.push((
                format!("{label} at {} ops/s", report::commas(rate)),
                l.clone(),
            ));
        }
        lines.push(plot::SweepLine { label, points });
    }
    let sweep = dir.join(format!("{name}-sweep.svg"));
    plot::sweep_overlay(&sweep, "throughput vs latency", &lines)?;
    let series: Vec<(String, &report::LatencySummary)> =
        curves.iter().map(|(n, l)| (n.clone(), l)).collect();
    let pct = dir.join(format!("{name}-percentiles.svg"));
    plot::percentiles(
        &pct,
        "latency percentiles (last run of each input)",
        &series,
    )?;
    eprintln!("wrote {} and {}", sweep.display(), pct.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250us").unwrap(), Duration::from_micros(250));
        assert!(parse_duration("x").is_err());
    }

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
