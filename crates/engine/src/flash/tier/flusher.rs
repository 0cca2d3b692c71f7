//! The flusher thread: writes sealed buffers whole, reclaims the oldest
//! segments ahead of need (reinserting hit records), frees wholly expired
//! segments, seals an idle buffer, and records a failed journal.

use super::*;

/// Whoever owns the index entries of records (the engine): told about each
/// live record of a segment that is being reclaimed or could not be written.
pub trait RecordOwner: Send + Sync {
    /// Drops the entry for the record at `loc`, or reinserts it (through
    /// [`FlashTier::append`]) when it was hit and `reinsert` allows, or
    /// moves it to the capacity class. False, with nothing changed, when
    /// the append found no write buffer and `may_wait` asked to be told.
    fn reclaim(&self, loc: Loc, item: &[u8], reinsert: bool, may_wait: bool) -> bool;
}

/// How long a reclaim waits for a write buffer to move or reinsert one
/// record before dropping it.
const MOVE_WAIT: Duration = Duration::from_millis(500);

enum Job {
    Write(u32, Arc<AlignedBuf>),
    Checkpoint(Checkpoint),
    /// A slot to reclaim, and whether all its records have expired.
    Reclaim(u32, bool),
    /// The journal failed and its record is not written yet: try again.
    RecordFailure,
}

impl FlashTier {
    /// The flusher: writes sealed buffers, keeps free slots ahead of need by
    /// reclaiming the oldest segments, and seals an idle open buffer after
    /// `idle` so that its items reach the device. Runs until [`stop`](Self::stop).
    pub fn run_flusher(&self, owner: &dyn RecordOwner, idle: Duration) {
        let mut scratch = AlignedBuf::new(self.params.segment_size);
        let mut last_append = (0u64, Instant::now());
        let mut last_expiry_scan = Instant::now();
        let mut last_record_try = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            let job = {
                let mut st = self.state.lock();
                loop {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some((slot, buf)) = Self::take_queued(&mut st) {
                        break Job::Write(slot, buf);
                    }
                    // Each class keeps its own slots free, reclaiming its
                    // own oldest segment.
                    let low = CLASSES.into_iter().find(|&c| {
                        st.free[c].len() < FREE_SLOTS_LOW.max(1) + 1 && !st.sealed[c].is_empty()
                    });
                    if let Some(slot) = low.and_then(|c| st.sealed[c].pop_front()) {
                        st.slots[slot as usize].state = SlotState::Reclaiming;
                        break Job::Reclaim(slot, false);
                    }
                    self.nhc_tick();
                    // Idle flush: an open buffer that stopped growing goes
                    // out, sealed when at least half full or when write
                    // buffers run short (an open buffer holds one), else
                    // written as a checkpoint and kept open
                    // (`FlashTier::checkpoint`).
                    let written = self.stats.objects_written.load(Ordering::Relaxed);
                    if written != last_append.0 {
                        last_append = (written, Instant::now());
                    } else if last_append.1.elapsed() >= idle {
                        let half = self.params.segment_size / 2;
                        let short = st.spare.len() <= st.reserved + 1;
                        let seal = |o: &Open| o.records > 0 && (short || o.write >= half);
                        let due = (0..STREAMS).find(|&c| {
                            st.open[c]
                                .as_ref()
                                .is_some_and(|o| seal(o) || o.records > o.checkpointed)
                        });
                        if let Some(class) = due {
                            if st.open[class].as_ref().is_some_and(seal) {
                                self.seal(&mut st, class);
                                continue;
                            }
                            if let Some(c) = self.checkpoint(&mut st, class) {
                                break Job::Checkpoint(c);
                            }
                        }
                    }
                    // Expiry frees whole segments: once a segment's latest
                    // exptime has passed, reclaim it ahead of its turn.
                    if last_expiry_scan.elapsed() >= Duration::from_secs(1) {
                        last_expiry_scan = Instant::now();
                        let now = self.clock.load(Ordering::Relaxed);
                        let expired = |i: &u32| {
                            let m = st.slots[*i as usize].max_exptime;
                            m != 0 && m <= now
                        };
                        let found = CLASSES.into_iter().find_map(|c| {
                            st.sealed[c].iter().position(expired).map(|pos| (c, pos))
                        });
                        if let Some((c, pos)) = found {
                            let slot = st.sealed[c].remove(pos).expect("found");
                            st.slots[slot as usize].state = SlotState::Reclaiming;
                            self.stats.segments_expired.fetch_add(1, Ordering::Relaxed);
                            break Job::Reclaim(slot, true);
                        }
                    }
                    // A failed journal is recorded (retried) even while the
                    // tier is idle: a device that comes back must get it.
                    if self.journal.failed()
                        && !self.distrust.recorded_everywhere()
                        && last_record_try.elapsed() >= Duration::from_millis(500)
                    {
                        last_record_try = Instant::now();
                        break Job::RecordFailure;
                    }
                    self.work.wait_for(&mut st, Duration::from_millis(20));
                }
            };
            match job {
                Job::Checkpoint(c) => self.write_checkpoint(c),
                Job::RecordFailure => {
                    self.record_journal_failure(true);
                }
                Job::Write(slot, buf) => self.write_queued(slot, buf, owner),
                Job::Reclaim(slot, expired) => {
                    self.reclaim_segment(slot, expired, &mut scratch, owner)
                }
            }
            self.wake_all();
        }
    }

    /// Writes a checkpoint: the changed blocks, then the header. A failure
    /// is logged and counted; the buffer's seal writes it all again.
    fn write_checkpoint(&self, c: Checkpoint) {
        let r = self.devices[c.dev]
            .write_at(c.data.as_slice(), c.data_at)
            .and_then(|()| self.devices[c.dev].write_at(c.head.as_slice(), c.at));
        match r {
            Ok(()) => {
                let n = (c.data.as_slice().len() + BLOCK) as u64;
                self.stats.devs[c.dev]
                    .bytes_written
                    .fetch_add(n, Ordering::Relaxed);
                self.stats.bytes_written.fetch_add(n, Ordering::Relaxed);
                self.stats.checkpoints.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(device = self.devices[c.dev].name(), error = %e,
                    "writing an idle flash buffer's checkpoint failed; its seal writes it again");
            }
        }
    }

    /// The oldest sealed buffer waiting to be written, marked as being
    /// written.
    fn take_queued(st: &mut State) -> Option<(u32, Arc<AlignedBuf>)> {
        let slot = st.queued.pop_front()?;
        let s = &mut st.slots[slot as usize];
        let SlotState::Queued(buf) = &s.state else {
            unreachable!("queued slot {slot} in state {:?}", s.state)
        };
        let buf = buf.clone();
        s.state = SlotState::Writing(buf.clone());
        Some((slot, buf))
    }

    fn write_queued(&self, slot: u32, buf: Arc<AlignedBuf>, owner: &dyn RecordOwner) {
        if self.journal.failed() {
            self.record_journal_failure(false);
        }
        self.write_segment(slot, buf, owner)
    }

    /// Gives a live record of a segment being reclaimed to its owner. A
    /// move (or reinsert) that finds no write buffer free waits for one:
    /// the flusher writes a queued buffer itself (nobody else would while
    /// it reclaims), or, with none queued, lets the shards' evacuation
    /// slices give back their reservations, for [`MOVE_WAIT`] per reclaimed
    /// segment (`deadline`, set at the first wait). Past it, or when the
    /// class the record would go to has no free slot (only this thread's
    /// reclaims free one), the record is dropped, counted as an eviction. Before, it was dropped at
    /// once and uncounted: a fast class reclaimed while the shards'
    /// demotions held the spare buffers lost keys the capacity class had
    /// room for.
    fn reclaim_record(
        &self,
        loc: Loc,
        item: &[u8],
        owner: &dyn RecordOwner,
        deadline: &mut Option<Instant>,
    ) {
        let reinsert = self.params.reinsert_hits;
        while !owner.reclaim(loc, item, reinsert, true) {
            self.stats.reclaim_waits.fetch_add(1, Ordering::Relaxed);
            let until = *deadline.get_or_insert_with(|| Instant::now() + MOVE_WAIT);
            let mut st = self.state.lock();
            if let Some((slot, buf)) = Self::take_queued(&mut st) {
                drop(st);
                self.write_queued(slot, buf, owner);
                self.wake_all();
                continue;
            }
            // Moves and reinserts go to the capacity class when there are
            // two (the fast class keeps only hit records expiring within
            // a minute: few), else to the one class. The reclaimed class
            // itself is short of slots (that is why it reclaims): its own
            // want of one must not drop records bound for the other.
            let to = if self.two_classes() {
                MOVE_CLASS
            } else {
                self.new_class
            };
            let no_slot = st.free[to].is_empty();
            if no_slot || Instant::now() >= until || self.stop.load(Ordering::Relaxed) {
                drop(st);
                owner.reclaim(loc, item, reinsert, false);
                return;
            }
            self.work.wait_for(&mut st, Duration::from_millis(1));
        }
    }

    fn write_segment(&self, slot: u32, buf: Arc<AlignedBuf>, owner: &dyn RecordOwner) {
        let (dev, off, len) = {
            let st = self.state.lock();
            let s = &st.slots[slot as usize];
            (
                s.dev,
                s.dev_off,
                round_up(BLOCK + s.data_len as usize, BLOCK),
            )
        };
        let r = self.devices[dev].write_at(&buf.as_slice()[..len], off);
        let mut st = self.state.lock();
        match r {
            Ok(()) => {
                st.consecutive_write_errors = 0;
                st.slots[slot as usize].state = SlotState::Sealed;
                let c = st.slots[slot as usize].class;
                st.sealed[c].push_back(slot);
                self.stats.devs[dev]
                    .bytes_written
                    .fetch_add(len as u64, Ordering::Relaxed);
                self.stats
                    .bytes_written
                    .fetch_add(len as u64, Ordering::Relaxed);
                self.stats.segments_written.fetch_add(1, Ordering::Relaxed);
                drop(st);
            }
            Err(e) => {
                st.consecutive_write_errors += 1;
                st.slots[slot as usize].state = SlotState::Failed;
                let errors = st.consecutive_write_errors;
                drop(st);
                self.stats.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!(device = self.devices[dev].name(), slot, error = %e,
                    "flash write failed; the segment's items are dropped");
                if errors >= DEGRADE_AFTER_ERRORS && !self.degraded.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        "flash tier stops admitting after {errors} failed writes in a row; serving from RAM"
                    );
                }
                // The data never reached the device: drop every entry into it.
                let seq = self.state.lock().slots[slot as usize].seq;
                self.for_each_record(&buf.as_slice()[..len], seq, slot, |loc, item| {
                    owner.reclaim(loc, item, false, false);
                });
            }
        }
        let buf =
            Arc::try_unwrap(buf).unwrap_or_else(|_| AlignedBuf::new(self.params.segment_size));
        self.state.lock().spare.push(buf);
    }

    fn reclaim_segment(
        &self,
        slot: u32,
        expired: bool,
        scratch: &mut AlignedBuf,
        owner: &dyn RecordOwner,
    ) {
        let (dev, off, len, seq, class, copies) = {
            let st = self.state.lock();
            let s = &st.slots[slot as usize];
            (
                s.dev,
                s.dev_off,
                round_up(BLOCK + s.data_len as usize, BLOCK),
                s.seq,
                s.class,
                s.copies,
            )
        };
        let journal = !expired && self.params.crash_journal;
        if journal {
            // Its records stay on the device until the slot is rewritten:
            // after a crash they must not come back once their entries go.
            // Its class's floor covers them, and older records of the same
            // keys in that class (the other class's are the shard's
            // business: Shard::reclaim_flash).
            self.wait_floor(self.journal.raise_class_floor(class, seq));
        }
        let buf = &mut scratch.as_mut_slice()[..len];
        let mut whole = false;
        match self.devices[dev].read_at(buf, off) {
            Ok(n) if n == len => {
                let mut deadline = None;
                whole = self.for_each_record(buf, seq, slot, |loc, item| {
                    self.reclaim_record(loc, item, owner, &mut deadline)
                });
            }
            Ok(n) => {
                self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    slot,
                    n,
                    len,
                    "short read while reclaiming a flash segment; its entries become misses"
                );
            }
            Err(e) => {
                self.stats.read_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(slot, error = %e,
                    "read failed while reclaiming a flash segment; its entries become misses");
            }
        }
        if journal && !whole {
            // Entries of records that could not be read stay in the index
            // until they are found stale, and a change of their key then
            // asks for no tombstone: an older copy of one on the other
            // class must be covered too. A record with the copy bit among
            // them was not seen, so its drop asked for no tombstone
            // (Shard::reclaim_flash), and its twin may be in a segment
            // numbered higher than this one (a copy lands in whichever
            // segment its stream has open: the short-TTL one can be far
            // older): when the slot may hold copies, the floors cover
            // every record so far, as tombstone_horizon's tombstone would
            // (classes_crash_paths.rs: an overwritten value came back
            // after a crash from the twin when the floors rose to `seq`).
            let floor = if copies { self.max_seq().max(seq) } else { seq };
            self.wait_floor(self.journal.raise_floor(floor));
        }
        let mut st = self.state.lock();
        let s = &mut st.slots[slot as usize];
        s.state = SlotState::Free;
        s.items = 0;
        let c = s.class;
        st.free[c].push_back(slot);
        drop(st);
        self.stats
            .segments_reclaimed
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Calls `f` with every valid record of a segment image. Returns false
    /// when some of it did not verify (records were skipped).
    pub(super) fn for_each_record(
        &self,
        seg: &[u8],
        seq: u64,
        slot: u32,
        mut f: impl FnMut(Loc, &[u8]),
    ) -> bool {
        let Some(h) = SegmentHeader::read(seg) else {
            tracing::warn!(
                slot,
                "flash segment header does not verify; skipping its records"
            );
            return false;
        };
        let mut whole = true;
        let end = (BLOCK + h.data_len as usize).min(seg.len());
        let mut at = BLOCK;
        while at + format::RECORD_PREFIX <= end {
            // Zero where a record would start: padding to the next block.
            if seg[at + 4..at + 8] == [0; 4] {
                at = round_up(at + 1, BLOCK);
                continue;
            }
            match format::check_record(&seg[at..end], seq, end - at) {
                Ok(item) => {
                    let size =
                        format::record_size(item[20] as usize, Header::read(item).vlen as usize);
                    f(
                        Loc {
                            seg: FLASH_SEG_BASE + slot,
                            off: at as u32,
                        },
                        item,
                    );
                    at += size;
                }
                Err(_) => {
                    whole = false;
                    self.stats.verify_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        slot,
                        at,
                        "corrupt record in a flash segment; skipping the block"
                    );
                    at = round_up(at + 1, BLOCK);
                }
            }
        }
        whole
    }
}
