//! The flash tier's space: the devices cut into fixed-size segment slots,
//! the one open write buffer that evicted items are appended to, the queue
//! of sealed buffers waiting for the flusher, and the FIFO of segments on
//! the device. Index entries of flash items point at `(slot + FLASH_SEG_BASE,
//! offset)`.
//!
//! ```text
//!  shard evicts ──append──► open buffer (RAM) ──seal──► queued ──flusher──► sealed (device)
//!                                                                               │ oldest first
//!                free slots ◄──────────── flusher reclaims: drop or reinsert ◄──┘
//! ```
//!
//! A slot's records stay readable from RAM until its write completes, so a
//! read never waits for the flusher. When no buffer or slot is free the
//! append is refused with [`Busy`]: the caller applies back-pressure rather
//! than dropping data the device has room for.
//!
//! This file holds the slots, the write buffers and appends; `start` opens
//! the tier over its devices; `budget` the write budget; `params` the
//! settings; `read` locates and fetches records; `flusher` writes and
//! reclaims, `recovery` rebuilds after a crash, `snapshot` drains and saves
//! for a graceful restart, `superblock` checks and stamps the devices.

use super::fetch::{Fetched, ReadReq};
use super::format::{self, DeviceContents, SegmentHeader, Superblock};
use super::journal::Journal;
use crate::device::aligned::{round_up, AlignedBuf, BLOCK};
use crate::device::block::{BlockDevice, DeviceError};
use crate::error::ConfigError;
use crate::index::Loc;
use crate::item::Header;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `Loc::seg` values from here up name flash slots; below are RAM segments.
pub const FLASH_SEG_BASE: u32 = 2048;
/// The most slots the index can address.
pub const MAX_SLOTS: usize = (1 << 16) - FLASH_SEG_BASE as usize;

#[inline]
pub fn is_flash(loc: Loc) -> bool {
    loc.seg >= FLASH_SEG_BASE
}

/// No write buffer or free slot right now; retry after the flusher's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// Why an item was not appended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// Wait for the flusher (back-pressure).
    Busy,
    /// Not admitted (size threshold, write budget, degraded device): evict it.
    Refused,
}

#[derive(Debug)]
enum SlotState {
    Free,
    Open,
    Queued(Arc<AlignedBuf>),
    Writing(Arc<AlignedBuf>),
    Sealed,
    Reclaiming,
    /// The device refused a write here; not used again.
    Failed,
}

#[derive(Debug)]
struct Slot {
    dev: usize,
    /// The device's class.
    class: DeviceClass,
    dev_off: u64,
    seq: u64,
    data_len: u32,
    /// Index entries pointing into the slot.
    items: u32,
    /// Latest exptime of its records (0 = some never expire).
    max_exptime: u32,
    /// It may hold a record with the copy bit, whose key may have another
    /// record in a segment numbered higher (`FlashTier::tombstone_horizon`).
    /// Set by such a write; set for every segment a restart or a crash
    /// recovery brings back (not known without reading them); cleared
    /// when the slot is opened anew.
    copies: bool,
    state: SlotState,
}

/// A checkpoint of an open buffer to write: its changed blocks, then its
/// header block (`FlashTier::checkpoint`).
struct Checkpoint {
    dev: usize,
    at: u64,
    head: AlignedBuf,
    data_at: u64,
    data: AlignedBuf,
}

struct Open {
    slot: u32,
    buf: AlignedBuf,
    /// Next free byte in `buf` (the header block comes first).
    write: usize,
    records: u32,
    max_exptime: u32,
    never_expires: bool,
    /// Block tails left empty because the next record did not fit in them,
    /// as (start, length): smaller records are put there (first fit), so
    /// that a record never crosses a block and little of a block is padding.
    gaps: Vec<(u32, u32)>,
    /// Records already on the device through a checkpoint (`checkpoint`),
    /// and the lowest offset changed since.
    checkpointed: u32,
    dirty_from: usize,
}

/// Gaps an open buffer remembers (the oldest is forgotten first).
const MAX_GAPS: usize = 32;

impl Open {
    /// Where a record of `size` bytes goes: a gap it fits in, else the end
    /// (after padding to the next block if it would cross one).
    fn place(&mut self, size: usize) -> usize {
        if size <= BLOCK {
            if let Some(i) = self.gaps.iter().position(|&(_, len)| len as usize >= size) {
                let (at, len) = self.gaps[i];
                let rest = len as usize - size;
                if rest >= format::RECORD_PREFIX + crate::item::HEADER + 8 {
                    self.gaps[i] = (at + size as u32, rest as u32);
                } else {
                    self.gaps.remove(i);
                }
                return at as usize;
            }
        }
        let at = format::place_record(self.write, size);
        let gap = at - self.write;
        if gap >= format::RECORD_PREFIX + crate::item::HEADER + 8 {
            if self.gaps.len() == MAX_GAPS {
                self.gaps.remove(0);
            }
            self.gaps.push((self.write as u32, gap as u32));
        }
        self.buf.as_mut_slice()[self.write..at].fill(0);
        self.write = at + size;
        at
    }
}

struct State {
    slots: Vec<Slot>,
    /// Free and sealed (oldest first) slots, by class.
    free: PerClass<VecDeque<u32>>,
    sealed: PerClass<VecDeque<u32>>,
    queued: VecDeque<u32>,
    /// Open buffers by stream: 0 new items with a long or no TTL, 1 new
    /// items expiring soon (both on the class new items land on),
    /// [`MOVE_STREAM`] items moved to [`MOVE_CLASS`].
    open: [Option<Open>; STREAMS],
    spare: Vec<AlignedBuf>,
    /// Buffer-and-slot pairs promised to evacuations in progress.
    reserved: usize,
    next_seq: u64,
    budget_tokens: f64,
    budget_at: Instant,
    consecutive_write_errors: u32,
}

impl State {
    /// The free lists from the slots' states (after recovery or a snapshot).
    fn rebuild_free(&mut self) {
        self.free = Default::default();
        for (i, s) in self.slots.iter().enumerate() {
            if matches!(s.state, SlotState::Free) {
                self.free[s.class].push_back(i as u32);
            }
        }
    }
}

/// Where a flash item's record is now.
#[derive(Debug, PartialEq, Eq)]
pub enum Where {
    /// Copied out of a write buffer (the record's item bytes, verified).
    Resident(Vec<u8>, u64),
    /// On a device: read the block(s) at `offset`; the record starts `skew` bytes in.
    Device {
        dev: usize,
        offset: u64,
        skew: usize,
        seq: u64,
    },
    /// The slot was reclaimed: the entry is stale.
    Gone,
}

/// The flash tier.
pub struct FlashTier {
    devices: Vec<Arc<dyn BlockDevice>>,
    journal: Arc<Journal>,
    /// Whether the devices held our format with this layout at start.
    kept: bool,
    /// The previous run did not keep the crash journal: nothing on the
    /// devices may be recovered after a crash until the floor covers it.
    prev_journal_off: bool,
    /// Each device's superblock as stamped at start.
    superblocks: Mutex<Vec<Superblock>>,
    /// A failed journal's record (and the previous run's).
    pub distrust: super::distrust::Distrust,
    /// The highest segment sequence number handed out (a tombstone's horizon).
    max_seq: AtomicU64,
    params: TierParams,
    state: Mutex<State>,
    work: Condvar,
    pub stats: TierStats,
    /// Which classes have slots; the class new items land on (fast when
    /// there is one).
    present: PerClass<bool>,
    new_class: DeviceClass,
    /// The non-hierarchical caching scheduler (both classes, `nhc` on).
    nhc: Option<classes::NhcCtl>,
    degraded: AtomicBool,
    stop: AtomicBool,
    /// The engine's time (unix seconds), set by its maintenance tick; the
    /// flusher frees expired segments by it (0 = not yet known).
    clock: AtomicU32,
    wakers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// Reclaims keep this many slots free ahead of need.
const FREE_SLOTS_LOW: usize = 2;
/// After this many write errors in a row the tier stops admitting.
const DEGRADE_AFTER_ERRORS: u32 = 3;

impl FlashTier {
    pub fn params(&self) -> &TierParams {
        &self.params
    }

    /// The crash journal.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// The highest segment sequence number handed out so far: a tombstone
    /// with this horizon covers every record appended until now.
    pub fn max_seq(&self) -> u64 {
        self.max_seq.load(Ordering::Acquire)
    }

    pub fn devices(&self) -> &[Arc<dyn BlockDevice>] {
        &self.devices
    }

    pub fn segment_size(&self) -> usize {
        self.params.segment_size
    }

    /// RAM the write buffers take.
    pub fn buffer_bytes(&self) -> usize {
        (self.params.write_buffers.max(2) + usize::from(self.two_classes()))
            * self.params.segment_size
    }

    pub fn slot_count(&self) -> usize {
        self.state.lock().slots.len()
    }

    /// Bytes of device space for segments.
    pub fn capacity(&self) -> u64 {
        self.slot_count() as u64 * self.params.segment_size as u64
    }

    /// The tier stopped admitting after repeated device errors, or because
    /// the crash journal cannot be written.
    pub fn degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed) || self.journal.failed()
    }

    /// Calls `f` whenever the flusher frees space (to retry parked requests).
    pub fn on_progress(&self, f: Box<dyn Fn() + Send + Sync>) {
        self.wakers.lock().push(f);
    }

    /// Wakes whoever waits for the flusher or the journal.
    pub fn wake_all(&self) {
        for w in self.wakers.lock().iter() {
            w();
        }
    }

    /// Whether an item with this value length may go to flash at all.
    pub fn admits_size(&self, vlen: usize) -> bool {
        vlen >= self.params.min_value_size && !self.degraded()
    }

    /// Makes sure `bytes` more of records (at most a segment) can be
    /// appended to every TTL stream without waiting: where an open buffer
    /// lacks the room, a fresh buffer and slot are reserved for the moment
    /// it fills (it is not sealed early, so segments go out full). Returns
    /// the reservations to pass to [`append`](Self::append) and to give
    /// back with [`unreserve`](Self::unreserve).
    pub fn reserve(&self, bytes: usize) -> Result<usize, Busy> {
        let mut st = self.state.lock();
        let classes = if self.params.low_ttl > 0 { 2 } else { 1 };
        let need = (0..classes)
            .filter(|&c| {
                st.open[c]
                    .as_ref()
                    .is_none_or(|o| self.params.segment_size - o.write < bytes)
            })
            .count();
        let avail = st
            .spare
            .len()
            .min(st.free[self.new_class].len())
            .saturating_sub(st.reserved);
        if avail < need {
            self.stats.busy.fetch_add(1, Ordering::Relaxed);
            return Err(Busy);
        }
        st.reserved += need;
        Ok(need)
    }

    /// Gives back reservations [`append`](Self::append) did not use.
    pub fn unreserve(&self, n: usize) {
        if n > 0 {
            let mut st = self.state.lock();
            st.reserved = st.reserved.saturating_sub(n);
        }
    }

    /// The TTL class of an item: 1 when it expires within `low_ttl`.
    fn class_of(&self, exptime: u32, now: u32) -> usize {
        usize::from(
            self.params.low_ttl > 0
                && exptime != 0
                && exptime <= now.saturating_add(self.params.low_ttl),
        )
    }

    /// Seals the open buffer (if any) and opens a fresh one; false when no
    /// buffer or slot is free.
    fn open_new(&self, st: &mut State, stream: usize, reserved: bool) -> bool {
        let class = self.stream_class(stream);
        // Reservations are for the streams of new items: they hold spare
        // buffers and that class's free slots; another class may only take
        // the spare buffers nobody reserved.
        let (spare, held) = if class == self.new_class {
            (st.spare.len(), st.reserved)
        } else {
            (st.spare.len().saturating_sub(st.reserved), 0)
        };
        let avail = spare.min(st.free[class].len());
        if avail == 0 || (!reserved && avail <= held) {
            return false;
        }
        if reserved {
            st.reserved -= 1;
        }
        self.seal(st, stream);
        let slot = st.free[class].pop_front().expect("checked");
        let buf = st.spare.pop().expect("checked");
        let seq = st.next_seq;
        st.next_seq += 1;
        self.max_seq.store(seq, Ordering::Release);
        let s = &mut st.slots[slot as usize];
        s.seq = seq;
        s.items = 0;
        s.data_len = 0;
        s.copies = false;
        s.state = SlotState::Open;
        st.open[stream] = Some(Open {
            slot,
            buf,
            write: BLOCK,
            records: 0,
            max_exptime: 0,
            never_expires: false,
            gaps: Vec::new(),
            checkpointed: 0,
            dirty_from: BLOCK,
        });
        true
    }

    /// The segment header of an open buffer as it stands.
    fn header_of(&self, st: &State, o: &Open) -> SegmentHeader {
        let slot = &st.slots[o.slot as usize];
        SegmentHeader {
            seq: slot.seq,
            slot: o.slot,
            data_len: (o.write - BLOCK) as u32,
            records: o.records,
            max_exptime: if o.never_expires { 0 } else { o.max_exptime },
            journal_counter: self.journal.counter(),
            class: slot.class,
        }
    }

    /// An idle open buffer less than half full: what reached it since its
    /// last checkpoint goes to the device, with a header for what it holds
    /// so far, and the buffer stays open for more (sealing it would leave
    /// most of its slot empty: a slow stream of evictions, sealed every
    /// 200 ms, wrote segments a quarter full and reclaim then dropped live
    /// items while most of the device was free). None when nothing new
    /// reached it. The data blocks are written before the header, so a
    /// crash between them leaves the previous header, whose records are all
    /// on the device; a torn write loses records, never misreads one (each
    /// is checked against its segment's sequence number and CRC).
    fn checkpoint(&self, st: &mut State, stream: usize) -> Option<Checkpoint> {
        let header = {
            let o = st.open[stream].as_ref()?;
            if o.records == o.checkpointed {
                return None;
            }
            self.header_of(st, o)
        };
        let (dev, dev_off) = {
            let o = st.open[stream].as_ref().expect("checked");
            let s = &st.slots[o.slot as usize];
            (s.dev, s.dev_off)
        };
        let o = st.open[stream].as_mut().expect("checked");
        let end = round_up(o.write, BLOCK);
        o.buf.as_mut_slice()[o.write..end].fill(0);
        let from = o.dirty_from / BLOCK * BLOCK;
        let mut data = AlignedBuf::new(end - from);
        data.as_mut_slice()
            .copy_from_slice(&o.buf.as_slice()[from..end]);
        let mut head = AlignedBuf::new(BLOCK);
        header.write(head.as_mut_slice());
        o.checkpointed = o.records;
        o.dirty_from = o.write;
        Some(Checkpoint {
            dev,
            at: dev_off,
            head,
            data_at: dev_off + from as u64,
            data,
        })
    }

    /// Hands the open buffer to the flusher.
    fn seal(&self, st: &mut State, class: usize) {
        let Some(mut o) = st.open[class].take() else {
            return;
        };
        if o.records == 0 {
            // Nothing in it: give the slot and the buffer back unwritten.
            st.slots[o.slot as usize].state = SlotState::Free;
            let c = st.slots[o.slot as usize].class;
            st.free[c].push_front(o.slot);
            st.spare.push(o.buf);
            return;
        }
        let end = round_up(o.write, BLOCK);
        o.buf.as_mut_slice()[o.write..end].fill(0);
        self.header_of(st, &o).write(o.buf.as_mut_slice());
        let slot = &mut st.slots[o.slot as usize];
        slot.data_len = (o.write - BLOCK) as u32;
        slot.max_exptime = if o.never_expires { 0 } else { o.max_exptime };
        slot.state = SlotState::Queued(Arc::new(o.buf));
        st.queued.push_back(o.slot);
        self.work.notify_one();
    }

    /// Seals a partly filled open buffer so that it reaches the device (idle flush).
    pub fn seal_open(&self) {
        let mut st = self.state.lock();
        for stream in 0..STREAMS {
            if st.open[stream].as_ref().is_some_and(|o| o.records > 0) {
                self.seal(&mut st, stream);
            }
        }
    }

    /// Appends an item (RAM layout) as a record; returns its new location.
    /// `admitted` counts it as new data (false for reinsertion). `dest`
    /// says why, which decides the class it goes to.
    pub fn append(
        &self,
        item: &[u8],
        admitted: bool,
        now: u32,
        reserved: &mut usize,
        dest: Dest,
    ) -> Result<Loc, AppendError> {
        let h = Header::read(item);
        let ttl_class = self.class_of(h.exptime, now);
        let size = format::record_size(h.klen as usize, h.vlen as usize);
        if self.degraded() || size + BLOCK > self.params.segment_size {
            return Err(AppendError::Refused);
        }
        let class = self.stream_for(ttl_class, dest, h.exptime, now);
        let copy = Self::copy_bit(dest, h.bits);
        let mut st = self.state.lock();
        if admitted && self.params.write_budget > 0 && !self.take_budget(&mut st, size) {
            self.stats.admission_refused.fetch_add(1, Ordering::Relaxed);
            return Err(AppendError::Refused);
        }
        let fits = |o: &Open| {
            (size <= BLOCK && o.gaps.iter().any(|g| g.1 as usize >= size))
                || format::place_record(o.write, size) + size <= self.params.segment_size
        };
        // A copy to the capacity class must land in a segment newer than its
        // fast record's: an older open buffer is sealed first if it is at
        // least a quarter full (or empty), else the copy waits for it to fill.
        let stale = match dest {
            Dest::Replica { from_seq } => st.open[class]
                .as_ref()
                .filter(|o| st.slots[o.slot as usize].seq <= from_seq)
                .map(|o| o.records == 0 || o.write >= self.params.segment_size / 4),
            _ => None,
        };
        if stale == Some(false) {
            return Err(AppendError::Refused);
        }
        if stale == Some(true) || !st.open[class].as_ref().is_some_and(fits) {
            let use_reservation = *reserved > 0 && st.reserved > 0;
            if !self.open_new(&mut st, class, use_reservation) {
                self.stats.busy.fetch_add(1, Ordering::Relaxed);
                return Err(AppendError::Busy);
            }
            if use_reservation {
                *reserved -= 1;
            }
        }
        let st = &mut *st;
        let o = st.open[class].as_mut().expect("open");
        let seq = st.slots[o.slot as usize].seq;
        if let Dest::Promote { from_seq } | Dest::Replica { from_seq } = dest {
            // The copy left on the capacity class must be older than the
            // new record, so that whatever covers the new one after a
            // crash (its tombstones, the floor of its reclaim) covers it.
            if seq <= from_seq {
                if matches!(dest, Dest::Promote { .. }) {
                    self.stats
                        .promotions_refused
                        .fetch_add(1, Ordering::Relaxed);
                }
                return Err(AppendError::Refused);
            }
        }
        let at = o.place(size);
        o.dirty_from = o.dirty_from.min(at);
        let slot = o.slot;
        format::write_record(&mut o.buf.as_mut_slice()[at..at + size], item, seq, copy);
        o.records += 1;
        if h.exptime == 0 {
            o.never_expires = true;
        }
        o.max_exptime = o.max_exptime.max(h.exptime);
        st.slots[slot as usize].items += 1;
        st.slots[slot as usize].copies |= copy;
        if admitted {
            self.stats
                .bytes_admitted
                .fetch_add(size as u64, Ordering::Relaxed);
        } else {
            self.stats
                .objects_reinserted
                .fetch_add(1, Ordering::Relaxed);
        }
        self.stats.objects_written.fetch_add(1, Ordering::Relaxed);
        Ok(Loc {
            seg: FLASH_SEG_BASE + slot,
            off: at as u32,
        })
    }

    /// An index entry now points into `loc`'s slot (an item's copy became its entry).
    pub fn acquire(&self, loc: Loc) {
        let mut st = self.state.lock();
        if let Some(s) = st.slots.get_mut((loc.seg - FLASH_SEG_BASE) as usize) {
            s.items += 1;
        }
    }

    /// An index entry pointing into `loc`'s slot went away.
    pub fn release(&self, loc: Loc) {
        let mut st = self.state.lock();
        if let Some(s) = st.slots.get_mut((loc.seg - FLASH_SEG_BASE) as usize) {
            s.items = s.items.saturating_sub(1);
        }
    }

    /// Tells the flusher what time it is (for freeing expired segments).
    pub fn set_clock(&self, now: u32) {
        self.clock.store(now, Ordering::Relaxed);
    }

    /// Stops the flusher.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        self.work.notify_all();
    }

    /// A snapshot for `stats`.
    pub fn usage(&self) -> Usage {
        let st = self.state.lock();
        let mut u = Usage {
            slots: st.slots.len() as u64,
            free: st.free.iter().map(VecDeque::len).sum::<usize>() as u64,
            sealed: st.sealed.iter().map(VecDeque::len).sum::<usize>() as u64,
            queued: st.queued.len() as u64,
            writing: 0,
            items: 0,
            failed: 0,
        };
        for s in &st.slots {
            u.items += u64::from(s.items);
            match s.state {
                SlotState::Failed => u.failed += 1,
                SlotState::Writing(_) => u.writing += 1,
                _ => {}
            }
        }
        u
    }
}

/// Counts of slots by state.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub slots: u64,
    pub free: u64,
    pub sealed: u64,
    pub queued: u64,
    /// Taken by the flusher, their write not finished (items in them are
    /// still served from memory, and dropped if the write fails).
    pub writing: u64,
    pub items: u64,
    pub failed: u64,
}

mod budget;
mod classes;
mod figures;
mod flusher;
mod params;
mod read;
mod recovery;
mod snapshot;
mod start;
mod superblock;

use super::class::{PerClass, CLASSES};
pub use params::{DeviceClass, Objective, Promote, TierParams};

pub use super::stats::{DevStats, NhcStats, Recovery, TierStats};
pub use classes::Dest;
use classes::{MOVE_CLASS, STREAMS};
pub use flusher::RecordOwner;
use superblock::{check_and_stamp, write_superblock};

#[cfg(test)]
mod tests;
