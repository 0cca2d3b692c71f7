//! `tiercache-sim`: replay a trace through tiercache's eviction policies
//! (`tiercache-sim --trace FILE ...`) or plan capacity (`tiercache-sim plan ...`).

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::path::PathBuf;
use std::time::Instant;
use tiercache_sim::replay::{self, ReplayOptions, Window};
use tiercache_sim::trace::{self, CsvColumns, Format};
use tiercache_sim::units::{self, SizeSpec};
use tiercache_sim::{plan, report, small_replay, synth};

#[derive(Parser)]
#[command(
    name = "tiercache-sim",
    version,
    about = "Replays cache traces through tiercache's own eviction policies; miss-ratio curves; capacity planning",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Capacity planner: DRAM, flash, endurance, NIC limit, hit ratio, cost.
    Plan(plan::PlanArgs),
    /// Writes a synthetic Zipf trace in oracleGeneral format, optionally a
    /// trace-like mix (weighted sizes, one-hit objects, a drifting hot set).
    Synth(synth::SynthArgs),
    /// The NHC scheduler (the server's code) against two device models.
    Nhc(tiercache_sim::nhc::NhcArgs),
    /// Replays a Zipf workload of small objects through the small-object store (docs/SMALL.md).
    Small(small_replay::SmallArgs),
}

#[derive(Args)]
struct RunArgs {
    /// The trace file (oracleGeneral may be zstd-compressed).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// The trace format.
    #[arg(long, value_enum, default_value = "oracle-general")]
    format: Format,
    /// CSV columns, 1-based: key=N,size=N,time=N,op=N,ttl=N,delimiter=C,header=BOOL
    /// (default key=1,size=2).
    #[arg(long)]
    csv_columns: Option<String>,
    /// Policies, comma-separated: lru, fifo, clock, sieve, s3fifo[:small%[:hits]],
    /// midlru[:insertion%], 2q[:a1in%], or all; tiercache[:POLICY] replays
    /// through the server's engine (RAM tier, and flash tier with --flash).
    #[arg(long, default_value = "lru")]
    policy: String,
    /// Cache sizes, comma-separated: bytes, with units (128MiB, 1GiB, 1gb), a
    /// share of the trace's footprint (10%), or auto[:N] for N sizes from 0.1%
    /// to 100% of the footprint. With --ignore-obj-size, object counts.
    #[arg(long, default_value = "128MiB,1GiB")]
    size: String,
    /// Flash size for `tiercache` runs (the server's engine with its flash
    /// tier on an in-memory device; --size is then its RAM, -m); without it
    /// `tiercache` runs RAM only. Other policies ignore it.
    #[arg(long)]
    flash: Option<String>,
    /// For `tiercache` runs with --flash: items of at most this many bytes
    /// of key and value go to the small-object store (the server's
    /// `ext_small_max`, half of the flash; docs/SMALL.md).
    #[arg(long)]
    small_max: Option<String>,
    /// Percent of --flash the small-object store takes (`ext_small_share`).
    #[arg(long, default_value_t = 50)]
    small_share: u64,
    /// Log objects of one set the store needs to move them into it (the
    /// server's `ext_small_threshold`; 0 = its default).
    #[arg(long, default_value_t = 0)]
    small_threshold: usize,
    /// Percent of the store's region its log takes (the server's
    /// `ext_small_log`; 0 = its default, 10).
    #[arg(long, default_value_t = 0)]
    small_log: u64,
    /// For `tiercache` runs with --flash: start the index small, as the
    /// server does without `ext_avg_item_size` (default: hinted with the
    /// trace's average object size).
    #[arg(long)]
    no_index_hint: bool,
    /// Every object is one unit large; sizes count objects (libCacheSim's --ignore-obj-size).
    #[arg(long)]
    ignore_obj_size: bool,
    /// Count only gets as requests; sets insert, deletes remove (default: every request is a get).
    #[arg(long)]
    honor_ops: bool,
    /// Report per window as well: N requests, or Ns seconds of trace time.
    #[arg(long)]
    window: Option<Window>,
    /// Replay only the first N requests.
    #[arg(long)]
    limit: Option<usize>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object per line per (policy, size) instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the results (miss-ratio curve) as CSV to this file.
    #[arg(long)]
    csv_out: Option<PathBuf>,
    /// Write the results as JSON lines to this file.
    #[arg(long)]
    json_out: Option<PathBuf>,
    /// Draw the miss-ratio curve (miss ratio against size, per policy) to this SVG file.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print a Markdown table of miss ratios (policy x size) after the results.
    #[arg(long)]
    markdown: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::Plan(args)) => plan::run(&args),
        Some(Cmd::Synth(args)) => synth::run(&args),
        Some(Cmd::Nhc(args)) => tiercache_sim::nhc::run(&args),
        Some(Cmd::Small(args)) => small_replay::run(&args),
        None => run(cli.run),
    }
}

fn sizes_for(spec: &str, footprint: u64) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some(rest) = part.strip_prefix("auto") {
            let n: usize = match rest.strip_prefix(':') {
                Some(n) => n.parse().context("auto:N takes a number of sizes")?,
                None if rest.is_empty() => 12,
                None => bail!("'{part}': use auto or auto:N"),
            };
            let n = n.max(2);
            for i in 0..n {
                let f = 0.001f64 * 1000f64.powf(i as f64 / (n - 1) as f64);
                out.push(SizeSpec::Fraction(f).resolve(footprint));
            }
        } else {
            out.push(units::parse_size(part)?.resolve(footprint));
        }
    }
    if out.is_empty() {
        bail!("no cache size given");
    }
    out.dedup();
    Ok(out)
}

fn run(a: RunArgs) -> Result<()> {
    let Some(path) = a.trace.as_ref() else {
        bail!("--trace FILE is required (or use the plan subcommand); see --help");
    };
    let policies: Vec<String> = if a.policy == "all" {
        tiercache_policy::POLICY_NAMES
            .iter()
            .map(|s| s.to_string())
            .collect()
    } else {
        a.policy
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    replay::check_policies(&policies)?;
    let csv = match &a.csv_columns {
        Some(s) => CsvColumns::parse(s)?,
        None => CsvColumns::default(),
    };
    let t0 = Instant::now();
    let mut t = trace::load(path, a.format, &csv)?;
    if let Some(n) = a.limit {
        t.ids.truncate(n);
        t.sizes.truncate(n);
        t.times.truncate(n);
        t.ops.truncate(n);
    }
    if a.ignore_obj_size {
        t.ignore_sizes();
    }
    let (objects, bytes) = t.footprint();
    eprintln!(
        "trace {}: {} requests, {} objects, {} distinct bytes, loaded in {:.2}s",
        path.display(),
        t.len(),
        objects,
        bytes,
        t0.elapsed().as_secs_f64()
    );
    let sizes = sizes_for(&a.size, bytes)?;
    let jobs: Vec<(String, u64)> = policies
        .iter()
        .flat_map(|p| sizes.iter().map(move |&s| (p.clone(), s)))
        .collect();
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let opts = ReplayOptions {
        window: a.window,
        honor_ops: a.honor_ops,
        flash: match &a.flash {
            Some(f) => Some(units::parse_size(f)?.resolve(bytes)).filter(|&f| f > 0),
            None => None,
        },
        small_max: match &a.small_max {
            Some(s) => units::parse_size(s)?.resolve(bytes) as usize,
            None => 0,
        },
        small_share: a.small_share,
        small_threshold: a.small_threshold,
        small_log_percent: a.small_log,
        no_index_hint: a.no_index_hint,
    };
    let total = t.len() as u64 * jobs.len() as u64;
    let bar = ProgressBar::new(total);
    if a.no_progress {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {human_pos}/{human_len} requests  {per_sec}  eta {eta}",
        )?
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let results = replay::run_all(&t, &jobs, threads, opts, |n| bar.set_position(n))?;
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "replayed {} jobs x {} requests on {} threads in {:.2}s: {:.2} M requests/s in all",
        jobs.len(),
        t.len(),
        threads.min(jobs.len()),
        secs,
        total as f64 / secs / 1e6
    );
    if a.json {
        print!("{}", report::json_lines(&results)?);
    } else {
        print!("{}", report::table(&results, a.ignore_obj_size));
    }
    if a.markdown {
        println!();
        print!("{}", report::matrix(&results, a.ignore_obj_size));
    }
    if let Some(p) = &a.csv_out {
        report::write(p, &report::csv(&results))?;
    }
    if let Some(p) = &a.json_out {
        report::write(p, &report::json_lines(&results)?)?;
    }
    if let Some(p) = &a.plot {
        let name = path
            .file_name()
            .map_or("trace".into(), |n| n.to_string_lossy());
        report::plot(
            &results,
            p,
            &format!("miss ratio, {name}"),
            a.ignore_obj_size,
        )?;
        eprintln!("plot written to {}", p.display());
    }
    Ok(())
}
