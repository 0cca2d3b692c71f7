//! Reading records back: where a record is (a write buffer or the device),
//! starting its fetch, and the blocking read loop for recovery and the
//! engine's blocking get.

use super::*;

impl FlashTier {
    /// Where the record at `loc` is. Records still in a write buffer are
    /// copied out (and verified) at once.
    pub fn locate(&self, loc: Loc) -> Where {
        self.find(loc).0
    }

    /// [`locate`](Self::locate), with the device of the record's slot and
    /// whether its buffer is still open (for the buffer-read counters).
    fn find(&self, loc: Loc) -> (Where, usize, bool) {
        let st = self.state.lock();
        let i = (loc.seg - FLASH_SEG_BASE) as usize;
        let Some(slot) = st.slots.get(i) else {
            return (Where::Gone, 0, false);
        };
        let w = Self::find_in(&st, slot, i, loc);
        (w, slot.dev, matches!(slot.state, SlotState::Open))
    }

    fn find_in(st: &State, slot: &Slot, i: usize, loc: Loc) -> Where {
        let off = loc.off as usize;
        let from_buf =
            |buf: &[u8]| match format::check_record(&buf[off..], slot.seq, buf.len() - off) {
                Ok(item) => Where::Resident(item.to_vec(), slot.seq),
                Err(_) => Where::Gone,
            };
        match &slot.state {
            SlotState::Open => {
                let o = st
                    .open
                    .iter()
                    .flatten()
                    .find(|o| o.slot as usize == i)
                    .expect("open slot has a buffer");
                if off >= o.write {
                    return Where::Gone;
                }
                from_buf(&o.buf.as_slice()[..o.write])
            }
            SlotState::Queued(b) | SlotState::Writing(b) => from_buf(b.as_slice()),
            SlotState::Sealed | SlotState::Reclaiming => {
                let abs = slot.dev_off + off as u64;
                let block = abs / BLOCK as u64 * BLOCK as u64;
                Where::Device {
                    dev: slot.dev,
                    offset: block,
                    skew: (abs - block) as usize,
                    seq: slot.seq,
                }
            }
            SlotState::Free | SlotState::Failed => Where::Gone,
        }
    }

    /// Starts fetching the record at `loc` into `fetched`: copied at once
    /// from a write buffer, or a device read pushed to `reads`. False when
    /// the entry points nowhere any more (its segment was reclaimed).
    pub fn fetch(&self, loc: Loc, fetched: &mut Fetched, reads: &mut Vec<ReadReq>) -> bool {
        let (w, dev, open) = self.find(loc);
        match w {
            Where::Resident(item, seq) => {
                self.count_buffer_read(dev, open);
                fetched.insert_resident(loc, item, seq)
            }
            Where::Device {
                dev,
                offset,
                skew,
                seq,
            } => {
                reads.push(fetched.add_read(loc, dev, offset, skew, seq));
                self.stats.reads_in_flight.fetch_add(1, Ordering::Relaxed);
                self.stats.devs[dev]
                    .in_flight
                    .fetch_add(1, Ordering::Relaxed);
            }
            Where::Gone => return false,
        }
        true
    }

    /// Starts fetching the record at `copy` (an item's capacity copy, in a
    /// segment numbered `copy_seq`) for the entry `loc`, whose own segment
    /// is numbered `seq`: the record must verify as `copy`'s, and is then
    /// reported as `loc`'s. False when the copy's segment was reused.
    pub fn fetch_copy(
        &self,
        loc: Loc,
        seq: u64,
        copy: Loc,
        copy_seq: u64,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) -> bool {
        let (w, dev, open) = self.find(copy);
        match w {
            Where::Resident(item, s) if s == copy_seq => {
                self.count_buffer_read(dev, open);
                fetched.insert_resident(loc, item, seq)
            }
            Where::Device {
                dev,
                offset,
                skew,
                seq: s,
            } if s == copy_seq => {
                reads.push(fetched.add_read(loc, dev, offset, skew, copy_seq));
                fetched.mark_copy(loc, seq);
                self.stats.reads_in_flight.fetch_add(1, Ordering::Relaxed);
                self.stats.devs[dev]
                    .in_flight
                    .fetch_add(1, Ordering::Relaxed);
            }
            _ => return false,
        }
        true
    }

    /// A record fetched from a write buffer of device `dev` (`open`: not
    /// sealed yet).
    fn count_buffer_read(&self, dev: usize, open: bool) {
        self.stats.buffer_reads.fetch_add(1, Ordering::Relaxed);
        self.stats.devs[dev]
            .buffer_reads
            .fetch_add(1, Ordering::Relaxed);
        if open {
            self.stats.buffer_reads_open.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Performs `reads` (and any longer read a record turns out to need)
    /// synchronously on the calling thread, completing them in `fetched`.
    /// For crash recovery and tests; requests use the asynchronous reader.
    pub fn read_blocking(&self, fetched: &mut Fetched, reads: &mut Vec<ReadReq>) {
        while let Some(r) = reads.pop() {
            let mut buf = AlignedBuf::new(r.len);
            let res = self.devices[r.dev]
                .read_at(buf.as_mut_slice(), r.offset)
                .map(|n| (buf, n));
            if let Some(more) =
                fetched.complete(r.slot, res, 0, self.params.segment_size, &self.stats)
            {
                reads.push(more);
            }
        }
    }

    /// The whether-to-tombstone test for a change or eviction of a key whose
    /// entry points at `loc`: the sequence number a tombstone must cover
    /// (the record's, or every record so far when the record may be a copy
    /// whose twin is numbered higher), None when none is needed (a fresh
    /// record below the floors of every class).
    pub fn tombstone_horizon(&self, loc: Loc) -> Option<u64> {
        // One look at the slot: its number and whether it may hold copies.
        let (seq, copies) = self.live_slot(loc, |s| (s.seq, s.copies))?;
        if !self.below_floors(seq) {
            Some(seq)
        } else if copies {
            Some(self.max_seq())
        } else {
            None
        }
    }

    /// The sequence number of the segment `loc` points into, while it holds
    /// data (a fetched record is only good if the segment was not reused).
    pub fn seq_of(&self, loc: Loc) -> Option<u64> {
        self.live_slot(loc, |s| s.seq)
    }

    /// `f` of the slot `loc` points into, while it holds data.
    fn live_slot<T>(&self, loc: Loc, f: impl FnOnce(&Slot) -> T) -> Option<T> {
        live(&self.state.lock(), loc, f)
    }

    /// [`seq_of`](Self::seq_of) for many entries under one hold of the
    /// tier's lock (ranking an index eviction's candidates). Drop it
    /// before calling anything else of the tier.
    pub fn seqs(&self) -> Seqs<'_> {
        Seqs(self.state.lock())
    }
}

fn live<T>(st: &State, loc: Loc, f: impl FnOnce(&Slot) -> T) -> Option<T> {
    let slot = st.slots.get((loc.seg - FLASH_SEG_BASE) as usize)?;
    match slot.state {
        SlotState::Free | SlotState::Failed => None,
        _ => Some(f(slot)),
    }
}

/// The slots' sequence numbers, read under one hold of the tier's lock
/// ([`FlashTier::seqs`]).
pub struct Seqs<'a>(parking_lot::MutexGuard<'a, State>);

impl Seqs<'_> {
    /// [`FlashTier::seq_of`].
    pub fn of(&self, loc: Loc) -> Option<u64> {
        live(&self.0, loc, |s| s.seq)
    }
}
