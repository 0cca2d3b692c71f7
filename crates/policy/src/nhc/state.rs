//! The scheduler's state machine: state 1 (classic caching) until the fast
//! hit ratio is stable, state 2's iterations of probes, the move an
//! iteration ends with, and the way back to state 1.

use super::{Iteration, Measurement, Nhc, Objective, Probe, ProbeOrder, MAX_PROBES};

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

impl Nhc {
    /// Closes one measured interval.
    pub fn interval(&mut self, m: &Measurement) {
        if m.reads < self.params.min_reads || m.secs <= 0.0 {
            return;
        }
        let ratio = m.fast_ratio();
        for c in 0..2 {
            if m.class_reads[c] >= self.params.min_reads {
                let mean = m.class_wait_us(c) / m.class_reads[c] as f64;
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
                // A slow decline moves the reference down with it, at most
                // `drift` an interval (never up).
                let fall = (self.reference - self.smoothed).clamp(0.0, self.params.drift);
                self.reference -= fall;
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
        self.copies_pay = false;
        // Limits are learned afresh in each stay in state 2: one learned
        // in an earlier stay (another load, a stall) held the split off a
        // class for good (docs/CLASSES.md, known limits until issue 35).
        self.limit = [0.0; 2];
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
        self.copies_pay = false;
        self.at_one = 0;
        self.load_admit = 1.0;
        self.recent.clear();
        self.left_tune += 1;
    }

    /// The point a probe measures: a step from the current one, clamped
    /// to [0, 1] (after a halved step the points are off the grid of
    /// `params.step`, and the upper one of 0.975 is 1).
    pub(super) fn point(&self, p: Probe) -> f64 {
        let v = match p {
            Probe::Lower => self.load_admit - self.step,
            Probe::Current => self.load_admit,
            Probe::Upper => self.load_admit + self.step,
        };
        (v.clamp(0.0, 1.0) * 1e6).round() / 1e6
    }

    /// The probe under measurement.
    pub(super) fn probe(&self) -> Probe {
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
