//! The expiry sweep: once a second the maintenance thread walks a shard's
//! segments in slices (the lock released between them), unlinking expired
//! items and freeing segments that hold nothing live. A segment whose
//! soonest expiry is still ahead is skipped whole (most of a cache with
//! long or no TTLs), and a walk of a segment tightens that bound to what
//! it saw, so a segment is walked again only when something in it expires.

use super::*;
use crate::segment::NEVER;

/// Where an expiry sweep done in slices stands: the segments it walks
/// (listed at its start), the one it is in and the offset in it.
#[derive(Debug)]
pub(super) struct Sweep {
    ids: Vec<u32>,
    at: usize,
    off: usize,
    /// The soonest exptime among the live items walked in this segment.
    walk_min: u32,
    /// Slices of index resizing done before the walk.
    resize_passes: usize,
}

/// The most slices of index resizing ([`Shard::resize_index`]) one sweep
/// runs before its walk: 512 Ki old buckets (32 MiB of index) a second.
const RESIZE_PASSES: usize = 1024;

impl Shard {
    /// Unlinks expired items and frees segments that hold nothing live, in
    /// one lock hold. Returns the number of items reclaimed.
    pub fn sweep_expired(&mut self, now: u32) -> u64 {
        let mut reclaimed = 0;
        loop {
            let (n, done) = self.sweep_slice(now, usize::MAX);
            reclaimed += n;
            if done {
                return reclaimed;
            }
        }
    }

    /// One slice of the expiry sweep: at most `max` items looked at (the
    /// caller releases the lock between slices, so that no request waits
    /// for a walk of the whole shard). The first slice of a sweep does the
    /// shard's once-a-second upkeep and lists the segments; the last frees
    /// the segments left empty. Returns the items reclaimed and whether
    /// the sweep is done. Segments freed between slices are skipped; items
    /// moved between slices are found at the next sweep.
    pub fn sweep_slice(&mut self, now: u32, max: usize) -> (u64, bool) {
        let mut reclaimed = 0;
        if self.sweep.is_none() {
            self.below.log.prune_tombs();
            self.below.upkeep(&self.index, &self.shared.pool);
            let left = self.flushed.sweep();
            self.stats.reclaimed += left.items;
            self.stats.expired_unfetched += left.unfetched;
            reclaimed += left.items;
            let ids = self.queues.iter().flat_map(|q| q.iter().copied()).collect();
            self.sweep = Some(Sweep {
                ids,
                at: 0,
                off: 0,
                walk_min: NEVER,
                resize_passes: 0,
            });
            return (reclaimed, false);
        }
        // Index tables that grow or shrink, a bounded slice at a time
        // (their rebuilds also go on at each insert into them).
        if let Some(cur) = self
            .sweep
            .as_mut()
            .filter(|c| c.resize_passes < RESIZE_PASSES)
        {
            cur.resize_passes += 1;
            if self.resize_index() {
                return (reclaimed, false);
            }
            self.sweep.as_mut().expect("a sweep").resize_passes = RESIZE_PASSES;
        }
        let mut cur = self.sweep.take().expect("a sweep");
        let mut looked = 0;
        while let Some(&id) = cur.ids.get(cur.at) {
            if looked >= max {
                self.sweep = Some(cur);
                return (reclaimed, false);
            }
            if self.segs.get(id as usize).is_none_or(|s| s.is_none()) {
                cur.at += 1;
                cur.off = 0;
                continue;
            }
            if cur.off == 0 {
                if !self.seg(id).may_hold_expired(now) {
                    self.stats.sweep_segments_skipped += 1;
                    cur.at += 1;
                    continue;
                }
                self.seg_mut(id).expiry_since_walk = NEVER;
                cur.walk_min = NEVER;
                self.stats.sweep_segments_walked += 1;
            }
            let end = self.seg(id).write;
            let room = max - looked;
            let mut n = 0;
            while n < room {
                let Some((loc, h)) = self.next_item(id, &mut cur.off, end) else {
                    break;
                };
                n += 1;
                if h.bits & item::DEAD == 0 && h.expired(now) {
                    let hash = hash_key(self.key(loc));
                    if self.index.contains(hash, loc) {
                        if h.bits & item::FETCHED == 0 {
                            self.stats.expired_unfetched += 1;
                        }
                        self.unlink_item(hash, loc);
                        self.stats.reclaimed += 1;
                        reclaimed += 1;
                    }
                } else if h.bits & item::DEAD == 0 && h.exptime != 0 {
                    cur.walk_min = cur.walk_min.min(h.exptime);
                }
            }
            looked += n;
            if cur.off >= end {
                // Walked whole: what it holds expires no sooner than what
                // the walk saw or what came (or was retimed) since.
                let seg = self.seg_mut(id);
                seg.soonest_expiry = cur.walk_min.min(seg.expiry_since_walk);
                cur.at += 1;
                cur.off = 0;
            }
        }
        // Free empty segments that are not a queue's open head (nor the
        // one an evacuation ahead is emptying: it frees that one itself).
        let evacuating = self.evacuating();
        for q in 0..2 {
            let head = self.queues[q].back().copied();
            let empty: Vec<u32> = self.queues[q]
                .iter()
                .copied()
                .filter(|&id| {
                    Some(id) != head && Some(id) != evacuating && self.seg(id).live_items == 0
                })
                .collect();
            for id in empty {
                self.queues[q].retain(|&x| x != id);
                let buf = self.close_segment(id);
                self.shared.pool.give(buf);
            }
        }
        (reclaimed, true)
    }
}
