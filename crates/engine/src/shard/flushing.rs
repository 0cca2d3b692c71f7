//! `flush_all` in slices. The flush itself is a swap, in one short hold:
//! the shard's index is replaced by an empty one and its RAM queues are
//! set aside, so no item from before the flush is found again. What was
//! set aside is given back afterwards a slice per lock hold, by the
//! evacuator thread (or the maintenance thread's once-a-second pass): the
//! set-aside segments are walked to remember the dropped keys
//! (`get_flushed`, [`crate::flushed`]) and returned to the pool, and the
//! old index goes to the maintenance thread to free (freeing a 512 KiB
//! table, an munmap, took 300-500 µs under a shard's lock). An
//! allocation that finds the pool empty meanwhile takes a set-aside
//! segment at once. A lookup that misses counts `get_flushed` for a key
//! the walk has not reached yet by finding it in the set-aside index
//! (each key once: the walk and the lookup take its entry out).
//!
//! Before, the flush cleared the index (a memset of every table: 46 MB
//! with 6 M flash items) and walked the RAM items in the same hold: 3 ms
//! on the CPU, 14 ms of wall time seen. Without an evacuator (tests, the
//! simulator) the slices still run at once, in the flush's hold.

use super::*;

/// Items walked per slice while keys are remembered (each a few cache
/// misses: the key, the old index, the set; 256 took 200-450 µs on a
/// loaded machine).
const WALK_ITEMS: usize = 64;
/// Segments given back per slice once no key is left to remember.
const GIVE_SEGMENTS: usize = 16;

/// A flush whose leftovers are still being given back.
pub(super) struct Flushing {
    /// The set-aside RAM segments, the walk at `off` in the first.
    segs: VecDeque<u32>,
    off: usize,
    /// The set-aside index while the walk remembers keys (it tells the
    /// items still linked from replaced ones); None once it stopped.
    index: Option<Index>,
    /// Linked RAM items not remembered (yet): counted `reclaimed` when the
    /// walk stops.
    unremembered: u64,
    /// Indexes set aside, freed once the segments are given back.
    old: Vec<Index>,
    /// The most keys remembered ([`crate::flushed::Flushed::remember`]).
    cap: usize,
}

impl Flushing {
    /// Bytes of the set-aside indexes (still charged to the memory limit
    /// until freed).
    pub(super) fn index_bytes(&self) -> usize {
        let walk = self.index.as_ref().map_or(0, Index::memory_bytes);
        walk + self.old.iter().map(Index::memory_bytes).sum::<usize>()
    }

    /// The walk stops: the keys not remembered count as reclaimed now.
    fn stop_walk(&mut self, stats: &mut ShardStats) {
        if let Some(i) = self.index.take() {
            self.old.push(i);
        }
        stats.reclaimed += std::mem::take(&mut self.unremembered);
    }
}

impl Shard {
    /// Applies a flush_all: the index and the RAM queues are set aside
    /// (see the module's doc) and the stores below RAM record the flush.
    pub fn flush(&mut self) {
        self.mark_hold(hold::HoldCause::Flush);
        if let Err(e) = self.below.flush() {
            tracing::error!(error = %e, "flush_all: the small-object store could not record it");
        }
        self.drop_ahead();
        self.sweep = None;
        let left = self.flushed.drain();
        self.stats.reclaimed += left.items;
        self.stats.expired_unfetched += left.unfetched;
        let ram_items = self.stats.curr_items - self.stats.flash_items;
        // Its tables get buckets at their first insert: allocating and
        // faulting in the fewest buckets of each (256 tables of 4 KiB a
        // shard at -m 1024) took about a millisecond of this hold.
        let fresh = Index::unallocated(self.index.precision());
        let index = std::mem::replace(&mut self.index, fresh);
        let f = match self.flushing.take() {
            Some(mut f) => {
                // A flush while the last one's leftovers are given back:
                // its keys are not remembered.
                f.stop_walk(&mut self.stats);
                f.old.push(index);
                self.stats.reclaimed += ram_items;
                f
            }
            None => Flushing {
                segs: VecDeque::new(),
                off: 0,
                index: Some(index),
                unremembered: ram_items,
                old: Vec::new(),
                cap: (self.shared.pool.limit() / 256 / 8 / self.shared.nshards.max(1)).max(64),
            },
        };
        self.flushing = Some(f);
        for q in 0..2 {
            let ids: Vec<u32> = self.queues[q].drain(..).collect();
            for &id in &ids {
                self.seg_mut(id).set_aside = true;
            }
            self.flushing.as_mut().expect("set above").segs.extend(ids);
        }
        self.stats.curr_items = 0;
        self.stats.flash_items = 0;
        self.stats.bytes = 0;
        self.account_index();
        if self.shared.evacuator.attached() {
            self.shared.evacuator.request(self.evacuator_bit);
        } else {
            self.finish_flush();
        }
    }

    /// Whether a flush's leftovers are still being given back.
    pub(crate) fn flushing(&self) -> bool {
        self.flushing.is_some()
    }

    /// One slice of giving back what a flush set aside; true when nothing
    /// is left.
    pub(crate) fn flush_slice(&mut self) -> bool {
        let Some(mut f) = self.flushing.take() else {
            return true;
        };
        self.mark_hold(hold::HoldCause::Flush);
        let mut walked = 0;
        let mut given = 0;
        let done = loop {
            if walked >= WALK_ITEMS || given >= GIVE_SEGMENTS {
                break false;
            }
            if (walked > 0 || given > 0) && self.lock_wanted() {
                break false;
            }
            if let Some(&id) = f.segs.front() {
                if f.index.is_some() && !self.remember_some(&mut f, id, &mut walked) {
                    continue;
                }
                f.segs.pop_front();
                f.off = 0;
                let buf = self.close_segment(id);
                self.shared.pool.give(buf);
                given += 1;
                continue;
            }
            f.stop_walk(&mut self.stats);
            for index in f.old.drain(..) {
                if self.shared.evacuator.attached() {
                    self.shared.pool.free_later(Box::new(index));
                }
            }
            break true;
        };
        if !done {
            self.flushing = Some(f);
        }
        self.account_index();
        done
    }

    /// Walks segment `id` from `f.off`, remembering its linked items' keys,
    /// until `walked` reaches the slice's bound (false) or the segment's
    /// end (true). The walk stops for good when the set is full.
    fn remember_some(&mut self, f: &mut Flushing, id: u32, walked: &mut usize) -> bool {
        let end = self.seg(id).write;
        let Some(index) = f.index.as_mut() else {
            return true;
        };
        let mut full = false;
        while *walked < WALK_ITEMS {
            let Some((loc, h)) = self.next_item(id, &mut f.off, end) else {
                break;
            };
            *walked += 1;
            if h.bits & item::DEAD != 0 {
                continue;
            }
            // Taken out of the set-aside index as it is remembered, so
            // that a lookup counts it once (`take_set_aside`).
            let hash = hash_key(self.key(loc));
            if !index.remove(hash, loc) {
                continue;
            }
            if !self
                .flushed
                .remember(hash, h.bits & item::FETCHED != 0, f.cap)
            {
                full = true;
                break;
            }
            f.unremembered = f.unremembered.saturating_sub(1);
        }
        if full {
            f.stop_walk(&mut self.stats);
            return true;
        }
        f.off >= end
    }

    /// A lookup missed: whether the key was one of a flush's items still
    /// in a set-aside segment the walk has not remembered yet (it then
    /// counts `get_flushed`, once: its entry in the set-aside index goes).
    pub(super) fn take_set_aside(&mut self, key: &[u8], hash: u64) -> bool {
        let Some(index) = self.flushing.as_mut().and_then(|f| f.index.as_mut()) else {
            return false;
        };
        // Only set-aside segments are read: a given-back one may hold
        // other data now (the walk has remembered its items, or stopped).
        let segs = &self.segs;
        let found = index.find(hash, |loc| {
            segs.get(loc.seg as usize)
                .and_then(Option::as_ref)
                .is_some_and(|s| s.set_aside && item::key_of(&s.data[loc.off as usize..]) == key)
        });
        let Some(loc) = found else {
            return false;
        };
        index.remove(hash, loc);
        let f = self.flushing.as_mut().expect("walking");
        f.unremembered = f.unremembered.saturating_sub(1);
        true
    }

    /// A set-aside segment for an allocation that found the pool empty.
    /// Its keys are not remembered, and the walk stops (the set-aside
    /// index then holds entries into a segment given back).
    pub(super) fn take_flushed_segment(&mut self) -> Option<Box<[u8]>> {
        let f = self.flushing.as_mut()?;
        let id = f.segs.pop_front()?;
        f.off = 0;
        f.stop_walk(&mut self.stats);
        Some(self.close_segment(id))
    }

    /// Gives back everything a flush set aside (before a snapshot, or
    /// without an evacuator to do it in slices).
    pub(crate) fn finish_flush(&mut self) {
        while !self.flush_slice() {}
    }
}
