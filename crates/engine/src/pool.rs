//! The memory budget: segment buffers are handed out from one pool shared by
//! all shards, so memory moves to whichever shard needs it, and the total of
//! segment bytes plus index bytes never exceeds the configured limit.
//!
//! A *jumbo* buffer holds one item larger than a segment (`-I` above the
//! segment size): it is allocated to the item's size and charged as the
//! whole segments it spans; it is never kept for reuse.
//!
//! A few segments of the budget are a *reserve* shared by the shards'
//! evacuations: an evacuation that keeps items (reinserts them) may need a
//! new head segment before it frees its victim, and takes it from the
//! reserve ([`take_spare`](SegmentPool::take_spare)); the victim's buffer
//! then goes back. Plain allocations ([`take`](SegmentPool::take)) leave
//! the reserve alone. (A spare segment per shard, idle between
//! evacuations, was an eighth of the memory with 8 segments per shard.)
//! With the reserve spent, an evacuation takes its spare over the budget
//! ([`take_over_budget`](SegmentPool::take_over_budget)) rather than
//! evict what the policy keeps, and [`give`](SegmentPool::give) frees the
//! victim's buffer in its place.

use parking_lot::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct SegmentPool {
    seg_size: usize,
    /// Bytes of segments and index allowed (`-m`; `cache_memlimit` changes it).
    limit: AtomicUsize,
    free: Mutex<Vec<Box<[u8]>>>,
    /// Buffers released ([`release`](Self::release)): no longer charged,
    /// freed by [`drop_released`](Self::drop_released) outside any shard's
    /// lock (freeing a 1 MiB buffer, an munmap, took about 250 µs of a
    /// shard's lock hold), or taken again first by the next allocation.
    released: Mutex<Vec<Box<[u8]>>>,
    /// Other memory to free outside any shard's lock (a flushed index's
    /// tables), with the released buffers.
    garbage: Mutex<Vec<Box<dyn Send>>>,
    allocated: AtomicUsize,
    index_bytes: AtomicUsize,
    /// Segments of the budget that only [`take_spare`](Self::take_spare)
    /// hands out.
    reserve: AtomicUsize,
}

impl SegmentPool {
    pub fn new(seg_size: usize, limit: usize) -> SegmentPool {
        SegmentPool {
            seg_size,
            limit: AtomicUsize::new(limit),
            free: Mutex::new(Vec::new()),
            released: Mutex::new(Vec::new()),
            garbage: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
            index_bytes: AtomicUsize::new(0),
            reserve: AtomicUsize::new(0),
        }
    }

    /// How many segments of the budget are kept for evacuations' spares
    /// (none until set: the engine sets [`reserve_for`](Self::reserve_for)).
    pub fn set_reserve(&self, segments: usize) {
        self.reserve.store(segments, Ordering::Relaxed);
    }

    /// The reserve a shard count wants: one spare for every four shards
    /// (evacuations run one per shard, under its lock or in slices, and
    /// hold a spare only while one runs), at least one.
    pub fn reserve_for(shards: usize) -> usize {
        (shards / 4).max(1)
    }

    /// Segments held by the shards (allocated and not free here).
    fn in_use(&self, free: usize) -> usize {
        self.allocated().saturating_sub(free)
    }

    /// Whether the reserve is short: the shards hold more than the budget
    /// less the reserve (after a snapshot's restore, or a lower limit), so
    /// a reclaim should give its segment back.
    pub fn reserve_short(&self) -> bool {
        let free = self.free.lock().len();
        self.in_use(free) + self.reserve.load(Ordering::Relaxed) > self.max_segments()
    }

    pub fn seg_size(&self) -> usize {
        self.seg_size
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    /// A new budget. Lower: shards give segments back as they reclaim
    /// (`over_budget`), and the maintenance pass has them give back their
    /// oldest (`Engine::maintain`), so memory comes down as the cache
    /// evicts; higher: `take` hands out more.
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Relaxed);
    }

    /// Segments the budget allows with the index at its current size.
    pub fn max_segments(&self) -> usize {
        self.limit()
            .saturating_sub(self.index_bytes.load(Ordering::Relaxed))
            / self.seg_size
    }

    /// Segments' worth of budget a buffer of `len` bytes is charged.
    pub fn units(&self, len: usize) -> usize {
        len.div_ceil(self.seg_size).max(1)
    }

    /// Whether a buffer is a jumbo one (larger than a segment).
    pub fn is_jumbo(&self, buf: &[u8]) -> bool {
        buf.len() > self.seg_size
    }

    /// A jumbo buffer of exactly `len` bytes, if the budget has its units
    /// (free segments are let go first to make them).
    pub fn take_jumbo(&self, len: usize) -> Option<Box<[u8]>> {
        let need = self.units(len);
        // Free buffers count as allocated: let one go until the units fit.
        while !self.charge(need) {
            let freed = self.free.lock().pop()?;
            self.release(freed);
        }
        Some(vec![0u8; len].into_boxed_slice())
    }

    /// Adds `units` to what is allocated if the budget has room for them.
    fn charge(&self, units: usize) -> bool {
        self.allocated
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                (cur + units <= self.max_segments()).then_some(cur + units)
            })
            .is_ok()
    }

    /// Whether [`take_jumbo`](Self::take_jumbo) of `len` bytes would get
    /// its units now (free segments count as room).
    pub fn has_room_for(&self, len: usize) -> bool {
        let free = self.free.lock().len();
        self.allocated() - free + self.units(len) <= self.max_segments()
    }

    /// A jumbo buffer of `len` bytes even over the budget (a snapshot's
    /// jumbo item: see [`take_over_budget`](Self::take_over_budget)).
    pub fn take_jumbo_over_budget(&self, len: usize) -> Box<[u8]> {
        self.allocated.fetch_add(self.units(len), Ordering::Relaxed);
        vec![0u8; len].into_boxed_slice()
    }

    /// Frees a buffer and its units of the budget (not kept for reuse).
    pub fn release(&self, buf: Box<[u8]>) {
        self.allocated
            .fetch_sub(self.units(buf.len()), Ordering::Relaxed);
        self.released.lock().push(buf);
    }

    /// Frees the released buffers (the maintenance thread, once a second,
    /// holding no shard's lock).
    pub fn drop_released(&self) {
        let gone = std::mem::take(&mut *self.released.lock());
        drop(gone);
        let gone = std::mem::take(&mut *self.garbage.lock());
        drop(gone);
    }

    /// Frees `x` with the released buffers, outside any shard's lock (no
    /// longer charged: the caller has taken it out of its accounts).
    pub fn free_later(&self, x: Box<dyn Send>) {
        self.garbage.lock().push(x);
    }

    /// A new segment buffer: a released one if there is one (its pages are
    /// mapped already), else a zeroed allocation, whose pages are mapped
    /// lazily, so RSS follows use. The caller has charged it.
    fn new_segment(&self) -> Box<[u8]> {
        let mut released = self.released.lock();
        match released.iter().rposition(|b| b.len() == self.seg_size) {
            Some(i) => released.swap_remove(i),
            None => {
                drop(released);
                vec![0u8; self.seg_size].into_boxed_slice()
            }
        }
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

    /// Whether [`take`](Self::take) would find a segment now (a free one,
    /// or room in the budget for a new one), the reserve left alone.
    pub fn has_room(&self) -> bool {
        let room = |free| {
            self.in_use(free) + 1 + self.reserve.load(Ordering::Relaxed) <= self.max_segments()
        };
        // Asked on inserts while a head is nearly full: the free list's
        // lock only when the budget alone says no.
        room(0) || room(self.free.lock().len())
    }

    /// A free buffer, or a new one if the budget allows, the reserve left
    /// alone.
    pub fn take(&self) -> Option<Box<[u8]>> {
        self.take_leaving(self.reserve.load(Ordering::Relaxed))
    }

    /// A segment for an evacuation's spare (or for the last segment of a
    /// shard that has nothing else): may come out of the reserve.
    pub fn take_spare(&self) -> Option<Box<[u8]>> {
        self.take_leaving(0)
    }

    /// A free buffer, or a new one, if `keep` segments of the budget are
    /// left after it.
    fn take_leaving(&self, keep: usize) -> Option<Box<[u8]>> {
        let mut free = self.free.lock();
        if self.in_use(free.len()) + 1 + keep > self.max_segments() {
            return None;
        }
        if let Some(b) = free.pop() {
            return Some(b);
        }
        // Charged under the free list's lock, so that two takers cannot
        // both pass the check above for the last segment before the reserve.
        if !self.charge(1) {
            return None;
        }
        drop(free);
        Some(self.new_segment())
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
        self.new_segment()
    }

    /// Frees kept buffers while the budget is exceeded.
    pub fn trim_free(&self) {
        while self.over_budget() {
            let Some(b) = self.free.lock().pop() else {
                return;
            };
            self.release(b);
        }
    }

    /// Returns a buffer for reuse, or frees it when over budget.
    pub fn give(&self, buf: Box<[u8]>) {
        if self.over_budget() || self.is_jumbo(&buf) {
            self.release(buf);
        } else {
            self.free.lock().push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_buffers_are_freed_later_or_taken_again() {
        let p = SegmentPool::new(1024, 4096);
        let mut a: Vec<_> = (0..4).map(|_| p.take().unwrap()).collect();
        a[0][0] = 7;
        let first = a[0].as_ptr();
        p.release(a.remove(0));
        assert_eq!(p.allocated(), 3, "uncharged at once");
        assert_eq!(
            p.released.lock().len(),
            1,
            "freed later, not under the caller's lock"
        );
        let b = p.take().expect("room for one");
        assert_eq!(b.as_ptr(), first, "the released buffer is taken again");
        p.release(b);
        p.drop_released();
        assert!(p.released.lock().is_empty());
    }

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
    fn jumbo_buffers_are_charged_whole_segments_and_freed() {
        let p = SegmentPool::new(1024, 8192);
        let a = p.take().unwrap();
        let b = p.take().unwrap();
        p.give(b);
        assert_eq!(p.allocated(), 2, "one in use, one free");
        // 7 segments' worth: the free one is let go to make room.
        let j = p.take_jumbo(6145).unwrap();
        assert_eq!(j.len(), 6145);
        assert_eq!(p.allocated(), 8);
        assert!(p.take_jumbo(1025).is_none(), "over the budget");
        assert!(p.take().is_none());
        p.give(j);
        assert_eq!(p.allocated(), 1, "a jumbo buffer is freed, not kept");
        assert!(p.has_room_for(7 * 1024));
        assert!(!p.has_room_for(7 * 1024 + 1));
        p.release(a);
        assert_eq!(p.allocated(), 0);
    }

    #[test]
    fn plain_takes_leave_the_reserve_to_spares() {
        let p = SegmentPool::new(1024, 4096);
        p.set_reserve(1);
        let mut a: Vec<_> = (0..3).map(|_| p.take().unwrap()).collect();
        assert!(p.take().is_none(), "the fourth is the reserve's");
        assert!(!p.has_room());
        assert!(!p.reserve_short());
        let spare = p.take_spare().expect("the reserve");
        assert!(p.take_spare().is_none(), "the budget is spent");
        assert!(p.reserve_short());
        // The evacuation that took it gives its victim back.
        p.give(a.pop().unwrap());
        assert!(!p.reserve_short());
        assert!(p.take().is_none(), "the buffer given back is the reserve");
        assert!(p.take_spare().is_some());
        drop(spare);
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
