//! The non-hierarchical caching scheduler of Orthus (seed `003_*`), as a pure
//! state machine: no clock, no device, no randomness of its own. The caller
//! (the engine's flash tier, or the simulator) measures each interval and
//! hands the figures to [`Nhc::interval`]; the scheduler answers with the two
//! controls of the seed:
//!
//! - `data_admit`: whether a hit served by the capacity class is copied into
//!   the fast class (classic caching's promotion);
//! - `load_admit`: the fraction of hits on items that have a copy on both
//!   classes that is sent to the fast class (1 = classic caching).
//!
//! State 1 is classic caching (`data_admit`, `load_admit` = 1) until the
//! fast class's hit ratio has been stable for a few intervals. State 2 stops
//! promoting and tunes `load_admit` by feedback: each iteration measures
//! `load_admit - step`, `load_admit` and `load_admit + step` (points outside
//! [0, 1] are not tried: the penalty), each over `probe_intervals` intervals
//! after `settle_intervals` discarded ones (the reads completing right after
//! a change were routed at the previous point while requests queue), and
//! moves to the best; a move needs a gain of `min_gain` over the current
//! point, so that at light load (every point serves the same demand) the
//! scheduler does not drift. It goes back to state 1 when the best point is
//! 1, or when the fast class's hit ratio drops below the one it entered
//! state 2 with (the working set changed).

/// Settings of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NhcParams {
    /// Change of `load_admit` per probe.
    pub step: f64,
    /// Intervals of state 1 over which the fast hit ratio must be stable
    /// before state 2 starts: the mean of their first half and of their
    /// second half differ by at most `stable_eps` (means, so that noise of
    /// single intervals does not keep it in state 1). 2 s at the server's
    /// 100 ms: state 1 also makes the capacity copies that state 2 reads.
    pub stable_intervals: usize,
    /// Largest change of the fast hit ratio's mean (absolute) counted as stable.
    pub stable_eps: f64,
    /// A drop of the fast hit ratio (absolute, smoothed over intervals with
    /// weight 1/2 for the newest) below the one state 2 began with that
    /// sends the scheduler back to state 1.
    pub drop: f64,
    /// Relative gain a neighbouring point needs over the current one to be
    /// moved to.
    pub min_gain: f64,
    /// Intervals with fewer reads than this are not measured (idle).
    pub min_reads: u64,
    /// Intervals discarded after the probed point changes: reads complete
    /// up to a queue's delay after they were routed, so the first interval
    /// at a point mostly measures the previous one (open-loop clients with
    /// requests queued in the server: bench/RESULTS.md, issue 17).
    pub settle_intervals: usize,
    /// Intervals measured per probed point, summed: a throttled device
    /// serves in bursts, and single 100 ms intervals differed by more than
    /// the gain of one step (the tuning wandered over [0.45, 0.95] and, at
    /// `load_admit` 1, went back to state 1 after one noisy iteration).
    pub probe_intervals: usize,
    /// Consecutive iterations that end at `load_admit` 1 before state 1:
    /// one noisy iteration at 1 is not enough to stop tuning.
    pub exit_iterations: usize,
    /// The order the points of an iteration are measured in.
    pub order: ProbeOrder,
    /// Smallest step: a move that reverses the one before halves the step
    /// (down to this), `grow_after` moves the same way in a row double it
    /// (up to `step`).
    /// `min_step` = `step` keeps the step fixed.
    pub min_step: f64,
    /// Moves the same way in a row after which the step doubles (2 let
    /// the step halve and double in turn on the throttled devices).
    pub grow_after: u32,
    /// `min_gain` in proportion to the step (a smaller step gains less).
    pub scale_gain: bool,
    /// Iterations in a row that must choose the same move before it is
    /// made (1: at once).
    pub confirm: u32,
    /// [`Objective::Balance`]: how much more one class's mean read latency
    /// must be than the other's (relative) for a move of load off it.
    pub balance_tol: f64,
    /// [`Objective::Balance`]: load moves off the fast class only while its
    /// mean read latency is at least this many times the lowest either
    /// class showed (its reads queue: it is busy; the capacity class,
    /// lightly used in classic caching, shows a device's latency without a
    /// queue even when the fast one never had one). Below that the fast
    /// class has headroom, and classic caching serves as well.
    pub busy: f64,
    /// [`Objective::Balance`]: a class whose reads per second reach this
    /// share of what it served while it limited the other (its limit) takes
    /// no more load, even if its reads wait less (0 = no such rule).
    pub at_limit: f64,
}

/// The order of an iteration's probes (bench/RESULTS.md, issue 17, "the
/// sawtooth": on throttled devices the order biases the scores).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeOrder {
    /// Lower, current, upper: the lower point follows the previous
    /// iteration's upper one, a jump of two steps (three after a move
    /// down). Each neighbour is scored against the one current point.
    Fixed,
    /// Lower, current, upper, then upper, current, lower, alternating:
    /// the first point of an iteration is next to the last of the one
    /// before.
    Serpentine,
    /// Current, lower, current, upper: each neighbour follows a
    /// measurement of the current point and is scored against it, and
    /// every change of the probed point is one step.
    Centered,
    /// Lower, current, upper, lower, upper, current: each point twice,
    /// each after each of the other two once (a carryover-balanced
    /// design), scored by its mean.
    Balanced,
}

impl Default for NhcParams {
    fn default() -> Self {
        NhcParams {
            step: 0.05,
            stable_intervals: 20,
            stable_eps: 0.02,
            drop: 0.05,
            min_gain: 0.02,
            min_reads: 50,
            settle_intervals: 1,
            probe_intervals: 3,
            exit_iterations: 2,
            order: ProbeOrder::Fixed,
            min_step: 0.0125,
            grow_after: 4,
            scale_gain: true,
            confirm: 1,
            balance_tol: 0.25,
            busy: 2.0,
            at_limit: 0.95,
        }
    }
}

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

    fn score(self, m: &Measurement) -> f64 {
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
            (self.class_reads[c] > 0).then(|| self.class_latency_us[c] / self.class_reads[c] as f64)
        };
        Some([mean(0)?, mean(1)?])
    }

    /// Adds another interval's figures.
    fn add(&mut self, m: &Measurement) {
        self.secs += m.secs;
        self.reads += m.reads;
        self.fast_resident += m.fast_resident;
        self.latency_us += m.latency_us;
        for c in 0..2 {
            self.class_reads[c] += m.class_reads[c];
            self.class_latency_us[c] += m.class_latency_us[c];
        }
    }
}

/// The scheduler's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Classic caching while the fast hit ratio settles.
    Classic,
    /// Promotion off, `load_admit` tuned by feedback.
    Tune,
}

impl State {
    /// 1 or 2, as the seed numbers them.
    pub fn number(self) -> u8 {
        match self {
            State::Classic => 1,
            State::Tune => 2,
        }
    }
}

/// Most probes in one iteration ([`ProbeOrder::Balanced`]).
pub const MAX_PROBES: usize = 6;

/// Intervals per probed point kept in an [`Iteration`]'s trace.
pub const TRACE_INTERVALS: usize = 8;

/// One probed point of a finished iteration (a trace for `stats` and the
/// benchmarks: what the feedback saw).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PointTrace {
    /// The point probed.
    pub load_admit: f64,
    /// Reads per second of each interval at the point, the discarded
    /// (settling) ones first; the first `intervals` are set.
    pub per_s: [f64; TRACE_INTERVALS],
    pub intervals: usize,
    /// The score the point was judged by.
    pub score: f64,
}

/// A finished iteration of state 2: its points in the order they were
/// measured, and the move it chose.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Iteration {
    pub points: [PointTrace; MAX_PROBES],
    pub probed: usize,
    /// `load_admit` before and after the iteration.
    pub from: f64,
    pub to: f64,
}

/// Which point of an iteration is being measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    Lower,
    Current,
    Upper,
}

/// The scheduler (see the module's documentation).
#[derive(Debug, Clone)]
pub struct Nhc {
    params: NhcParams,
    objective: Objective,
    state: State,
    load_admit: f64,
    /// The iteration's probes in the order measured (`plan[..planned]`),
    /// the one under measurement (`next - 1`), and their scores.
    plan: [Probe; MAX_PROBES],
    planned: usize,
    next: usize,
    scores: [Option<f64>; MAX_PROBES],
    /// Serpentine order: this iteration runs upper to lower.
    downward: bool,
    /// The step of the probes now, and the direction of the last move
    /// (-1, 0 for none yet, +1) and how many moves that way in a row.
    step: f64,
    last_dir: i8,
    run: u32,
    /// The move the iterations before chose and did not make yet, and how
    /// many of them in a row chose it.
    pending: (i8, u32),
    /// Intervals spent at the probed point, and the sum of the measured ones.
    at_point: usize,
    acc: Measurement,
    /// The figures of the last point measured.
    measured: Measurement,
    /// The lowest mean read latency of each class over an interval with at
    /// least `min_reads` reads of it ([`Objective::Balance`]).
    floor: [f64; 2],
    /// The reads per second each class served while the other's reads
    /// waited for it (a moving average): what it serves at its limit.
    limit: [f64; 2],
    /// Consecutive iterations that ended at `load_admit` 1.
    at_one: usize,
    /// Fast hit ratios of the last intervals (state 1).
    recent: Vec<f64>,
    /// The fast hit ratio state 2 began with, and its smoothed value since.
    reference: f64,
    smoothed: f64,
    /// The iteration under way (its trace), and the last finished one.
    trace: Iteration,
    last: Option<Iteration>,
    /// Transitions to state 2 and back, moves of `load_admit`, and
    /// finished iterations.
    pub entered_tune: u64,
    pub left_tune: u64,
    pub moves: u64,
    pub iterations: u64,
}

impl Nhc {
    pub fn new(params: NhcParams, objective: Objective) -> Nhc {
        Nhc {
            params,
            objective,
            state: State::Classic,
            load_admit: 1.0,
            plan: [Probe::Current; MAX_PROBES],
            planned: 0,
            next: 0,
            scores: [None; MAX_PROBES],
            downward: false,
            step: params.step,
            last_dir: 0,
            run: 0,
            pending: (0, 0),
            at_point: 0,
            acc: Measurement::default(),
            measured: Measurement::default(),
            floor: [f64::INFINITY; 2],
            limit: [0.0; 2],
            at_one: 0,
            recent: Vec::new(),
            reference: 0.0,
            smoothed: 0.0,
            trace: Iteration::default(),
            last: None,
            entered_tune: 0,
            left_tune: 0,
            moves: 0,
            iterations: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// What the feedback measures.
    pub fn objective(&self) -> Objective {
        self.objective
    }

    /// Copy capacity hits into the fast class (state 1 only).
    pub fn data_admit(&self) -> bool {
        self.state == State::Classic
    }

    /// The `load_admit` the tuning settled on (1 in state 1).
    pub fn load_admit(&self) -> f64 {
        self.load_admit
    }

    /// The fraction of dual-copy hits to send to the fast class during the
    /// current interval: the point being probed.
    pub fn effective_load_admit(&self) -> f64 {
        match self.state {
            State::Classic => 1.0,
            State::Tune => self.point(self.probe()),
        }
    }

    /// The last finished iteration of state 2 (its probes' reads and scores
    /// and the move chosen), for traces.
    pub fn last_iteration(&self) -> Option<&Iteration> {
        self.last.as_ref()
    }

    /// Whether a hit on an item with a copy on both classes goes to the fast
    /// class, for a uniform random number `r` in [0, 1).
    pub fn to_fast(&self, r: f64) -> bool {
        r < self.effective_load_admit()
    }

    /// Closes one measured interval.
    pub fn interval(&mut self, m: &Measurement) {
        if m.reads < self.params.min_reads || m.secs <= 0.0 {
            return;
        }
        let ratio = m.fast_ratio();
        for c in 0..2 {
            if m.class_reads[c] >= self.params.min_reads {
                let mean = m.class_latency_us[c] / m.class_reads[c] as f64;
                self.floor[c] = self.floor[c].min(mean);
            }
        }
        match self.state {
            State::Classic => {
                self.recent.push(ratio);
                let k = self.params.stable_intervals.max(1);
                if self.recent.len() > k {
                    self.recent.remove(0);
                }
                if self.recent.len() == k {
                    let (a, b) = self.recent.split_at(k / 2);
                    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
                    if (mean(a) - mean(b)).abs() <= self.params.stable_eps {
                        self.enter_tune(mean(b));
                    }
                }
            }
            State::Tune => {
                self.smoothed = 0.5 * self.smoothed + 0.5 * ratio;
                if self.smoothed < self.reference - self.params.drop {
                    self.back_to_classic();
                    return;
                }
                self.at_point += 1;
                self.note(m);
                if self.at_point <= self.params.settle_intervals {
                    return;
                }
                self.acc.add(m);
                if self.at_point < self.params.settle_intervals + self.params.probe_intervals.max(1)
                {
                    return;
                }
                let score = self.objective.score(&self.acc);
                self.scores[self.next - 1] = Some(score);
                self.measured = self.acc;
                if let Some(p) = self.trace.points.get_mut(self.trace.probed) {
                    p.score = score;
                    self.trace.probed += 1;
                }
                self.next_probe();
            }
        }
    }

    fn enter_tune(&mut self, ratio: f64) {
        self.state = State::Tune;
        self.at_one = 0;
        self.reference = ratio;
        self.smoothed = ratio;
        self.load_admit = 1.0;
        self.step = self.params.step;
        self.last_dir = 0;
        self.run = 0;
        self.pending = (0, 0);
        self.first_probe();
        self.entered_tune += 1;
    }

    fn back_to_classic(&mut self) {
        self.state = State::Classic;
        self.at_one = 0;
        self.load_admit = 1.0;
        self.recent.clear();
        self.left_tune += 1;
    }

    /// The point a probe measures: a step from the current one, clamped
    /// to [0, 1] (after a halved step the points are off the grid of
    /// `params.step`, and the upper one of 0.975 is 1).
    fn point(&self, p: Probe) -> f64 {
        let v = match p {
            Probe::Lower => self.load_admit - self.step,
            Probe::Current => self.load_admit,
            Probe::Upper => self.load_admit + self.step,
        };
        (v.clamp(0.0, 1.0) * 1e6).round() / 1e6
    }

    /// The probe under measurement.
    fn probe(&self) -> Probe {
        self.plan[self.next.max(1) - 1]
    }

    /// Whether the probe `p` is measured: a neighbour is not where it
    /// would be the current point again (at a bound; the penalty).
    fn inside(&self, p: Probe) -> bool {
        p == Probe::Current || self.point(p) != self.load_admit
    }

    /// Adds an interval at the probed point to the iteration's trace.
    fn note(&mut self, m: &Measurement) {
        let la = self.effective_load_admit();
        if let Some(p) = self.trace.points.get_mut(self.trace.probed) {
            p.load_admit = la;
            if let Some(x) = p.per_s.get_mut(p.intervals) {
                *x = m.reads as f64 / m.secs;
                p.intervals += 1;
            }
        }
    }

    /// Starts measuring the probed point afresh.
    fn reset_point(&mut self) {
        self.at_point = 0;
        self.acc = Measurement::default();
    }

    /// Starts an iteration: plans its probes (in the order of
    /// `params.order`, the points inside the bounds) and measures the first.
    fn first_probe(&mut self) {
        use Probe::*;
        let order: &[Probe] = match self.params.order {
            _ if self.objective == Objective::Balance => &[Current],
            ProbeOrder::Fixed => &[Lower, Current, Upper],
            ProbeOrder::Serpentine if self.downward => &[Upper, Current, Lower],
            ProbeOrder::Serpentine => &[Lower, Current, Upper],
            ProbeOrder::Centered => &[Current, Lower, Current, Upper],
            ProbeOrder::Balanced => &[Lower, Current, Upper, Lower, Upper, Current],
        };
        self.planned = 0;
        for &p in order {
            if self.inside(p) {
                self.plan[self.planned] = p;
                self.planned += 1;
            }
        }
        if self.params.order == ProbeOrder::Centered
            && self.objective != Objective::Balance
            && self.plan[self.planned - 1] == Current
        {
            // At a bound: the current point once, then its one neighbour.
            self.planned -= 1;
        }
        self.downward = !self.downward;
        self.scores = [None; MAX_PROBES];
        self.next = 1;
        self.reset_point();
        self.trace = Iteration {
            from: self.load_admit,
            ..Iteration::default()
        };
    }

    /// Moves to the next point of the iteration, or ends it.
    fn next_probe(&mut self) {
        self.reset_point();
        if self.next < self.planned {
            self.next += 1;
        } else {
            self.end_iteration();
        }
    }

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
    fn balance_target(&mut self) -> f64 {
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
            if full(1) {
                return self.load_admit;
            }
            self.point(Probe::Lower)
        } else if cap > fast && busy && full(0) {
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
    fn probed_target(&self) -> f64 {
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

    /// Ends an iteration: moves to the point the feedback chose (after
    /// `confirm` iterations agree), adapts the step, and goes back to
    /// state 1 after `exit_iterations` at 1.
    fn end_iteration(&mut self) {
        let mut target = match self.objective {
            Objective::Balance => self.balance_target(),
            _ => self.probed_target(),
        };
        let want: i8 = if target > self.load_admit {
            1
        } else if target < self.load_admit {
            -1
        } else {
            0
        };
        self.pending = if want != 0 && want == self.pending.0 {
            (want, self.pending.1 + 1)
        } else {
            (want, 1)
        };
        if want != 0 && self.pending.1 < self.params.confirm.max(1) {
            target = self.load_admit;
        } else if want != 0 {
            self.pending = (0, 0);
        }
        if target != self.load_admit {
            self.moves += 1;
            let dir = if target > self.load_admit { 1 } else { -1 };
            if dir == -self.last_dir {
                self.step = (self.step / 2.0).max(self.params.min_step);
                self.run = 1;
            } else {
                self.run += 1;
                if self.run >= self.params.grow_after.max(1) {
                    self.step = (self.step * 2.0).min(self.params.step);
                }
            }
            self.last_dir = dir;
        }
        self.iterations += 1;
        self.last = Some(Iteration {
            to: target,
            ..self.trace
        });
        self.load_admit = target;
        self.at_one = if target >= 1.0 { self.at_one + 1 } else { 0 };
        if self.at_one >= self.params.exit_iterations.max(1) {
            // Classic caching is best: the fast class has headroom, so it
            // needs its hit ratio raised again.
            self.back_to_classic();
            return;
        }
        self.first_probe();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intervals of a stable hit ratio before state 2.
    const WARM: usize = 20;
    /// Intervals per probed point (settling and measured).
    const PER_POINT: usize = 4;

    /// A fake pair of devices: the fast one serves `fast` reads per second,
    /// the capacity one `cap`, and the clients offer `demand`. With a share
    /// `la` of the hits on the fast one, the throughput is the demand or
    /// what the busier device limits it to.
    fn served(la: f64, fast: f64, cap: f64, demand: f64) -> f64 {
        let by_fast = if la > 0.0 { fast / la } else { f64::MAX };
        let by_cap = if la < 1.0 { cap / (1.0 - la) } else { f64::MAX };
        demand.min(by_fast).min(by_cap)
    }

    fn m(reads: f64, ratio: f64) -> Measurement {
        Measurement {
            secs: 0.1,
            reads: (reads * 0.1) as u64,
            fast_resident: (reads * 0.1 * ratio) as u64,
            ..Measurement::default()
        }
    }

    fn run(s: &mut Nhc, intervals: usize, fast: f64, cap: f64, demand: f64, ratio: f64) {
        for _ in 0..intervals {
            let la = s.effective_load_admit();
            s.interval(&m(served(la, fast, cap, demand), ratio));
        }
    }

    #[test]
    fn classic_until_the_fast_hit_ratio_is_stable() {
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        // A warming cache: the ratio climbs by 3 points an interval.
        for i in 0..20 {
            s.interval(&m(20_000.0, 0.3 + 0.03 * i as f64));
            assert_eq!(s.state(), State::Classic, "interval {i}");
            assert!(s.data_admit());
            assert_eq!(s.effective_load_admit(), 1.0);
        }
        // Stable at 0.9, with noise of +-3 points from one interval to the
        // next: state 2 within WARM intervals, promotion off.
        let took = (0..WARM)
            .position(|i| {
                s.interval(&m(20_000.0, if i % 2 == 0 { 0.87 } else { 0.93 }));
                s.state() == State::Tune
            })
            .expect("state 2 within WARM intervals");
        // Not while the last intervals of the climb are in the window.
        assert!(took >= WARM / 4, "after {took}");
        assert!(!s.data_admit());
        // The first probe is below 1 (1 + step is outside the bounds).
        assert!((s.effective_load_admit() - 0.95).abs() < 1e-9);
    }

    #[test]
    fn saturated_fast_device_converges_near_its_share_and_stays_bounded() {
        // Fast 20k, capacity 10k, demand 40k: best is la = 2/3 (30k).
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut s, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        assert_eq!(s.state(), State::Tune);
        let mut seen = Vec::new();
        for _ in 0..300 {
            run(&mut s, 1, 20_000.0, 10_000.0, 40_000.0, 0.95);
            let la = s.effective_load_admit();
            assert!((0.0..=1.0).contains(&la), "out of bounds: {la}");
            seen.push(s.load_admit());
        }
        assert_eq!(s.state(), State::Tune);
        let la = s.load_admit();
        assert!((la - 2.0 / 3.0).abs() <= 0.06, "settled at {la}");
        // Throughput at the settled point is within 10% of the 1.5x ceiling.
        let t = served(la, 20_000.0, 10_000.0, 40_000.0);
        assert!(t >= 27_000.0, "{t}");
        assert!(s.moves >= 5);
    }

    #[test]
    fn light_load_goes_back_back_to_classic() {
        // Demand 10k: every point serves 10k, nothing beats la = 1.
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut s, WARM, 20_000.0, 10_000.0, 10_000.0, 0.95);
        assert_eq!(s.state(), State::Tune);
        // Two iterations at the points 0.95 and 1 (1.05 is outside).
        run(
            &mut s,
            4 * PER_POINT - 1,
            20_000.0,
            10_000.0,
            10_000.0,
            0.95,
        );
        assert_eq!(s.state(), State::Tune);
        run(&mut s, 1, 20_000.0, 10_000.0, 10_000.0, 0.95);
        assert_eq!(s.state(), State::Classic);
        assert_eq!(s.load_admit(), 1.0);
        assert!(s.data_admit());
        assert_eq!(s.left_tune, 1);
    }

    #[test]
    fn a_hit_ratio_drop_goes_back_to_classic_at_once() {
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut s, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        run(&mut s, 60, 20_000.0, 10_000.0, 40_000.0, 0.95);
        assert_eq!(s.state(), State::Tune);
        assert!(s.load_admit() < 0.9);
        // The working set changed: the fast class hits only half.
        s.interval(&m(20_000.0, 0.5));
        assert_eq!(s.state(), State::Classic);
        assert_eq!(s.effective_load_admit(), 1.0);
        assert!(s.data_admit());
        // A small wobble within `drop`, or one bad interval, would not have.
        let mut t = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut t, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        t.interval(&m(20_000.0, 0.86));
        assert_eq!(t.state(), State::Tune);
        let mut t = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut t, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        run(&mut t, 10, 20_000.0, 10_000.0, 40_000.0, 0.93);
        assert_eq!(t.state(), State::Tune);
    }

    #[test]
    fn load_falling_off_drifts_back_to_classic() {
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut s, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        run(&mut s, 90, 20_000.0, 10_000.0, 40_000.0, 0.95);
        assert!(s.load_admit() < 0.8);
        // The demand drops to 8k: every split serves it. Up from a step
        // halved by the tuning's reversals (0.0125, 0.0125, then doubled
        // after two moves up), back in state 1 within 120 intervals, with
        // load_admit 1.
        let exits = s.left_tune;
        let back = (0..120).position(|_| {
            run(&mut s, 1, 20_000.0, 10_000.0, 8_000.0, 0.95);
            s.state() == State::Classic
        });
        assert!(back.is_some(), "still tuning at {}", s.load_admit());
        assert_eq!(s.left_tune, exits + 1);
        assert_eq!(s.effective_load_admit(), 1.0);
    }

    #[test]
    fn idle_intervals_change_nothing() {
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut s, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        let before = (s.state(), s.effective_load_admit());
        for _ in 0..20 {
            s.interval(&m(100.0, 0.1));
        }
        assert_eq!((s.state(), s.effective_load_admit()), before);
    }

    #[test]
    fn latency_objective_prefers_the_less_loaded_split() {
        // Latency model: each device an M/M/1 queue at its share of 25k.
        let lat = |la: f64| {
            let q = |rate: f64, mu: f64| 1e6 / (mu - rate).max(1.0);
            la * q(25_000.0 * la, 20_000.0) + (1.0 - la) * q(25_000.0 * (1.0 - la), 10_000.0)
        };
        let mut s = Nhc::new(NhcParams::default(), Objective::Latency);
        run(&mut s, WARM, 20_000.0, 10_000.0, 25_000.0, 0.95);
        for _ in 0..300 {
            let la = s.effective_load_admit();
            s.interval(&Measurement {
                secs: 0.1,
                reads: 2500,
                fast_resident: 2400,
                latency_us: lat(la) * 2500.0,
                ..Measurement::default()
            });
        }
        // The minimum of that model is near la = 0.68.
        assert_eq!(s.state(), State::Tune);
        assert!((s.load_admit() - 0.68).abs() <= 0.08, "{}", s.load_admit());
    }

    /// A fake clock of 100 ms intervals over devices whose reads complete
    /// `lag` intervals after they were routed (requests queued in the
    /// server, as with open-loop clients beyond saturation), served in
    /// bursts: each interval's throughput is off by up to `noise` (a fixed
    /// pseudo-random sequence). Returns the scheduler after `n` intervals
    /// and the mean effective load_admit of the last half.
    fn lagged(params: NhcParams, lag: usize, noise: f64, n: usize) -> (Nhc, f64) {
        let mut s = Nhc::new(params, Objective::Throughput);
        let mut routed = vec![1.0; lag + 1];
        let mut x: u64 = 12345;
        let mut sum = 0.0;
        for i in 0..n {
            routed.push(s.effective_load_admit());
            let la = routed[routed.len() - 1 - lag];
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let r = (x >> 11) as f64 / (1u64 << 53) as f64;
            let t = served(la, 20_000.0, 10_000.0, 40_000.0) * (1.0 + noise * (2.0 * r - 1.0));
            s.interval(&m(t, 0.95));
            if i >= n / 2 {
                sum += s.effective_load_admit();
            }
        }
        (s, sum / (n - n / 2) as f64)
    }

    #[test]
    fn lagged_bursty_devices_settle_near_the_best_split_and_stay_tuning() {
        // 60 s; reads complete one interval late, throughput +-15%.
        let (s, la) = lagged(NhcParams::default(), 1, 0.15, 600);
        assert_eq!(s.state(), State::Tune);
        // Once, in its first two iterations (25% odds per entry with this
        // noise), then it stays.
        assert!(
            s.left_tune <= 1,
            "went back to state 1 {} times",
            s.left_tune
        );
        assert!((la - 2.0 / 3.0).abs() <= 0.1, "mean load_admit {la}");
        // Measured one interval per point with nothing discarded (the
        // settings before), the same devices send it back to state 1 and
        // keep it away from the best split.
        let one = NhcParams {
            settle_intervals: 0,
            probe_intervals: 1,
            exit_iterations: 1,
            ..NhcParams::default()
        };
        let (s, la) = lagged(one, 1, 0.15, 600);
        eprintln!(
            "one interval per point: {} exits, mean load_admit {la:.2}",
            s.left_tune
        );
        assert!(s.left_tune > 1 || (la - 2.0 / 3.0).abs() > 0.1, "{la}");
    }

    /// Throttled devices that keep unused reads as credit (the kernel's
    /// blkio throttle, bench/RESULTS.md, issue 17, "the sawtooth"): a
    /// device serving less than its IOPS banks the difference and serves
    /// it later on top of its IOPS, up to `burst` times more, so a point
    /// that moves load onto the device that was underused scores high for
    /// a while. Fast 5,000 and capacity 2,500 reads/s, a closed loop of
    /// 10,000, a share `dual` of the reads on items with both copies and
    /// the rest on the capacity class only (best load_admit 0.926, where
    /// both devices are busy). Runs `n` intervals of 100 ms after state 2
    /// began; returns the scheduler and the tuned point of every interval.
    fn with_credit(params: NhcParams, burst: f64, n: usize) -> (Nhc, Vec<f64>) {
        let (fast, cap, dual) = (5_000.0, 2_500.0, 0.72);
        let mut s = Nhc::new(params, Objective::Throughput);
        let mut credit = [0.0f64; 2];
        let mut tuned = Vec::new();
        for i in 0..WARM + n {
            let la = s.effective_load_admit();
            let (fs, cs) = (dual * la, 1.0 - dual * la);
            let by = |iops: f64, c: f64, share: f64| {
                if share > 0.0 {
                    (iops + (c / 0.1).min(burst * iops)) / share
                } else {
                    f64::MAX
                }
            };
            let t = by(fast, credit[0], fs)
                .min(by(cap, credit[1], cs))
                .min(10_000.0);
            credit[0] = (credit[0] + (fast - t * fs) * 0.1).max(0.0);
            credit[1] = (credit[1] + (cap - t * cs) * 0.1).max(0.0);
            s.interval(&m(t, 0.95));
            if i >= WARM {
                tuned.push(s.load_admit());
            }
        }
        (s, tuned)
    }

    /// The range and mean of `v`.
    fn spread(v: &[f64]) -> (f64, f64, f64) {
        let lo = v.iter().copied().fold(f64::MAX, f64::min);
        let hi = v.iter().copied().fold(f64::MIN, f64::max);
        (lo, hi, v.iter().sum::<f64>() / v.len() as f64)
    }

    #[test]
    fn throttle_credit_does_not_make_the_tuning_saw() {
        // 60 s after state 2 began, banked reads spent at up to 20% over a
        // device's IOPS; the last 30 s are judged against the best point,
        // 0.926.
        let (s, tuned) = with_credit(NhcParams::default(), 0.2, 600);
        let (lo, hi, mean) = spread(&tuned[300..]);
        eprintln!(
            "default: tuned {lo:.3}-{hi:.3} (mean {mean:.3}), {} moves, {} exits",
            s.moves, s.left_tune
        );
        assert_eq!(s.state(), State::Tune);
        assert_eq!(s.left_tune, 0, "back to state 1 {} times", s.left_tune);
        // Within 0.05 of the best throughout, never at 1.
        assert!(lo >= 0.875 && hi <= 0.976, "tuned {lo}-{hi}");
        assert!((mean - 0.926).abs() <= 0.01, "mean {mean}");
        // The scheduler before (a fixed step of 0.05) goes up to 1 and back
        // to state 1 on the same devices; so does a step that doubles after
        // two moves the same way (it halves and doubles in turn).
        let old = NhcParams {
            min_step: 0.05,
            ..NhcParams::default()
        };
        let quick = NhcParams {
            grow_after: 2,
            ..NhcParams::default()
        };
        for p in [old, quick] {
            let (s, tuned) = with_credit(p, 0.2, 600);
            let (lo, hi, mean) = spread(&tuned[300..]);
            eprintln!(
                "step {} to {}, doubling after {}: tuned {lo:.3}-{hi:.3} (mean {mean:.3}), {} moves, {} exits",
                p.min_step, p.step, p.grow_after, s.moves, s.left_tune
            );
            assert!(hi >= 1.0 && s.left_tune >= 1, "tuned {lo}-{hi}");
        }
        // Without credit all settle at the best point of their grid and
        // stay (the noise-free model).
        for p in [NhcParams::default(), old, quick] {
            let (_, tuned) = with_credit(p, 0.0, 600);
            let (lo, hi, _) = spread(&tuned[300..]);
            assert!(lo == hi && (lo - 0.926).abs() <= 0.03, "tuned {lo}-{hi}");
        }
    }

    /// A fake clock over the devices of [`with_credit`] that also reports
    /// each class's reads and latency: a class's mean latency is its base
    /// latency (100 us) over one minus its utilisation (capped at 0.98,
    /// where reads queue), so the class that limits a closed loop shows the
    /// long waits. Each class's utilisation counts its banked reads (up to
    /// `burst` times its IOPS more) as capacity. `demand` is the clients'
    /// reads per second. Returns the scheduler, the tuned point of every
    /// interval after the warm-up, and the mean reads per second of the
    /// last half.
    fn loaded(
        objective: Objective,
        burst: f64,
        demand: f64,
        pair: (f64, f64, f64),
        n: usize,
    ) -> (Nhc, Vec<f64>, f64) {
        loaded_with(NhcParams::default(), objective, burst, demand, pair, n)
    }

    fn loaded_with(
        params: NhcParams,
        objective: Objective,
        burst: f64,
        demand: f64,
        (fast, cap, dual): (f64, f64, f64),
        n: usize,
    ) -> (Nhc, Vec<f64>, f64) {
        let mut s = Nhc::new(params, objective);
        let mut credit = [0.0f64; 2];
        let mut tuned = Vec::new();
        let mut served = 0.0;
        for i in 0..WARM + n {
            let la = s.effective_load_admit();
            let shares = [dual * la, 1.0 - dual * la];
            let iops = [fast, cap];
            let room: Vec<f64> = (0..2)
                .map(|d| iops[d] + (credit[d] / 0.1).min(burst * iops[d]))
                .collect();
            let room = |d: usize| room[d];
            let t = (0..2)
                .filter(|&d| shares[d] > 0.0)
                .map(|d| room(d) / shares[d])
                .fold(demand, f64::min);
            let mut m = m(t, 0.95);
            for d in 0..2 {
                let used = t * shares[d];
                let rho = (used / room(d)).min(0.98);
                m.class_reads[d] = (used * 0.1) as u64;
                m.class_latency_us[d] = m.class_reads[d] as f64 * 100.0 / (1.0 - rho);
                credit[d] = (credit[d] + (iops[d] - used) * 0.1).clamp(0.0, iops[d]);
            }
            s.interval(&m);
            if i >= WARM {
                tuned.push(s.load_admit());
            }
            if i >= WARM + n / 2 {
                served += t / (n - n / 2) as f64;
            }
        }
        (s, tuned, served)
    }

    /// Fast 5,000 and capacity 2,500 reads/s, 72% of the reads on items
    /// with both copies: best load_admit 0.926 (both devices busy, 7,500
    /// reads/s).
    const PAIR: (f64, f64, f64) = (5_000.0, 2_500.0, 0.72);

    #[test]
    fn balance_settles_at_the_best_split_with_banked_bursts() {
        // Noise-free: at the best split (between the grid's points, which
        // the throughput probes stop next to), serving the ceiling.
        let (s, tuned, served) = loaded(Objective::Balance, 0.0, 10_000.0, PAIR, 600);
        let (lo, hi, _) = spread(&tuned[300..]);
        assert!(
            (lo - 0.926).abs() <= 0.0125 && (hi - 0.926).abs() <= 0.0125,
            "{lo}-{hi}"
        );
        assert!(served >= 0.99 * 7_500.0, "{served}");
        assert_eq!((s.state(), s.left_tune), (State::Tune, 0));
        // Reached from 1 within 10 s (25 iterations of 0.4 s).
        let first = tuned.iter().position(|&v| (v - 0.926).abs() <= 0.05);
        assert!(first.is_some_and(|i| i <= 100), "{first:?}");
        let (_, _, probed) = loaded(Objective::Throughput, 0.0, 10_000.0, PAIR, 600);
        assert!(probed < 0.97 * 7_500.0, "{probed}");
        // Banked reads spent at up to 20% and 50% over a device's IOPS: a
        // class spending its bank serves more without waiting. Held by
        // `at_limit` (a class serving at what it served as the bottleneck
        // takes no more load), the tuned point stays within 0.025 of the
        // best over the last 30 s and the devices serve the ceiling.
        for burst in [0.2, 0.5] {
            let (s, tuned, served) = loaded(Objective::Balance, burst, 10_000.0, PAIR, 600);
            let (lo, hi, mean) = spread(&tuned[300..]);
            eprintln!("burst {burst}: tuned {lo:.3}-{hi:.3} (mean {mean:.3}), {served:.0} reads/s");
            assert_eq!((s.state(), s.left_tune), (State::Tune, 0));
            assert!(lo >= 0.9 && hi <= 0.951, "burst {burst}: tuned {lo}-{hi}");
            assert!(served >= 0.98 * 7_500.0, "{served}");
            // Without the rule the point swings with the banks (0.80-1.0).
            let off = NhcParams {
                at_limit: 0.0,
                ..NhcParams::default()
            };
            let (_, tuned, _) = loaded_with(off, Objective::Balance, burst, 10_000.0, PAIR, 600);
            let (lo, hi, _) = spread(&tuned[300..]);
            assert!(hi - lo >= 0.1, "burst {burst} without at_limit: {lo}-{hi}");
        }
    }

    #[test]
    fn balance_leaves_light_load_and_a_busy_capacity_class_to_classic() {
        // 3,000 reads/s: neither class waits much, the tuning stays at 1
        // and goes back to state 1 after two iterations there.
        let (s, tuned, _) = loaded(Objective::Balance, 0.0, 3_000.0, PAIR, 100);
        assert!(tuned.iter().all(|&v| v == 1.0), "{tuned:?}");
        assert!(s.left_tune >= 1 && s.moves == 0);
        // 4:1 (8,000 / 2,000) with half the reads capacity-only: the
        // capacity class limits the throughput at load_admit 1 already;
        // nothing below 1 is tried for long.
        let (s, tuned, _) = loaded(
            Objective::Balance,
            0.0,
            20_000.0,
            (8_000.0, 2_000.0, 0.5),
            300,
        );
        let below = tuned.iter().filter(|&&v| v < 1.0).count();
        assert_eq!(below, 0, "{} moves", s.moves);
        assert!(s.left_tune >= 1);
    }

    #[test]
    fn balance_follows_a_load_that_falls_off_and_needs_both_classes_measured() {
        let (mut s, _, _) = loaded(Objective::Balance, 0.0, 10_000.0, PAIR, 200);
        assert!(s.load_admit() < 0.98);
        // A capacity class that completes no read gives no balance: the
        // point stays, and the tuning goes on.
        let la = s.load_admit();
        for _ in 0..40 {
            let mut m = m(7_000.0, 0.95);
            m.class_reads = [700, 0];
            m.class_latency_us = [700.0 * 5_000.0, 0.0];
            s.interval(&m);
        }
        assert_eq!((s.state(), s.load_admit()), (State::Tune, la));
        // Both classes busy (fast 10x the lowest latency seen), the fast
        // one waiting 10% longer: inside the band, the point stays.
        let floor = s.floor[0].min(s.floor[1]);
        for _ in 0..40 {
            let mut m = m(7_000.0, 0.95);
            m.class_reads = [500, 200];
            m.class_latency_us = [500.0 * floor * 11.0, 200.0 * floor * 10.0];
            s.interval(&m);
        }
        assert_eq!((s.state(), s.load_admit()), (State::Tune, la));
        // The same ratio at light load (the fast class answering in its
        // lowest latency): up to classic caching, where nothing is lost.
        let mut t = s.clone();
        let limits = t.limit;
        let back = (0..200).position(|_| {
            let mut m = m(3_000.0, 0.95);
            m.class_reads = [200, 100];
            m.class_latency_us = [200.0 * floor * 1.1, 100.0 * floor];
            t.interval(&m);
            t.state() == State::Classic
        });
        assert!(back.is_some(), "still at {}", t.load_admit());
        // Nothing queued there: no class's limit was learned from it (a
        // light-load rate taken for a limit would hold all load off it).
        let mut u = s.clone();
        for _ in 0..40 {
            let mut m = m(2_000.0, 0.95);
            m.class_reads = [100, 100];
            m.class_latency_us = [100.0 * floor, 100.0 * floor * 1.5];
            u.interval(&m);
        }
        assert_eq!((t.limit, u.limit), (limits, limits));
        // Nor from a capacity device that is slower when idle (250 us
        // against the fast one's 100, at light load through states 1 and
        // 2): it waits 2.5x as long, but not for a queue.
        let mut v = Nhc::new(NhcParams::default(), Objective::Balance);
        for _ in 0..WARM + 80 {
            let mut m = m(2_000.0, 0.95);
            m.class_reads = [150, 60];
            m.class_latency_us = [150.0 * 100.0, 60.0 * 250.0];
            v.interval(&m);
        }
        assert!(v.entered_tune >= 1);
        assert_eq!(v.limit, [0.0, 0.0]);
        // The fast class waits a quarter less than the capacity one: up,
        // step by step, to 1 and back to state 1.
        let back = (0..200).position(|_| {
            let mut m = m(3_000.0, 0.95);
            m.class_reads = [200, 100];
            m.class_latency_us = [200.0 * 100.0, 100.0 * 140.0];
            s.interval(&m);
            s.state() == State::Classic
        });
        assert!(back.is_some(), "still at {}", s.load_admit());
        assert_eq!(s.effective_load_admit(), 1.0);
    }

    #[test]
    fn the_last_iteration_is_traced() {
        let mut s = Nhc::new(NhcParams::default(), Objective::Throughput);
        run(&mut s, WARM, 20_000.0, 10_000.0, 40_000.0, 0.95);
        assert!(s.last_iteration().is_none());
        // At 1: the points 0.95 and 1, each 1 + 3 intervals.
        run(&mut s, 2 * PER_POINT, 20_000.0, 10_000.0, 40_000.0, 0.95);
        let it = *s.last_iteration().expect("an iteration");
        assert_eq!(s.iterations, 1);
        assert_eq!(it.probed, 2);
        assert_eq!((it.from, it.to), (1.0, 0.95));
        let [a, b, ..] = it.points;
        assert_eq!((a.load_admit, b.load_admit), (0.95, 1.0));
        assert_eq!((a.intervals, b.intervals), (PER_POINT, PER_POINT));
        // 0.95 serves 20,000 / 0.95 reads/s, 1 serves 20,000.
        assert!((a.score - 20_000.0 / 0.95).abs() < 20.0, "{}", a.score);
        assert!((b.score - 20_000.0).abs() < 20.0, "{}", b.score);
        assert!((b.per_s[0] - 20_000.0).abs() < 20.0);
    }
}
