//! What the SLA view adds to a request, in time (callgrind counts the
//! instructions, bench/sla_cost.py, but not the kernel's vDSO clock read):
//! a clock read alone (what every request already paid to start its
//! timer), a clock read with the SLA's `elapsed` and bucket record, and the
//! record alone, each in ns per call over 20 million calls, best of 5.
//!
//! `cargo run --release -p tiercache-server --example sla_record_cost`

use std::hint::black_box;
use std::time::{Duration, Instant};
use tiercache_server::stats::WorkerStats;

const CALLS: u32 = 20_000_000;

fn best_ns(mut f: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..CALLS {
                f();
            }
            t.elapsed().as_secs_f64() * 1e9 / f64::from(CALLS)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let w = WorkerStats::default();
    let clock = best_ns(|| {
        black_box(Instant::now());
    });
    let timed = best_ns(|| {
        let t = black_box(Instant::now());
        w.latency.record(t.elapsed());
    });
    let mut i = 0u64;
    let record = best_ns(|| {
        i = i.wrapping_add(7919);
        w.latency
            .record(Duration::from_nanos(black_box(i % 3_000_000)));
    });
    println!("clock read {clock:.1} ns; clock read + elapsed + record {timed:.1} ns; record alone {record:.1} ns");
    println!("added per request by the SLA view: {:.1} ns", timed - clock);
}
