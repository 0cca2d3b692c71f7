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

use super::aligned::{round_up, AlignedBuf, BLOCK};
use super::device::{BlockDevice, DeviceError};
use super::fetch::{Fetched, ReadReq};
use super::format::{self, DeviceContents, SegmentHeader, Superblock};
use super::journal::Journal;
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

/// Settings of the flash tier.
#[derive(Debug, Clone)]
pub struct TierParams {
    /// Bytes per segment (a multiple of 4 KiB, at most 8 MiB).
    pub segment_size: usize,
    /// Write buffers (each `segment_size` of RAM): one open, the rest queued or in flight.
    pub write_buffers: usize,
    /// Items with fewer value bytes stay in RAM only (memcached's ext_item_size).
    pub min_value_size: usize,
    /// Reinsert items that were read while on flash when their segment is reclaimed.
    pub reinsert_hits: bool,
    /// When a get served from flash copies the item back to RAM.
    pub promote: Promote,
    /// Items that expire within this many seconds go to their own segments
    /// (memcached's ext_low_ttl), so that expiry frees whole segments; 0 =
    /// one stream for all. Needs at least 3 write buffers.
    pub low_ttl: u32,
    /// Device write budget in bytes per second (0 = none): admission drops past it.
    pub write_budget: u64,
    /// Overwrite devices that hold something other than our format.
    pub wipe: bool,
    /// Keep the crash journal (tombstones before changes, the floor before
    /// reclaims), so that a crash can be recovered from. Off: changes never
    /// wait for tombstones, and the devices are marked so that no later run
    /// recovers from them until its floor covers everything on them.
    pub crash_journal: bool,
}

impl Default for TierParams {
    fn default() -> Self {
        TierParams {
            segment_size: 4 << 20,
            write_buffers: 4,
            min_value_size: 0,
            reinsert_hits: true,
            promote: Promote::Second,
            low_ttl: 3600,
            write_budget: 0,
            wipe: false,
            crash_journal: true,
        }
    }
}

/// Which flash hits copy the item back to RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promote {
    /// Never: flash items stay on flash (fewest device writes).
    Never,
    /// On the second hit while on flash (the first sets the entry's hit
    /// bit), while promoted items keep getting hit in RAM before they leave
    /// it; when they mostly leave unhit (reuse too far apart for RAM to
    /// keep them, as under uniform reads of a set much larger than RAM),
    /// only one second hit in 64 is promoted, sparing the copy and the
    /// later flash write.
    Second,
    /// On every hit.
    Always,
}

impl Promote {
    pub fn parse(s: &str) -> Option<Promote> {
        match s {
            "never" => Some(Promote::Never),
            "second" | "hit" => Some(Promote::Second),
            "always" => Some(Promote::Always),
            _ => None,
        }
    }
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
    dev_off: u64,
    seq: u64,
    data_len: u32,
    /// Index entries pointing into the slot.
    items: u32,
    /// Latest exptime of its records (0 = some never expire).
    max_exptime: u32,
    state: SlotState,
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
    free: VecDeque<u32>,
    sealed: VecDeque<u32>,
    queued: VecDeque<u32>,
    /// Open buffers by TTL class: 0 long or no TTL, 1 expiring soon.
    open: [Option<Open>; 2],
    spare: Vec<AlignedBuf>,
    /// Buffer-and-slot pairs promised to evacuations in progress.
    reserved: usize,
    next_seq: u64,
    budget_tokens: f64,
    budget_at: Instant,
    consecutive_write_errors: u32,
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

/// Counters of the flash tier (monotonic unless noted).
#[derive(Default)]
pub struct TierStats {
    pub bytes_written: AtomicU64,
    pub bytes_admitted: AtomicU64,
    pub objects_written: AtomicU64,
    pub objects_reinserted: AtomicU64,
    pub objects_evicted: AtomicU64,
    pub objects_read: AtomicU64,
    pub bytes_read: AtomicU64,
    pub read_errors: AtomicU64,
    pub verify_failures: AtomicU64,
    pub tag_misses: AtomicU64,
    pub write_errors: AtomicU64,
    pub segments_written: AtomicU64,
    pub segments_reclaimed: AtomicU64,
    /// Segments reclaimed early because every record in them had expired.
    pub segments_expired: AtomicU64,
    pub busy: AtomicU64,
    pub admission_refused: AtomicU64,
    /// Reads submitted and not completed yet (a gauge).
    pub reads_in_flight: AtomicU64,
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
    degraded: AtomicBool,
    stop: AtomicBool,
    /// The engine's time (unix seconds), set by its maintenance tick; the
    /// flusher frees expired segments by it (0 = not yet known).
    clock: AtomicU32,
    wakers: Mutex<Vec<Box<dyn Fn() + Send + Sync>>>,
}

/// Segments crash recovery reads at once.
const RECOVERY_THREADS: usize = 4;
/// Reclaims keep this many slots free ahead of need.
const FREE_SLOTS_LOW: usize = 2;
/// After this many write errors in a row the tier stops admitting.
const DEGRADE_AFTER_ERRORS: u32 = 3;

impl FlashTier {
    /// Lays the slots out over the devices (round robin, so consecutive
    /// segments go to different devices) after checking what they hold.
    pub fn new(
        devices: Vec<Arc<dyn BlockDevice>>,
        params: TierParams,
    ) -> Result<FlashTier, DeviceError> {
        let seg = params.segment_size;
        if !seg.is_multiple_of(BLOCK) || !(64 << 10..=8 << 20).contains(&seg) {
            return Err(DeviceError(format!(
                "flash segment size {seg} must be a multiple of 4 KiB between 64 KiB and 8 MiB"
            )));
        }
        if devices.is_empty() {
            return Err(DeviceError("no flash device configured".into()));
        }
        let mut per_dev = Vec::new();
        let mut kept = true;
        let mut prev_journal_off = false;
        let mut superblocks = Vec::new();
        let mut starts = Vec::new();
        for (no, d) in devices.iter().enumerate() {
            let journal = format::journal_bytes_for(d.size());
            let (sb, layout_kept, was_off) =
                check_and_stamp(d.as_ref(), no as u32, seg, journal, &params)?;
            kept &= layout_kept;
            prev_journal_off |= was_off;
            superblocks.push(sb);
            let start = format::segments_start(journal);
            starts.push(start);
            let n = d.size().saturating_sub(start) / seg as u64;
            if n == 0 {
                return Err(DeviceError(format!(
                    "flash device {} ({} bytes) is too small for one {} KiB segment",
                    d.name(),
                    d.size(),
                    seg >> 10
                )));
            }
            per_dev.push(n);
        }
        let mut slots = Vec::new();
        let mut next = vec![0u64; devices.len()];
        loop {
            let before = slots.len();
            for (dev, n) in per_dev.iter().enumerate() {
                if next[dev] < *n {
                    slots.push(Slot {
                        dev,
                        dev_off: starts[dev] + next[dev] * seg as u64,
                        seq: 0,
                        data_len: 0,
                        items: 0,
                        max_exptime: 0,
                        state: SlotState::Free,
                    });
                    next[dev] += 1;
                }
            }
            if slots.len() == before || slots.len() >= MAX_SLOTS {
                break;
            }
        }
        slots.truncate(MAX_SLOTS);
        if params.low_ttl > 0 && params.write_buffers < 3 {
            return Err(DeviceError(
                "grouping by TTL (ext_low_ttl) needs at least 3 write buffers (ext_wbuf_count)"
                    .into(),
            ));
        }
        if slots.len() < FREE_SLOTS_LOW + params.write_buffers {
            return Err(DeviceError(format!(
                "flash devices hold {} segments of {} KiB; need at least {}",
                slots.len(),
                seg >> 10,
                FREE_SLOTS_LOW + params.write_buffers
            )));
        }
        let jbytes = format::journal_bytes_for(devices[0].size());
        if !kept {
            // A new, wiped or re-laid-out device: nothing on it may be
            // recovered, so no old journal block or segment header may remain.
            Self::clear_old_contents(&devices, &slots, jbytes)?;
        }
        let journal =
            Journal::open(devices[0].clone(), format::JOURNAL_START, jbytes).map_err(|e| {
                DeviceError(format!(
                    "flash device {}: cannot read the journal: {e}",
                    devices[0].name()
                ))
            })?;
        let free = (0..slots.len() as u32).collect();
        let spare = (0..params.write_buffers.max(2))
            .map(|_| AlignedBuf::new(seg))
            .collect();
        let first_seq = {
            let rec = journal.take_recovered().unwrap_or_default();
            let floor_and_horizon = rec.floor.max(rec.max_horizon);
            *journal.recovered_slot() = Some(rec);
            floor_and_horizon + 1
        };
        Ok(FlashTier {
            devices,
            journal: Arc::new(journal),
            kept,
            prev_journal_off,
            superblocks: Mutex::new(superblocks),
            distrust: Default::default(),
            max_seq: AtomicU64::new(first_seq - 1),
            state: Mutex::new(State {
                slots,
                free,
                sealed: VecDeque::new(),
                queued: VecDeque::new(),
                open: [None, None],
                spare,
                reserved: 0,
                next_seq: first_seq,
                budget_tokens: 0.0,
                budget_at: Instant::now(),
                consecutive_write_errors: 0,
            }),
            params,
            work: Condvar::new(),
            stats: TierStats::default(),
            degraded: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            clock: AtomicU32::new(0),
            wakers: Mutex::new(Vec::new()),
        })
    }

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

    /// Zeroes the journal and every slot's header block.
    fn clear_old_contents(
        devices: &[Arc<dyn BlockDevice>],
        slots: &[Slot],
        jbytes: u64,
    ) -> Result<(), DeviceError> {
        let err = |d: &dyn BlockDevice, e: std::io::Error| {
            DeviceError(format!("flash device {}: cannot write: {e}", d.name()))
        };
        Journal::wipe(devices[0].as_ref(), format::JOURNAL_START, jbytes)
            .map_err(|e| err(devices[0].as_ref(), e))?;
        let zero = AlignedBuf::new(BLOCK);
        for s in slots {
            let d = devices[s.dev].as_ref();
            d.write_at(zero.as_slice(), s.dev_off)
                .map_err(|e| err(d, e))?;
        }
        for d in devices {
            d.sync().map_err(|e| err(d.as_ref(), e))?;
        }
        Ok(())
    }

    pub fn devices(&self) -> &[Arc<dyn BlockDevice>] {
        &self.devices
    }

    pub fn segment_size(&self) -> usize {
        self.params.segment_size
    }

    /// RAM the write buffers take.
    pub fn buffer_bytes(&self) -> usize {
        self.params.write_buffers.max(2) * self.params.segment_size
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
            .min(st.free.len())
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
    fn open_new(&self, st: &mut State, class: usize, reserved: bool) -> bool {
        let avail = st.spare.len().min(st.free.len());
        if avail == 0 || (!reserved && avail <= st.reserved) {
            return false;
        }
        if reserved {
            st.reserved -= 1;
        }
        self.seal(st, class);
        let slot = st.free.pop_front().expect("checked");
        let buf = st.spare.pop().expect("checked");
        let seq = st.next_seq;
        st.next_seq += 1;
        self.max_seq.store(seq, Ordering::Release);
        let s = &mut st.slots[slot as usize];
        s.seq = seq;
        s.items = 0;
        s.data_len = 0;
        s.state = SlotState::Open;
        st.open[class] = Some(Open {
            slot,
            buf,
            write: BLOCK,
            records: 0,
            max_exptime: 0,
            never_expires: false,
            gaps: Vec::new(),
        });
        true
    }

    /// Hands the open buffer to the flusher.
    fn seal(&self, st: &mut State, class: usize) {
        let Some(mut o) = st.open[class].take() else {
            return;
        };
        if o.records == 0 {
            // Nothing in it: give the slot and the buffer back unwritten.
            st.slots[o.slot as usize].state = SlotState::Free;
            st.free.push_front(o.slot);
            st.spare.push(o.buf);
            return;
        }
        let slot = &mut st.slots[o.slot as usize];
        let end = round_up(o.write, BLOCK);
        o.buf.as_mut_slice()[o.write..end].fill(0);
        SegmentHeader {
            seq: slot.seq,
            slot: o.slot,
            data_len: (o.write - BLOCK) as u32,
            records: o.records,
            max_exptime: if o.never_expires { 0 } else { o.max_exptime },
            journal_counter: self.journal.counter(),
        }
        .write(o.buf.as_mut_slice());
        slot.data_len = (o.write - BLOCK) as u32;
        slot.max_exptime = if o.never_expires { 0 } else { o.max_exptime };
        slot.state = SlotState::Queued(Arc::new(o.buf));
        st.queued.push_back(o.slot);
        self.work.notify_one();
    }

    /// Seals a partly filled open buffer so that it reaches the device (idle flush).
    pub fn seal_open(&self) {
        let mut st = self.state.lock();
        for class in 0..2 {
            if st.open[class].as_ref().is_some_and(|o| o.records > 0) {
                self.seal(&mut st, class);
            }
        }
    }

    /// Appends an item (RAM layout) as a record; returns its new location.
    /// `admitted` counts it as new data (false for reinsertion).
    pub fn append(
        &self,
        item: &[u8],
        admitted: bool,
        now: u32,
        reserved: &mut usize,
    ) -> Result<Loc, AppendError> {
        let h = Header::read(item);
        let class = self.class_of(h.exptime, now);
        let size = format::record_size(h.klen as usize, h.vlen as usize);
        if self.degraded() || size + BLOCK > self.params.segment_size {
            return Err(AppendError::Refused);
        }
        let mut st = self.state.lock();
        if admitted && self.params.write_budget > 0 && !self.take_budget(&mut st, size) {
            self.stats.admission_refused.fetch_add(1, Ordering::Relaxed);
            return Err(AppendError::Refused);
        }
        let fits = |o: &Open| {
            (size <= BLOCK && o.gaps.iter().any(|g| g.1 as usize >= size))
                || format::place_record(o.write, size) + size <= self.params.segment_size
        };
        if !st.open[class].as_ref().is_some_and(fits) {
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
        let at = o.place(size);
        let slot = o.slot;
        let seq = st.slots[slot as usize].seq;
        format::write_record(&mut o.buf.as_mut_slice()[at..at + size], item, seq);
        o.records += 1;
        if h.exptime == 0 {
            o.never_expires = true;
        }
        o.max_exptime = o.max_exptime.max(h.exptime);
        st.slots[slot as usize].items += 1;
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

    fn take_budget(&self, st: &mut State, size: usize) -> bool {
        let rate = self.params.write_budget as f64;
        let now = Instant::now();
        let dt = now.duration_since(st.budget_at).as_secs_f64();
        st.budget_at = now;
        // Bursts of up to one second of budget.
        st.budget_tokens = (st.budget_tokens + dt * rate).min(rate);
        if st.budget_tokens >= size as f64 {
            st.budget_tokens -= size as f64;
            true
        } else {
            false
        }
    }

    /// An index entry pointing into `loc`'s slot went away.
    pub fn release(&self, loc: Loc) {
        let mut st = self.state.lock();
        if let Some(s) = st.slots.get_mut((loc.seg - FLASH_SEG_BASE) as usize) {
            s.items = s.items.saturating_sub(1);
        }
    }

    /// Where the record at `loc` is. Records still in a write buffer are
    /// copied out (and verified) at once.
    pub fn locate(&self, loc: Loc) -> Where {
        let st = self.state.lock();
        let i = (loc.seg - FLASH_SEG_BASE) as usize;
        let Some(slot) = st.slots.get(i) else {
            return Where::Gone;
        };
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
        match self.locate(loc) {
            Where::Resident(item, seq) => fetched.insert_resident(loc, item, seq),
            Where::Device {
                dev,
                offset,
                skew,
                seq,
            } => {
                reads.push(fetched.add_read(loc, dev, offset, skew, seq));
                self.stats.reads_in_flight.fetch_add(1, Ordering::Relaxed);
            }
            Where::Gone => return false,
        }
        true
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
            if let Some(more) = fetched.complete(r.slot, res, self.params.segment_size, &self.stats)
            {
                reads.push(more);
            }
        }
    }

    /// The sequence number of the segment `loc` points into, while it holds
    /// data (a fetched record is only good if the segment was not reused).
    pub fn seq_of(&self, loc: Loc) -> Option<u64> {
        let st = self.state.lock();
        let slot = st.slots.get((loc.seg - FLASH_SEG_BASE) as usize)?;
        match slot.state {
            SlotState::Free | SlotState::Failed => None,
            _ => Some(slot.seq),
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
            free: st.free.len() as u64,
            sealed: st.sealed.len() as u64,
            queued: st.queued.len() as u64,
            items: 0,
            failed: 0,
        };
        for s in &st.slots {
            u.items += u64::from(s.items);
            if matches!(s.state, SlotState::Failed) {
                u.failed += 1;
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
    pub items: u64,
    pub failed: u64,
}

/// Refuses devices holding data that is not ours (or another version of
/// ours) unless told to wipe them, then writes our superblock. Returns it,
/// whether the device already held our format with the same layout (its
/// contents kept), and whether its last run did not keep the crash journal.
/// A device stays marked "journal off" until [`FlashTier::covered`] clears
/// it, so a crash in between never trusts unjournaled contents.
fn check_and_stamp(
    d: &dyn BlockDevice,
    no: u32,
    seg: usize,
    journal: u64,
    params: &TierParams,
) -> Result<(Superblock, bool, bool), DeviceError> {
    let mut b = AlignedBuf::new(BLOCK);
    let n = d
        .read_at(b.as_mut_slice(), 0)
        .map_err(|e| DeviceError(format!("flash device {}: cannot read: {e}", d.name())))?;
    if n < BLOCK {
        b.as_mut_slice()[n..].fill(0);
    }
    let mut sb = Superblock {
        device_size: d.size(),
        segment_size: seg as u32,
        device_no: no,
        journal_bytes: journal as u32,
        journal_off: !params.crash_journal,
    };
    let (kept, was_off) = match Superblock::inspect(b.as_slice()) {
        DeviceContents::Ours(old) if old.same_layout(&sb) && !params.wipe => {
            sb.journal_off |= old.journal_off;
            if old == sb {
                return Ok((sb, true, old.journal_off));
            }
            (true, old.journal_off)
        }
        DeviceContents::Ours(old) => {
            if !params.wipe {
                tracing::warn!(
                    device = d.name(),
                    ?old,
                    new = ?sb,
                    "flash device layout changed (size, segment size or device order): its contents are dropped"
                );
            }
            (false, false)
        }
        DeviceContents::Empty => (false, false),
        DeviceContents::OtherVersion(v) if !params.wipe => {
            return Err(DeviceError(format!(
                "flash device {} holds tiercache format version {v}, this build reads version {}; \
                 start with -o ext_wipe to erase it",
                d.name(),
                format::VERSION
            )))
        }
        DeviceContents::Foreign if !params.wipe => {
            return Err(DeviceError(format!(
                "flash device {} holds data that is not a tiercache flash file; refusing to overwrite it \
                 (start with -o ext_wipe to erase it, or choose another path)",
                d.name()
            )))
        }
        _ => (false, false),
    };
    write_superblock(d, &sb)?;
    Ok((sb, kept, was_off))
}

fn write_superblock(d: &dyn BlockDevice, sb: &Superblock) -> Result<(), DeviceError> {
    let mut b = AlignedBuf::new(BLOCK);
    sb.write(b.as_mut_slice());
    d.write_at(b.as_slice(), 0)
        .and_then(|_| d.sync())
        .map_err(|e| DeviceError(format!("flash device {}: cannot write: {e}", d.name())))
}

/// Whoever owns the index entries of records (the engine): told about each
/// live record of a segment that is being reclaimed or could not be written.
pub trait RecordOwner: Send + Sync {
    /// Drops the entry for the record at `loc`, or reinserts it (through
    /// [`FlashTier::append`]) when it was hit and `reinsert` allows.
    fn reclaim(&self, loc: Loc, item: &[u8], reinsert: bool);
}

enum Job {
    Write(u32, Arc<AlignedBuf>),
    /// A slot to reclaim, and whether all its records have expired.
    Reclaim(u32, bool),
}

impl FlashTier {
    /// The flusher: writes sealed buffers, keeps free slots ahead of need by
    /// reclaiming the oldest segments, and seals an idle open buffer after
    /// `idle` so that its items reach the device. Runs until [`stop`](Self::stop).
    pub fn run_flusher(&self, owner: &dyn RecordOwner, idle: Duration) {
        let mut scratch = AlignedBuf::new(self.params.segment_size);
        let mut last_append = (0u64, Instant::now());
        let mut last_expiry_scan = Instant::now();
        while !self.stop.load(Ordering::Relaxed) {
            if self.journal.failed() {
                self.record_journal_failure(false);
            }
            let job = {
                let mut st = self.state.lock();
                loop {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some(slot) = st.queued.pop_front() {
                        let s = &mut st.slots[slot as usize];
                        let SlotState::Queued(buf) = &s.state else {
                            unreachable!("queued slot {slot} in state {:?}", s.state)
                        };
                        let buf = buf.clone();
                        s.state = SlotState::Writing(buf.clone());
                        break Job::Write(slot, buf);
                    }
                    if st.free.len() < FREE_SLOTS_LOW.max(1) + 1 {
                        if let Some(slot) = st.sealed.pop_front() {
                            st.slots[slot as usize].state = SlotState::Reclaiming;
                            break Job::Reclaim(slot, false);
                        }
                    }
                    // Idle flush: an open buffer that stopped growing goes out.
                    let written = self.stats.objects_written.load(Ordering::Relaxed);
                    if written != last_append.0 {
                        last_append = (written, Instant::now());
                    } else if last_append.1.elapsed() >= idle {
                        if let Some(class) =
                            (0..2).find(|&c| st.open[c].as_ref().is_some_and(|o| o.records > 0))
                        {
                            self.seal(&mut st, class);
                            continue;
                        }
                    }
                    // Expiry frees whole segments: once a segment's latest
                    // exptime has passed, reclaim it ahead of its turn.
                    if last_expiry_scan.elapsed() >= Duration::from_secs(1) {
                        last_expiry_scan = Instant::now();
                        let now = self.clock.load(Ordering::Relaxed);
                        if let Some(pos) = st.sealed.iter().position(|&i| {
                            let m = st.slots[i as usize].max_exptime;
                            m != 0 && m <= now
                        }) {
                            let slot = st.sealed.remove(pos).expect("found");
                            st.slots[slot as usize].state = SlotState::Reclaiming;
                            self.stats.segments_expired.fetch_add(1, Ordering::Relaxed);
                            break Job::Reclaim(slot, true);
                        }
                    }
                    self.work.wait_for(&mut st, Duration::from_millis(20));
                }
            };
            match job {
                Job::Write(slot, buf) => self.write_segment(slot, buf, owner),
                Job::Reclaim(slot, expired) => {
                    self.reclaim_segment(slot, expired, &mut scratch, owner)
                }
            }
            self.wake_all();
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
                st.sealed.push_back(slot);
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
                    owner.reclaim(loc, item, false)
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
        let (dev, off, len, seq) = {
            let st = self.state.lock();
            let s = &st.slots[slot as usize];
            (
                s.dev,
                s.dev_off,
                round_up(BLOCK + s.data_len as usize, BLOCK),
                s.seq,
            )
        };
        if !expired && self.params.crash_journal {
            // Its records stay on the device until the slot is rewritten:
            // after a crash they must not come back once their entries go.
            let t = self.journal.raise_floor(seq);
            if !self.journal.wait_durable(t, Duration::from_secs(60)) {
                tracing::error!(slot, "the crash journal did not commit the floor in 60 s");
            }
        }
        let buf = &mut scratch.as_mut_slice()[..len];
        match self.devices[dev].read_at(buf, off) {
            Ok(n) if n == len => {
                self.for_each_record(buf, seq, slot, |loc, item| {
                    owner.reclaim(loc, item, self.params.reinsert_hits)
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
        let mut st = self.state.lock();
        let s = &mut st.slots[slot as usize];
        s.state = SlotState::Free;
        s.items = 0;
        st.free.push_back(slot);
        drop(st);
        self.stats
            .segments_reclaimed
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Calls `f` with every valid record of a segment image.
    fn for_each_record(&self, seg: &[u8], seq: u64, slot: u32, mut f: impl FnMut(Loc, &[u8])) {
        let Some(h) = SegmentHeader::read(seg) else {
            tracing::warn!(
                slot,
                "flash segment header does not verify; skipping its records"
            );
            return;
        };
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
    }
}

/// What a crash recovery found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Recovery {
    pub segments: u64,
    pub items: u64,
    /// Records dropped by a tombstone.
    pub dead: u64,
    /// Older records of keys that had a newer one (dropped after the scan).
    pub duplicates: u64,
    /// Segments with a valid header below the floor (not trusted).
    pub untrusted_segments: u64,
    pub bytes_read: u64,
}

impl FlashTier {
    /// The crash journal failed: marks the devices untrusted for the next
    /// start (see [`super::distrust`]), retried by the flusher until it is
    /// written. `now`: try at once (at shutdown). Returns whether the
    /// failure is recorded where the next start looks.
    pub fn record_journal_failure(&self, now: bool) -> bool {
        self.distrust.record(
            &self.devices,
            &self.superblocks,
            |d, sb| write_superblock(d, sb).map_err(|e| e.0),
            now,
        );
        self.distrust.recorded()
    }
}

/// Crash recovery: the segment table and the index from the devices.
impl FlashTier {
    /// Rebuilds the segment table from the segment headers on the devices
    /// and hands every record that may be served to `insert` (which returns
    /// whether it took it), oldest segment first. A record is dropped when
    /// its segment is at or below the journal's floor, a tombstone covers
    /// it, or it fails its checksum or sequence check (expired ones are
    /// indexed and expire on first access, as always). Call
    /// once, before anything is appended, and only after a crash (a
    /// snapshot from a graceful shutdown is exact; use it instead).
    pub fn recover(&self, insert: impl Fn(Loc, &[u8], u64) -> bool + Sync) -> Recovery {
        let mut report = Recovery::default();
        let mut rec = self.journal.take_recovered().unwrap_or_default();
        if !self.kept || !self.params.crash_journal {
            if !self.kept {
                // Nothing of the earlier run is on the devices any more.
                self.distrust.clear_files();
            }
            return report;
        }
        if self.prev_journal_off {
            rec.damaged = Some(
                "the previous run kept no crash journal (ext_crash_safe=0, or its journal failed)"
                    .into(),
            );
        }
        if self.distrust.previous_run() {
            rec.damaged =
                Some("an earlier run's crash journal failed (its mark file is there)".into());
        }
        let mut st = self.state.lock();
        let headers = self.read_headers(&st);
        report.bytes_read += (st.slots.len() * BLOCK) as u64;
        let mut found: Vec<(u64, u32, SegmentHeader)> = Vec::new();
        for (i, h) in headers {
            if h.seq <= rec.floor {
                report.untrusted_segments += 1;
                continue;
            }
            if h.journal_counter > rec.max_counter && rec.damaged.is_none() {
                rec.damaged = Some(format!(
                    "the crash journal on {} reads back older (write {}) than segment {i} sealed after it (write {})",
                    self.devices[0].name(),
                    rec.max_counter,
                    h.journal_counter
                ));
            }
            found.push((h.seq, i, h));
        }
        if let Some(why) = &rec.damaged {
            tracing::error!(
                "{why}: tombstones may be lost, so no flash item can be proven current; \
                 starting with an empty flash tier"
            );
            // Make the distrust durable: the floor over everything found.
            let top = found.iter().map(|f| f.0).max().unwrap_or(0);
            report.untrusted_segments += found.len() as u64;
            found.clear();
            st.next_seq = st.next_seq.max(top + 1);
            let t = self.journal.raise_floor(top);
            if self.journal.wait_durable(t, Duration::from_secs(60)) {
                if let Err(e) = self.journal.zero_blocks(&rec.invalid_blocks) {
                    tracing::error!(error = %e, "cannot clear the damaged journal blocks");
                }
                drop(st);
                self.covered();
                st = self.state.lock();
            }
        }
        found.sort_unstable_by_key(|f| f.0);
        let slots: Vec<(usize, u64)> = st.slots.iter().map(|s| (s.dev, s.dev_off)).collect();
        drop(st);
        // Several segments read at once (the device wants queue depth), each
        // parsed by the thread that read it; records may be indexed in any
        // order, since at most one live record of a key survives the journal.
        let next = AtomicUsize::new(0);
        let (dead, bytes) = (AtomicU64::new(0), AtomicU64::new(0));
        let items: Vec<AtomicU32> = found.iter().map(|_| AtomicU32::new(u32::MAX)).collect();
        let threads = RECOVERY_THREADS.min(found.len()).max(1);
        std::thread::scope(|sc| {
            for _ in 0..threads {
                sc.spawn(|| {
                    let mut scratch = AlignedBuf::new(self.params.segment_size);
                    loop {
                        let n = next.fetch_add(1, Ordering::Relaxed);
                        let Some(&(seq, slot, h)) = found.get(n) else {
                            return;
                        };
                        let (dev, off) = slots[slot as usize];
                        let len = round_up(BLOCK + h.data_len as usize, BLOCK);
                        let buf = &mut scratch.as_mut_slice()[..len];
                        if !self.devices[dev]
                            .read_at(buf, off)
                            .is_ok_and(|got| got == len)
                        {
                            tracing::warn!(
                                slot,
                                "cannot read a flash segment during recovery; its items are dropped"
                            );
                            continue;
                        }
                        bytes.fetch_add(len as u64, Ordering::Relaxed);
                        let mut kept = 0u32;
                        self.for_each_record(buf, seq, slot, |loc, item| {
                            let key = crate::item::key_of(item);
                            let hash = crate::shard::hash_key(key);
                            if rec.is_dead(hash, seq) {
                                dead.fetch_add(1, Ordering::Relaxed);
                            } else if insert(loc, item, hash) {
                                kept += 1;
                            }
                        });
                        items[n].store(kept, Ordering::Relaxed);
                    }
                });
            }
        });
        report.dead = dead.into_inner();
        report.bytes_read += bytes.into_inner();
        let mut st = self.state.lock();
        let mut max_seq = st.next_seq - 1;
        for (n, &(seq, slot, h)) in found.iter().enumerate() {
            max_seq = max_seq.max(seq);
            let kept = items[n].load(Ordering::Relaxed);
            if kept == u32::MAX {
                continue;
            }
            report.items += u64::from(kept);
            report.segments += 1;
            let s = &mut st.slots[slot as usize];
            s.seq = seq;
            s.data_len = h.data_len;
            s.items = kept;
            s.max_exptime = h.max_exptime;
            s.state = SlotState::Sealed;
            st.sealed.push_back(slot);
        }
        st.next_seq = max_seq + 1;
        self.max_seq.store(max_seq, Ordering::Release);
        st.free = (0..st.slots.len() as u32)
            .filter(|&i| matches!(st.slots[i as usize].state, SlotState::Free))
            .collect();
        report
    }
}

/// Snapshot (graceful restart) of the segment table: see persist.rs.
impl FlashTier {
    /// The valid segment headers on the devices, by slot (a header that
    /// names another slot or more data than a segment holds is not one).
    fn read_headers(&self, st: &State) -> Vec<(u32, SegmentHeader)> {
        let mut block = AlignedBuf::new(BLOCK);
        let mut found = Vec::new();
        for (i, s) in st.slots.iter().enumerate() {
            if !self.devices[s.dev]
                .read_at(block.as_mut_slice(), s.dev_off)
                .is_ok_and(|n| n == BLOCK)
            {
                continue;
            }
            if let Some(h) = SegmentHeader::read(block.as_slice()).filter(|h| {
                h.slot == i as u32 && h.data_len as usize + BLOCK <= self.params.segment_size
            }) {
                found.push((i as u32, h));
            }
        }
        found
    }

    /// After a snapshot was restored: if the last run kept no crash journal,
    /// raises the floor over every segment on the devices, so that a crash
    /// from now on never trusts what that run wrote.
    pub fn after_restore(&self) {
        if !self.params.crash_journal || !(self.prev_journal_off || self.distrust.previous_run()) {
            return;
        }
        let st = self.state.lock();
        let top = self
            .read_headers(&st)
            .iter()
            .map(|(_, h)| h.seq)
            .fold(self.max_seq(), u64::max);
        drop(st);
        let t = self.journal.raise_floor(top);
        if self.journal.wait_durable(t, Duration::from_secs(60)) {
            self.covered();
        }
    }

    /// The floor covers everything written without the journal: clears the
    /// devices' "journal off" mark.
    fn covered(&self) {
        if self.distrust.previous_run() {
            self.distrust.clear_files();
        }
        let mut sbs = self.superblocks.lock();
        for (d, sb) in self.devices.iter().zip(sbs.iter_mut()) {
            if sb.journal_off {
                sb.journal_off = false;
                if let Err(e) = write_superblock(d.as_ref(), sb) {
                    tracing::error!(error = %e.0, "cannot update the superblock");
                }
            }
        }
    }

    /// Seals the open buffer, waits until every queued segment is written
    /// and no reclaim runs, then stops the flusher. False on timeout.
    pub fn drain_and_stop(&self, timeout: Duration) -> bool {
        self.seal_open();
        let deadline = Instant::now() + timeout;
        loop {
            {
                let st = self.state.lock();
                let busy = !st.queued.is_empty()
                    || st
                        .slots
                        .iter()
                        .any(|s| matches!(s.state, SlotState::Writing(_) | SlotState::Reclaiming));
                if !busy {
                    self.stop.store(true, Ordering::Relaxed);
                    self.work.notify_all();
                    drop(st);
                    let t = self.journal.last_ticket();
                    let left = deadline.saturating_duration_since(Instant::now());
                    return self.journal.wait_durable(t, left);
                }
            }
            if Instant::now() > deadline {
                return false;
            }
            self.work.notify_all();
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    pub fn save<W: std::io::Write>(
        &self,
        w: &mut crate::persist::SnapWriter<W>,
    ) -> std::io::Result<()> {
        let st = self.state.lock();
        w.u64(st.next_seq)?;
        w.u32(st.slots.len() as u32)?;
        for s in &st.slots {
            w.u8(u8::from(matches!(s.state, SlotState::Sealed)))?;
            w.u64(s.seq)?;
            w.u32(s.data_len)?;
            w.u32(s.items)?;
            w.u32(s.max_exptime)?;
        }
        w.list(st.sealed.iter().copied())
    }

    /// Loads the segment table; a sealed segment whose header on the device
    /// does not match is dropped (its index entries become misses). Returns
    /// the number of segments restored.
    pub fn load<R: std::io::Read>(
        &self,
        r: &mut crate::persist::SnapReader<R>,
    ) -> std::io::Result<usize> {
        use crate::persist::invalid;
        let mut st = self.state.lock();
        st.next_seq = r.u64()?.max(st.next_seq);
        self.max_seq.store(st.next_seq - 1, Ordering::Release);
        let n = r.u32()? as usize;
        if n != st.slots.len() {
            return Err(invalid("flash segment count differs from the devices"));
        }
        let mut sealed_flags = vec![false; n];
        for (i, s) in st.slots.iter_mut().enumerate() {
            sealed_flags[i] = r.u8()? == 1;
            s.seq = r.u64()?;
            s.data_len = r.u32()?;
            s.items = r.u32()?;
            s.max_exptime = r.u32()?;
            s.state = SlotState::Free;
        }
        let order = r.list(n)?;
        let mut block = AlignedBuf::new(BLOCK);
        let mut restored = 0;
        for &i in &order {
            let i = i as usize;
            if i >= n || !sealed_flags[i] {
                return Err(invalid("sealed list names a free segment"));
            }
            let s = &st.slots[i];
            let ok = self.devices[s.dev]
                .read_at(block.as_mut_slice(), s.dev_off)
                .ok()
                .filter(|&got| got == BLOCK)
                .and_then(|_| SegmentHeader::read(block.as_slice()))
                .is_some_and(|h| h.seq == s.seq && h.slot == i as u32);
            if ok {
                st.slots[i].state = SlotState::Sealed;
                st.sealed.push_back(i as u32);
                restored += 1;
            } else {
                tracing::warn!(
                    slot = i,
                    "flash segment on the device does not match the snapshot; its items are dropped"
                );
            }
        }
        st.free = (0..n as u32)
            .filter(|&i| matches!(st.slots[i as usize].state, SlotState::Free))
            .collect();
        Ok(restored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open() -> Open {
        Open {
            slot: 0,
            buf: AlignedBuf::new(64 << 10),
            write: BLOCK,
            records: 0,
            max_exptime: 0,
            never_expires: false,
            gaps: Vec::new(),
        }
    }

    #[test]
    fn small_records_fill_the_tails_that_larger_ones_left() {
        let mut o = open();
        // Three 1048-byte records fill 3144 bytes of the first data block;
        // the fourth goes to the next block, leaving a 952-byte tail.
        let at: Vec<usize> = (0..4).map(|_| o.place(1048)).collect();
        assert_eq!(at, [4096, 5144, 6192, 8192]);
        assert_eq!(o.gaps, [(7240, 952)]);
        // Small records go into that tail, first fit, one after another.
        assert_eq!(o.place(136), 7240);
        assert_eq!(o.place(136), 7376);
        assert_eq!(o.gaps, [(7512, 680)]);
        // One that does not fit the tail goes at the end.
        assert_eq!(o.place(1000), 9240);
        // Never across a block: every record ends in its block.
        for (a, size) in [(4096, 1048), (7240, 136), (7376, 136), (9240, 1000)] {
            assert_eq!(a / BLOCK, (a + size - 1) / BLOCK);
        }
        // A tail too small for any record is not kept.
        let mut o = open();
        o.place(4096 - 16);
        o.place(100);
        assert!(o.gaps.is_empty());
    }
}
