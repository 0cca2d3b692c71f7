//! The evacuator thread's loop over the shards (see [`crate::evacuator`]).

use super::Engine;
use crate::shard::hold::HoldCause;
use std::sync::atomic::{AtomicBool, Ordering};

impl Engine {
    /// The evacuator thread's body (see [`crate::evacuator`]): runs the
    /// evacuations that sets begin ahead, a slice per lock hold, round
    /// robin over the shards that asked, until `stop`. Sets run the slices
    /// themselves while it is not running.
    pub fn run_evacuator(&self, stop: &AtomicBool) {
        use crate::evacuator::{shards_in, Slice};
        let ev = &self.shared.evacuator;
        ev.attach(true);
        let n = self.shards.list.len();
        while !stop.load(Ordering::Relaxed) {
            let mut bits = ev.take(std::time::Duration::from_millis(100));
            while bits != 0 && !stop.load(Ordering::Relaxed) {
                let mut progress = false;
                for b in shards_in(bits) {
                    let mut left = false;
                    for i in (b..n).step_by(64) {
                        let mut g = self.shards.list[i].lock_for(HoldCause::Evacuation);
                        g.catch_up(crate::clock::unix_now());
                        let s = g.evacuator_slice();
                        g.unlock_fair();
                        progress |= s != Slice::Busy;
                        left |= s != Slice::Done;
                    }
                    if !left {
                        bits &= !(1 << b);
                    }
                }
                if !progress {
                    // The flash tier's write buffers are full: let the
                    // flusher write.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                bits |= ev.take_now();
            }
        }
        ev.attach(false);
    }

    /// Marks the evacuator thread running without running it (tests: an
    /// evacuator starved of CPU, as on an overloaded machine).
    #[doc(hidden)]
    pub fn starve_evacuator_for_tests(&self) {
        self.shared.evacuator.attach(true);
    }

    /// Marks every shard's lock as wanted by a waiter that never comes
    /// (tests: evacuation slices then end at their first check, as they do
    /// on a busy server where requests keep asking for the lock, so the
    /// sets' own slices fall behind whatever the machine's load).
    #[doc(hidden)]
    pub fn contend_locks_for_tests(&self) {
        for s in &self.shards.list {
            s.add_phantom_waiter();
        }
    }

    /// Takes `n` segments over the memory budget and keeps them out of
    /// every shard (tests: the memory over its budget by segments lent to
    /// sets while a starved evacuator finishes their evacuations).
    #[doc(hidden)]
    pub fn lend_segments_for_tests(&self, n: usize) -> Vec<Box<[u8]>> {
        (0..n)
            .map(|_| self.shared.pool.take_over_budget())
            .collect()
    }

    /// Gives back what [`lend_segments_for_tests`](Self::lend_segments_for_tests) took.
    #[doc(hidden)]
    pub fn return_segments_for_tests(&self, lent: Vec<Box<[u8]>>) {
        for b in lent {
            self.shared.pool.release(b);
        }
    }
}
