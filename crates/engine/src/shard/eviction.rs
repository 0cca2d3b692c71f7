//! Room for new items: bump allocation at a queue's head segment, and
//! reclaiming a queue's tail segment a whole segment at a time, where the
//! policy decides for each live item whether it is reinserted, demoted to
//! flash or evicted.

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

    /// Room for an insert when no segment is free. With an evacuator
    /// thread, an insert never evacuates a whole segment in its lock hold:
    /// the evacuation is begun ahead if none was (the pool had room when
    /// the head filled), then [`head_over_budget`](Self::head_over_budget)
    /// lends a segment over the budget while the evacuator finishes it.
    /// When the memory is already over by a segment per shard (the
    /// evacuator starved of CPU, on an overloaded machine), the insert runs
    /// one slice and answers `Busy` (its request runs again a moment later)
    /// instead of finishing the evacuation: up to a segment of items, 72 ms
    /// of one set's hold on the CPU in an overloaded run, which every
    /// request for the shard waited behind (issue 31). Little left (at most
    /// [`LATE_AHEAD_BYTES`]): finished here, as without an evacuator.
    fn reclaim_for_insert(&mut self) -> Result<Box<[u8]>, InsertError> {
        if !self.shared.evacuator.attached() {
            return self.reclaim();
        }
        self.mark_hold(super::hold::HoldCause::Evacuation);
        if self.ahead.is_none() && self.ready.is_none() && !self.begin_ahead() {
            // The victim is a queue's open head or a jumbo segment.
            return self.reclaim();
        }
        if let Some(buf) = self.head_over_budget()? {
            return Ok(buf);
        }
        if self
            .ahead
            .as_ref()
            .is_some_and(|a| a.end - a.off > LATE_AHEAD_BYTES)
        {
            self.stats.evacuation_waits += 1;
            self.ahead_slice(AHEAD_SLICE_ITEMS)?;
            if self.ahead.is_some() {
                self.shared.evacuator.request(self.evacuator_bit);
                return Err(InsertError::Busy);
            }
            // That slice finished it: its segment is ready, or went to the
            // pool (for the spare it took, or to a shard that asked).
            return match self.ready.take().or_else(|| self.shared.pool.take()) {
                Some(b) => Ok(b),
                None => Err(InsertError::Busy),
            };
        }
        self.reclaim()
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
        // (Counted once per evacuation: a set told Busy asks again.)
        if self
            .ahead
            .as_mut()
            .is_some_and(|a| !std::mem::replace(&mut a.waited, true))
        {
            self.stats.evacuations_waited += 1;
        }
        while self.ahead.is_some() {
            self.ahead_slice(usize::MAX)?;
        }
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
    fn evacuate_items(
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
        let buf = self.shared.pool.take_spare()?;
        *used_spare = true;
        self.open_segment(q, buf);
        self.bump(q, size)
    }
}

/// Items an evacuation done ahead moves, evicts or demotes per slice (one
/// slice per insert, under the lock the insert holds anyway): tens of
/// microseconds of 100-byte items.
const AHEAD_SLICE_ITEMS: usize = 64;

/// An evacuation slice also ends once it has run this long (items cost
/// from well under a microsecond to ~10 when the policy's ghost maps are
/// cold, so a count alone does not bound the hold), or as soon as a
/// request waits for the lock, and checks both every few items.
const AHEAD_SLICE_TIME: std::time::Duration = std::time::Duration::from_micros(32);
const DEADLINE_EVERY: usize = 4;

/// With an evacuator thread, sets run slices themselves only once their
/// queue's head has less than 1/HELP_AT of a segment left.
const HELP_AT: usize = 32;

/// What an evacuation ahead may have left when a set needs its segment and
/// the set still finishes it in its own lock hold: 16 KiB, about 130 small
/// items (tens of microseconds). An eighth of a segment (1,000 small items)
/// held a set's lock for up to 435 us on the CPU (issue 31); with more
/// left, the set takes a segment over the budget and the evacuator
/// finishes the evacuation in slices.
const LATE_AHEAD_BYTES: usize = 16 << 10;

/// An evacuation begun before a segment is needed (see
/// [`Shard::evacuate_ahead`]): its victim stays the oldest of its queue,
/// where lookups, sweeps and snapshots see the items not yet moved.
#[derive(Debug)]
pub(super) struct Ahead {
    victim: u32,
    q: Queue,
    off: usize,
    end: usize,
    used_spare: bool,
    /// A set needed the segment before the slices were done.
    waited: bool,
}

impl Shard {
    /// After an insert into queue `q`: when its head segment is nearly full
    /// and the next segment will have to be reclaimed from this shard, one
    /// slice of the evacuation that frees it, so that no request waits for
    /// a whole segment's evacuation under the lock. The freed segment waits
    /// in `ready` for the next allocation; [`reclaim`](Self::reclaim)
    /// finishes an evacuation begun here.
    pub(super) fn evacuate_ahead(&mut self, q: Queue) {
        if self.ready.is_some() {
            return;
        }
        if self.ahead.is_none() {
            let Some(&head) = self.queues[q as usize].back() else {
                return;
            };
            // Begun only when the next segment must come from this shard:
            // one begun while the pool has room evicts ahead of need (2Q
            // then lost hot keys in tests/hot_keys.rs). One begun late is
            // not finished by a set (see `head_over_budget`).
            let seg_size = self.shared.pool.seg_size();
            if self.seg(head).room() * 8 > seg_size || self.shared.pool.has_room() {
                return;
            }
            if !self.begin_ahead() {
                return;
            }
        }
        let ev = &self.shared.evacuator;
        if ev.attached() {
            ev.request(self.evacuator_bit);
            // The evacuator runs it; sets help only once it has fallen
            // behind, with the head nearly full.
            let head_room = self.queues[q as usize]
                .back()
                .map_or(0, |&h| self.seg(h).room());
            if head_room * HELP_AT > self.shared.pool.seg_size() {
                return;
            }
        }
        // Busy: the next insert tries again; a reclaim waits as it would.
        if self.ahead_slice(AHEAD_SLICE_ITEMS).is_ok() {
            self.stats.evacuation_slices_sets += 1;
        }
    }

    /// One slice of the evacuation ahead, for the evacuator thread.
    pub(crate) fn evacuator_slice(&mut self) -> crate::evacuator::Slice {
        use crate::evacuator::Slice;
        if self.flushing() {
            let done = self.flush_slice();
            return if done && self.ahead.is_none() {
                Slice::Done
            } else {
                Slice::More
            };
        }
        if self.ahead.is_none() {
            return Slice::Done;
        }
        match self.ahead_slice(AHEAD_SLICE_ITEMS) {
            Err(_) => Slice::Busy,
            Ok(()) => {
                self.stats.evacuation_slices_evacuator += 1;
                if self.ahead.is_some() {
                    Slice::More
                } else {
                    Slice::Done
                }
            }
        }
    }

    /// A set needs a segment while an evacuation ahead has more than
    /// [`LATE_AHEAD_BYTES`] left (it began late: the pool had room when
    /// the head segment was nearly full, and other shards took it since).
    /// Rather than finishing it in this lock hold, the set gets a segment
    /// over the memory budget, and the evacuation goes on a slice per
    /// insert; the segment it frees then goes back to the pool (which is
    /// over its budget by that one segment until then). None: the
    /// evacuation is to be finished (little is left).
    fn head_over_budget(&mut self) -> Result<Option<Box<[u8]>>, InsertError> {
        let Some(a) = &self.ahead else {
            return Ok(None);
        };
        // Over by a segment per shard already (an evacuator starved of
        // CPU): the set finishes it, as when little is left.
        let pool = &self.shared.pool;
        if a.end - a.off <= LATE_AHEAD_BYTES
            || pool.allocated() >= pool.max_segments() + self.shared.nshards
        {
            return Ok(None);
        }
        self.stats.evacuations_late += 1;
        if self.shared.evacuator.attached() {
            self.shared.evacuator.request(self.evacuator_bit);
        } else {
            self.ahead_slice(AHEAD_SLICE_ITEMS)?;
        }
        Ok(Some(match self.ready.take() {
            Some(b) => b,
            None => self.shared.pool.take_over_budget(),
        }))
    }

    /// Picks the victim as [`reclaim`](Self::reclaim) would and starts an
    /// evacuation ahead of it; false when there is none to start (a queue's
    /// open head, a jumbo segment, or flash write buffers short).
    fn begin_ahead(&mut self) -> bool {
        let q = self.victim_queue();
        let queue = &self.queues[q as usize];
        let (Some(&victim), Some(&head)) = (queue.front(), queue.back()) else {
            return false;
        };
        if victim == head || self.is_jumbo(victim) {
            return false;
        }
        let end = self.seg(victim).write;
        self.ahead = Some(Ahead {
            victim,
            q,
            off: 0,
            end,
            used_spare: false,
            waited: false,
        });
        true
    }

    /// Up to `max` items of the evacuation ahead, for at most
    /// [`AHEAD_SLICE_TIME`]; at its end the victim's
    /// segment leaves its queue and goes back to the pool for the spare (if
    /// the evacuation took one), goes to the pool (see [`gives_back`](Self::gives_back)),
    /// or waits in `ready`.
    /// `Err(Busy)`: the flash tier has no write buffer room for the
    /// slice's demotions now (nothing was done).
    pub(super) fn ahead_slice(&mut self, max: usize) -> Result<(), InsertError> {
        let Some(mut a) = self.ahead.take() else {
            return Ok(());
        };
        self.mark_hold(super::hold::HoldCause::Evacuation);
        // Write buffer room for the slice's demotions, held for the slice
        // only: a reservation held between requests could keep other
        // shards' evacuations waiting on a shard that gets no requests.
        if let Err(e) = self.reserve_demotions(a.victim, a.end - a.off) {
            self.ahead = Some(a);
            return Err(e);
        }
        let began = std::time::Instant::now();
        let done = self.evacuate_items(
            a.victim,
            a.q,
            false,
            (&mut a.off, a.end),
            (max, Some(began + AHEAD_SLICE_TIME)),
            &mut a.used_spare,
        );
        self.count_hold(began);
        self.below.log.unreserve();
        if !done {
            self.ahead = Some(a);
            return Ok(());
        }
        self.evacuation_done();
        let queue = &mut self.queues[a.q as usize];
        debug_assert_eq!(queue.front(), Some(&a.victim));
        queue.retain(|&id| id != a.victim);
        let buf = self.close_segment(a.victim);
        // Back to the pool in place of the spare it took, or to a shard
        // that asked; else ready for this shard's next head.
        if a.used_spare || self.gives_back() {
            self.shared.pool.give(buf);
        } else {
            self.ready = Some(buf);
        }
        Ok(())
    }

    /// The queue whose oldest segment goes next, as the policy names it
    /// from the queues' bytes and this shard's share (the other queue when
    /// that one is empty).
    fn victim_queue(&self) -> Queue {
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
    fn reserve_demotions(&mut self, victim: u32, bytes: usize) -> Result<(), InsertError> {
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
    fn count_hold(&mut self, began: std::time::Instant) {
        let took = began.elapsed().as_micros() as u64;
        self.stats.evacuate_us += took;
        self.stats.evacuate_max_us = self.stats.evacuate_max_us.max(took);
    }

    /// A segment's evacuation is complete: counted, and the policy's ghost
    /// list sized to the keys the shard holds in RAM (S3-FIFO's rule, not a
    /// fixed few thousand).
    fn evacuation_done(&mut self) {
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
    fn gives_back(&self) -> bool {
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
