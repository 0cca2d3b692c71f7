//! The SLA of seed `002_*` as a pure decision: which minutes count as
//! unavailable, given each minute's p99 latency. The server (`stats sla`,
//! the metrics endpoint) and `tiercache-bench` (its `sla` report) both feed
//! their per-minute p99 into a [`Window`], so the rule lives here once.
//!
//! The seed's rule, read literally: the key figure is the highest p99 over
//! the last two hours; its everyday value is the *daily level*. With a
//! daily level of at most 2 ms, a p99 over 10 ms lasting a minute or more
//! counts as unavailable time; at most 5 ms: over 25 ms; at most 20 ms:
//! over 40 ms; above 20 ms: over the level by 100% (twice the level).
//!
//! How it is applied here (docs/SLA.md gives the reasons):
//! - A minute (an interval of the configured length) is the unit: its p99
//!   is over all requests it completed. A minute whose p99 is over the
//!   threshold is one unavailable minute: the p99 of a whole minute over
//!   the threshold is what "over it for a minute or more" can mean at this
//!   granularity, and an episode of N such minutes counts N.
//! - The daily level a minute is judged against is the highest p99 of the
//!   previous 120 minutes (the two hours before it, not the minute itself),
//!   leaving out minutes with no requests and minutes that were themselves
//!   unavailable: an outage does not raise the bar its own later minutes
//!   are judged by, so an outage of N minutes counts N.
//! - When there is no such minute (at the start, or after two hours of
//!   nothing but idle or unavailable minutes) there is no level: the
//!   minute is not judged (it counts as available) and its p99 becomes the
//!   level. So a service whose p99 is steadily 12 ms has a 12 ms level and
//!   is available, and one whose p99 moved for good from 1 ms to 15 ms
//!   counts two hours unavailable, then 15 ms is its level.
//! - Tier bounds are inclusive ("within 2 ms" includes 2 ms) and "over" is
//!   strict: a p99 equal to the threshold is available.

use std::collections::VecDeque;

/// Minutes in the rolling window the daily level is taken over (two hours).
pub const WINDOW_MINUTES: usize = 120;

/// The p99 (µs) over which a minute is unavailable, given the daily level
/// (µs).
pub fn threshold_us(level_us: u64) -> u64 {
    match level_us {
        0..=2_000 => 10_000,
        2_001..=5_000 => 25_000,
        5_001..=20_000 => 40_000,
        level => level.saturating_mul(2),
    }
}

/// One closed minute and how it was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Minute {
    /// Requests completed in it.
    pub requests: u64,
    /// Their p99 in µs (None: no requests).
    pub p99_us: Option<u64>,
    /// The daily level it was judged against (None: there was none, so it
    /// was not judged).
    pub level_us: Option<u64>,
    /// The threshold that level gives.
    pub threshold_us: Option<u64>,
    /// Its p99 was over the threshold.
    pub unavailable: bool,
}

/// The last two hours of minutes and the counts since the start.
#[derive(Debug, Clone, Default)]
pub struct Window {
    /// Most recent last, at most [`WINDOW_MINUTES`].
    minutes: VecDeque<Minute>,
    closed: u64,
    idle: u64,
    unavailable: u64,
}

impl Window {
    pub fn new() -> Window {
        Window::default()
    }

    /// The daily level now: the highest p99 of the minutes in the window
    /// that had requests and were available (None if there are none).
    pub fn level_us(&self) -> Option<u64> {
        self.minutes
            .iter()
            .filter(|m| !m.unavailable)
            .filter_map(|m| m.p99_us)
            .max()
    }

    /// The threshold the next minute will be judged against.
    pub fn threshold_us(&self) -> Option<u64> {
        self.level_us().map(threshold_us)
    }

    /// Closes a minute with `requests` requests whose p99 was `p99_us`
    /// (None when there were none), judges it against the level of the
    /// minutes before it, and keeps it in the window.
    pub fn close(&mut self, requests: u64, p99_us: Option<u64>) -> Minute {
        let level_us = self.level_us();
        let threshold_us = level_us.map(threshold_us);
        let m = Minute {
            requests,
            p99_us,
            level_us,
            threshold_us,
            unavailable: matches!((p99_us, threshold_us), (Some(p), Some(t)) if p > t),
        };
        self.closed += 1;
        self.idle += u64::from(p99_us.is_none());
        self.unavailable += u64::from(m.unavailable);
        if self.minutes.len() == WINDOW_MINUTES {
            self.minutes.pop_front();
        }
        self.minutes.push_back(m);
        m
    }

    /// The minutes in the window, most recent first.
    pub fn recent(&self) -> impl Iterator<Item = &Minute> {
        self.minutes.iter().rev()
    }

    /// The last closed minute.
    pub fn last(&self) -> Option<&Minute> {
        self.minutes.back()
    }

    /// Minutes closed since the start.
    pub fn closed(&self) -> u64 {
        self.closed
    }

    /// Of those, minutes without requests.
    pub fn idle(&self) -> u64 {
        self.idle
    }

    /// Of those, unavailable minutes.
    pub fn unavailable(&self) -> u64 {
        self.unavailable
    }

    /// Unavailable minutes in the window (the last two hours).
    pub fn unavailable_in_window(&self) -> u64 {
        self.minutes.iter().filter(|m| m.unavailable).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tier_boundary() {
        for (level, threshold) in [
            (0, 10_000),
            (2_000, 10_000),
            (2_001, 25_000),
            (5_000, 25_000),
            (5_001, 40_000),
            (20_000, 40_000),
            (20_001, 40_002),
            (30_000, 60_000),
        ] {
            assert_eq!(threshold_us(level), threshold, "level {level}");
        }
    }

    /// A window whose level is `level` (one minute at it), then the verdict
    /// on a minute with p99 `p99`.
    fn judged(level: u64, p99: u64) -> Minute {
        let mut w = Window::new();
        assert!(!w.close(100, Some(level)).unavailable);
        assert_eq!(w.level_us(), Some(level));
        w.close(100, Some(p99))
    }

    #[test]
    fn over_is_strict_at_each_tier() {
        for (level, threshold) in [
            (1_500, 10_000),
            (2_000, 10_000),
            (3_000, 25_000),
            (5_000, 25_000),
            (12_000, 40_000),
            (20_000, 40_000),
            (25_000, 50_000),
        ] {
            let at = judged(level, threshold);
            assert_eq!(
                (at.level_us, at.threshold_us),
                (Some(level), Some(threshold))
            );
            assert!(!at.unavailable, "level {level}: p99 at the threshold");
            assert!(
                judged(level, threshold + 1).unavailable,
                "level {level}: 1 µs over"
            );
        }
    }

    #[test]
    fn the_first_minute_sets_the_level_and_later_ones_are_judged() {
        let mut w = Window::new();
        assert_eq!((w.level_us(), w.threshold_us()), (None, None));
        // An idle minute sets nothing.
        assert!(!w.close(0, None).unavailable);
        assert_eq!(w.level_us(), None);
        // No level: not judged, and it becomes the level (a steady 12 ms
        // service is in the 5-20 ms tier, not unavailable).
        let m = w.close(10, Some(12_000));
        assert_eq!(
            (m.level_us, m.threshold_us, m.unavailable),
            (None, None, false)
        );
        assert_eq!(
            (w.level_us(), w.threshold_us()),
            (Some(12_000), Some(40_000))
        );
        for _ in 0..300 {
            assert!(!w.close(10, Some(12_000)).unavailable);
        }
        assert!(!w.close(10, Some(40_000)).unavailable);
        // 40 ms was available, so it is the level: over 20 ms, twice it.
        assert_eq!(w.threshold_us(), Some(80_000));
        assert!(w.close(10, Some(80_001)).unavailable);
        assert_eq!((w.closed(), w.unavailable(), w.idle()), (304, 1, 1));
    }

    #[test]
    fn the_level_is_the_max_of_the_last_two_hours() {
        let mut w = Window::new();
        // A 4 ms minute, then 119 minutes at 1 ms: still in the window.
        w.close(1, Some(4_000));
        for _ in 0..119 {
            assert!(!w.close(1, Some(1_000)).unavailable);
        }
        assert_eq!(w.level_us(), Some(4_000));
        assert_eq!(w.threshold_us(), Some(25_000));
        // 20 ms is within the 2-5 ms tier's 25 ms.
        let m = w.close(1, Some(20_000));
        assert!(!m.unavailable);
        assert_eq!(m.level_us, Some(4_000));
        // That pushed the 4 ms minute out, but the 20 ms one is the level.
        assert_eq!(w.level_us(), Some(20_000));
        assert_eq!(w.threshold_us(), Some(40_000));
        // 120 more minutes at 1 ms push it out too: back to the first tier.
        for _ in 0..119 {
            w.close(1, Some(1_000));
        }
        assert_eq!(w.level_us(), Some(20_000));
        w.close(1, Some(1_000));
        assert_eq!(w.level_us(), Some(1_000));
        assert_eq!(w.threshold_us(), Some(10_000));
        assert_eq!(w.recent().count(), WINDOW_MINUTES);
        assert_eq!(w.closed(), 241);
    }

    #[test]
    fn an_outage_counts_every_minute_and_leaves_the_window_after_two_hours() {
        let mut w = Window::new();
        for _ in 0..10 {
            w.close(1000, Some(800));
        }
        for _ in 0..30 {
            assert!(w.close(1000, Some(50_000)).unavailable);
        }
        assert_eq!(w.unavailable(), 30);
        assert_eq!(w.unavailable_in_window(), 30);
        assert_eq!(w.level_us(), Some(800));
        for _ in 0..WINDOW_MINUTES {
            w.close(1000, Some(800));
        }
        assert_eq!(w.unavailable_in_window(), 0);
        assert_eq!(w.unavailable(), 30);
        let last = w.last().unwrap();
        assert_eq!((last.p99_us, last.unavailable), (Some(800), false));
        assert_eq!(w.recent().next(), Some(last));
    }

    #[test]
    fn a_lasting_move_counts_two_hours_then_is_the_new_level() {
        let mut w = Window::new();
        w.close(1000, Some(1_000));
        // From 1 ms to 15 ms for good: unavailable while the 1 ms minute is
        // in the window (120 minutes), then the next one sets the level.
        for _ in 0..WINDOW_MINUTES {
            assert!(w.close(1000, Some(15_000)).unavailable);
        }
        assert_eq!(w.level_us(), None);
        let m = w.close(1000, Some(15_000));
        assert!(!m.unavailable && m.level_us.is_none());
        assert_eq!(w.threshold_us(), Some(40_000));
        assert!(!w.close(1000, Some(15_000)).unavailable);
        assert_eq!(w.unavailable(), WINDOW_MINUTES as u64);
    }
}
