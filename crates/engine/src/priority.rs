//! The scheduling priority of the threads that hold shard locks in the
//! background (the evacuator, the maintenance sweep, the flash flusher).
//!
//! A request waits for its shard's lock as long as the holder keeps it,
//! and a holder the scheduler took the CPU from keeps it for a time slice:
//! on a machine with more runnable threads than cores (the workers, these
//! threads and whatever else runs there) that is milliseconds. Run at a
//! higher priority (a lower nice value) than the workers, these threads are
//! preempted less often inside their short holds. Measured under the
//! operator's benchmark (2 cores, 50,000 new keys/s beside hot gets,
//! `bench/tail_under_writes`): the hot gets' p99 0.45x and 0.86x in two
//! paired batches with the three at nice -10 (bench/RESULTS.md,
//! 2026-12-08). Their work is what the sets need done anyway (room in RAM,
//! segments written to flash); they do it sooner, in holds less often cut.
//!
//! Raising a priority needs CAP_SYS_NICE (root, or `LimitNICE=` under
//! systemd); without it the threads keep the process's priority and the
//! server says so once.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// The nice value of the background lock holders by default.
pub const DEFAULT_NICE: i32 = -10;

/// The nice value they take ([`set_nice`]; 0: the process's own).
static NICE: AtomicI32 = AtomicI32::new(DEFAULT_NICE);
static TOLD: AtomicBool = AtomicBool::new(false);

/// Sets the nice value the background lock holders take from now on
/// (-20 to 19; 0 leaves them at the process's priority).
pub fn set_nice(nice: i32) {
    NICE.store(nice.clamp(-20, 19), Ordering::Relaxed);
}

/// The calling thread, a background lock holder (`what` names it in the
/// log), takes the nice value set. False if it could not.
pub fn background_lock_holder(what: &str) -> bool {
    let nice = NICE.load(Ordering::Relaxed);
    if nice == 0 {
        return true;
    }
    let tid = rustix::thread::gettid();
    match rustix::process::setpriority_process(Some(tid), nice) {
        Ok(()) => true,
        Err(e) => {
            if !TOLD.swap(true, Ordering::Relaxed) {
                tracing::info!(
                    thread = what,
                    error = %e,
                    "the maintenance threads run at the workers' priority: nice {nice} needs CAP_SYS_NICE (root, or systemd's LimitNICE=); -o maintenance_nice=0 leaves them there without this message"
                );
            }
            false
        }
    }
}

/// The calling thread's nice value.
#[cfg(test)]
fn this_thread_nice() -> i32 {
    let tid = rustix::thread::gettid();
    rustix::process::getpriority_process(Some(tid)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_takes_the_nice_value_it_is_allowed() {
        std::thread::spawn(|| {
            set_nice(5);
            assert!(
                background_lock_holder("test"),
                "a lower priority needs no privilege"
            );
            assert_eq!(this_thread_nice(), 5);
            set_nice(DEFAULT_NICE);
            let raised = background_lock_holder("test");
            let root = rustix::process::geteuid().is_root();
            if raised {
                assert_eq!(this_thread_nice(), DEFAULT_NICE);
            } else {
                assert!(!root, "root may raise a priority");
                assert_eq!(this_thread_nice(), 5, "unchanged when refused");
            }
        })
        .join()
        .unwrap();
    }
}
