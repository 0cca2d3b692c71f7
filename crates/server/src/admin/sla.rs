//! The SLA view of seed `002_*` (issue 18): the p99 of server-side request
//! latency per minute, the daily level (the highest per-minute p99 of the
//! last two hours) and the minutes that count as unavailable, in `stats`,
//! `stats sla` and the metrics endpoint. The rule itself is
//! [`tiercache_policy::sla`], shared with `tiercache-bench`.
//!
//! Recording is per worker and lock-free: each worker counts its requests'
//! latencies into its own [`Recorder`] (log-linear buckets of µs, one
//! relaxed load and store, no other thread writes them). The maintenance
//! thread calls [`Sla::tick`] every 50 ms; when a minute has ended it sums
//! the workers' buckets, takes the difference from the sums at the
//! minute's start, and closes the minute with that histogram's p99. Only
//! that thread and `stats` readers take the lock.
//!
//! Precision: a bucket holds one µs below 256 µs and 1/128 of its octave
//! above, so a reported p99 is the highest value of its bucket: at most
//! 0.8% (and 1 µs) above the true one, never below. Latencies over 2^32 µs
//! (71 minutes) count as that.

use crate::stats::line::{stat, Sink};
use crate::stats::WorkerStats;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tiercache_policy::sla::{Window, WINDOW_MINUTES};

/// Sub-buckets per octave: 2^7.
const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;
/// Latencies up to 2^32 - 1 µs.
const MAX_BITS: u32 = 32;
/// Buckets per histogram (26 KiB of counters per worker).
pub const BUCKETS: usize = (MAX_BITS - SUB_BITS) as usize * SUB + SUB;

/// The bucket of a latency in µs.
pub fn bucket(us: u64) -> usize {
    let v = us.min((1 << MAX_BITS) - 1);
    if v < SUB as u64 {
        return v as usize;
    }
    let k = 63 - v.leading_zeros() - SUB_BITS;
    k as usize * SUB + (v >> k) as usize
}

/// The highest latency (µs) a bucket holds.
pub fn highest(idx: usize) -> u64 {
    if idx < 2 * SUB {
        return idx as u64;
    }
    let k = idx / SUB - 1;
    let m = (idx - k * SUB) as u64;
    ((m + 1) << k) - 1
}

/// The p99 (µs) of a histogram, and its count (None if empty): the value
/// of the request at rank ceil(0.99 n).
pub fn p99(counts: &[u64]) -> (u64, Option<u64>) {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return (0, None);
    }
    let rank = (n * 99).div_ceil(100).max(1);
    let mut seen = 0;
    for (i, &c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return (n, Some(highest(i)));
        }
    }
    unreachable!("rank {rank} is within the {n} counted")
}

/// One worker's latency counts since the start.
pub struct Recorder {
    counts: Box<[AtomicU64]>,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    /// Counts one request that took `took`. Only the owning worker calls
    /// this, so a load and a store do (no locked add).
    #[inline]
    pub fn record(&self, took: Duration) {
        // Not `as_micros`: its u128 division costs more than the rest.
        let us = took.as_secs().saturating_mul(1_000_000) + u64::from(took.subsec_micros());
        let c = &self.counts[bucket(us)];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn add_to(&self, sums: &mut [u64]) {
        for (s, c) in sums.iter_mut().zip(self.counts.iter()) {
            *s += c.load(Ordering::Relaxed);
        }
    }
}

/// The minute clock and the window of judged minutes.
pub struct Sla {
    workers: Vec<Arc<WorkerStats>>,
    state: Mutex<State>,
}

struct State {
    interval: Duration,
    /// When the open minute ends.
    ends: Instant,
    /// The workers' summed counts when the open minute began.
    base: Vec<u64>,
    window: Window,
}

impl Sla {
    /// Minutes of `interval` (60 s in the server) from `now`, over the
    /// latencies the `workers` record.
    pub fn new(workers: Vec<Arc<WorkerStats>>, interval: Duration, now: Instant) -> Sla {
        let base = sums(&workers);
        Sla {
            workers,
            state: Mutex::new(State {
                interval,
                ends: now + interval,
                base,
                window: Window::new(),
            }),
        }
    }

    /// Starts over with minutes of `interval` from `now`: for tests, which
    /// cannot wait for real minutes.
    #[doc(hidden)]
    pub fn restart(&self, interval: Duration, now: Instant) {
        let base = sums(&self.workers);
        *self.lock() = State {
            interval,
            ends: now + interval,
            base,
            window: Window::new(),
        };
    }

    /// The length of a minute (60 s but in tests).
    pub fn interval(&self) -> Duration {
        self.lock().interval
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes the minutes that have ended by `now`. The requests counted
    /// since the last close go to the first of them; if the caller was
    /// late by whole minutes, those are closed idle (at most two hours of
    /// them: after a longer pause the clock starts again at `now`).
    pub fn tick(&self, now: Instant) {
        let mut s = self.lock();
        if now < s.ends {
            return;
        }
        let cur = sums(&self.workers);
        let delta: Vec<u64> = cur.iter().zip(&s.base).map(|(c, b)| c - b).collect();
        let (n, p) = p99(&delta);
        s.window.close(n, p);
        s.base = cur;
        let interval = s.interval;
        s.ends += interval;
        let mut late = 0;
        while now >= s.ends {
            if late == WINDOW_MINUTES {
                s.ends = now + interval;
                break;
            }
            s.window.close(0, None);
            s.ends += interval;
            late += 1;
        }
    }

    /// The SLA lines of the general `stats`.
    pub fn general(&self, out: &mut dyn Sink, now: Instant) {
        self.tick(now);
        let s = self.lock();
        let w = &s.window;
        let last = w.last().and_then(|m| m.p99_us).unwrap_or(0);
        stat(out, "sla_p99_last_minute_us", last);
        // 0: no level yet (the next minute with requests sets it).
        stat(out, "sla_daily_level_us", w.level_us().unwrap_or(0));
        stat(
            out,
            "sla_unavailable_threshold_us",
            w.threshold_us().unwrap_or(0),
        );
        stat(out, "sla_unavailable_minutes", w.unavailable());
        stat(out, "sla_closed_minutes", w.closed());
    }

    /// `stats sla`: the general lines, more counts, the open minute so far
    /// and every minute of the window, most recent first (`minute:1:` is
    /// the last closed one).
    pub fn group(&self, out: &mut Vec<u8>, now: Instant) {
        self.general(out, now);
        let s = self.lock();
        let w = &s.window;
        stat(out, "sla_interval_ms", s.interval.as_millis());
        stat(out, "sla_window_minutes", WINDOW_MINUTES);
        stat(out, "sla_idle_minutes", w.idle());
        stat(out, "sla_unavailable_minutes_2h", w.unavailable_in_window());
        let last = w.last();
        stat(
            out,
            "sla_requests_last_minute",
            last.map_or(0, |m| m.requests),
        );
        let cur = sums(&self.workers);
        let delta: Vec<u64> = cur.iter().zip(&s.base).map(|(c, b)| c - b).collect();
        let (n, p) = p99(&delta);
        stat(out, "sla_requests_this_minute", n);
        stat(out, "sla_p99_this_minute_us", p.unwrap_or(0));
        for (i, m) in w.recent().enumerate() {
            let i = i + 1;
            stat(out, &format!("minute:{i}:requests"), m.requests);
            stat(out, &format!("minute:{i}:p99_us"), m.p99_us.unwrap_or(0));
            let threshold = m.threshold_us.unwrap_or(0);
            stat(out, &format!("minute:{i}:threshold_us"), threshold);
            stat(
                out,
                &format!("minute:{i}:unavailable"),
                u8::from(m.unavailable),
            );
        }
    }
}

/// The workers' counts summed.
fn sums(workers: &[Arc<WorkerStats>]) -> Vec<u64> {
    let mut s = vec![0; BUCKETS];
    for w in workers {
        w.latency.add_to(&mut s);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_below_256_us_and_within_one_128th_above() {
        for us in 0..256 {
            assert_eq!(highest(bucket(us)), us);
        }
        for us in (256..1 << 20)
            .step_by(7)
            .chain([25_000, 1 << 31, (1 << 32) - 1])
        {
            let b = bucket(us);
            let hi = highest(b);
            assert!(hi >= us && (hi - us) * 128 <= us, "{us} -> {hi}");
            assert!(b < BUCKETS);
        }
        // Consecutive buckets tile the range.
        for b in 1..BUCKETS {
            assert_eq!(bucket(highest(b - 1) + 1), b, "after bucket {}", b - 1);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(highest(BUCKETS - 1), (1 << 32) - 1);
    }

    #[test]
    fn p99_is_the_value_at_rank_ceil_99_percent() {
        let mut c = vec![0u64; BUCKETS];
        assert_eq!(p99(&c), (0, None));
        c[bucket(5)] = 99;
        c[bucket(20_000)] = 1;
        // 100 requests: rank 99 is the last 5 µs one.
        assert_eq!(p99(&c), (100, Some(5)));
        c[bucket(20_000)] = 2;
        // 101: rank 100 is a 20 ms one (its bucket's top).
        assert_eq!(p99(&c), (101, Some(highest(bucket(20_000)))));
        let mut one = vec![0u64; BUCKETS];
        one[bucket(7)] = 1;
        assert_eq!(p99(&one), (1, Some(7)));
    }

    fn workers(n: usize) -> Vec<Arc<WorkerStats>> {
        (0..n).map(|_| Arc::new(WorkerStats::default())).collect()
    }

    fn lines(out: &[u8]) -> Vec<String> {
        String::from_utf8_lossy(out)
            .lines()
            .map(String::from)
            .collect()
    }

    #[test]
    fn minutes_close_on_tick_with_the_workers_merged() {
        let ws = workers(2);
        let t0 = Instant::now();
        let min = Duration::from_secs(60);
        let sla = Sla::new(ws.clone(), min, t0);
        let fast = |n| {
            for _ in 0..n {
                ws[0].latency.record(Duration::from_micros(50));
                ws[1].latency.record(Duration::from_micros(60));
            }
        };
        // Minute 1 sets the level: 60 µs.
        fast(100);
        sla.tick(t0 + min - Duration::from_millis(1));
        let mut out = Vec::new();
        sla.general(&mut out, t0 + min - Duration::from_millis(1));
        assert!(lines(&out).contains(&"STAT sla_closed_minutes 0".to_string()));
        assert!(lines(&out).contains(&"STAT sla_daily_level_us 0".to_string()));
        sla.tick(t0 + min);
        assert_eq!(sla.lock().window.level_us(), Some(60));
        // Minute 2: 196 fast requests over two workers and 4 slow ones on
        // one: p99 is the slow ones' (rank 198 of 200).
        fast(98);
        for _ in 0..4 {
            ws[1].latency.record(Duration::from_millis(12));
        }
        sla.tick(t0 + 2 * min);
        let m = *sla.lock().window.last().unwrap();
        assert_eq!(m.requests, 200);
        assert_eq!(m.p99_us, Some(highest(bucket(12_000))));
        assert_eq!(m.threshold_us, Some(10_000));
        assert!(m.unavailable, "12 ms over the first tier's 10 ms");
        // Minute 3: 100 requests at 1 ms (bucket 1000..=1003); minute 4
        // idle; the tick comes late, in minute 5, and closes both.
        for _ in 0..100 {
            ws[0].latency.record(Duration::from_millis(1));
        }
        let late = t0 + 4 * min + Duration::from_secs(1);
        sla.tick(late);
        let mut out = Vec::new();
        sla.group(&mut out, late);
        let got = lines(&out);
        for want in [
            "STAT sla_closed_minutes 4",
            "STAT sla_idle_minutes 1",
            "STAT sla_unavailable_minutes 1",
            "STAT sla_unavailable_minutes_2h 1",
            "STAT sla_p99_last_minute_us 0",
            "STAT sla_daily_level_us 1003",
            "STAT sla_unavailable_threshold_us 10000",
            "STAT sla_interval_ms 60000",
            "STAT sla_requests_this_minute 0",
            "STAT minute:1:requests 0",
            "STAT minute:2:requests 100",
            "STAT minute:2:p99_us 1003",
            "STAT minute:2:unavailable 0",
            "STAT minute:3:requests 200",
            "STAT minute:3:threshold_us 10000",
            "STAT minute:3:unavailable 1",
            "STAT minute:4:requests 200",
            "STAT minute:4:p99_us 60",
            "STAT minute:4:threshold_us 0",
        ] {
            assert!(got.contains(&want.to_string()), "{want} not in {got:?}");
        }
        // The open minute so far.
        ws[1].latency.record(Duration::from_micros(300));
        let mut out = Vec::new();
        sla.group(&mut out, late + Duration::from_secs(1));
        let got = lines(&out);
        assert!(got.contains(&"STAT sla_requests_this_minute 1".to_string()));
        let want = format!("STAT sla_p99_this_minute_us {}", highest(bucket(300)));
        assert!(got.contains(&want));
    }

    #[test]
    fn a_long_pause_closes_at_most_two_hours_and_restarts_the_clock() {
        let ws = workers(1);
        let t0 = Instant::now();
        let min = Duration::from_millis(10);
        let sla = Sla::new(ws, min, t0);
        let late = t0 + 1000 * min;
        sla.tick(late);
        let s = sla.lock();
        assert_eq!(s.window.closed(), 1 + WINDOW_MINUTES as u64);
        assert_eq!(s.ends, late + min);
        drop(s);
        sla.restart(Duration::from_secs(1), late);
        let s = sla.lock();
        assert_eq!(s.window.closed(), 0);
        assert_eq!(s.interval, Duration::from_secs(1));
    }
}
