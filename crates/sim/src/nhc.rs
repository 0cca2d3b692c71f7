//! `tiercache-sim nhc`: the non-hierarchical caching scheduler the server
//! runs (`tiercache_policy::nhc`, the same code) replayed against two device
//! models with given IOPS, next to classic caching, so that an operator can
//! see what a second device class would give before buying it.
//!
//! The model is a fluid one, per scheduler interval. Clients offer `load`
//! times the fast device's IOPS of flash reads (closed loop: what is not
//! served waits). A share `hit` of the reads is for items with a fast copy
//! (every item has a capacity copy, as in the seed's setup); `load_admit`
//! of those go to the fast device, the rest and the capacity-only reads to
//! the capacity device. While `data_admit` is on, each capacity-only read
//! is also written to the fast device (a promotion), costing it
//! `write_cost` reads' worth. Served throughput is the largest rate both
//! devices can carry. A working-set change at `change_at` drops the hit
//! ratio to `hit_after_change`, from where it climbs back toward `hit`
//! only while data is admitted (the fast device warms up), with time
//! constant `warm_secs`; without admission it stays.
//!
//! `noise` (seeded by `seed`) puts each interval's served reads off by up to
//! that fraction while a device limits the throughput (a throttled device
//! serves in bursts; below saturation the demand is served as it comes), and
//! `lag` counts reads completed `lag` intervals after they were routed. With
//! both at 0 (the default) the model is the noise-free one. Each class's
//! mean read latency, which the `balance` feedback compares, is its idle
//! latency (`fast_us`, `cap_us`) over one minus its utilisation (capped at
//! 0.98: the class that limits the throughput holds the queue), off by the
//! same noise while a device limits the throughput. The timeline's
//! `tuned` column is the point the tuning is at (`load_admit` is the probed
//! one), and the summary gives its range over the second half.

use anyhow::{bail, Result};
use clap::Args;
use tiercache_policy::nhc::{Measurement, Nhc, NhcParams, Objective, ProbeOrder};

#[derive(Args, Debug, Clone)]
pub struct NhcArgs {
    /// Fast device's 4 KiB random-read IOPS.
    #[arg(long, default_value_t = 20_000.0)]
    pub fast_iops: f64,
    /// Capacity device's IOPS.
    #[arg(long, default_value_t = 10_000.0)]
    pub cap_iops: f64,
    /// Offered read load as a multiple of the fast device's IOPS (Load-1.0
    /// saturates it).
    #[arg(long, default_value_t = 2.0)]
    pub load: f64,
    /// Share of flash reads whose item is on the fast class once warm.
    #[arg(long, default_value_t = 0.95)]
    pub hit: f64,
    /// Seconds to simulate.
    #[arg(long, default_value_t = 60.0)]
    pub secs: f64,
    /// Scheduler interval, seconds (the server uses 0.1).
    #[arg(long, default_value_t = 0.1)]
    pub interval: f64,
    /// A working-set change at this time (seconds; none by default).
    #[arg(long)]
    pub change_at: Option<f64>,
    /// The hit ratio right after the change.
    #[arg(long, default_value_t = 0.3)]
    pub hit_after_change: f64,
    /// Warm-up time constant of the fast device while it admits data.
    #[arg(long, default_value_t = 3.0)]
    pub warm_secs: f64,
    /// Fast-device cost of a promotion write, in reads.
    #[arg(long, default_value_t = 1.0)]
    pub write_cost: f64,
    /// Measurement noise: while a device limits the throughput, each
    /// interval's served reads are off by up to this fraction (uniform,
    /// seeded), as a throttled device serving in bursts is (0 = the
    /// noise-free fluid model; a demand the devices carry is served as it
    /// comes).
    #[arg(long, default_value_t = 0.0)]
    pub noise: f64,
    /// Intervals between routing a read and its completion being counted
    /// (requests queued in the server; 0 = none).
    #[arg(long, default_value_t = 0)]
    pub lag: usize,
    /// Seed of the noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Throttle carry-over: a device that serves less than its IOPS keeps
    /// the unused reads as credit, up to this many seconds of its IOPS, and
    /// serves them later on top of its IOPS (at most `burst` times its IOPS
    /// more), as the kernel's blkio throttle does with a device below its
    /// limit (bench/RESULTS.md, "the sawtooth": the budget of a
    /// throttle slice that keeps being extended is never trimmed). 0 = none.
    #[arg(long, default_value_t = 0.0)]
    pub carry: f64,
    /// Largest extra rate of a device spending credit, a fraction of its IOPS.
    #[arg(long, default_value_t = 0.3)]
    pub burst: f64,
    /// The scheduler's probe order: `fixed`, `serpentine`, `centered` or `balanced`
    /// (the server's default when not given; `tiercache_policy::nhc::ProbeOrder`).
    #[arg(long)]
    pub order: Option<String>,
    /// The scheduler's settling and measured intervals per probed point,
    /// and the gain a move needs (the server's defaults when not given).
    #[arg(long)]
    pub settle: Option<usize>,
    #[arg(long)]
    pub probe_intervals: Option<usize>,
    #[arg(long)]
    pub min_gain: Option<f64>,
    #[arg(long)]
    pub min_step: Option<f64>,
    #[arg(long)]
    pub grow_after: Option<u32>,
    #[arg(long)]
    pub confirm: Option<u32>,
    /// The balance feedback's `at_limit` (0 = off; the server's default
    /// when not given).
    #[arg(long)]
    pub at_limit: Option<f64>,
    /// Keep the gain a move needs fixed when the step is halved.
    #[arg(long)]
    pub fixed_gain: bool,
    /// What the scheduler's feedback measures: `balance` (the classes' read
    /// latencies, the server's default) or `throughput`.
    #[arg(long, default_value = "balance")]
    pub feedback: String,
    /// Each device's read latency when idle, microseconds (the model: that
    /// over one minus the device's utilisation, capped at 0.98 where reads
    /// queue; credit counts as capacity).
    #[arg(long, default_value_t = 100.0)]
    pub fast_us: f64,
    #[arg(long, default_value_t = 100.0)]
    pub cap_us: f64,
    /// A queue both classes' reads wait in before their device (the pread
    /// pool's, `ext_io=pool`), microseconds per read while a device limits
    /// the throughput (clients beyond saturation fill it): added to both
    /// classes' latencies and reported to the scheduler as that queue's
    /// part, which the balance leaves out (0 = none, as with io_uring).
    #[arg(long, default_value_t = 0.0)]
    pub shared_queue_us: f64,
    /// Write the timeline (t, state, data_admit, load_admit, throughput of
    /// NHC and of classic caching) as CSV to this file.
    #[arg(long)]
    pub csv_out: Option<std::path::PathBuf>,
}

/// One interval of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub t: f64,
    pub state: u8,
    pub data_admit: bool,
    pub load_admit: f64,
    /// The point the tuning is at (`load_admit` without the probe's step).
    pub tuned: f64,
    pub hit: f64,
    /// Reads served per second.
    pub served: f64,
}

/// Reads per second the two devices carry at this split.
pub fn served(a: &NhcArgs, hit: f64, la: f64, data_admit: bool) -> f64 {
    served_by(a, hit, la, data_admit, a.fast_iops, a.cap_iops).0
}

/// Reads per second the two devices carry at this split when they serve
/// `fast` and `cap` reads per second at most, and the reads per second
/// each of them serves (a promotion counts `write_cost` on the fast one).
fn served_by(
    a: &NhcArgs,
    hit: f64,
    la: f64,
    data_admit: bool,
    fast: f64,
    cap: f64,
) -> (f64, f64, f64) {
    let demand = a.load * a.fast_iops;
    let fast_share = hit * la
        + if data_admit {
            (1.0 - hit) * a.write_cost
        } else {
            0.0
        };
    let cap_share = 1.0 - hit * la;
    let by_fast = if fast_share > 0.0 {
        fast / fast_share
    } else {
        f64::MAX
    };
    let by_cap = if cap_share > 0.0 {
        cap / cap_share
    } else {
        f64::MAX
    };
    let t = demand.min(by_fast).min(by_cap);
    (t, t * fast_share, t * cap_share)
}

/// Runs the model; `nhc` false is classic caching (data_admit on,
/// load_admit 1 throughout).
pub fn simulate(a: &NhcArgs, nhc: bool) -> Vec<Step> {
    let mut params = NhcParams::default();
    params.order = match a.order.as_deref() {
        Some("fixed") => ProbeOrder::Fixed,
        Some("serpentine") => ProbeOrder::Serpentine,
        Some("centered") => ProbeOrder::Centered,
        Some("balanced") => ProbeOrder::Balanced,
        _ => params.order,
    };
    params.settle_intervals = a.settle.unwrap_or(params.settle_intervals);
    params.probe_intervals = a.probe_intervals.unwrap_or(params.probe_intervals);
    params.min_gain = a.min_gain.unwrap_or(params.min_gain);
    params.min_step = a.min_step.unwrap_or(params.min_step);
    params.grow_after = a.grow_after.unwrap_or(params.grow_after);
    params.confirm = a.confirm.unwrap_or(params.confirm);
    params.scale_gain &= !a.fixed_gain;
    params.at_limit = a.at_limit.unwrap_or(params.at_limit);
    let objective = Objective::parse(&a.feedback).unwrap_or(Objective::Balance);
    let mut s = Nhc::new(params, objective);
    let mut hit = a.hit;
    let mut out = Vec::new();
    let steps = (a.secs / a.interval).round() as usize;
    let mut changed = false;
    let mut x = a.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    // The splits routed in the last `lag` intervals, oldest first.
    let mut routed: Vec<(f64, bool)> = vec![(1.0, true); a.lag];
    // Throttle credit of each device (reads), with `carry`.
    let mut credit = [0.0f64; 2];
    for i in 0..steps {
        let t = i as f64 * a.interval;
        if a.change_at.is_some_and(|c| t >= c) && !changed {
            changed = true;
            hit = a.hit_after_change;
        }
        let (da, la) = if nhc {
            (s.data_admit(), s.effective_load_admit())
        } else {
            (true, 1.0)
        };
        routed.push((la, da));
        let (la_done, da_done) = routed.remove(0);
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let r = (x >> 11) as f64 / (1u64 << 53) as f64;
        let iops = [a.fast_iops, a.cap_iops];
        let extra = |d: usize| (credit[d] / a.interval).min(a.burst * iops[d]);
        let (fluid, fast_used, cap_used) = served_by(
            a,
            hit,
            la_done,
            da_done,
            iops[0] + extra(0),
            iops[1] + extra(1),
        );
        // As the throughput: off by the noise only while a device limits it.
        let jitter = if fluid < a.load * a.fast_iops {
            1.0 + a.noise * (2.0 * r - 1.0)
        } else {
            1.0
        };
        let mut class_reads = [0u64; 2];
        let mut class_latency_us = [0.0f64; 2];
        let mut class_queued_us = [0.0f64; 2];
        let idle_us = [a.fast_us, a.cap_us];
        let shared = if fluid < a.load * a.fast_iops {
            a.shared_queue_us
        } else {
            0.0
        };
        for (d, used) in [fast_used, cap_used].into_iter().enumerate() {
            let rho = (used / (iops[d] + extra(d))).min(0.98);
            class_reads[d] = (used * a.interval) as u64;
            class_queued_us[d] = class_reads[d] as f64 * shared;
            class_latency_us[d] =
                class_reads[d] as f64 * idle_us[d] / (1.0 - rho) * jitter + class_queued_us[d];
        }
        for (d, used) in [fast_used, cap_used].into_iter().enumerate() {
            credit[d] = (credit[d] + (iops[d] - used) * a.interval).clamp(0.0, a.carry * iops[d]);
        }
        // Only a device that limits the throughput adds its bursts: below
        // saturation the clients' demand is served as it comes.
        let done = if fluid < a.load * a.fast_iops {
            fluid * (1.0 + a.noise * (2.0 * r - 1.0))
        } else {
            fluid
        };
        out.push(Step {
            t,
            state: if nhc { s.state().number() } else { 1 },
            data_admit: da,
            load_admit: la,
            tuned: if nhc { s.load_admit() } else { 1.0 },
            hit,
            served: done,
        });
        if nhc {
            let reads = (done * a.interval) as u64;
            s.interval(&Measurement {
                secs: a.interval,
                reads,
                fast_resident: (reads as f64 * hit) as u64,
                latency_us: 0.0,
                class_reads,
                class_latency_us,
                class_queued_us,
            });
        }
        if da {
            hit += (a.hit - hit) * (1.0 - (-a.interval / a.warm_secs).exp());
        }
    }
    out
}

fn mean(v: &[Step], from: f64) -> f64 {
    let w: Vec<f64> = v.iter().filter(|s| s.t >= from).map(|s| s.served).collect();
    w.iter().sum::<f64>() / w.len().max(1) as f64
}

pub fn run(a: &NhcArgs) -> Result<()> {
    if a.fast_iops <= 0.0 || a.cap_iops <= 0.0 || a.load <= 0.0 || a.interval <= 0.0 {
        bail!("IOPS, load and interval must be positive");
    }
    if !(0.0..=1.0).contains(&a.hit) || !(0.0..=1.0).contains(&a.hit_after_change) {
        bail!("hit ratios are between 0 and 1");
    }
    if !matches!(a.feedback.as_str(), "balance" | "throughput") {
        bail!("--feedback is balance or throughput, not {}", a.feedback);
    }
    if a.fast_us <= 0.0 || a.cap_us <= 0.0 {
        bail!("--fast-us and --cap-us must be positive");
    }
    if let Some(o) = a.order.as_deref() {
        if !["fixed", "serpentine", "centered", "balanced"].contains(&o) {
            bail!("--order is fixed, serpentine, centered or balanced, not {o}");
        }
    }
    let nhc = simulate(a, true);
    let classic = simulate(a, false);
    if let Some(p) = &a.csv_out {
        let mut csv = String::from(
            "t,state,data_admit,load_admit,hit,nhc_reads_per_s,classic_reads_per_s,tuned\n",
        );
        for (n, c) in nhc.iter().zip(&classic) {
            csv += &format!(
                "{:.2},{},{},{:.3},{:.3},{:.0},{:.0},{:.3}\n",
                n.t,
                n.state,
                u8::from(n.data_admit),
                n.load_admit,
                n.hit,
                n.served,
                c.served,
                n.tuned
            );
        }
        std::fs::write(p, csv)?;
    }
    // The second half: after the scheduler settled.
    let from = a.secs / 2.0;
    let (xn, xc) = (mean(&nhc, from), mean(&classic, from));
    let ceiling = (a.fast_iops + a.cap_iops).min(a.load * a.fast_iops);
    println!(
        "fast {:.0} IOPS, capacity {:.0} IOPS, load {:.2}, hit {:.2}, feedback {}",
        a.fast_iops, a.cap_iops, a.load, a.hit, a.feedback
    );
    println!(
        "classic {xc:.0} reads/s, nhc {xn:.0} reads/s: {:.2}x (ceiling {:.2}x), load_admit at the end {:.3}",
        xn / xc,
        ceiling / xc,
        nhc.last().map_or(1.0, |s| s.load_admit)
    );
    let tuned: Vec<f64> = nhc
        .iter()
        .filter(|s| s.t >= from)
        .map(|s| s.tuned)
        .collect();
    let (lo, hi) = tuned
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    println!(
        "tuned load_admit over the second half: {lo:.2}-{hi:.2}, mean {:.3}",
        tuned.iter().sum::<f64>() / tuned.len().max(1) as f64
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(load: f64, hit: f64, cap: f64) -> NhcArgs {
        NhcArgs {
            fast_iops: 20_000.0,
            cap_iops: cap,
            load,
            hit,
            secs: 60.0,
            interval: 0.1,
            change_at: None,
            hit_after_change: 0.3,
            warm_secs: 3.0,
            write_cost: 1.0,
            noise: 0.0,
            lag: 0,
            seed: 1,
            carry: 0.0,
            burst: 0.3,
            order: None,
            settle: None,
            probe_intervals: None,
            min_gain: None,
            min_step: None,
            grow_after: None,
            confirm: None,
            fixed_gain: false,
            at_limit: None,
            feedback: "balance".into(),
            fast_us: 100.0,
            cap_us: 100.0,
            shared_queue_us: 0.0,
            csv_out: None,
        }
    }

    fn ratio(a: &NhcArgs) -> f64 {
        mean(&simulate(a, true), 30.0) / mean(&simulate(a, false), 30.0)
    }

    #[test]
    fn twice_the_fast_load_gains_most_of_the_ceiling() {
        let r = ratio(&args(2.0, 0.95, 10_000.0));
        // Ceiling 30k / classic (20k / (0.95 + 0.05)) = 1.5.
        assert!(r > 1.35 && r <= 1.5 + 1e-9, "{r}");
        // A 4:1 pair: ceiling 25k/20k.
        let r4 = ratio(&args(2.0, 0.95, 5_000.0));
        assert!(r4 > 1.1 && r4 <= 1.25 + 1e-9, "{r4}");
    }

    #[test]
    fn noise_is_seeded_and_leaves_light_load_alone() {
        let noisy = |load: f64, seed: u64| NhcArgs {
            noise: 0.3,
            lag: 1,
            seed,
            ..args(load, 0.95, 5_000.0)
        };
        let a = simulate(&noisy(2.0, 7), true);
        assert_eq!(a, simulate(&noisy(2.0, 7), true));
        assert_ne!(a, simulate(&noisy(2.0, 8), true));
        // Below saturation the demand is served as it comes: no noise, and
        // the scheduler stays classic.
        let light = simulate(&noisy(0.5, 7), true);
        assert!(light.iter().all(|s| (s.served - 10_000.0).abs() < 1e-6));
        assert!(light.iter().all(|s| s.tuned == 1.0));
        // Under load the tuning still gains most of the 4:1 ceiling (1.25x).
        let r = mean(&a, 30.0) / mean(&simulate(&noisy(2.0, 7), false), 30.0);
        assert!(r > 1.08, "{r}");
    }

    #[test]
    fn a_queue_both_classes_share_does_not_hide_the_bottleneck() {
        // 100 ms in the pread pool's one queue beyond saturation, as the
        // 4:1 pair showed on the devices: the split still finds most of
        // the ceiling (1.25x), as without the queue.
        let a = NhcArgs {
            shared_queue_us: 100_000.0,
            ..args(2.0, 0.95, 5_000.0)
        };
        let r = ratio(&a);
        assert!(r > 1.2 && r <= 1.25 + 1e-9, "{r}");
        assert!((r - ratio(&args(2.0, 0.95, 5_000.0))).abs() < 0.01, "{r}");
    }

    #[test]
    fn light_load_is_classic_caching() {
        let r = ratio(&args(0.5, 0.95, 10_000.0));
        assert!((r - 1.0).abs() < 0.01, "{r}");
    }

    #[test]
    fn a_working_set_change_goes_back_to_classic_then_tunes_again() {
        let a = NhcArgs {
            change_at: Some(10.0),
            ..args(2.0, 0.95, 10_000.0)
        };
        let run = simulate(&a, true);
        let at = |t: f64| run.iter().find(|s| s.t >= t - 1e-9).unwrap();
        assert_eq!(at(9.9).state, 2);
        // Within 2 s of the change: classic caching.
        assert!(run
            .iter()
            .filter(|s| s.t >= 10.0 && s.t < 12.0)
            .any(|s| s.state == 1 && s.data_admit));
        // Within 30 s: back in state 2, tuned to a split that serves (probes
        // included) within 10% of both devices' sum (30k).
        let late = at(40.0);
        assert_eq!(late.state, 2);
        assert!(late.load_admit < 1.0);
        let window: Vec<f64> = run
            .iter()
            .filter(|s| s.t >= 35.0 && s.t < 40.0)
            .map(|s| s.served)
            .collect();
        let mean = window.iter().sum::<f64>() / window.len() as f64;
        assert!(mean >= 0.9 * 30_000.0, "{mean}");
    }
}
