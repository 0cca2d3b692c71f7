//! The scheduler's feedback: what the caller measures over an interval, the
//! objectives that score a measured point, and the target each objective
//! picks at the end of an iteration (the balance of the classes' read
//! latencies, or the best of the throughput probes).

use super::{Nhc, Probe, ProbeOrder};

/// What the caller measured over one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Measurement {
    /// Length of the interval in seconds.
    pub secs: f64,
    /// Flash hits served (both classes).
    pub reads: u64,
    /// Of those, hits on items that had a copy on the fast class.
    pub fast_resident: u64,
    /// Sum of the read latencies, in microseconds (for [`Objective::Latency`]).
    pub latency_us: f64,
    /// Reads completed by each class (fast, capacity), and the sum of their
    /// latencies in microseconds (for [`Objective::Balance`]).
    pub class_reads: [u64; 2],
    pub class_latency_us: [f64; 2],
    /// Of each class's latency sum, the part its reads spent waiting in a
    /// queue both classes share before a device (the pread pool's one
    /// queue, `ext_io=pool`; 0 where each read goes to its device at once,
    /// as with io_uring). The balance leaves it out: a read of either
    /// class waits as long there, so beyond saturation (open-loop clients
    /// with thousands of gets queued) it made both classes' latencies
    /// about equal (95-120 ms each, within the band) whichever device was
    /// the bottleneck, and the split held where it was (bench/RESULTS.md,
    /// issue 35: the 4:1 pair).
    pub class_queued_us: [f64; 2],
}

impl Measurement {
    /// The fast class's hit ratio in this interval.
    pub fn fast_ratio(&self) -> f64 {
        if self.reads == 0 {
            0.0
        } else {
            self.fast_resident as f64 / self.reads as f64
        }
    }
}

/// What the feedback maximises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// Flash hits served per second (closed-loop clients).
    Throughput,
    /// Minus the mean read latency (open-loop clients at a fixed rate).
    Latency,
    /// The classes' own load, a device-level figure the seed names: each
    /// iteration measures the current point only and moves load off the
    /// fast class when its mean read latency is more than `balance_tol`
    /// above the capacity class's and `busy` times the lowest either class
    /// showed, and toward it when the capacity class's is higher or the
    /// fast class is not busy (light load drifts back to classic caching);
    /// it stays in between. No neighbour is probed, so no point is
    /// measured right after a device was left idle (the throttle's banked
    /// budget made those score high: docs/CLASSES.md). Where both classes
    /// are busy their latencies meet; where the fast class has headroom it
    /// is the faster one and the tuning goes up to classic caching.
    Balance,
}

impl Objective {
    /// The name `ext_nhc_feedback` and `stats` use.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Throughput => "throughput",
            Objective::Latency => "latency",
            Objective::Balance => "balance",
        }
    }

    /// The objective of a name (see [`Objective::name`]).
    pub fn parse(s: &str) -> Option<Objective> {
        [
            Objective::Throughput,
            Objective::Latency,
            Objective::Balance,
        ]
        .into_iter()
        .find(|o| o.name() == s)
    }

    pub(super) fn score(self, m: &Measurement) -> f64 {
        match self {
            Objective::Throughput => m.reads as f64 / m.secs.max(1e-9),
            Objective::Latency => -(m.latency_us / m.reads.max(1) as f64),
            Objective::Balance => m.class_latency().map_or(1.0, |[f, c]| f / c.max(1e-9)),
        }
    }
}

impl Measurement {
    /// Mean read latency of each class, when both completed reads.
    pub fn class_latency(&self) -> Option<[f64; 2]> {
        let mean = |c: usize| {
            (self.class_reads[c] > 0).then(|| self.class_wait_us(c) / self.class_reads[c] as f64)
        };
        Some([mean(0)?, mean(1)?])
    }

    /// The sum of class `c`'s read latencies without the wait in a shared
    /// queue (`class_queued_us`): the time its reads spent at its devices.
    pub fn class_wait_us(&self, c: usize) -> f64 {
        (self.class_latency_us[c] - self.class_queued_us[c]).max(0.0)
    }

    /// Adds another interval's figures.
    pub(super) fn add(&mut self, m: &Measurement) {
        self.secs += m.secs;
        self.reads += m.reads;
        self.fast_resident += m.fast_resident;
        self.latency_us += m.latency_us;
        for c in 0..2 {
            self.class_reads[c] += m.class_reads[c];
            self.class_latency_us[c] += m.class_latency_us[c];
            self.class_queued_us[c] += m.class_queued_us[c];
        }
    }
}

impl Nhc {
    /// The score of neighbour `p` and of the current point it is judged
    /// against: with [`ProbeOrder::Centered`] the measurement of the
    /// current point nearest before it (after it if none is before), else
    /// the means of their measurements.
    fn pair(&self, p: Probe) -> Option<(f64, f64)> {
        let plan = &self.plan[..self.planned];
        let mean = |q: Probe| {
            let v: Vec<f64> = (0..plan.len())
                .filter(|&j| plan[j] == q)
                .filter_map(|j| self.scores[j])
                .collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        };
        if self.params.order != ProbeOrder::Centered {
            return Some((mean(p)?, mean(Probe::Current)?));
        }
        let i = plan.iter().position(|&q| q == p)?;
        let c = (0..i)
            .rev()
            .chain(i + 1..plan.len())
            .find(|&j| plan[j] == Probe::Current)?;
        Some((self.scores[i]?, self.scores[c]?))
    }

    /// [`Objective::Balance`]: a step down when the fast class's reads wait
    /// longer than the capacity class's by more than `balance_tol` while it
    /// is busy (`busy`); a step up when the capacity class's wait longer at
    /// all or the fast class is not busy; the current point in between or
    /// if a class completed no read.
    pub(super) fn balance_target(&mut self) -> f64 {
        self.copies_pay = false;
        // The capacity class served (almost) nothing: everything read is on
        // the fast class, and there is no latency of its own to compare. If
        // the fast class's reads queue, copies on the capacity class pay,
        // and the split goes down so that they are read from there once
        // made (nothing moves before).
        let m = &self.measured;
        let queued = m.class_wait_us(0) / 1e6 / m.secs.max(1e-9);
        if m.class_reads[1] < self.params.min_reads && queued >= self.params.copy_queue {
            self.copies_pay = true;
            return self.point(Probe::Lower);
        }
        let Some([fast, cap]) = self.measured.class_latency() else {
            return self.load_admit;
        };
        let tol = 1.0 + self.params.balance_tol;
        let floor = self.floor[0].min(self.floor[1]) * self.params.busy;
        let busy = fast >= floor;
        // The capacity class queues when its latency is `busy` times its
        // own lowest (a slower device's idle latency may be twice the fast
        // one's: judged by the fast one's, it would look busy while idle).
        let own = if self.floor[1].is_finite() {
            self.floor[1] * self.params.busy
        } else {
            floor
        };
        let m = &self.measured;
        let rate = |c: usize| m.class_reads[c] as f64 / m.secs.max(1e-9);
        let rates = [rate(0), rate(1)];
        // A class whose reads queue, and wait longer than the other's, is
        // the bottleneck: it serves at its limit; learn that. (Not at light
        // load, where neither queues: a rate learned there would stop all
        // offloading later.)
        let fast_waits = busy && fast > cap * tol;
        let waiting = if fast_waits {
            Some(0)
        } else if cap >= own && cap > fast * tol {
            Some(1)
        } else {
            None
        };
        if let Some(c) = waiting {
            let r = &mut self.limit[c];
            *r = if *r > 0.0 {
                0.75 * *r + 0.25 * rates[c]
            } else {
                rates[c]
            };
        }
        // A class serving at its limit takes no more load, however short
        // its waits: it is spending a throttle's bank (docs/CLASSES.md).
        let at = self.params.at_limit;
        let full = |c: usize| at > 0.0 && self.limit[c] > 0.0 && rates[c] >= at * self.limit[c];
        if fast_waits {
            // More of the fast class's hot items with a capacity copy give
            // the split more reads to move. Also while the limit rule holds
            // the point: the copies move load only as fast as they are
            // made, and a capacity class really at its limit then queues
            // and sends the split up. Without them a limit learned too low
            // (an iteration where the capacity class served a few hundred
            // reads, of the few items copied so far, slowly behind the
            // copies' writes or a stall of the machine) held the split and
            // stopped the copies with it: the capacity class's reads stayed
            // at the limit, which grew 5% an iteration, 257 to 1,903
            // reads/s in 21 s of a 30 s run (bench/RESULTS.md, issue 35,
            // fourth session).
            self.copies_pay = true;
            if full(1) {
                self.limit[1] *= 1.0 + self.params.limit_growth;
                return self.load_admit;
            }
            self.point(Probe::Lower)
        } else if cap > fast && busy && full(0) {
            self.limit[0] *= 1.0 + self.params.limit_growth;
            self.load_admit
        } else if cap > fast || !busy {
            // The capacity class waits longer, or the fast one has
            // headroom: classic caching serves as well there, and promotes
            // (light load, where both classes answer alike at any split,
            // drifts back to classic caching).
            self.point(Probe::Upper)
        } else {
            self.load_admit
        }
    }

    /// The throughput probes' choice: the best point of the iteration (the
    /// current one unless a neighbour beats it by `min_gain`; a tie with the
    /// upper neighbour goes to it, so that light load drifts back to
    /// classic caching).
    pub(super) fn probed_target(&self) -> f64 {
        // The gain a move needs, in proportion to the step (a smaller
        // step gains less).
        let g = if self.params.scale_gain {
            self.params.min_gain * self.step / self.params.step
        } else {
            self.params.min_gain
        };
        // Relative gain of a neighbour over its current point.
        let gain = |p: Probe| self.pair(p).map(|(s, c)| (s - c) / c.abs().max(1e-9));
        let (up, down) = (gain(Probe::Upper), gain(Probe::Lower));
        let beats = |x: Option<f64>| x.is_some_and(|x| x > g);
        let (upper, lower) = (self.point(Probe::Upper), self.point(Probe::Lower));
        match (beats(up), beats(down)) {
            (true, true) if up >= down => upper,
            (true, false) => upper,
            (_, true) => lower,
            // Nothing gains: drift toward classic caching where nothing
            // loses either (a flat region, where the demand, not the
            // devices, sets the throughput: light load), stay where both
            // neighbours lose.
            (false, false) if up.is_some_and(|x| x >= -g) => upper,
            (false, false) => self.load_admit,
        }
    }
}
