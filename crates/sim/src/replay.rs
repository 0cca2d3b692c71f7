//! Replay: one (policy, cache size) job runs a trace through
//! [`QueueCache`], the object-level cache driven by the policy code the
//! server's engine runs; jobs run in parallel on a pool of threads, each
//! replaying the shared in-memory trace.
//!
//! Semantics (libCacheSim's): capacity in bytes (in objects with
//! `--ignore-obj-size`), no per-object metadata counted, no warm-up, every
//! request counts; a miss inserts the object after evicting until it fits;
//! an object larger than the cache is never inserted; a hit does not change
//! the stored size. With `honor_ops`, only gets count as requests: a set
//! inserts or refreshes the object like a request that is not counted, a
//! delete removes it.

use crate::job::window_ends;
pub use crate::job::{Counts, ReplayOptions, RunResult, Window, WindowStats};
use crate::trace::{Op, Trace};
use anyhow::{anyhow, Result};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tiercache_policy::{
    clock::Clock, fifo::Fifo, lru::Lru, queue_cache::QueueCache, sieve::Sieve, EvictionPolicy,
};

/// Requests between two updates of the shared progress counter.
const CHUNK: usize = 1 << 16;

/// Replays the trace through one cache.
pub fn replay<P: EvictionPolicy>(
    trace: &Trace,
    policy: P,
    capacity: u64,
    opts: ReplayOptions,
    progress: &AtomicU64,
) -> RunResult {
    let started = Instant::now();
    let cpu_start = thread_cpu_ns();
    let name = policy.name().to_string();
    let mut cache = QueueCache::new(policy, capacity);
    let mut total = Counts::default();
    let mut windows = Vec::new();
    let mut start = 0usize;
    for end in window_ends(trace, opts.window) {
        let mut w = Counts::default();
        let mut i = start;
        while i < end {
            let stop = (i + CHUNK).min(end);
            let ids = &trace.ids[i..stop];
            let sizes = &trace.sizes[i..stop];
            if opts.honor_ops && !trace.ops.is_empty() {
                for ((&id, &size), &op) in ids.iter().zip(sizes).zip(&trace.ops[i..stop]) {
                    match op {
                        Op::Get => count(&mut w, cache.request(id, size as u64), size),
                        Op::Set => {
                            cache.request(id, size as u64);
                        }
                        Op::Delete => {
                            cache.remove(id);
                        }
                    }
                }
            } else {
                for (&id, &size) in ids.iter().zip(sizes) {
                    count(&mut w, cache.request(id, size as u64), size);
                }
            }
            progress.fetch_add((stop - i) as u64, Ordering::Relaxed);
            i = stop;
        }
        if opts.window.is_some() && end > start {
            windows.push(WindowStats {
                first_request: start as u64,
                start_time: trace.times[start],
                counts: w,
                miss_ratio: w.miss_ratio(),
                byte_miss_ratio: w.byte_miss_ratio(),
                engine: None,
            });
        }
        total.add(&w);
        start = end;
    }
    RunResult {
        policy: name,
        size: capacity,
        counts: total,
        miss_ratio: total.miss_ratio(),
        byte_miss_ratio: total.byte_miss_ratio(),
        evictions: cache.evictions,
        objects: cache.len() as u64,
        seconds: started.elapsed().as_secs_f64(),
        cpu_seconds: cpu_start
            .zip(thread_cpu_ns())
            .map(|(a, b)| b.saturating_sub(a) as f64 / 1e9),
        engine: None,
        windows,
    }
}

/// Nanoseconds the calling thread has run on a CPU.
fn thread_cpu_ns() -> Option<u64> {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Some(t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64)
}

#[inline(always)]
fn count(w: &mut Counts, hit: bool, size: u32) {
    w.requests += 1;
    w.bytes += size as u64;
    if !hit {
        w.misses += 1;
        w.miss_bytes += size as u64;
    }
}

/// Runs one job. The common policies are replayed with their concrete type
/// (static dispatch, the fast path); the others through [`tiercache_policy::by_name`].
/// The result is labelled with `spec` as given (`midlru:50`).
pub fn run_job(
    trace: &Trace,
    spec: &str,
    capacity: u64,
    opts: ReplayOptions,
    progress: &AtomicU64,
) -> Result<RunResult> {
    if crate::engine_replay::engine_policy(spec).is_some() {
        return crate::engine_replay::replay_engine(trace, spec, capacity, opts, progress);
    }
    let mut r = match spec {
        "lru" => replay(trace, Lru, capacity, opts, progress),
        "fifo" => replay(trace, Fifo, capacity, opts, progress),
        "clock" => replay(trace, Clock, capacity, opts, progress),
        "sieve" => replay(trace, Sieve, capacity, opts, progress),
        _ => {
            let p = tiercache_policy::by_name(spec).ok_or_else(|| unknown_policy(spec))?;
            replay(trace, p, capacity, opts, progress)
        }
    };
    r.policy = spec.to_string();
    Ok(r)
}

fn unknown_policy(spec: &str) -> anyhow::Error {
    anyhow!(
        "unknown policy '{spec}': choose from {} (midlru, 2q and s3fifo take :PERCENT), or tiercache[:POLICY] for the server's engine",
        tiercache_policy::POLICY_NAMES.join(", ")
    )
}

/// Checks policy names before any work starts.
pub fn check_policies(specs: &[String]) -> Result<()> {
    for s in specs {
        let inner = crate::engine_replay::engine_policy(s).unwrap_or(s);
        if tiercache_policy::by_name(inner).is_none() {
            return Err(unknown_policy(s));
        }
    }
    Ok(())
}

/// Runs every job on `threads` threads; results come back in job order.
/// `tick` is called about ten times a second with the requests replayed so far.
pub fn run_all(
    trace: &Trace,
    jobs: &[(String, u64)],
    threads: usize,
    opts: ReplayOptions,
    mut tick: impl FnMut(u64),
) -> Result<Vec<RunResult>> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let progress = AtomicU64::new(0);
    let results: Mutex<Vec<Option<Result<RunResult>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads.max(1).min(jobs.len().max(1)) {
            s.spawn(|| loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                let Some((spec, size)) = jobs.get(j) else {
                    break;
                };
                let r = run_job(trace, spec, *size, opts, &progress);
                results.lock().unwrap()[j] = Some(r);
                done.fetch_add(1, Ordering::Release);
            });
        }
        while done.load(Ordering::Acquire) < jobs.len() {
            std::thread::sleep(Duration::from_millis(100));
            tick(progress.load(Ordering::Relaxed));
        }
        tick(progress.load(Ordering::Relaxed));
    });
    results
        .into_inner()
        .unwrap()
        .into_iter()
        .map(|r| r.expect("every job ran"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> Trace {
        let mut t = Trace::default();
        for i in 0..1000u64 {
            t.ids.push(i % 10);
            t.sizes.push(10);
            t.times.push((i / 100) as u32);
        }
        t
    }

    #[test]
    fn windows_add_up() {
        let t = trace();
        let p = AtomicU64::new(0);
        for w in [Window::Requests(300), Window::Seconds(3)] {
            let opts = ReplayOptions {
                window: Some(w),
                ..ReplayOptions::default()
            };
            let r = run_job(&t, "lru", 50, opts, &p).unwrap();
            assert_eq!(r.windows.len(), 4);
            let sum: u64 = r.windows.iter().map(|w| w.counts.misses).sum();
            assert_eq!(sum, r.counts.misses);
            assert_eq!(r.windows[1].first_request, 300);
        }
        assert_eq!(p.load(Ordering::Relaxed), 2000);
        let whole = run_job(&t, "lru", 100, ReplayOptions::default(), &p).unwrap();
        assert_eq!(whole.counts.misses, 10, "only cold misses when it all fits");
    }

    #[test]
    fn ops_are_honoured_when_asked() {
        let mut t = trace();
        t.ops = vec![Op::Get; t.len()];
        t.ops[0] = Op::Set;
        t.ops[10] = Op::Delete;
        let opts = ReplayOptions {
            honor_ops: true,
            ..ReplayOptions::default()
        };
        let r = run_job(&t, "fifo", 100, opts, &AtomicU64::new(0)).unwrap();
        assert_eq!(r.counts.requests, 998);
        // Key 0: set, so its first get hits; deleted at request 10, so request 20 misses.
        assert_eq!(r.counts.misses, 9 + 1);
    }

    #[test]
    fn jobs_run_in_parallel_and_keep_their_order() {
        let t = trace();
        let jobs: Vec<(String, u64)> = ["lru", "fifo", "sieve", "midlru:50", "2q", "s3fifo"]
            .iter()
            .flat_map(|p| [30u64, 100].map(|s| (p.to_string(), s)))
            .collect();
        let rs = run_all(&t, &jobs, 3, ReplayOptions::default(), |_| {}).unwrap();
        for (r, (p, s)) in rs.iter().zip(&jobs) {
            assert_eq!((&r.policy, r.size), (p, *s));
        }
        assert!(check_policies(&["lru".into(), "nope".into()]).is_err());
    }
}
