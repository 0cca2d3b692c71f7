//! Runs one phase (preload, closed-loop or open-loop): opens every
//! connection before the clock starts, starts the stats sampler, spawns one
//! worker per thread with a common start instant, shows progress, and merges
//! what the workers measured.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::conn::Conn;
use crate::latency::{open_worker, OpenParams};
use crate::record::Recorder;
use crate::report::commas;
use crate::stats_sampler::{Sampler, Snapshot};
use crate::throughput::{closed_worker, ns_since, ClosedParams};
use crate::workload::{Generator, Preload, Protocol, Workload};

/// Where and how wide.
#[derive(Debug, Clone)]
pub struct Target {
    pub addr: SocketAddr,
    pub threads: usize,
    pub conns_per_thread: usize,
    pub protocol: Protocol,
}

impl Target {
    pub fn total_conns(&self) -> usize {
        self.threads * self.conns_per_thread
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub enum Phase {
    /// Set every key once, `pipeline` deep.
    Preload { pipeline: usize },
    /// As fast as possible for `duration`.
    Closed { pipeline: usize, duration: Duration },
    /// Fixed arrival rate for `duration`.
    Open { rate: f64, duration: Duration },
}

/// Knobs common to all phases.
#[derive(Debug, Clone)]
pub struct Opts {
    pub seed: u64,
    pub drain: Duration,
    pub interval_ns: u64,
    /// The SLA view's minute.
    pub sla_interval_ns: u64,
    pub keep_samples: bool,
    pub stats_interval: Option<Duration>,
    pub show_progress: bool,
    pub label: String,
}

/// What a phase produced.
pub struct PhaseOut {
    pub rec: Recorder,
    pub elapsed_s: f64,
    pub snaps: Vec<Snapshot>,
}

fn mix(a: u64, b: u64) -> u64 {
    a.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .rotate_left(29)
        .wrapping_add(b.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

pub fn run_phase(
    t: &Target,
    wl: &Arc<Workload>,
    phase: &Phase,
    opts: &Opts,
    run_index: u64,
    interrupted: &AtomicBool,
) -> Result<PhaseOut> {
    let total = t.total_conns();
    let mut streams: Vec<TcpStream> = (0..total)
        .map(|_| Conn::connect_std(t.addr))
        .collect::<Result<_>>()?;
    let t0 = Instant::now() + Duration::from_millis(20);
    let sampler = match (opts.stats_interval, phase) {
        (Some(iv), Phase::Closed { .. } | Phase::Open { .. }) => {
            match Sampler::start(t.addr, iv, t0) {
                Ok(s) => Some(s),
                Err(e) => {
                    eprintln!("warning: no server stats: {e:#}");
                    None
                }
            }
        }
        _ => None,
    };
    let progress = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let outs: Vec<(Recorder, u64)> = std::thread::scope(|sc| -> Result<_> {
        let mut handles = Vec::new();
        for th in 0..t.threads {
            let mine: Vec<TcpStream> = streams.drain(..t.conns_per_thread).collect();
            let first = (th * t.conns_per_thread) as u32;
            let (progress, stop) = (&progress, &stop);
            let wl = wl.clone();
            let h = std::thread::Builder::new()
                .name(format!("bench-{th}"))
                .spawn_scoped(sc, move || -> Result<(Recorder, u64)> {
                    let n = mine.len();
                    let conn_ids = (first as u64)..(first as u64 + n as u64);
                    let rec = match phase {
                        Phase::Preload { pipeline } => {
                            let per = wl.keys.div_ceil(total as u64);
                            let sources = conn_ids
                                .map(|c| {
                                    let lo = (c * per).min(wl.keys);
                                    let hi = ((c + 1) * per).min(wl.keys);
                                    Preload::new(wl.clone(), lo, hi, mix(opts.seed, c))
                                })
                                .collect();
                            let p = ClosedParams {
                                protocol: t.protocol,
                                pipeline: *pipeline,
                                duration: None,
                                drain: opts.drain,
                                interval_ns: opts.interval_ns,
                                sla_interval_ns: opts.sla_interval_ns,
                                keep_samples: false,
                            };
                            closed_worker(mine, first, sources, &p, t0, progress, stop)
                        }
                        Phase::Closed { pipeline, duration } => {
                            let sources = conn_ids
                                .map(|c| {
                                    Generator::new(wl.clone(), mix(mix(opts.seed, run_index), c))
                                })
                                .collect();
                            let p = ClosedParams {
                                protocol: t.protocol,
                                pipeline: *pipeline,
                                duration: Some(*duration),
                                drain: opts.drain,
                                interval_ns: opts.interval_ns,
                                sla_interval_ns: opts.sla_interval_ns,
                                keep_samples: opts.keep_samples,
                            };
                            closed_worker(mine, first, sources, &p, t0, progress, stop)
                        }
                        Phase::Open { rate, duration } => {
                            let sources = conn_ids
                                .map(|c| {
                                    Generator::new(wl.clone(), mix(mix(opts.seed, run_index), c))
                                })
                                .collect();
                            let p = OpenParams {
                                protocol: t.protocol,
                                rate: *rate,
                                total_conns: total as u64,
                                duration: *duration,
                                drain: opts.drain,
                                interval_ns: opts.interval_ns,
                                sla_interval_ns: opts.sla_interval_ns,
                                keep_samples: opts.keep_samples,
                            };
                            open_worker(mine, first, sources, &p, t0, progress, stop)
                        }
                    };
                    if rec.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    Ok((rec?, ns_since(t0)))
                })?;
            handles.push(h);
        }
        watch(&handles, phase, wl, opts, t0, &progress, &stop, interrupted);
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("worker thread panicked"))?)
            .collect()
    })?;
    let snaps = sampler.map(Sampler::finish).unwrap_or_default();
    let elapsed_s = outs.iter().map(|o| o.1).max().unwrap_or(0) as f64 / 1e9;
    let mut it = outs.into_iter();
    let (mut rec, _) = it.next().ok_or_else(|| anyhow!("no workers"))?;
    for (r, _) in it {
        rec.merge(r);
    }
    Ok(PhaseOut {
        rec,
        elapsed_s,
        snaps,
    })
}

/// Shows progress until every worker is done; forwards Ctrl-C to them.
#[allow(clippy::too_many_arguments)]
fn watch<T>(
    handles: &[std::thread::ScopedJoinHandle<'_, T>],
    phase: &Phase,
    wl: &Workload,
    opts: &Opts,
    t0: Instant,
    progress: &AtomicU64,
    stop: &AtomicBool,
    interrupted: &AtomicBool,
) {
    let (len, timed) = match phase {
        Phase::Preload { .. } => (wl.keys, false),
        Phase::Closed { duration, .. } | Phase::Open { duration, .. } => {
            (duration.as_millis() as u64, true)
        }
    };
    let pb = if opts.show_progress {
        ProgressBar::new(len)
    } else {
        ProgressBar::hidden()
    };
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{elapsed_precise}] [{bar:30}] {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    pb.set_prefix(opts.label.clone());
    let mut last = (Instant::now(), 0u64);
    while !handles.iter().all(|h| h.is_finished()) {
        // poll often so the final stats snapshot follows the end closely
        std::thread::sleep(Duration::from_millis(5));
        if interrupted.load(Ordering::Relaxed) {
            stop.store(true, Ordering::Relaxed);
        }
        let now = Instant::now();
        if now - last.0 < Duration::from_millis(250) {
            continue;
        }
        let done = progress.load(Ordering::Relaxed);
        let rate = (done - last.1) as f64 / (now - last.0).as_secs_f64().max(1e-9);
        last = (now, done);
        if timed {
            pb.set_position((now.saturating_duration_since(t0).as_millis() as u64).min(len));
        } else {
            pb.set_position(done.min(len));
        }
        pb.set_message(format!(
            "{} ops/s, {} done",
            commas(rate),
            commas(done as f64)
        ));
    }
    pb.finish_and_clear();
}
