//! How long each shard's lock is held, and for what: the lock
//! ([`ShardLock`]) hands out a guard that times the hold and, when it is
//! released, counts it in the shard's histogram under its cause. The cause
//! is the one the taker names ([`ShardLock::lock_for`]; a plain
//! [`ShardLock::lock`] is a command), unless maintenance ran inside the
//! hold ([`Shard::mark_hold`]: an evacuation slice run by a set, an index
//! resize, a flush applied on the way in): then the hold is that
//! maintenance's, the weightiest one when several ran. Requests wait behind
//! these holds, so their longest is the bound on what maintenance adds to a
//! request's latency (`stats`: `shard_lock_hold_*`, `/metrics`:
//! `tiercache_shard_lock_hold_seconds{cause}`).
//!
//! Recording happens under the lock, into the shard's own counters: no
//! atomics, two clock reads per hold.
//!
//! A hold's wall time includes the time its thread was descheduled while
//! holding (on a busy machine, milliseconds), which no engine change can
//! remove. Maintenance holds (every cause but a plain command or `stats`)
//! are also timed on the holding thread's CPU clock, from the moment the
//! maintenance began: their longest and the count over [`CPU_BOUND_US`]
//! are the engine's own share, the bound a slice is designed to keep
//! (`shard_lock_hold_<cause>_cpu_max_us`). Two more clock reads, a system
//! call each, only for maintenance holds.
//!
//! The waits are counted too: a taker that finds the lock held times its
//! wait and records it, once it has the lock, in the shard's `waits` under
//! its own cause (`stats`: `shard_lock_wait_*`, `/metrics`:
//! `tiercache_shard_lock_wait_seconds{cause}`). A command's wait is what
//! the holds before it cost a request, descheduled holders included.

use super::Shard;
use crate::clock::Instant;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

/// What a shard-lock hold was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HoldCause {
    /// Reading `stats` (the lowest: any work inside makes the hold that
    /// work's).
    Stats,
    /// A request: get, set, delete, ...
    Command,
    /// A slice of the background expiry sweep.
    Sweep,
    /// The flash tier's reclaim of a segment: its live items reinserted or
    /// dropped from the index.
    Reclaim,
    /// The small-object store's buffer written or its flush recorded.
    Small,
    /// A RAM segment's items evicted, reinserted or demoted to flash
    /// (whole, or a slice ahead of need), or given back to the pool.
    Evacuation,
    /// An index table rebuilt larger or smaller.
    Resize,
    /// flush_all applied to the shard.
    Flush,
}

/// Every cause, in [`HoldCause`]'s order.
pub const HOLD_CAUSES: [HoldCause; 8] = [
    HoldCause::Stats,
    HoldCause::Command,
    HoldCause::Sweep,
    HoldCause::Reclaim,
    HoldCause::Small,
    HoldCause::Evacuation,
    HoldCause::Resize,
    HoldCause::Flush,
];

impl HoldCause {
    /// Its name in `stats` and `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            HoldCause::Stats => "stats",
            HoldCause::Command => "command",
            HoldCause::Sweep => "sweep",
            HoldCause::Reclaim => "reclaim",
            HoldCause::Small => "small",
            HoldCause::Evacuation => "evacuation",
            HoldCause::Resize => "resize",
            HoldCause::Flush => "flush",
        }
    }
}

/// Histogram buckets: a hold of `us` microseconds falls in the first
/// bucket whose bound is at least `us`; bounds 1, 2, 4, ... 2^18 µs
/// (262 ms), then one over all.
pub const HOLD_BUCKETS: usize = 20;

/// The upper bound of bucket `i` in microseconds; `None` for the last.
pub fn hold_bucket_bound_us(i: usize) -> Option<u64> {
    (i + 1 < HOLD_BUCKETS).then(|| 1u64 << i)
}

/// The on-CPU time a maintenance hold is designed to stay within (issue
/// 31's 200 µs, rounded up to the histogram's power of two).
pub const CPU_BOUND_US: u64 = 256;

/// Lock holds by cause: a histogram, the count, the sum and the longest
/// of their wall time; of maintenance holds, also the longest on-CPU time
/// and how many were over [`CPU_BOUND_US`] on the CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HoldStats {
    pub buckets: [[u64; HOLD_BUCKETS]; HOLD_CAUSES.len()],
    pub sum_ns: [u64; HOLD_CAUSES.len()],
    pub max_ns: [u64; HOLD_CAUSES.len()],
    pub cpu_max_ns: [u64; HOLD_CAUSES.len()],
    pub cpu_over_bound: [u64; HOLD_CAUSES.len()],
}

impl HoldStats {
    /// Counts one hold of `ns` nanoseconds.
    pub fn record(&mut self, cause: HoldCause, ns: u64) {
        let c = cause as usize;
        let us = ns.div_ceil(1000);
        let b = if us <= 1 {
            0
        } else {
            ((64 - (us - 1).leading_zeros()) as usize).min(HOLD_BUCKETS - 1)
        };
        self.buckets[c][b] += 1;
        self.sum_ns[c] += ns;
        self.max_ns[c] = self.max_ns[c].max(ns);
    }

    /// Counts the on-CPU time of a maintenance hold of `cause`.
    pub fn record_cpu(&mut self, cause: HoldCause, ns: u64) {
        let c = cause as usize;
        self.cpu_max_ns[c] = self.cpu_max_ns[c].max(ns);
        if ns > CPU_BOUND_US * 1000 {
            self.cpu_over_bound[c] += 1;
        }
    }

    /// Adds another shard's.
    pub fn add(&mut self, o: &HoldStats) {
        for c in 0..HOLD_CAUSES.len() {
            for b in 0..HOLD_BUCKETS {
                self.buckets[c][b] += o.buckets[c][b];
            }
            self.sum_ns[c] += o.sum_ns[c];
            self.max_ns[c] = self.max_ns[c].max(o.max_ns[c]);
            self.cpu_max_ns[c] = self.cpu_max_ns[c].max(o.cpu_max_ns[c]);
            self.cpu_over_bound[c] += o.cpu_over_bound[c];
        }
    }

    /// Holds of `cause`.
    pub fn count(&self, cause: HoldCause) -> u64 {
        self.buckets[cause as usize].iter().sum()
    }

    /// Holds of `cause` longer than `us` microseconds, counted by whole
    /// buckets (exact when `us` is a power of two).
    pub fn over_us(&self, cause: HoldCause, us: u64) -> u64 {
        (0..HOLD_BUCKETS)
            .filter(|&b| hold_bucket_bound_us(b).is_none_or(|bound| bound > us))
            .map(|b| self.buckets[cause as usize][b])
            .sum()
    }
}

/// A shard's lock. A waiter spins briefly and then sleeps in the kernel
/// (std's futex mutex); it never gives its CPU away in a loop of
/// `sched_yield` calls, as parking_lot's mutex does before it parks. On a
/// machine with more runnable threads than cores each such yield hands the
/// CPU to another process for a time slice: measured under a stream of sets
/// (`bench/tail_under_writes.py`, `perf sched timehist`), the workers spent
/// 1.3 s of 8 s off the CPU in those yields, against 0.1 s sleeping on
/// the lock, and their hits' p99 was several times memcached's (whose
/// pthread mutexes do not yield).
///
/// A futex mutex lets the thread that unlocks take it again before the
/// waiter it woke has run. Maintenance that locks again at once therefore
/// counts the waiters (`waiting`) and lets them in first
/// ([`ShardGuard::unlock_fair`]).
pub struct ShardLock {
    m: Mutex<Shard>,
    /// Threads that found the lock taken and wait for it (the shard
    /// holds the same counter, [`Shard::lock_wanted`]).
    waiting: Arc<AtomicU32>,
}

/// The longest a maintenance loop stands aside after a slice for requests
/// that wait on the lock (they take it within a wake-up's latency).
const HAND_OVER_MAX: Duration = Duration::from_millis(1);
/// How long it spins before it yields its core, and the spins between
/// clock reads at the start.
const SPIN_TIME: Duration = Duration::from_micros(50);
const SPIN_BEFORE_YIELD: u32 = 64;

impl ShardLock {
    pub fn new(mut s: Shard) -> ShardLock {
        let waiting = Arc::new(AtomicU32::new(0));
        s.lock_waiters = waiting.clone();
        ShardLock {
            m: Mutex::new(s),
            waiting,
        }
    }

    /// Takes the lock for a command.
    #[inline]
    pub fn lock(&self) -> ShardGuard<'_> {
        self.lock_for(HoldCause::Command)
    }

    /// Takes the lock for `cause` (a hold that runs maintenance inside a
    /// command is re-attributed by [`Shard::mark_hold`]).
    #[inline]
    pub fn lock_for(&self, cause: HoldCause) -> ShardGuard<'_> {
        // A panic under the lock leaves the shard as consistent as
        // parking_lot's unpoisoned mutex would: take it regardless.
        let mut g = match self.m.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let asked = Instant::now();
                self.waiting.fetch_add(1, Ordering::AcqRel);
                let mut g = self.m.lock().unwrap_or_else(PoisonError::into_inner);
                self.waiting.fetch_sub(1, Ordering::AcqRel);
                g.waits.record(cause, asked.elapsed().as_nanos() as u64);
                g
            }
        };
        // Marks left by work done without the lock (the shard had one
        // owner, `get_mut`) belong to no hold; a CPU clock read on another
        // thread would be meaningless here.
        g.hold_mark = None;
        g.hold_cpu = (cause > HoldCause::Command).then(thread_cpu_ns);
        ShardGuard {
            g: Some(g),
            lock: self,
            cause,
            start: Instant::now(),
        }
    }

    /// Counts a waiter that never takes the lock (tests: a lock always
    /// wanted, so that every maintenance slice ends at its first check).
    pub(crate) fn add_phantom_waiter(&self) {
        self.waiting.fetch_add(1, Ordering::AcqRel);
    }

    /// The shard, without locking (the caller has it alone).
    pub fn get_mut(&mut self) -> &mut Shard {
        self.m.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A held shard lock; counts the hold when dropped.
pub struct ShardGuard<'a> {
    /// Taken only when the hold ends.
    g: Option<MutexGuard<'a, Shard>>,
    lock: &'a ShardLock,
    cause: HoldCause,
    start: Instant,
}

impl Deref for ShardGuard<'_> {
    type Target = Shard;
    #[inline]
    fn deref(&self) -> &Shard {
        self.g.as_deref().expect("held until dropped")
    }
}

impl DerefMut for ShardGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Shard {
        self.g.as_deref_mut().expect("held until dropped")
    }
}

impl<'a> ShardGuard<'a> {
    /// Counts the hold and gives back the lock's guard.
    fn end(&mut self) -> Option<MutexGuard<'a, Shard>> {
        let mut g = self.g.take()?;
        let ns = self.start.elapsed().as_nanos() as u64;
        let cause = g.hold_mark.take().map_or(self.cause, |m| m.max(self.cause));
        g.holds.record(cause, ns);
        if let Some(cpu) = g.hold_cpu.take() {
            g.holds
                .record_cpu(cause, thread_cpu_ns().saturating_sub(cpu));
        }
        Some(g)
    }

    /// Releases the lock and, if requests wait for it, stands aside until
    /// one of them has taken it (at most [`HAND_OVER_MAX`]): maintenance
    /// that locks again at once lets a waiting request in first, and then
    /// queues behind it like any other taker. It spins first (a woken
    /// waiter runs within microseconds when a core is free), then yields
    /// its core to the waiter.
    pub fn unlock_fair(mut self) {
        let lock = self.lock;
        let waiting = lock.waiting.load(Ordering::Acquire);
        drop(self.end());
        if waiting == 0 {
            return;
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while lock.waiting.load(Ordering::Acquire) >= waiting {
            if spins < SPIN_BEFORE_YIELD {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            if start.elapsed() >= HAND_OVER_MAX {
                break;
            }
            if start.elapsed() < SPIN_TIME {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        drop(self.end());
    }
}

/// The calling thread's CPU time so far, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

impl Shard {
    /// Maintenance of `cause` runs inside the current hold: the hold is
    /// counted as the weightiest maintenance that ran in it.
    #[inline]
    pub(crate) fn mark_hold(&mut self, cause: HoldCause) {
        self.hold_mark = Some(self.hold_mark.map_or(cause, |m| m.max(cause)));
        if self.hold_cpu.is_none() {
            self.hold_cpu = Some(thread_cpu_ns());
        }
    }

    /// The lock holds counted so far.
    /// Whether a thread waits for this shard's lock (held by the caller):
    /// maintenance ends its slice early for it.
    #[inline]
    pub(crate) fn lock_wanted(&self) -> bool {
        self.lock_waiters.load(Ordering::Relaxed) > 0
    }

    pub fn holds(&self) -> &HoldStats {
        &self.holds
    }

    /// The waits for this lock counted so far, by the waiter's cause (a
    /// take that found the lock free is not counted).
    pub fn waits(&self) -> &HoldStats {
        &self.waits
    }

    /// Forgets the holds and the waits (`stats reset`).
    pub fn reset_holds(&mut self) {
        self.holds = HoldStats::default();
        self.waits = HoldStats::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        let mut h = HoldStats::default();
        for ns in [0, 999, 1000, 1001, 2000, 3000, 200_000, 10_000_000_000] {
            h.record(HoldCause::Command, ns);
        }
        let b = &h.buckets[HoldCause::Command as usize];
        assert_eq!(b[0], 3, "0, 0.999 and 1 µs are within 1 µs");
        assert_eq!(b[1], 2, "1.001 and 2 µs within 2 µs");
        assert_eq!(b[2], 1, "3 µs within 4");
        assert_eq!(b[8], 1, "200 µs within 256");
        assert_eq!(b[HOLD_BUCKETS - 1], 1, "10 s in the last");
        assert_eq!(h.count(HoldCause::Command), 8);
        assert_eq!(h.max_ns[HoldCause::Command as usize], 10_000_000_000);
        assert_eq!(h.over_us(HoldCause::Command, 256), 1);
        assert_eq!(h.over_us(HoldCause::Command, 128), 2);
        assert_eq!(h.count(HoldCause::Flush), 0);
    }

    #[test]
    fn cpu_time_counts_work_not_sleep() {
        let mut h = HoldStats::default();
        let a = thread_cpu_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let slept = thread_cpu_ns() - a;
        assert!(slept < 10_000_000, "sleeping is not on the CPU: {slept} ns");
        let b = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - b < 2_000_000 {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let spun = thread_cpu_ns() - b;
        assert!(spun >= 2_000_000 && x > 0);
        h.record_cpu(HoldCause::Evacuation, spun);
        h.record_cpu(HoldCause::Evacuation, 1000);
        let e = HoldCause::Evacuation as usize;
        assert_eq!(h.cpu_max_ns[e], spun);
        assert_eq!(
            h.cpu_over_bound[e], 1,
            "2 ms is over the bound, 1 µs is not"
        );
    }

    #[test]
    fn the_weightiest_maintenance_names_the_hold() {
        assert!(HoldCause::Flush > HoldCause::Resize);
        assert!(HoldCause::Resize > HoldCause::Evacuation);
        assert!(HoldCause::Evacuation > HoldCause::Command);
        assert!(HoldCause::Command > HoldCause::Stats);
        for (i, c) in HOLD_CAUSES.iter().enumerate() {
            assert_eq!(*c as usize, i);
        }
    }

    fn one_shard() -> crate::Engine {
        crate::Engine::new(crate::EngineConfig {
            memory_limit: 8 << 20,
            segment_size: 1 << 20,
            shards: 1,
            ..Default::default()
        })
        .unwrap()
    }

    /// Holds the lock until another thread waits for it.
    fn until_waited_for(lock: &ShardLock) {
        let t = Instant::now();
        while lock.waiting.load(Ordering::Acquire) == 0 {
            assert!(t.elapsed() < Duration::from_secs(30), "nobody came");
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_wait_for_the_lock_is_counted_under_the_waiters_cause() {
        let e = one_shard();
        let lock = e.shard_lock(0);
        let g = lock.lock_for(HoldCause::Evacuation);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| drop(lock.lock()));
            until_waited_for(lock);
            std::thread::sleep(Duration::from_millis(5));
            drop(g);
            waiter.join().unwrap();
        });
        // A take that finds the lock free is no wait.
        drop(lock.lock_for(HoldCause::Sweep));
        let g = lock.lock();
        let w = g.waits();
        let c = HoldCause::Command as usize;
        assert_eq!(w.count(HoldCause::Command), 1);
        assert!(w.max_ns[c] >= 5_000_000, "waited {} ns", w.max_ns[c]);
        assert_eq!(
            w.count(HoldCause::Evacuation) + w.count(HoldCause::Sweep),
            0
        );
        assert!(g.holds().count(HoldCause::Evacuation) >= 1);
    }

    #[test]
    fn a_waiting_request_is_seen_under_the_lock() {
        let e = one_shard();
        let lock = e.shard_lock(0);
        let g = lock.lock_for(HoldCause::Evacuation);
        assert!(!g.lock_wanted());
        std::thread::scope(|s| {
            let waiter = s.spawn(|| drop(lock.lock()));
            until_waited_for(lock);
            assert!(g.lock_wanted(), "a slice would end for it");
            drop(g);
            waiter.join().unwrap();
        });
        assert!(!lock.lock().lock_wanted(), "it left the count");
    }

    #[test]
    fn maintenance_that_locks_again_lets_a_waiter_in_first() {
        // A futex mutex lets the thread that unlocks take it again before
        // the waiter it woke runs; unlock_fair returns only once the waiter
        // has the lock. The waiter holds it a while, so "has it" is seen
        // as the lock being taken. A plain unlock returns at once (the
        // waiter still asleep) and loses nearly every round.
        let e = one_shard();
        let lock = e.shard_lock(0);
        let rounds = 40;
        let mut waiter_first = 0;
        for _ in 0..rounds {
            let done = AtomicU32::new(0);
            std::thread::scope(|s| {
                let g = lock.lock_for(HoldCause::Evacuation);
                let waiter = s.spawn(|| {
                    let _g = lock.lock();
                    std::thread::sleep(Duration::from_micros(300));
                    done.store(1, Ordering::Release);
                });
                until_waited_for(lock);
                // Past its spinning, asleep in the kernel.
                std::thread::sleep(Duration::from_millis(2));
                g.unlock_fair();
                let taken = matches!(lock.m.try_lock(), Err(TryLockError::WouldBlock));
                waiter_first += (taken || done.load(Ordering::Acquire) == 1) as usize;
                waiter.join().unwrap();
            });
        }
        // Bounded by HAND_OVER_MAX, so a waiter that takes over a
        // millisecond to be scheduled (a loaded CI machine) may lose.
        assert!(
            waiter_first * 2 > rounds,
            "the waiter had the lock in {waiter_first} of {rounds} rounds"
        );
    }
}
