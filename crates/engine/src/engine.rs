//! The engine: shards behind mutexes, the shared memory pool and CAS counter,
//! flush_all, the expiry sweeper's entry point, and aggregated stats;
//! `restart` holds the snapshot and crash-recovery start, `sizing` the
//! memory arithmetic of a configuration, `config` its settings, `small_start`
//! the small-object store's start-up.

use crate::device::io::{IoBackend, IoMode, Notify, ReadPool, Reader};
use crate::device::uring::{self, UringReader};
use crate::device::Undo;
use crate::error::{ConfigError, FlashShare, SnapshotError};
use crate::flash::tier::RecordOwner;
use crate::flash::{BlockDevice, FileDevice, FlashTier};
use crate::hash::hash_key;
use crate::index::Loc;
use crate::item::{Header, HEADER};
use crate::pool::SegmentPool;
use crate::shard::hold::{HoldCause, HoldStats, ShardGuard, ShardLock};
use crate::shard::{Shard, ShardStats, Shared};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Average item size the index is first sized for when no hash power is
/// given; it grows with the item count from there.
const SIZING_ITEM_BYTES: usize = 4096;
/// Segments each shard should own at least.
const MIN_SEGMENTS_PER_SHARD: usize = 8;
/// Items the expiry sweep looks at per lock hold (tens of microseconds).
const SWEEP_SLICE_ITEMS: usize = 256;

/// Picks the flash reader for `mode` and says in the log which one and why.
fn choose_io(fc: &FlashConfig, devices: &[Arc<dyn BlockDevice>]) -> Result<IoBackend, ConfigError> {
    let mode = fc.io;
    if mode == IoMode::Pool {
        tracing::info!("flash reads: thread pool (ext_io=pool)");
        return Ok(IoBackend::Pool);
    }
    // On a thread of its own: a thread that used a ring may see later
    // blocking calls (socket reads with a timeout) fail with EINTR when the
    // kernel tears the ring down, and the caller's thread should not.
    let probed = {
        let devices = devices.to_vec();
        std::thread::Builder::new()
            .name("flash-io-probe".into())
            .spawn(move || uring::probe(&devices))
            .map_err(|error| ConfigError::Thread {
                thread: "the io_uring probe",
                error,
            })?
            .join()
            .unwrap_or_else(|_| Err("the io_uring probe panicked".into()))
    };
    match probed {
        Ok(()) => {
            tracing::info!(
                "flash reads: io_uring, one ring per worker, at most {} reads of a device in the kernel (ext_read_depth), {} in each of {} rings (ext_io={})",
                fc.read_depth,
                uring::per_ring(fc.read_depth, fc.readers),
                fc.readers.max(1),
                if mode == IoMode::Uring {
                    "uring"
                } else {
                    "auto"
                }
            );
            Ok(IoBackend::Uring)
        }
        Err(why) if mode == IoMode::Uring => Err(ConfigError::NoUring { why }),
        Err(why) => {
            tracing::info!("flash reads: thread pool, because io_uring cannot be used: {why}");
            Ok(IoBackend::Pool)
        }
    }
}

type SnapFile = crate::persist::SnapReader<std::io::BufReader<std::fs::File>>;

/// The shards, shared with the flusher thread.
struct Shards {
    list: Vec<ShardLock>,
    mask: u64,
}

impl Shards {
    #[inline]
    fn of(&self, hash: u64) -> &ShardLock {
        &self.list[self.index(hash)]
    }

    /// High bits pick the shard; the index uses the low bits.
    #[inline]
    fn index(&self, hash: u64) -> usize {
        ((hash >> 40) & self.mask) as usize
    }
}

impl RecordOwner for Shards {
    fn reclaim(&self, loc: Loc, item: &[u8], reinsert: bool, may_wait: bool) -> bool {
        let klen = Header::read(item).klen as usize;
        let hash = hash_key(&item[HEADER..HEADER + klen]);
        self.of(hash)
            .lock_for(HoldCause::Reclaim)
            .reclaim_flash(hash, loc, item, reinsert, may_wait)
    }
}

pub struct Engine {
    shards: Arc<Shards>,
    pub(crate) shared: Arc<Shared>,
    config: EngineConfig,
    flash: Option<Arc<FlashTier>>,
    /// The reader chosen at start; None without a flash tier.
    io_backend: Option<IoBackend>,
    /// Made on first use: always with the pool backend, and for a worker
    /// whose ring cannot be created.
    read_pool: std::sync::OnceLock<ReadPool>,
    flusher: Option<JoinHandle<()>>,
    /// The small-object store's flusher threads and how to stop them.
    small_flushers: Vec<JoinHandle<()>>,
    small_tx: Option<crossbeam_channel::Sender<u32>>,
    journal_writer: Option<JoinHandle<()>>,
    last_recovery: Mutex<Option<crate::flash::tier::Recovery>>,
}

impl Drop for Engine {
    fn drop(&mut self) {
        if let Some(tx) = self.small_tx.take() {
            for _ in 0..self.small_flushers.len() {
                let _ = tx.send(SMALL_STOP);
            }
        }
        for t in self.small_flushers.drain(..) {
            let _ = t.join();
        }
        if let Some(f) = &self.flash {
            f.stop();
        }
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
        if let Some(f) = &self.flash {
            f.journal().stop();
        }
        if let Some(t) = self.journal_writer.take() {
            let _ = t.join();
        }
    }
}

impl Engine {
    /// Starts a shrink of every index table to its fewest buckets and
    /// leaves it under way (tests: a rebuild that evicts when finished).
    #[doc(hidden)]
    pub fn start_index_shrinks_for_tests(&self) {
        for s in &self.shards.list {
            s.lock().start_index_shrinks_for_tests();
        }
    }

    /// Shard `i`'s lock, for the lock's own tests.
    #[cfg(test)]
    pub(crate) fn shard_lock(&self, i: usize) -> &ShardLock {
        &self.shards.list[i]
    }

    /// Builds the engine, opening the configured flash devices.
    /// A start that fails removes the flash files it created and gives
    /// files that were there their old length back (while it still holds
    /// their locks).
    pub fn new(config: EngineConfig) -> Result<Engine, ConfigError> {
        Engine::new_undoable(config).map(|(e, _)| e)
    }

    /// [`new`](Self::new), with what undoes its device opens (a created
    /// file removed, a grown one shrunk back) for a start that fails after
    /// the engine is built; dropped unrun, they only close a descriptor.
    pub fn new_undoable(config: EngineConfig) -> Result<(Engine, Vec<Undo>), ConfigError> {
        crate::clock::calibrate();
        let mut devices: Vec<Arc<dyn BlockDevice>> = Vec::new();
        let mut undo = Vec::new();
        let mut opened = Ok(());
        if let Some(fc) = &config.flash {
            for (path, size) in &fc.paths {
                match FileDevice::open(path, *size) {
                    Ok(d) => {
                        undo.extend(d.undo().ok());
                        devices.push(Arc::new(d));
                    }
                    Err(e) => {
                        opened = Err(e.into());
                        break;
                    }
                }
            }
        }
        match opened.and_then(|()| Engine::with_devices(config, devices)) {
            Ok(engine) => Ok((engine, undo)),
            Err(e) => {
                undo.into_iter().for_each(|u| u.run());
                Err(e)
            }
        }
    }

    /// Builds the engine on the given flash devices (tests pass in-memory or
    /// fault-injecting ones); `config.flash.paths` is ignored.
    pub fn with_devices(
        mut config: EngineConfig,
        mut devices: Vec<Arc<dyn BlockDevice>>,
    ) -> Result<Engine, ConfigError> {
        // As asked (shards and hash power 0 = from memory), for messages.
        let asked = config.clone();
        let seg = config.segment_size;
        if !(64 * 1024..=crate::index::MAX_SEGMENT_BYTES).contains(&seg) {
            return Err(ConfigError::SegmentSize { size: seg });
        }
        let segments = config.memory_limit / seg;
        let device_bytes: u64 = devices.iter().map(|d| d.size()).sum();
        if segments < 4 {
            return Err(too_small(&asked, device_bytes, String::new()));
        }
        if segments > crate::index::MAX_SEGMENTS as usize {
            return Err(ConfigError::TooManySegments {
                memory_mb: config.memory_limit >> 20,
                segment_kib: seg >> 10,
                max_segments: crate::index::MAX_SEGMENTS,
                min_segment_kib: (config.memory_limit / crate::index::MAX_SEGMENTS as usize)
                    .div_ceil(1024),
            });
        }
        if config.shards == 0 {
            config.shards = shards_for(segments);
        }
        if !config.shards.is_power_of_two() {
            return Err(ConfigError::ShardCount {
                shards: config.shards,
            });
        }
        // Index buckets per shard at start: 2^hashpower over the shards when
        // given, else what RAM items of 4 KiB (and flash items of
        // ext_avg_item_size, when given) need; it resizes itself from there.
        let sizing = index_size(&config, device_bytes);
        config.hash_power = sizing.hash_power;
        if segments / config.shards + 16 >= crate::flash::FLASH_SEG_BASE as usize {
            return Err(ConfigError::TooManySegmentsPerShard {
                segments,
                segment_kib: seg >> 10,
                shards: config.shards,
            });
        }
        if tiercache_policy::by_name(&config.policy).is_none() {
            return Err(ConfigError::UnknownPolicy {
                name: config.policy.clone(),
            });
        }
        let small_region = carve_small_region(&config, &mut devices);
        let flash = match (&config.flash, devices.is_empty()) {
            (Some(fc), false) => {
                if fc.params.segment_size < 2 * seg + 2 * crate::device::aligned::BLOCK {
                    return Err(ConfigError::FlashSegmentTooSmall {
                        flash_kib: fc.params.segment_size >> 10,
                        ram_kib: seg >> 10,
                    });
                }
                Some(Arc::new(FlashTier::new(devices, fc.params.clone())?))
            }
            (Some(_), true) => return Err(ConfigError::NoFlashDevice),
            _ => None,
        };
        let shared = Arc::new(Shared {
            pool: SegmentPool::new(seg, config.memory_limit),
            cas: AtomicU64::new(0),
            flush_gen: AtomicU64::new(0),
            flush_at: AtomicU32::new(0),
            nshards: config.shards,
            index_cap: std::sync::atomic::AtomicUsize::new(index_cap(&config)),
            evictions: std::sync::OnceLock::new(),
            item_size_max: std::sync::atomic::AtomicUsize::new(0),
            segments_wanted: std::sync::atomic::AtomicUsize::new(0),
            evacuator: Default::default(),
        });
        shared
            .pool
            .set_reserve(SegmentPool::reserve_for(config.shards));
        if let Some(f) = &flash {
            // Write buffers come out of the memory limit.
            shared.pool.add_index_bytes(f.buffer_bytes() as isize);
            if shared.pool.max_segments() < min_segments(config.shards, true) {
                return Err(too_small(
                    &asked,
                    device_bytes,
                    format!(
                        " next to {} MiB of flash write buffers",
                        f.buffer_bytes() >> 20
                    ),
                ));
            }
        }
        let mut list: Vec<ShardLock> = (0..config.shards)
            .map(|_| {
                let policy = tiercache_policy::by_name(&config.policy).expect("checked");
                ShardLock::new(Shard::new(
                    sizing.precision,
                    sizing.buckets,
                    policy,
                    shared.clone(),
                    flash.clone(),
                ))
            })
            .collect();
        for (i, s) in list.iter_mut().enumerate() {
            s.get_mut().set_position(i);
        }
        if let (Some(region), Some(fc)) = (&small_region, &config.flash) {
            attach_small(region, &mut list, fc)?;
        }
        // Small-store tombstones of regions that no longer exist (the store
        // is off, or has fewer parts) protect nothing: the journal drops them.
        if let Some(f) = list.first_mut().and_then(|s| s.get_mut().flash_tier()) {
            let parts = if small_region.is_some() {
                list.len()
            } else {
                0
            };
            f.journal().retire_small_parts_from(parts as u32);
        }
        // The index and the write buffers come out of -m: what is left must
        // hold a working RAM tier.
        // The store's filters and log index are allocated with its first
        // objects (issue 32): what they will take is counted now, as the
        // minimum `-m` (sizing::memory_fits) counts it.
        let small_now: usize = list.iter_mut().map(|s| s.get_mut().small_dram()).sum();
        let small_bytes = small_now.max(sizing::small_start_dram(&config, device_bytes));
        let index_mb = (shared.pool.index_bytes()
            - flash.as_ref().map_or(0, |f| f.buffer_bytes())
            - small_now)
            >> 20;
        let room = shared
            .pool
            .limit()
            .saturating_sub(shared.pool.index_bytes() + small_bytes - small_now)
            / seg;
        if room < min_segments(config.shards, flash.is_some()) {
            let hint = config.flash.as_ref().is_some_and(|f| f.avg_item_size > 0);
            return Err(too_small(
                &asked,
                device_bytes,
                format!(
                    ": the index takes {index_mb} MiB{}{}{} and leaves room for only {} segments of {} KiB",
                    match (flash.is_some(), hint) {
                        (true, true) => " (sized for the flash devices full of items of ext_avg_item_size; without it the index starts small and grows with the items)",
                        _ => "",
                    },
                    if small_bytes > 0 {
                        format!(
                            ", the small-object store's filters and buffers {} MiB",
                            small_bytes.div_ceil(1 << 20)
                        )
                    } else {
                        String::new()
                    },
                    if flash.is_some() {
                        " plus the flash write buffers"
                    } else {
                        ""
                    },
                    room,
                    seg >> 10,
                ),
            ));
        }
        let shards = Arc::new(Shards {
            list,
            mask: (config.shards - 1) as u64,
        });
        let io_backend = match (&flash, &config.flash) {
            (Some(f), Some(fc)) => Some(choose_io(fc, f.devices())?),
            _ => None,
        };
        let journal_writer = match &flash {
            Some(f) => {
                f.journal()
                    .set_geometry(config.shards.trailing_zeros() as u8, sizing.precision);
                let f2 = f.clone();
                let t = std::thread::Builder::new()
                    .name("flash-journal".into())
                    .spawn(move || f2.journal().run(&|| f2.wake_all()))
                    .map_err(|error| ConfigError::Thread {
                        thread: "the flash journal",
                        error,
                    })?;
                Some(t)
            }
            None => None,
        };
        let flusher = match &flash {
            Some(f) => {
                let (f2, owner) = (f.clone(), shards.clone());
                let t = std::thread::Builder::new()
                    .name("flash-flusher".into())
                    .spawn(move || {
                        crate::priority::background_lock_holder("flash-flusher");
                        f2.run_flusher(owner.as_ref(), Duration::from_millis(200))
                    })
                    .map_err(|error| ConfigError::Thread {
                        thread: "the flash flusher",
                        error,
                    })?;
                Some(t)
            }
            None => None,
        };
        let (small_tx, small_flushers) = start_small_flushers(&shards, &config)?;
        let engine = Engine {
            shards,
            shared,
            config,
            flash,
            io_backend,
            read_pool: std::sync::OnceLock::new(),
            flusher,
            small_flushers,
            small_tx,
            journal_writer,
            last_recovery: Mutex::new(None),
        };
        if let (Some(f), Some(fc)) = (&engine.flash, &engine.config.flash) {
            f.distrust.set_files(fc.untrusted_marks.clone());
            if f.distrust.found_marks() && fc.params.wipe {
                f.distrust.clear_files();
            }
        }
        engine.restore_if_any()?;
        if let Some(f) = &engine.flash {
            // A snapshot brings its own index: fingerprints follow the index.
            let precision = engine.shards.list[0].lock().index_precision();
            f.journal()
                .set_geometry(engine.config.shards.trailing_zeros() as u8, precision);
        }
        Ok(engine)
    }

    /// The flash tier, if configured.
    pub fn flash(&self) -> Option<&Arc<FlashTier>> {
        self.flash.as_ref()
    }

    /// The flash tier's figures for `stats`, with the crash recovery at
    /// start and the reader in use; None without a flash tier.
    pub fn flash_stats(&self) -> Option<crate::flash::FlashStats> {
        let mut s = self.flash.as_ref()?.stats_snapshot();
        s.recovery = self.last_recovery();
        s.io_backend = self.io_backend;
        Some(s)
    }

    /// The flash reader in use (`ext_io`), if there is a flash tier.
    pub fn io_backend(&self) -> Option<IoBackend> {
        self.io_backend
    }

    /// A reader for one network worker, made on that worker's thread.
    /// The pool reader wakes the worker through `notify`; the io_uring
    /// reader through its [`Reader::event_fd`], which the worker registers.
    pub fn reader(&self, notify: Notify) -> Option<Box<dyn Reader>> {
        let flash = self.flash.as_ref()?;
        if self.io_backend == Some(IoBackend::Uring) {
            let depth = self
                .config
                .flash
                .as_ref()
                .map_or(uring::DEFAULT_DEPTH, |c| {
                    uring::per_ring(c.read_depth, c.readers)
                });
            match UringReader::new(flash.devices(), depth) {
                Ok(r) => return Some(Box::new(r)),
                Err(e) => tracing::warn!(error = %e,
                    "cannot create this worker's io_uring ring; it reads flash through the thread pool"),
            }
        }
        let pool = self.read_pool.get_or_init(|| {
            let threads = self.config.flash.as_ref().map_or(4, |c| c.read_threads);
            ReadPool::new(flash.devices().to_vec(), threads.max(1))
        });
        Some(Box::new(pool.reader(notify)))
    }
    /// Whether an item with a key of `klen` bytes and a value of `vlen`
    /// (no client flags) fits: the key length, half the memory limit, and
    /// the item size limit when one is set.
    pub fn fits(&self, klen: usize, vlen: usize) -> bool {
        self.shards.of(0).lock().fits(klen, vlen, 0)
    }

    /// memcached's item size limit (`-I`, counted as memcached counts an
    /// item: see `tiercache_proto::text::Limits::too_large`); an append or
    /// prepend whose result is over it is not stored. 0: only half the
    /// memory limit bounds an item.
    pub fn set_item_size_max(&self, bytes: usize) {
        self.shared.item_size_max.store(bytes, Ordering::Relaxed);
    }

    /// The memory limit now (`-m`, or the last `cache_memlimit`), bytes.
    pub fn memory_limit(&self) -> usize {
        self.shared.pool.limit()
    }

    /// `cache_memlimit`: a new memory limit (bytes) at run time, with the
    /// checks a start with that `-m` makes (a limit below the
    /// configuration's minimum is refused, naming it). Lower: the RAM tier
    /// gives segments back as it evicts, so memory comes down with the
    /// cache's next writes, and the index's budget shrinks (a larger index
    /// evicts entries rather than growing, and shrinks as its load drops);
    /// higher: both may grow at once.
    pub fn set_memory_limit(&self, bytes: usize) -> Result<(), ConfigError> {
        let mut c = self.config().clone();
        c.memory_limit = bytes;
        let device_bytes = self.flash().map_or(0, |f| f.capacity());
        if !sizing::memory_fits(&c, device_bytes) {
            return Err(too_small(&c, device_bytes, String::new()));
        }
        self.shared.pool.set_limit(bytes);
        self.shared
            .index_cap
            .store(index_cap(&c), Ordering::Relaxed);
        Ok(())
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Hash of a key (pass it to [`Engine::lock`]).
    #[inline]
    pub fn hash(key: &[u8]) -> u64 {
        hash_key(key)
    }

    /// Every key command's opening: the key's hash and its shard, locked and
    /// caught up.
    #[inline]
    pub(crate) fn lock_key(&self, key: &[u8], now: u32) -> (u64, ShardGuard<'_>) {
        let hash = hash_key(key);
        (hash, self.lock(hash, now))
    }

    /// The shard that owns `hash`.
    #[inline]
    pub(crate) fn shard_index(&self, hash: u64) -> usize {
        self.shards.index(hash)
    }

    /// Shard `i` (in 0..its count), locked and caught up; None past the last.
    pub(crate) fn lock_nth(&self, i: usize, now: u32) -> Option<ShardGuard<'_>> {
        let mut g = self.shards.list.get(i)?.lock();
        g.catch_up(now);
        Some(g)
    }

    /// Locks the shard that owns `hash`, applying any pending flush first.
    #[inline]
    pub fn lock(&self, hash: u64, now: u32) -> ShardGuard<'_> {
        let mut g = self.shards.of(hash).lock();
        g.catch_up(now);
        g
    }

    /// Before flush_all: with a flash tier, raises the crash journal's floor
    /// over every segment so far (a crash must not bring flushed items
    /// back). False until that is durable: retry the request.
    pub fn flush_gate(&self) -> bool {
        match &self.flash {
            Some(f) => {
                let t = f.journal().raise_floor(f.max_seq());
                f.journal().is_durable(t)
            }
            None => true,
        }
    }

    /// flush_all: as memcached, items go at `now + delay - 1`, so a delay of
    /// 0 or 1 flushes at once; an immediate flush consumes a CAS value.
    pub fn flush_all(&self, delay: i64, now: u32) {
        let at = if delay > 0 {
            crate::clock::absolute_exptime(delay, now).saturating_sub(1)
        } else {
            now
        };
        if at > now {
            self.shared.flush_at.store(at, Ordering::Relaxed);
        } else {
            self.shared.flush_at.store(0, Ordering::Relaxed);
            self.shared.next_cas();
            self.shared.flush_gen.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Background maintenance: applies pending flushes and reclaims expired items.
    pub fn maintain(&self, now: u32) -> u64 {
        if let Some(f) = &self.flash {
            f.set_clock(now);
        }
        let mut reclaimed = 0;
        for s in &self.shards.list {
            // In slices, the lock released between them: a walk of the
            // whole shard in one hold was a request's worst wait.
            loop {
                let mut g = s.lock_for(HoldCause::Sweep);
                g.catch_up(now);
                // What a flush set aside goes first (the evacuator gives
                // it back too; this pass finishes what it has not).
                let (n, done) = if g.flushing() {
                    g.flush_slice();
                    (0, false)
                } else {
                    g.sweep_slice(now, SWEEP_SLICE_ITEMS)
                };
                // A request waiting for the lock goes before the next slice.
                g.unlock_fair();
                reclaimed += n;
                if done {
                    break;
                }
            }
        }
        self.give_back_over_budget(now);
        self.shared.pool.drop_released();
        reclaimed
    }

    /// Over the memory limit (a lower `cache_memlimit`, a grown index):
    /// free buffers go first, then each shard, those holding the most
    /// first, gives back up to
    /// [`GIVE_BACK_PER_PASS`] of its oldest segments, each evacuated
    /// [`GIVE_BACK_SLICE_ITEMS`] items per lock hold, so that memory comes
    /// down without waiting for sets to reclaim and without holding a
    /// shard's lock for a whole segment.
    fn give_back_over_budget(&self, now: u32) {
        let pool = &self.shared.pool;
        pool.trim_free();
        if !pool.over_budget() {
            return;
        }
        // The shards holding the most give first, so that none is drained
        // below its share while others keep more.
        let mut held: Vec<(usize, usize)> = (self.shards.list.iter().enumerate())
            .map(|(i, s)| (s.lock_for(HoldCause::Stats).held_segments(), i))
            .collect();
        held.sort_unstable_by(|a, b| b.cmp(a));
        for (_, i) in held {
            let mut given = 0;
            // Bounded: a shard whose evacuations keep their items (into
            // the spare) gives nothing for many slices.
            let mut slices = 0;
            while given < GIVE_BACK_PER_PASS && slices < GIVE_BACK_MAX_SLICES {
                slices += 1;
                if !pool.over_budget() {
                    return;
                }
                // One slice per lock hold: requests run between them.
                let mut g = self.shards.list[i].lock();
                g.catch_up(now);
                // A head segment per queue stays: sets keep room.
                let r = g.give_back_slice(2, GIVE_BACK_SLICE_ITEMS);
                g.unlock_fair();
                match r {
                    Ok(None) => {}
                    Ok(Some(true)) => given += 1,
                    Ok(Some(false)) | Err(_) => break,
                }
            }
        }
    }

    /// Reports every eviction of a RAM item to `sink` from now on (memcached's
    /// `watch evictions`); a second sink is refused (returned).
    pub fn watch_evictions(
        &self,
        sink: Arc<dyn crate::evictions::EvictionSink>,
    ) -> Result<(), Arc<dyn crate::evictions::EvictionSink>> {
        self.shared.evictions.set(sink)
    }

    /// The small-object store's figures over every shard; None without one.
    pub fn small_stats(&self) -> Option<crate::small::SmallTotals> {
        let mut t: Option<crate::small::SmallTotals> = None;
        for s in &self.shards.list {
            if let Some(p) = s.lock_for(HoldCause::Stats).small_stats() {
                t.get_or_insert_with(Default::default).add(&p);
            }
        }
        t
    }

    /// Sum of all shards' counters.
    pub fn stats(&self, now: u32) -> EngineStats {
        let mut total = ShardStats::default();
        let (mut index_buckets, mut index_entries, mut index_slots) = (0, 0, 0);
        let mut small: Option<crate::small::SmallTotals> = None;
        let (mut holds, mut waits) = (HoldStats::default(), HoldStats::default());
        for s in &self.shards.list {
            let mut g = s.lock_for(HoldCause::Stats);
            g.catch_up(now);
            holds.add(g.holds());
            waits.add(g.waits());
            index_buckets += g.index_buckets();
            let (entries, slots) = g.index_usage();
            index_entries += entries;
            index_slots += slots;
            if let Some(p) = g.small_stats() {
                small.get_or_insert_with(Default::default).add(&p);
            }
            // Summed (the longest for a `max` field), as each field declares.
            total.add(&g.stats);
        }
        total.curr_items += small.map_or(0, |s| s.objects);
        EngineStats {
            shard: total,
            small,
            index_bytes: self.shared.pool.index_bytes() as u64,
            segments_allocated: self.shared.pool.allocated() as u64,
            segment_size: self.shared.pool.seg_size() as u64,
            memory_limit: self.shared.pool.limit() as u64,
            index_buckets: index_buckets as u64,
            index_entries: index_entries as u64,
            index_slots: index_slots as u64,
            index_table_bytes: self
                .shards
                .list
                .iter()
                .map(|s| s.lock_for(HoldCause::Stats).index_bytes() as u64)
                .sum(),
            shards: self.shards.list.len() as u64,
            holds,
            waits,
        }
    }

    /// Resets the counters that `stats reset` clears.
    pub fn reset_stats(&self) {
        for s in &self.shards.list {
            let mut g = s.lock_for(HoldCause::Stats);
            g.reset_holds();
            // The counters ShardStats declares `reset`.
            g.stats.reset();
        }
    }
}

mod config;
mod evacuation;
mod restart;
mod sizing;
mod small_start;

pub use config::{EngineConfig, FlashConfig};
use small_start::{attach_small, carve_small_region, start_small_flushers, SMALL_STOP};

/// Segments a shard gives back per maintenance pass (once a second in the
/// server) while the pool is over its budget.
const GIVE_BACK_PER_PASS: usize = 16;

/// Items a give-back evacuates per lock hold (as an evacuation ahead does
/// per insert): tens of microseconds.
const GIVE_BACK_SLICE_ITEMS: usize = 64;

/// Lock holds a shard's give-back may take per maintenance pass: enough
/// for [`GIVE_BACK_PER_PASS`] segments of small items.
const GIVE_BACK_MAX_SLICES: usize = 4096;

use sizing::{index_cap, index_size, min_segments, shards_for, too_small};
pub use sizing::{index_dram_bytes, min_memory_mb};

/// Engine-wide figures for `stats`.
#[derive(Debug, Clone, Copy)]
pub struct EngineStats {
    pub shard: ShardStats,
    pub index_bytes: u64,
    pub segments_allocated: u64,
    pub segment_size: u64,
    pub memory_limit: u64,
    pub index_buckets: u64,
    /// Entries in the indexes (RAM and flash items) and the slots they have.
    pub index_entries: u64,
    pub index_slots: u64,
    /// Bytes of the index tables alone (`index_bytes` also counts the
    /// flash write buffers).
    pub index_table_bytes: u64,
    pub shards: u64,
    /// The small-object store's figures (its objects are in `curr_items`).
    pub small: Option<crate::small::SmallTotals>,
    /// Shard-lock holds by cause, over every shard (`shard::hold`).
    pub holds: HoldStats,
    /// Waits for a shard's lock by the waiter's cause, over every shard.
    pub waits: HoldStats,
}
