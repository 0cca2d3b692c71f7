//! The SLA view of seed `002_*` from the client side: the run cut into
//! minutes (`--sla-interval`, 60 s by default), each minute's p99 over the
//! requests intended to be sent in it (unanswered ones at their lower
//! bound), and each minute judged by `tiercache_policy::sla`, the rule the
//! server's `stats sla` applies: the first minute with requests sets the
//! daily level, later ones are unavailable when their p99 is over the
//! threshold of the level before them. The last minute of a run is usually
//! partial: it is judged like the others and marked.

use hdrhistogram::Histogram;
use serde::Serialize;
use tiercache_policy::sla::Window;

use crate::hist::new_small_hist;

/// Per-minute histograms of one worker, or of a whole run once merged.
pub struct Minutes {
    pub interval_ns: u64,
    pub hists: Vec<Histogram<u32>>,
}

impl Minutes {
    pub fn new(interval_ns: u64) -> Minutes {
        Minutes {
            interval_ns: interval_ns.max(1),
            hists: Vec::new(),
        }
    }

    /// A request intended at `intended_ns` that took `lat_ns`.
    #[inline]
    pub fn record(&mut self, intended_ns: u64, lat_ns: u64) {
        let i = (intended_ns / self.interval_ns) as usize;
        while self.hists.len() <= i {
            self.hists.push(new_small_hist());
        }
        self.hists[i].saturating_record(lat_ns);
    }

    pub fn merge(&mut self, o: &Minutes) {
        while self.hists.len() < o.hists.len() {
            self.hists.push(new_small_hist());
        }
        for (a, b) in self.hists.iter_mut().zip(&o.hists) {
            a.add(b).expect("same histogram bounds");
        }
    }
}

/// One judged minute.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SlaMinute {
    /// End of the minute, seconds since the start of the run.
    pub t_s: f64,
    pub requests: u64,
    /// None: no requests.
    pub p99_us: Option<f64>,
    /// The daily level it was judged against (None: the first, not judged).
    pub level_us: Option<f64>,
    pub threshold_us: Option<f64>,
    pub unavailable: bool,
    /// The run ended before the minute did.
    pub partial: bool,
}

/// The SLA view of a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SlaReport {
    pub interval_s: f64,
    pub minutes: Vec<SlaMinute>,
    /// The daily level at the end of the run: the highest p99 of the
    /// available minutes of the last two hours (None: no judged level).
    pub daily_level_us: Option<f64>,
    pub unavailable_minutes: u64,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

impl SlaReport {
    /// Judges the minutes of a run that lasted `elapsed_s`.
    pub fn build(m: &Minutes, elapsed_s: f64) -> SlaReport {
        let interval_s = m.interval_ns as f64 / 1e9;
        let mut w = Window::new();
        let minutes = m
            .hists
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let n = h.len();
                // Judged in whole µs, as the server judges (the thresholds
                // are whole µs).
                let p99 = (n > 0).then(|| h.value_at_quantile(0.99) / 1000);
                let j = w.close(n, p99);
                let t_s = (i as f64 + 1.0) * interval_s;
                SlaMinute {
                    t_s,
                    requests: n,
                    p99_us: (n > 0).then(|| us(h.value_at_quantile(0.99))),
                    level_us: j.level_us.map(|v| v as f64),
                    threshold_us: j.threshold_us.map(|v| v as f64),
                    unavailable: j.unavailable,
                    partial: t_s > elapsed_s + 1e-9,
                }
            })
            .collect();
        SlaReport {
            interval_s,
            minutes,
            daily_level_us: w.level_us().map(|v| v as f64),
            unavailable_minutes: w.unavailable(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn minutes_are_judged_by_the_shared_rule() {
        let mut a = Minutes::new(1000 * MS);
        let mut b = Minutes::new(1000 * MS);
        // Minute 0: 1 ms (sets the level); minute 1: 200 requests, 3 at
        // 30 ms (p99 over the first tier's 10 ms); minute 2 idle; minute 3:
        // 3 ms (the level, 2-5 ms tier: 25 ms); minute 4 (partial): 26 ms.
        for _ in 0..100 {
            a.record(10 * MS, MS);
        }
        for i in 0..197 {
            b.record(1000 * MS + i, MS);
        }
        for _ in 0..3 {
            a.record(1500 * MS, 30 * MS);
        }
        b.record(3500 * MS, 3 * MS);
        a.record(4100 * MS, 26 * MS);
        a.merge(&b);
        let r = SlaReport::build(&a, 4.5);
        let m: Vec<_> = r.minutes.iter().map(|m| m.unavailable).collect();
        assert_eq!(m, [false, true, false, false, true]);
        assert_eq!(r.minutes[0].level_us, None);
        assert_eq!(r.minutes[1].requests, 200);
        assert_eq!(r.minutes[1].threshold_us, Some(10_000.0));
        assert!(r.minutes[1].p99_us.unwrap() >= 30_000.0);
        assert_eq!((r.minutes[2].requests, r.minutes[2].p99_us), (0, None));
        // HDR's 2 digits: 3 ms is reported within 1%.
        let p3 = r.minutes[3].p99_us.unwrap();
        assert!((3000.0..3030.0).contains(&p3), "{p3}");
        assert_eq!(r.minutes[4].threshold_us, Some(25_000.0));
        assert!(r.minutes[4].partial && !r.minutes[3].partial);
        assert_eq!(r.unavailable_minutes, 2);
        assert_eq!(r.daily_level_us, Some(p3.floor()));
    }
}
