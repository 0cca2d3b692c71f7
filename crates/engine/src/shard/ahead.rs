//! Evacuations begun ahead of need: a RAM segment's items moved, evicted
//! or demoted a slice per lock hold (by the evacuator thread, or by sets
//! once it falls behind), and what an insert does when it needs a segment
//! before the evacuation is done (a segment lent over the budget, or a
//! slice and `Busy`), so that no request evacuates a whole segment in its
//! hold ([`Shard::reclaim`] in `eviction.rs` does the rest).

use super::*;

/// Items an evacuation done ahead moves, evicts or demotes per slice (one
/// slice per insert, under the lock the insert holds anyway): tens of
/// microseconds of 100-byte items.
const AHEAD_SLICE_ITEMS: usize = 64;

/// An evacuation slice also ends once it has run this long (items cost
/// from well under a microsecond to ~10 when the policy's ghost maps are
/// cold, so a count alone does not bound the hold), or as soon as a
/// request waits for the lock, and checks both every few items.
const AHEAD_SLICE_TIME: std::time::Duration = std::time::Duration::from_micros(32);
pub(super) const DEADLINE_EVERY: usize = 4;

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
    pub(super) victim: u32,
    pub(super) q: Queue,
    pub(super) off: usize,
    pub(super) end: usize,
    pub(super) used_spare: bool,
    /// A set needed the segment before the slices were done.
    pub(super) waited: bool,
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
    pub(super) fn head_over_budget(&mut self) -> Result<Option<Box<[u8]>>, InsertError> {
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
    pub(super) fn begin_ahead(&mut self) -> bool {
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

    /// Finishes the evacuation begun ahead, if any, in this hold (a set
    /// waited for it: counted once per evacuation, as a set told `Busy`
    /// asks again).
    pub(super) fn finish_ahead(&mut self) -> Result<(), InsertError> {
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
        Ok(())
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
    /// [`LATE_AHEAD_BYTES`]): finished here; if its segment then went to the
    /// pool (for the spare it took) and none is free, the next evacuation is
    /// begun and the insert answers `Busy`, rather than evacuating a whole
    /// segment in its hold as [`reclaim`](Self::reclaim) does without an
    /// evacuator.
    pub(super) fn reclaim_for_insert(&mut self) -> Result<Box<[u8]>, InsertError> {
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
        // Little left: finished in this hold, as `reclaim` would.
        self.finish_ahead()?;
        if let Some(b) = self.ready.take().or_else(|| self.shared.pool.take()) {
            return Ok(b);
        }
        // Its segment went to the pool (in place of the spare it took, or
        // to a shard that asked) and none is free: the next evacuation is
        // begun and the insert waits for its slices, where `reclaim` went
        // on to evacuate a whole segment in this hold (20-200 ms of a
        // set's hold at 50,000 new keys/s with a flash file on an
        // overloaded machine, over a millisecond of it on the CPU; issue 31).
        if self.begin_ahead() {
            self.stats.evacuation_waits += 1;
            self.shared.evacuator.request(self.evacuator_bit);
            return Err(InsertError::Busy);
        }
        self.reclaim()
    }
}
