//! The latency histograms' bounds, shared by the per-worker records and the
//! per-minute SLA view: nanoseconds up to 1 hour.

use hdrhistogram::Histogram;

/// Latencies are recorded in nanoseconds, 3 significant digits, up to 1 hour.
pub const HIST_MAX_NS: u64 = 3_600_000_000_000;

pub fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid histogram bounds")
}

/// 2 significant digits and 32-bit counts: the many per-interval and
/// per-minute histograms.
pub fn new_small_hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, HIST_MAX_NS, 2).expect("valid histogram bounds")
}
