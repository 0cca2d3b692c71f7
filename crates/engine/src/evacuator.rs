//! The evacuator: a thread of its own (the server starts it, as memcached
//! starts its LRU maintainer) that runs the RAM segment evacuations begun
//! ahead of need, a slice per lock hold, the lock handed fairly to any
//! request waiting for it between slices. A set that begins an evacuation
//! only flags its shard here; it runs slices itself only when the
//! evacuator has fallen behind (its queue's head is nearly full), so a
//! worker thread, and every connection it serves, does no bulk
//! maintenance. Without an evacuator (tests, the simulator, a server
//! stopping) sets run the slices, as before.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::Duration;

/// The shards with an evacuation to run, and the evacuator's wake-up.
#[derive(Default)]
pub struct Evacuator {
    attached: AtomicBool,
    /// One bit per shard (at most 64 shards).
    pending: AtomicU64,
    park: Mutex<()>,
    wake: Condvar,
}

/// What one slice left to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Slice {
    /// No evacuation in progress any more.
    Done,
    /// More of it.
    More,
    /// The flash tier has no write buffer room for its demotions now.
    Busy,
}

impl Evacuator {
    /// Whether a thread runs the evacuations (sets then leave them to it).
    #[inline]
    pub fn attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    /// The shards whose bits are in `bits` have an evacuation to run.
    #[inline]
    pub fn request(&self, bits: u64) {
        // Asked already (every insert into a shard asks while its
        // evacuation runs): a read of the shared line, not a write.
        if self.pending.load(Ordering::Relaxed) & bits == bits {
            return;
        }
        if self.pending.fetch_or(bits, Ordering::AcqRel) & bits != bits {
            // Under the lock the evacuator checks `pending` with: no lost
            // wake-up.
            let _g = self.park.lock().unwrap_or_else(PoisonError::into_inner);
            self.wake.notify_one();
        }
    }

    /// Marks the evacuator running (true) or gone (false).
    pub(crate) fn attach(&self, on: bool) {
        self.attached.store(on, Ordering::SeqCst);
    }

    /// The shards asked for since the last call, without waiting.
    pub(crate) fn take_now(&self) -> u64 {
        self.pending.swap(0, Ordering::AcqRel)
    }

    /// The shards asked for since the last call, waiting up to `timeout`
    /// when there are none.
    pub(crate) fn take(&self, timeout: Duration) -> u64 {
        let bits = self.pending.swap(0, Ordering::AcqRel);
        if bits != 0 {
            return bits;
        }
        let g = self.park.lock().unwrap_or_else(PoisonError::into_inner);
        let bits = self.pending.swap(0, Ordering::AcqRel);
        if bits != 0 {
            return bits;
        }
        let _ = self
            .wake
            .wait_timeout(g, timeout)
            .unwrap_or_else(PoisonError::into_inner);
        self.pending.swap(0, Ordering::AcqRel)
    }
}

/// The shards named by `bits`, lowest first.
pub(crate) fn shards_in(mut bits: u64) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (bits != 0).then(|| {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            i
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_taken_once_and_wake_a_waiter() {
        let e = std::sync::Arc::new(Evacuator::default());
        assert_eq!(e.take(Duration::from_millis(1)), 0);
        e.request(0b101);
        e.request(0b100);
        assert_eq!(e.take(Duration::from_secs(5)), 0b101);
        let e2 = e.clone();
        let t = std::thread::spawn(move || e2.take(Duration::from_secs(30)));
        std::thread::sleep(Duration::from_millis(20));
        e.request(1 << 63);
        assert_eq!(t.join().unwrap(), 1 << 63, "woken, not timed out");
        assert_eq!(shards_in(0b1001_0010).collect::<Vec<_>>(), vec![1, 4, 7]);
    }
}
