//! The memory budget: segment buffers are handed out from one pool shared by
//! all shards, so memory moves to whichever shard needs it, and the total of
//! segment bytes plus index bytes never exceeds the configured limit.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct SegmentPool {
    seg_size: usize,
    /// Bytes of segments and index allowed (`-m`; `cache_memlimit` changes it).
    limit: AtomicUsize,
    free: Mutex<Vec<Box<[u8]>>>,
    allocated: AtomicUsize,
    index_bytes: AtomicUsize,
}

impl SegmentPool {
    pub fn new(seg_size: usize, limit: usize) -> SegmentPool {
        SegmentPool {
            seg_size,
            limit: AtomicUsize::new(limit),
            free: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
            index_bytes: AtomicUsize::new(0),
        }
    }

    pub fn seg_size(&self) -> usize {
        self.seg_size
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// A new budget. Lower: shards give segments back as they reclaim
    /// (`over_budget`), so memory comes down as the cache evicts; higher:
    /// `take` hands out more.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Segments the budget allows with the index at its current size.
    pub fn max_segments(&self) -> usize {
        self.limit()
            .saturating_sub(self.index_bytes.load(Ordering::Relaxed))
            / self.seg_size
    }

    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    pub fn index_bytes(&self) -> usize {
        self.index_bytes.load(Ordering::Relaxed)
    }

    /// Records a change in index memory.
    pub fn add_index_bytes(&self, delta: isize) {
        if delta >= 0 {
            self.index_bytes
                .fetch_add(delta as usize, Ordering::Relaxed);
        } else {
            self.index_bytes
                .fetch_sub((-delta) as usize, Ordering::Relaxed);
        }
    }

    /// Whether more segments are allocated than the budget allows.
    pub fn over_budget(&self) -> bool {
        self.allocated() > self.max_segments()
    }

    /// A free buffer, or a new one if the budget allows.
    pub fn take(&self) -> Option<Box<[u8]>> {
        if let Some(b) = self.free.lock().pop() {
            return Some(b);
        }
        let mut cur = self.allocated.load(Ordering::Relaxed);
        loop {
            if cur + 1 > self.max_segments() {
                return None;
            }
            match self.allocated.compare_exchange_weak(
                cur,
                cur + 1,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(c) => cur = c,
            }
        }
        // Zeroed allocation: pages are mapped lazily, so RSS follows use.
        Some(vec![0u8; self.seg_size].into_boxed_slice())
    }

    /// A free buffer, or a new one even over the budget: for restoring a
    /// snapshot whose RAM no longer fits next to what the index and the
    /// small-object store now take. The shards give segments back as they
    /// reclaim ([`over_budget`](Self::over_budget)), as after a lower
    /// `cache_memlimit`.
    pub fn take_over_budget(&self) -> Box<[u8]> {
        if let Some(b) = self.free.lock().pop() {
            return b;
        }
        self.allocated.fetch_add(1, Ordering::Relaxed);
        vec![0u8; self.seg_size].into_boxed_slice()
    }

    /// Returns a buffer for reuse, or frees it when over budget.
    pub fn give(&self, buf: Box<[u8]>) {
        if self.over_budget() {
            self.allocated.fetch_sub(1, Ordering::Relaxed);
            drop(buf);
        } else {
            self.free.lock().push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_includes_index() {
        let p = SegmentPool::new(1024, 4096);
        let a: Vec<_> = (0..4).map(|_| p.take().unwrap()).collect();
        assert!(p.take().is_none());
        p.add_index_bytes(1500);
        assert!(p.over_budget());
        for b in a {
            p.give(b);
        }
        assert_eq!(p.allocated(), 2);
        assert!(!p.over_budget());
    }

    #[test]
    fn a_restore_may_go_over_and_gives_back() {
        let p = SegmentPool::new(1024, 2048);
        let mut a: Vec<_> = (0..2).map(|_| p.take().unwrap()).collect();
        assert!(p.take().is_none());
        a.push(p.take_over_budget());
        assert_eq!(p.allocated(), 3);
        assert!(p.over_budget());
        p.give(a.pop().unwrap());
        assert_eq!(p.allocated(), 2, "freed, not kept");
        assert!(!p.over_budget());
    }
}
