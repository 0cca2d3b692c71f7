//! [`SmallStore`]: a small flash log (KLog) in front of 4 KiB sets, on one
//! region of a [`BlockDevice`]. Objects are appended to the log a segment at
//! a time; when the log wraps, the oldest segment's objects move to their
//! sets, several at once (a set with fewer than `move_threshold` log objects
//! drops them, or readmits those that were hit), so that one 4 KiB set write
//! carries several objects. docs/SMALL.md has the design and the crash rules.

use super::filter::SetFilters;
use super::flush::Job;
use super::format::{self, BlockError, Kind, Obj, BLOCK_PAYLOAD};
use super::inval::Inval;
use super::log::{tag_of, LogIndex, MAX_PAGES};
use super::sets::{page_offset, set_offset, verify_block};
use super::tomb::{place_fp, Tombs};
use super::SmallStats;
use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

/// Sealed segments waiting for, or under, a background flush at most.
const QUEUED_SEGMENTS: usize = 2;
/// [`QUEUED_SEGMENTS`] in the log's first pass ([`SmallStore::queue_full`]).
const FIRST_PASS_QUEUED: usize = 16;

/// Log pages per bucket of the log's index. Issue 32: with two buckets a
/// page (about 15 objects of 100 bytes each), the index took 11.4 B per log
/// object (the buckets' headers, allocations and spare capacity beside the
/// 6-byte entries), more than the log tier's index entry (7.1 B); a bucket
/// of about 60 entries spreads its header over more (7.4-7.8 B measured;
/// 4-byte entries since, sized for the geometry: about 4.7 B). A rewrite of
/// a set scans its bucket.
pub const LOG_PAGES_PER_BUCKET: usize = 2;

/// RRIP value of an object entering a set (of 0..=7; 7 is evicted first).
pub const RRIP_INSERT: u8 = 6;
pub(super) const RRIP_MAX: u8 = format::RRIP_MASK;

/// The store's geometry and policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmallConfig {
    /// 4 KiB sets.
    pub sets: usize,
    /// Log segments, each `seg_pages` 4 KiB pages written at once.
    pub log_segments: usize,
    pub seg_pages: usize,
    /// Bloom filter bits per set.
    pub filter_bits: usize,
    /// Log objects of one set needed to move them to it.
    pub move_threshold: usize,
}

impl SmallConfig {
    /// A region of `bytes` with `log_percent` of it for the log.
    pub fn for_region(bytes: u64, log_percent: u64) -> SmallConfig {
        let blocks = (bytes / BLOCK as u64) as usize;
        let seg_pages = 16;
        let log_segments = ((blocks as u64 * log_percent / 100) as usize / seg_pages).max(2);
        SmallConfig {
            sets: blocks.saturating_sub(1 + log_segments * seg_pages).max(1),
            log_segments,
            seg_pages,
            filter_bits: 128,
            move_threshold: 2,
        }
    }

    pub fn log_pages(&self) -> usize {
        self.log_segments * self.seg_pages
    }

    /// Buckets of the log's index: one per [`LOG_PAGES_PER_BUCKET`] log
    /// pages.
    pub fn log_buckets(&self) -> usize {
        self.log_pages().div_ceil(LOG_PAGES_PER_BUCKET)
    }

    /// DRAM a fresh store of this shape holds (`SmallStore::dram_bytes`
    /// before any object): the per-set filters, the log index's empty
    /// buckets, the log segments' generations and the segment buffer. The
    /// log index grows with the objects in the log from there.
    pub fn start_dram_bytes(&self) -> usize {
        crate::small::filter::SetFilters::bytes_for(self.sets, self.filter_bits)
            + crate::small::log::LogIndex::start_bytes(self.log_buckets(), self.sets)
            + self.log_segments * 8
            + self.seg_pages * BLOCK
    }

    /// Bytes of device the store takes: its first block (the region's
    /// head), the log, the sets.
    pub fn region_bytes(&self) -> u64 {
        ((1 + self.log_pages() + self.sets) * BLOCK) as u64
    }
}

/// The key hashes of a group of unwritten objects (the open buffer's, or
/// one sealed segment's) with how many objects carry each: the prefilter
/// of the scans of [`SmallStore::unwritten`] (a change of a key, a get that
/// misses RAM, an admission), which compare full keys only on a hash held
/// here. It follows its group exactly: an object added or removed is
/// counted here in the same call.
#[derive(Default)]
pub(super) struct Hashes(HashMap<u64, u32, Mix>);

impl Hashes {
    fn add(&mut self, h: u64) {
        *self.0.entry(h).or_insert(0) += 1;
    }

    fn remove(&mut self, h: u64, n: u32) {
        if n == 0 {
            return;
        }
        if let Some(c) = self.0.get_mut(&h) {
            debug_assert!(*c >= n);
            *c = c.saturating_sub(n);
            if *c == 0 {
                self.0.remove(&h);
            }
        }
    }

    /// Whether an object of the group may have this key hash (false: none has).
    pub(super) fn has(&self, h: u64) -> bool {
        self.0.contains_key(&h)
    }

    /// DRAM of the table: a bucket of (hash, count) and its control byte per slot.
    fn bytes(&self) -> usize {
        self.0.capacity() * (std::mem::size_of::<(u64, u32)>() + 1)
    }
}

/// The hasher of [`Hashes`]: its keys are xxh3 hashes already, so one
/// multiply by a per-process seed spreads them (a key cannot choose its
/// table slot without the seed); SipHash would cost more than the lookup.
#[derive(Clone, Copy)]
pub(super) struct Mix(u64);

impl Default for Mix {
    fn default() -> Mix {
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        Mix(*SEED.get_or_init(|| std::collections::hash_map::RandomState::new().hash_one(0u64) | 1))
    }
}

impl BuildHasher for Mix {
    type Hasher = MixHasher;
    fn build_hasher(&self) -> MixHasher {
        MixHasher { seed: self.0, h: 0 }
    }
}

pub(super) struct MixHasher {
    seed: u64,
    h: u64,
}

impl Hasher for MixHasher {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.h = self.h.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.h ^= x;
    }

    fn finish(&self) -> u64 {
        let m = u128::from(self.h ^ self.seed) * u128::from(0x9E37_79B9_7F4A_7C15u64);
        (m as u64) ^ ((m >> 64) as u64)
    }
}

/// The small-object store.
pub struct SmallStore {
    pub(super) dev: Arc<dyn BlockDevice>,
    /// The io_uring ring its blocks are read on (made at the first read).
    pub(super) ring: super::setio::Ring,
    pub(super) base: u64,
    pub(super) cfg: SmallConfig,
    pub(super) filters: SetFilters,
    pub(super) log: LogIndex,
    /// Generation each log segment was written at (0: never).
    pub(super) seg_gen: Vec<u64>,
    /// The next log segment to write.
    pub(super) head: usize,
    /// The segment being filled: pages of (key hash, object).
    pub(super) buffer: Vec<Vec<(u64, Obj)>>,
    /// The key hashes of the buffer's objects (the scans' prefilter).
    pub(super) buffered: Hashes,
    pub(super) buffer_used: usize,
    pub(super) generation: u64,
    /// Blocks written at this generation or before hold nothing (flush_all).
    pub(super) floor: u64,
    /// The region's nonce, in every block it writes.
    pub(super) nonce: u64,
    /// Which of the store's regions this is, of how many.
    pub(super) part: u32,
    pub(super) parts: u32,
    pub(super) set_objects: u64,
    pub(super) failed: bool,
    /// Failed, then emptied on the device ([`SmallStore::forget_all`]).
    pub(super) emptied: bool,
    /// A segment flush waits this many times its own duration after the
    /// previous one (0: never waits); see [`SmallStore::set_flush_duty`].
    flush_duty: u32,
    /// No flush before this instant: admissions that need one are refused.
    next_flush_at: Option<std::time::Instant>,
    /// The clock expiry is judged by: the latest `now` a get gave.
    pub(super) now: u32,
    /// Segment flushes sealed and not committed yet, oldest first: the
    /// first may be under way, the others wait for it.
    pub(super) jobs: std::collections::VecDeque<Arc<Job>>,
    /// Where to say that a job was sealed (the background flusher, told
    /// this region's part number); None: flushes run on the inserting thread.
    pub(super) notify: Option<crossbeam_channel::Sender<u32>>,
    /// The last job number handed out.
    pub(super) job_ids: u64,
    /// Keys whose changes wait for an invalidation job, or may go ahead
    /// (by key hash; see [`SmallStore::gate`]).
    pub(super) invals: HashMap<u64, Inval>,
    /// Changes of held keys made durable by the crash journal's
    /// tombstones, until their sets are rewritten ([`super::tomb`]).
    pub(super) tombs: Tombs,
    /// The crash journal those tombstones go to (None: changes rewrite
    /// their sets first, as without one).
    pub(super) journal: Option<Arc<crate::flash::journal::Journal>>,
    pub stats: SmallStats,
}

/// The key's hash, the set and the tag it implies.
pub(super) fn place(key: &[u8], sets: usize) -> (u64, u32, u16) {
    let h = xxh3_64(key);
    (h, place_fp(h as u32, sets), tag_of(h))
}

impl SmallStore {
    /// A new, empty store on a region (whatever it held before is ignored);
    /// use [`SmallStore::open`] to recover one.
    pub fn format(
        dev: Arc<dyn BlockDevice>,
        base: u64,
        cfg: SmallConfig,
    ) -> io::Result<SmallStore> {
        SmallStore::format_part(dev, base, cfg, 0, 1)
    }

    /// [`format`](Self::format) for region `part` of `parts`. Only the
    /// region's first block is written: it draws a new nonce, and blocks
    /// written under another nonce read as empty.
    pub fn format_part(
        dev: Arc<dyn BlockDevice>,
        base: u64,
        cfg: SmallConfig,
        part: u32,
        parts: u32,
    ) -> io::Result<SmallStore> {
        assert!(cfg.log_pages() <= MAX_PAGES && cfg.move_threshold >= 1);
        if !base.is_multiple_of(BLOCK as u64) || base + cfg.region_bytes() > dev.size() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "small store region does not fit the device",
            ));
        }
        let mut st = SmallStore::empty(dev, base, cfg);
        st.nonce = new_nonce(base, part);
        (st.part, st.parts) = (part, parts);
        st.write_head()?;
        Ok(st)
    }

    /// Writes the region's first block (geometry, nonce, floor), durably.
    pub(super) fn write_head(&self) -> io::Result<()> {
        let mut b = AlignedBuf::new(BLOCK);
        format::encode_region(b.as_mut_slice(), &self.head());
        self.dev.write_durable(b.as_slice(), self.base)
    }

    /// What the region's first block says.
    pub fn head(&self) -> format::RegionHead {
        format::RegionHead {
            part: self.part,
            parts: self.parts,
            sets: self.cfg.sets as u32,
            log_segments: self.cfg.log_segments as u32,
            seg_pages: self.cfg.seg_pages as u32,
            nonce: self.nonce,
            floor: self.floor,
        }
    }

    /// Verifies a block of this region: [`format::check`] with the
    /// region's nonce; a block at or below the floor holds nothing.
    pub(super) fn verify(
        &self,
        b: &[u8],
        kind: Kind,
        number: u32,
    ) -> Result<format::BlockHead, BlockError> {
        verify_block(b, kind, number, self.nonce, self.floor)
    }

    /// Drops every object (flush_all): from DRAM now, and on the device by
    /// raising the floor in the region's first block, durably, before this
    /// returns (a crash must not bring a flushed object back).
    pub fn clear(&mut self) -> io::Result<()> {
        // The jobs under way end first: their writes must not land above
        // the floor. A store that failed forgets everything instead (a new
        // nonce: nothing it wrote verifies).
        if self.finish_jobs().is_err() || self.failed {
            self.jobs.clear();
            return self.forget_all();
        }
        debug_assert!(self.jobs.is_empty());
        self.generation += 1;
        self.floor = self.generation;
        self.clear_dram();
        if self.failed {
            return Ok(());
        }
        self.generation += 1;
        let r = self.write_head();
        match &r {
            Err(e) => self.fail(e),
            // The floor covers every tombstone's objects now.
            Ok(()) => self.retire_all_tombs(),
        }
        r
    }

    /// Writes the segment being filled (a graceful stop keeps its objects).
    pub fn flush_buffer(&mut self) -> io::Result<()> {
        self.finish_jobs()?;
        debug_assert!(self.jobs.is_empty());
        if self.failed || self.buffer.iter().all(Vec::is_empty) {
            return Ok(());
        }
        let job = self.seal();
        self.run_inline(&job)
    }

    /// After a write failed: forgets every object, on the device too (a new
    /// nonce in the region's first block, so that no block verifies), and
    /// admits nothing more. Err when even that write fails.
    pub fn forget_all(&mut self) -> io::Result<()> {
        let _ = self.finish_jobs();
        self.clear_dram();
        self.nonce = new_nonce(self.base, self.part);
        self.floor = 0;
        self.failed = true;
        self.write_head()?;
        self.emptied = true;
        // No block verifies under the new nonce: no tombstone is needed.
        self.retire_all_tombs();
        Ok(())
    }

    fn clear_dram(&mut self) {
        self.filters = SetFilters::new(self.cfg.sets, self.cfg.filter_bits);
        self.log = LogIndex::new(self.cfg.log_buckets(), self.cfg.sets, self.cfg.log_pages());
        self.seg_gen.iter_mut().for_each(|g| *g = 0);
        self.buffer = vec![Vec::new()];
        self.buffered = Hashes::default();
        self.buffer_used = 0;
        self.set_objects = 0;
        // Jobs are finished before this: no answer is awaited, and those
        // not taken no longer hold (nothing is left to have been found).
        self.invals = HashMap::new();
    }

    /// Whether the store stopped after a device error.
    pub fn failed(&self) -> bool {
        self.failed
    }

    pub(super) fn empty(dev: Arc<dyn BlockDevice>, base: u64, cfg: SmallConfig) -> SmallStore {
        SmallStore {
            dev,
            ring: Default::default(),
            base,
            filters: SetFilters::new(cfg.sets, cfg.filter_bits),
            log: LogIndex::new(cfg.log_buckets(), cfg.sets, cfg.log_pages()),
            seg_gen: vec![0; cfg.log_segments],
            head: 0,
            buffer: vec![Vec::new()],
            buffered: Hashes::default(),
            buffer_used: 0,
            generation: 1,
            floor: 0,
            nonce: 1,
            part: 0,
            parts: 1,
            set_objects: 0,
            failed: false,
            emptied: false,
            flush_duty: 0,
            next_flush_at: None,
            now: crate::clock::unix_now(),
            jobs: Default::default(),
            notify: None,
            job_ids: 0,
            invals: HashMap::new(),
            tombs: Tombs::default(),
            journal: None,
            stats: SmallStats::default(),
            cfg,
        }
    }

    pub fn config(&self) -> SmallConfig {
        self.cfg
    }

    pub(super) fn page_offset(&self, page: u32) -> u64 {
        page_offset(self.base, page)
    }

    pub(super) fn set_offset(&self, set: u32) -> u64 {
        set_offset(self.base, &self.cfg, set)
    }

    /// Segment flushes run on a background thread from now on: a full
    /// buffer is sealed and `tx` told this region's part number, and the
    /// thread runs the job ([`super::flush::run_sealed_job`]) with the
    /// device I/O outside the store's owner.
    pub fn set_background(&mut self, tx: crossbeam_channel::Sender<u32>) {
        self.notify = Some(tx);
    }

    /// Whether an unwritten object (in the buffer, or in a sealed segment
    /// not committed yet) may have the key hash `h`; false: none has, and
    /// [`unwritten`](Self::unwritten) need not be scanned. A few hash
    /// lookups (the buffer's, one per queued job) instead of a scan of up to
    /// three segments' objects.
    pub(super) fn maybe_unwritten(&self, h: u64) -> bool {
        let maybe = self.buffered.has(h) || self.jobs.iter().any(|j| j.sealed_hashes.has(h));
        debug_assert_eq!(maybe, self.unwritten().any(|(ph, _)| *ph == h));
        maybe
    }

    /// The objects of the buffer and of the sealed segment under way, newest first.
    pub(super) fn unwritten(&self) -> impl Iterator<Item = &(u64, Obj)> {
        let sealed = self.jobs.iter().rev().flat_map(|j| j.sealed.iter().rev());
        self.buffer
            .iter()
            .rev()
            .chain(sealed)
            .flat_map(|p| p.iter().rev())
    }

    /// A 4 KiB block as DRAM describes it: from the view of the flush
    /// under way if it replaces the block, else from the device.
    pub(super) fn read_viewed(&self, off: u64) -> io::Result<AlignedBuf> {
        if let Some(job) = self.jobs.front() {
            let held = job.with_view(|v| {
                v.get(&off).map(|b| {
                    let mut c = AlignedBuf::new(BLOCK);
                    c.as_mut_slice().copy_from_slice(b.as_slice());
                    c
                })
            });
            if let Some(b) = held {
                return Ok(b);
            }
        }
        self.read_block(off, BLOCK)
    }

    pub(super) fn read_block(&self, off: u64, len: usize) -> io::Result<AlignedBuf> {
        let mut b = AlignedBuf::new(len);
        let n = self.dev.read_at(b.as_mut_slice(), off)?;
        if n < len {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"));
        }
        Ok(b)
    }

    /// Objects held: in sets, in the log index (older copies included) and in the buffer.
    pub fn objects(&self) -> u64 {
        self.set_objects + self.log.len() as u64 + self.unwritten().count() as u64
    }

    /// Objects in the log (indexed, older copies of a key included).
    pub fn log_objects(&self) -> u64 {
        self.log.len() as u64
    }

    /// DRAM the store holds: filters, log index, segment generations, the segment buffer.
    pub fn dram_bytes(&self) -> u64 {
        let (f, l, o) = self.dram_parts();
        f + l + o
    }

    /// DRAM by part: per-set filters (Bloom, hit bits, generation), the log
    /// index (with its vectors' spare capacity), the rest.
    pub fn dram_parts(&self) -> (u64, u64, u64) {
        // The open buffer (once it holds an object) and the sealed segments
        // waiting for their flush.
        let open = usize::from(self.buffer_used > 0 || self.buffer.len() > 1);
        let other = self.seg_gen.len() * 8
            + (open + self.flush_jobs()) * self.cfg.seg_pages * BLOCK
            + self.invals.capacity() * std::mem::size_of::<(u64, Inval)>()
            + self
                .invals
                .values()
                .map(|e| e.key.capacity())
                .sum::<usize>()
            + self.buffered.bytes()
            + self.tombs.bytes()
            + self
                .jobs
                .iter()
                .map(|j| j.sealed_hashes.bytes())
                .sum::<usize>();
        (
            self.filters.bytes() as u64,
            self.log.bytes() as u64,
            other as u64,
        )
    }

    /// Admits an object (leaving RAM). False if it does not fit a block or
    /// the store has failed.
    pub fn insert(&mut self, obj: Obj) -> io::Result<bool> {
        if self.failed || !format::fits(obj.key.len(), obj.value.len()) {
            return Ok(false);
        }
        if self.flush_deferred(obj.size()) {
            self.stats.deferred += 1;
            return Ok(false);
        }
        let h = xxh3_64(&obj.key);
        self.drop_buffered(&obj.key, h);
        self.stats.objects_admitted += 1;
        self.stats.bytes_admitted += (obj.key.len() + obj.value.len()) as u64;
        self.append(h, obj)?;
        Ok(true)
    }

    /// Bounds the share of time segment flushes take (the device's, with a
    /// background flusher; the inserting thread's, under its shard's lock,
    /// without): after a flush whose device work took T, the next waits
    /// `duty` x T, and admissions that would need it meanwhile are refused
    /// (the caller sends the item elsewhere). 0 (the default) never
    /// refuses: a full queue is waited for; the server uses 3 (flushes at
    /// most a quarter of the time).
    pub fn set_flush_duty(&mut self, duty: u32) {
        self.flush_duty = duty;
        if duty == 0 {
            self.next_flush_at = None;
        }
    }

    /// Whether admitting an object of `size` bytes ([`Obj::size`]) would
    /// need a segment flush that must wait (the admission would be refused):
    /// the previous flush is still under way, or the flush duty says wait.
    pub fn flush_deferred(&self, size: usize) -> bool {
        let full =
            self.buffer_used + size > BLOCK_PAYLOAD && self.buffer.len() == self.cfg.seg_pages;
        // With a duty of 0 nothing is deferred: a full queue is waited for.
        full && self.flush_duty > 0
            && (self.queue_full()
                || self.seg_gen[self.head] != 0
                    && self
                        .next_flush_at
                        .is_some_and(|t| std::time::Instant::now() < t))
    }

    /// How long the next flush must still wait under the flush duty (only
    /// flushes that move objects into sets wait, as in
    /// [`flush_deferred`](Self::flush_deferred)).
    pub(super) fn duty_wait(&self) -> std::time::Duration {
        if self.jobs.front().is_some_and(|j| j.invalidate) {
            // Changes wait for it.
            return std::time::Duration::ZERO;
        }
        let next = self.jobs.front().map_or(self.head, |j| j.seg);
        match self.next_flush_at {
            Some(t) if self.seg_gen[next] != 0 => {
                t.saturating_duration_since(std::time::Instant::now())
            }
            _ => std::time::Duration::ZERO,
        }
    }

    /// A flush's device work took `took`: the next waits `flush_duty` times it.
    pub(super) fn flushed(&mut self, took: std::time::Duration) {
        if self.flush_duty > 0 {
            self.next_flush_at = Some(std::time::Instant::now() + took * self.flush_duty);
        }
    }

    /// Whether appending an object of `size` bytes would seal a job that a
    /// background flusher runs (the open segment is full).
    pub(super) fn readmit_would_seal(&self, size: usize) -> bool {
        self.notify.is_some()
            && self.buffer_used + size > BLOCK_PAYLOAD
            && self.buffer.len() == self.cfg.seg_pages
    }

    pub(super) fn drop_buffered(&mut self, key: &[u8], h: u64) -> bool {
        if !self.buffered.has(h) {
            return false;
        }
        let mut dropped = 0;
        for page in self.buffer.iter_mut() {
            page.retain(|(ph, o)| {
                let same = *ph == h && o.key == key;
                dropped += u32::from(same);
                !same
            });
        }
        self.buffered.remove(h, dropped);
        dropped > 0
    }

    pub(super) fn append(&mut self, h: u64, mut obj: Obj) -> io::Result<()> {
        obj.set_rrip(0);
        // A copy above the key's tombstone: a next change needs a new one.
        self.tombs.readmitted(super::tomb::fp_of(h));
        // A copy of the key again: what an invalidation said of it no
        // longer holds (a change waiting for it asks anew).
        if !self.invals.is_empty() {
            self.invals.remove(&h);
        }
        let size = obj.size();
        if self.buffer_used + size > BLOCK_PAYLOAD {
            if self.buffer.len() == self.cfg.seg_pages {
                if self.queue_full() {
                    // Up to the first segment flush: the invalidations
                    // queued behind it need not run under the caller's lock.
                    let first = self.jobs.iter().position(|j| !j.invalidate);
                    self.finish_jobs_to(first.map_or(0, |i| i + 1))?;
                }
                if self.failed {
                    return Err(io::Error::other("small-object store failed"));
                }
                let job = self.seal();
                if self.notify.is_none() {
                    let t = std::time::Instant::now();
                    self.run_inline(&job)?;
                    self.held_lock(t);
                } else if self.jobs.len() == 1 && !self.tell_flusher() {
                    self.finish_jobs()?;
                }
                return self.append(h, obj);
            }
            self.buffer.push(Vec::new());
            self.buffer_used = 0;
        }
        self.buffer_used += size;
        self.buffer.last_mut().expect("a page").push((h, obj));
        self.buffered.add(h);
        Ok(())
    }

    /// Segment flushes queued (the jobs that are not invalidations).
    pub(super) fn flush_jobs(&self) -> usize {
        self.jobs.iter().filter(|j| !j.invalidate).count()
    }

    /// Sealed segments that may wait for their flush at once (with a
    /// background flusher; one without): a burst of small items fills
    /// them while the first is written, instead of going to the log tier.
    pub(super) fn max_jobs(&self) -> usize {
        match self.notify {
            Some(_) => QUEUED_SEGMENTS.min(self.cfg.log_segments - 1).max(1),
            None => 1,
        }
    }

    /// Whether another sealed segment must wait for the queue: it holds
    /// [`max_jobs`](Self::max_jobs), unless every queued flush and the
    /// next one write over slots never written since the region was
    /// formatted (the log's first pass: each is one sequential write that
    /// moves nothing), where up to [`FIRST_PASS_QUEUED`] wait, so that a
    /// burst (a RAM segment leaving RAM at once holds about fifteen
    /// segments of small items) is queued instead of sent to the log tier.
    pub(super) fn queue_full(&self) -> bool {
        let n = self.flush_jobs();
        if n < self.max_jobs() {
            return false;
        }
        let deep = FIRST_PASS_QUEUED.min(self.cfg.log_segments - 1);
        let fresh = (0..=n).all(|i| self.seg_gen[(self.head + i) % self.cfg.log_segments] == 0);
        !(self.notify.is_some() && n < deep && fresh)
    }

    /// Tells the background flusher that the first job can start; false
    /// if there is none (it stopped).
    pub(super) fn tell_flusher(&self) -> bool {
        self.notify
            .as_ref()
            .is_some_and(|tx| tx.send(self.part).is_ok())
    }

    pub(super) fn fail(&mut self, e: &io::Error) {
        tracing::error!(error = %e, "small-object store write failed; the store stops");
        self.failed = true;
    }
}

/// A nonce for a region formatted now: blocks of earlier regions on the
/// same bytes do not carry it.
fn new_nonce(base: u64, part: u32) -> u64 {
    use std::hash::BuildHasher;
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((t, base, part, std::process::id())) | 1
}
