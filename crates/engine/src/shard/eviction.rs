//! Room for new items: bump allocation at a queue's head segment, and
//! reclaiming a queue's tail segment a whole segment at a time, where the
//! policy decides for each live item whether it is reinserted, demoted to
//! flash or evicted.

use super::ahead::DEADLINE_EVERY;
use super::*;
use crate::stores::log::Room;

impl Shard {
    /// Room for `size` bytes at the head of queue `q`.
    pub(super) fn alloc(&mut self, q: Queue, size: usize) -> Result<Loc, InsertError> {
        if let Some(loc) = self.bump(q, size) {
            self.evacuate_ahead(q);
            return Ok(loc);
        }
        if size > self.shared.pool.seg_size() {
            return self.alloc_jumbo(q, size);
        }
        let buf = match self.ready.take() {
            Some(b) => b,
            None => match self.shared.pool.take() {
                Some(b) => b,
                None => match self.take_flushed_segment() {
                    Some(b) => b,
                    None => {
                        self.ask_for_share();
                        self.reclaim_for_insert()?
                    }
                },
            },
        };
        self.open_segment(q, buf);
        self.bump(q, size).ok_or(InsertError::TooLarge)
    }

    pub(super) fn bump(&mut self, q: Queue, size: usize) -> Option<Loc> {
        let id = *self.queues[q as usize].back()?;
        let seg = self.seg_mut(id);
        if seg.room() < size {
            return None;
        }
        let off = seg.write;
        seg.write += size;
        Some(Loc {
            seg: id,
            off: off as u32,
        })
    }

    pub(super) fn open_segment(&mut self, q: Queue, buf: Box<[u8]>) {
        let id = self.new_segment(Segment::new(buf, q));
        self.queues[q as usize].push_back(id);
    }

    fn new_segment(&mut self, seg: Segment) -> u32 {
        self.stats.segments += 1;
        match self.free_ids.pop() {
            Some(id) => {
                self.segs[id as usize] = Some(seg);
                id
            }
            None => {
                self.segs.push(Some(seg));
                (self.segs.len() - 1) as u32
            }
        }
    }

    /// Room for an item larger than a segment (`-I` above the segment
    /// size): a jumbo segment of exactly its size, full from the start, so
    /// nothing else is ever bumped into it (offsets past a segment could not
    /// be indexed). It is queued just behind the head of `q`, which stays
    /// open for other items. The memory comes from the pool, else from this
    /// shard's oldest segments; when the shard has too few, `NoMemory`
    /// ([`Engine::store`](crate::Engine::store) then has the other shards
    /// give some back and tries once more).
    fn alloc_jumbo(&mut self, q: Queue, size: usize) -> Result<Loc, InsertError> {
        debug_assert!(size.is_multiple_of(item::ALIGN));
        for _ in 0..self.shared.pool.units(size) + MAX_EVICT_PASSES {
            if let Some(buf) = self.shared.pool.take_jumbo(size) {
                let mut seg = Segment::new(buf, q);
                seg.write = size;
                let id = self.new_segment(seg);
                self.queue_behind_head(q, id);
                return Ok(Loc { seg: id, off: 0 });
            }
            if !self.give_back_segment(0)? {
                break;
            }
        }
        Err(InsertError::NoMemory)
    }

    /// Frees this shard's oldest segment (its items evicted, demoted or
    /// reinserted as for any reclaim) and lets its memory go to the pool,
    /// if the shard holds more than `keep` segments. False when it gave
    /// none. A shard left with none takes a spare from the pool's reserve,
    /// and refuses sets once that is gone: for another shard's sake it
    /// keeps at least one.
    pub(crate) fn give_back_segment(&mut self, keep: usize) -> Result<bool, InsertError> {
        if self.queues.iter().map(|q| q.len()).sum::<usize>() <= keep {
            return Ok(false);
        }
        let buf = self.reclaim()?;
        self.shared.pool.release(buf);
        Ok(true)
    }

    /// One slice of giving a segment back to the pool, for the maintenance
    /// thread: the segment an evacuation freed ahead (`ready`) goes at
    /// once; else the oldest segment's evacuation is begun or continued
    /// ahead, at most `max_items` of its items in this lock hold; with no
    /// more than `keep` segments queued, nothing. `Some`: whether a
    /// segment went back (false: nothing left to give); `None`: none yet,
    /// call again (with the lock released
    /// between, so requests run between the slices).
    pub(crate) fn give_back_slice(
        &mut self,
        keep: usize,
        max_items: usize,
    ) -> Result<Option<bool>, InsertError> {
        if let Some(b) = self.ready.take() {
            self.shared.pool.release(b);
            return Ok(Some(true));
        }
        let before = self.held_segments();
        if self.ahead.is_none() {
            if self.queues.iter().map(|q| q.len()).sum::<usize>() <= keep {
                // Down to the queues' heads.
                return Ok(Some(false));
            }
            if !self.begin_ahead() {
                // The victim is a queue's open head or a jumbo segment:
                // given back whole (a jumbo segment is one item).
                return self.give_back_segment(keep).map(Some);
            }
        }
        self.ahead_slice(max_items)?;
        if self.ahead.is_some() {
            return Ok(None);
        }
        // Done: its segment went to the pool, or waits in `ready`, or
        // went back for the spare the evacuation took (then none went
        // back yet, call again).
        if let Some(b) = self.ready.take() {
            self.shared.pool.release(b);
        }
        Ok((self.held_segments() < before).then_some(true))
    }

    /// Puts segment `id` in queue `q` just behind its head (the segment
    /// items are bumped into), or as the head of an empty queue.
    pub(super) fn queue_behind_head(&mut self, q: Queue, id: u32) {
        let queue = &mut self.queues[q as usize];
        let at = queue.len().saturating_sub(1);
        queue.insert(at, id);
        self.seg_mut(id).queue = q;
    }

    /// Whether segment `id` holds one item larger than a segment.
    pub(super) fn is_jumbo(&self, id: u32) -> bool {
        self.shared.pool.is_jumbo(&self.seg(id).data)
    }

    /// A jumbo segment at the tail of queue `q`: the policy decides for its
    /// item as for any other; kept means the segment itself moves to the
    /// queue the policy names (no copy). False: its item is to be evicted.
    fn keep_jumbo(&mut self, id: u32, q: Queue, force: bool) -> bool {
        let loc = Loc { seg: id, off: 0 };
        let h = self.header(loc);
        if force || h.bits & item::DEAD != 0 || h.expired(self.clock_now) {
            return false;
        }
        let hash = hash_key(self.key(loc));
        if !self.index.contains(hash, loc) {
            return false;
        }
        if h.bits & item::FLASH_COPY != 0 {
            self.below.log.score_promotion(&h);
        }
        match self.policy.on_tail(q, hash, h.bits & item::FREQ_MASK) {
            (TailAction::Evict, _) => false,
            (TailAction::Reinsert(to), freq) => {
                self.update_bits(loc, freq, item::FREQ_MASK);
                self.queue_behind_head(to, id);
                self.stats.reinserted += 1;
                true
            }
        }
    }

    pub(super) fn close_segment(&mut self, id: u32) -> Box<[u8]> {
        let seg = self.segs[id as usize].take().expect("live segment");
        self.free_ids.push(id);
        self.stats.segments -= 1;
        seg.data
    }

    /// Frees one segment's worth of space by evacuating the oldest segment
    /// of the queue the policy names; returns the freed buffer.
    pub(super) fn reclaim(&mut self) -> Result<Box<[u8]>, InsertError> {
        self.mark_hold(super::hold::HoldCause::Evacuation);
        if let Some(buf) = self.head_over_budget()? {
            return Ok(buf);
        }
        // An evacuation begun ahead is finished first: its segment is the
        // oldest of its queue, and its items are half moved.
        self.finish_ahead()?;
        if let Some(b) = self.ready.take() {
            return Ok(b);
        }
        let mut gave = false;
        for pass in 0..MAX_EVICT_PASSES {
            let q = self.victim_queue();
            let Some(&victim) = self.queues[q as usize].front() else {
                // Nothing of its own to evict: its segments went back to the
                // pool while the index grew (or to a flush) and the other
                // shards hold the rest. A spare from the reserve becomes a
                // segment rather than a set being refused.
                return self.shared.pool.take_spare().ok_or(InsertError::NoMemory);
            };
            if self.is_jumbo(victim) {
                // One item, never demoted (larger than a flash record may
                // be): kept by moving its segment, or evicted and its memory
                // taken back as a segment.
                self.queues[q as usize].pop_front();
                let force = pass + 1 == MAX_EVICT_PASSES;
                if !self.keep_jumbo(victim, q, force) {
                    self.evacuate(victim, q, true);
                    let buf = self.close_segment(victim);
                    self.shared.pool.release(buf);
                    if let Some(b) = self.shared.pool.take() {
                        return Ok(b);
                    }
                }
                continue;
            }
            self.reserve_demotions(victim, self.seg(victim).write)?;
            self.queues[q as usize].pop_front();
            let force = pass + 1 == MAX_EVICT_PASSES;
            let began = std::time::Instant::now();
            let used_spare = self.evacuate(victim, q, force);
            self.count_hold(began);
            self.evacuation_done();
            self.stats.evacuations_waited += 1;
            self.below.log.unreserve();
            let buf = self.close_segment(victim);
            if used_spare {
                // It took a spare for its head: the victim's buffer goes
                // back in its place, and the next pass frees one.
                self.shared.pool.give(buf);
                continue;
            }
            // Memory goes back to the pool from a shard above its share,
            // one segment per reclaim: when the index grew past the budget,
            // or for a shard below its share that had to reclaim its own.
            // A shard never gives below its share, so another shard's index
            // growth cannot drain it (and its hot items) in one lock hold.
            let queued = self.queues[0].len() + self.queues[1].len();
            if !gave && pass + 1 < MAX_EVICT_PASSES && queued > 0 && self.gives_back() {
                gave = true;
                self.shared.pool.give(buf);
                continue;
            }
            return Ok(buf);
        }
        Err(InsertError::NoMemory)
    }

    /// Evicts or reinserts every live item of a segment that has left its
    /// queue. Returns whether the spare segment was used.
    pub(super) fn evacuate(&mut self, victim: u32, q: Queue, force: bool) -> bool {
        let mut used_spare = false;
        let end = self.seg(victim).write;
        let mut off = 0usize;
        self.evacuate_items(
            victim,
            q,
            force,
            (&mut off, end),
            (usize::MAX, None),
            &mut used_spare,
        );
        used_spare
    }

    /// [`evacuate`](Self::evacuate) of the items of `victim` from `*at.0`
    /// up to `at.1`, at most `budget.0` of them (live or not) and, when
    /// `budget.1` gives a deadline, none begun after it (looked at every
    /// [`DEADLINE_EVERY`] items); `*at.0` is left past the last one done.
    /// Returns whether it reached `at.1`.
    pub(super) fn evacuate_items(
        &mut self,
        victim: u32,
        q: Queue,
        force: bool,
        at: (&mut usize, usize),
        budget: (usize, Option<std::time::Instant>),
        used_spare: &mut bool,
    ) -> bool {
        let (off, end) = at;
        let (max, until) = budget;
        for n in 0..max {
            if n % DEADLINE_EVERY == DEADLINE_EVERY - 1
                && until.is_some_and(|t| self.lock_wanted() || std::time::Instant::now() >= t)
            {
                return *off >= end;
            }
            let Some((loc, h)) = self.next_item(victim, off, end) else {
                return true;
            };
            let size = h.size();
            if h.bits & item::DEAD != 0 {
                continue;
            }
            let hash = hash_key(self.key(loc));
            if !self.index.contains(hash, loc) {
                continue;
            }
            if h.bits & item::FLASH_COPY != 0 && !force {
                self.below.log.score_promotion(&h);
            }
            let (action, freq) = if force {
                (TailAction::Evict, 0)
            } else {
                self.policy.on_tail(q, hash, h.bits & item::FREQ_MASK)
            };
            let target = match action {
                TailAction::Evict => None,
                TailAction::Reinsert(to) => {
                    let t = self.evac_alloc(to, size, used_spare);
                    if t.is_none() {
                        self.stats.reinserts_refused += 1;
                    }
                    t
                }
            };
            if target.is_none() && self.demote(hash, loc, &h) {
                self.seg_mut(victim).live_items -= 1;
                continue;
            }
            match target {
                Some(new) => {
                    let bytes = self.bytes_at(loc)[..size].to_vec();
                    self.write_at(new, &bytes);
                    let bits = (h.bits & !item::FREQ_MASK) | freq;
                    self.field_mut(new, item::OFF_BITS, 1)[0] = bits;
                    self.index.relocate(hash, loc, new);
                    self.seg_mut(new.seg).gain(h.exptime);
                    self.stats.reinserted += 1;
                }
                None => {
                    if h.expired(self.clock_now) {
                        self.stats.reclaimed += 1;
                    } else {
                        self.stats.evictions += 1;
                        self.report_eviction(loc, &h);
                        if h.bits & item::FETCHED == 0 {
                            self.stats.evicted_unfetched += 1;
                        }
                        if h.bits & item::FLASH_COPY != 0 {
                            // Its record on flash is no longer tracked.
                            self.tombstone(hash);
                        }
                    }
                    self.index.remove(hash, loc);
                    self.stats.curr_items -= 1;
                    self.stats.bytes -= size as u64;
                }
            }
            self.seg_mut(victim).live_items -= 1;
        }
        *off >= end
    }

    /// Tells the eviction sink, if one is installed and wants it, that the
    /// RAM item at `loc` is being evicted.
    #[inline]
    pub(super) fn report_eviction(&self, loc: Loc, h: &item::Header) {
        let Some(sink) = self.shared.evictions.get() else {
            return;
        };
        if sink.wants() {
            let now = self.clock_now;
            sink.evicted(&crate::evictions::Eviction {
                key: self.key(loc),
                fetched: h.bits & item::FETCHED != 0,
                ttl: if h.exptime == 0 {
                    -1
                } else {
                    i64::from(h.exptime) - i64::from(now)
                },
                idle: u32::from((now as u16).wrapping_sub(h.atime)),
                value_len: h.vlen,
            });
        }
    }

    /// Room at a queue head during evacuation: the head, else a new head
    /// from the pool's reserve, once per evacuation (whose victim's buffer
    /// goes back when it ends). None: the item is evicted.
    pub(super) fn evac_alloc(
        &mut self,
        q: Queue,
        size: usize,
        used_spare: &mut bool,
    ) -> Option<Loc> {
        if let Some(loc) = self.bump(q, size) {
            return Some(loc);
        }
        if *used_spare {
            return None;
        }
        let pool = &self.shared.pool;
        let buf = match pool.take_spare() {
            Some(b) => b,
            // The reserve is spent (more evacuations under way than it has
            // spares) or the memory is over its budget (segments lent to
            // sets while a starved evacuator lags): the spare is taken over
            // the budget rather than the item evicted, which lost hot keys
            // (issue 31). The victim's buffer pays it back when the
            // evacuation ends (`SegmentPool::give` frees it while over).
            None if pool.allocated() < pool.max_segments() + 2 * self.shared.nshards => {
                self.stats.spares_over_budget += 1;
                pool.take_over_budget()
            }
            None => return None,
        };
        *used_spare = true;
        self.open_segment(q, buf);
        self.bump(q, size)
    }
}

impl Shard {
    /// The queue whose oldest segment goes next, as the policy names it
    /// from the queues' bytes and this shard's share (the other queue when
    /// that one is empty).
    pub(super) fn victim_queue(&self) -> Queue {
        let seg_size = self.shared.pool.seg_size() as u64;
        let pb = self.queues[0].len() as u64 * seg_size;
        let mb = self.queues[1].len() as u64 * seg_size;
        let q = (self.policy).victim_queue(pb, mb, self.fair_share() as u64 * seg_size);
        if self.queues[q as usize].is_empty() {
            other(q)
        } else {
            q
        }
    }

    /// Flash write-buffer room for demoting the items in `bytes` bytes of
    /// segment `victim` ([`LogPart::reserve_demotions`]), held until the
    /// caller unreserves it. `Err(Busy)` when the flash tier has none now
    /// (for at most `TierParams::max_write_wait`: then the evacuation goes
    /// on without it, counted in `flash_waits_expired`).
    pub(super) fn reserve_demotions(
        &mut self,
        victim: u32,
        bytes: usize,
    ) -> Result<(), InsertError> {
        let live = self.seg(victim).live_items as usize;
        match self.below.log.reserve_demotions(live, bytes) {
            Ok(Room::Reserved) => Ok(()),
            Ok(Room::WaitExpired) => {
                self.stats.flash_waits_expired += 1;
                Ok(())
            }
            Err(_) => Err(InsertError::Busy),
        }
    }

    /// A lock hold of evacuation work that began at `began`.
    pub(super) fn count_hold(&mut self, began: std::time::Instant) {
        let took = began.elapsed().as_micros() as u64;
        self.stats.evacuate_us += took;
        self.stats.evacuate_max_us = self.stats.evacuate_max_us.max(took);
    }

    /// A segment's evacuation is complete: counted, and the policy's ghost
    /// list sized to the keys the shard holds in RAM (S3-FIFO's rule, not a
    /// fixed few thousand).
    pub(super) fn evacuation_done(&mut self) {
        self.stats.evacuations += 1;
        let ram_items = self.stats.curr_items.saturating_sub(self.stats.flash_items);
        self.policy.set_capacity_items(ram_items as usize);
    }

    /// The segment an evacuation ahead is emptying, if any: sweeps must
    /// not free it under the evacuation.
    pub(super) fn evacuating(&self) -> Option<u32> {
        self.ahead.as_ref().map(|a| a.victim)
    }

    /// Drops the evacuation ahead (flush_all empties the queues) and the
    /// segment it freed.
    pub(super) fn drop_ahead(&mut self) {
        self.ahead = None;
        if let Some(b) = self.ready.take() {
            self.shared.pool.give(b);
        }
    }

    /// This shard's fair share of the segments the budget allows now.
    pub(crate) fn fair_share(&self) -> usize {
        self.shared.pool.max_segments() / self.shared.nshards.max(1)
    }

    /// Segments this shard holds: in its queues and ready.
    pub(crate) fn held_segments(&self) -> usize {
        self.stats.segments as usize + usize::from(self.ready.is_some())
    }

    /// Whether the segment just freed by a reclaim (not yet counted in
    /// [`held_segments`](Self::held_segments)) goes to the pool: only from
    /// a shard holding more than its fair share, when memory is over the
    /// budget or a shard below its share asked for one.
    pub(super) fn gives_back(&self) -> bool {
        if self.held_segments() < self.fair_share() {
            return false;
        }
        self.shared.pool.over_budget()
            || self.shared.pool.reserve_short()
            || self
                .shared
                .segments_wanted
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| w.checked_sub(1))
                .is_ok()
    }

    /// A shard that must reclaim its own segment although it holds less
    /// than its share asks the others for one (they give it to the pool at
    /// their next reclaim, where this shard's next allocation finds it).
    fn ask_for_share(&self) {
        let n = self.shared.nshards;
        if self.held_segments() + 1 < self.fair_share() {
            let _ = self.shared.segments_wanted.fetch_update(
                Ordering::Relaxed,
                Ordering::Relaxed,
                |w| (w < n).then_some(w + 1),
            );
        }
    }
}

pub(super) fn other(q: Queue) -> Queue {
    match q {
        Queue::Main => Queue::Probation,
        Queue::Probation => Queue::Main,
    }
}
