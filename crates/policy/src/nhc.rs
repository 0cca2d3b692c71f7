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
//!
//! This file is the scheduler's face: its settings, its traces and the
//! [`Nhc`] type with its controls. The state machine (state 1, state 2's
//! iterations of probes and moves) is in `nhc/state.rs`; the feedback (the
//! [`Measurement`] of an interval, the [`Objective`]s and the target each
//! picks) in `nhc/feedback.rs`; the tests in `nhc/tests.rs`.

mod feedback;
mod state;
#[cfg(test)]
mod tests;

pub use feedback::{Measurement, Objective};
pub use state::State;

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
    /// How far (absolute, per interval) the hit ratio `drop` is measured
    /// from follows a slow decline: a working-set change drops the ratio
    /// within a few intervals, while the fast class's own churn in state 2
    /// (it still takes items leaving RAM and moves what it reclaims to the
    /// capacity class, and nothing is promoted back) lowers it by about
    /// 0.005 a second; without this that churn alone sent the scheduler
    /// back to state 1 every 10-15 s (bench/RESULTS.md, issue 35, fast 580
    /// MiB). 0 = measured from the ratio state 2 began with.
    pub drift: f64,
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
    /// [`Objective::Balance`]: each iteration the limit rule holds the
    /// point, the held class's limit grows by this share, so that a limit
    /// learned too low (an interval where the machine stalled both classes
    /// made the capacity class's 367 reads/s its limit, and the split held
    /// at 0.65, then at 1 for good: bench/RESULTS.md, issue 35, second
    /// session) is tried again (0.05: 367 to 2,000 in 35 iterations, 14 s;
    /// 0.1 let the banks of `balance_settles_at_the_best_split_with_banked_bursts`
    /// swing the point over 0.875-0.963); a class that is really at its
    /// limit queues once it gets more, and learns it again.
    pub limit_growth: f64,
    /// [`Objective::Balance`]: the mean number of fast reads in flight
    /// (Little's law over the iteration: latency sum / time) at which the
    /// fast class counts as queued when the capacity class completed no
    /// read, so that there is no latency to compare (everything the reads
    /// want is on the fast class): copies to the capacity class pay then
    /// ([`Nhc::copies_pay`]).
    pub copy_queue: f64,
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
            drift: 0.0025,
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
            limit_growth: 0.05,
            copy_queue: 4.0,
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
    /// The last iteration found the fast class queued and waiting longer
    /// than the capacity class, or the capacity class idle
    /// ([`Nhc::copies_pay`]).
    copies_pay: bool,
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
            copies_pay: false,
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

    /// Whether copies of fast items on the capacity class pay now: in state
    /// 2, the last iteration found the fast class's reads queued and
    /// waiting longer than the capacity class's (or the capacity class
    /// idle), also where the capacity class is at its learned limit (the
    /// point holds then, but the copies go on: a limit learned too low
    /// would otherwise stop them for good). Items hit on the fast
    /// class are then worth a second record on the capacity class, so that
    /// `load_admit` has reads to move (docs/CLASSES.md, "Copies where they
    /// pay"). False in state 1: when the load falls, no more are made.
    pub fn copies_pay(&self) -> bool {
        self.state == State::Tune && self.copies_pay
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

    /// What the balance feedback learned: each class's limit (reads per
    /// second it served while it was the bottleneck; 0 = none yet) and its
    /// lowest mean read latency over an interval (microseconds; infinite =
    /// none yet), for traces.
    pub fn learned(&self) -> ([f64; 2], [f64; 2]) {
        (self.limit, self.floor)
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
}
