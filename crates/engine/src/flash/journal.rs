//! The crash journal: what lets a start after a crash (kill -9, power loss)
//! rebuild the flash index from the device without ever serving a value
//! that was deleted or overwritten.
//!
//! Deletes and overwrites touch only DRAM, so after a crash the device still
//! holds the old records. Two facts, made durable here *before* the change
//! they protect is made, say which records are dead:
//!
//! - a **tombstone** `(fingerprint, horizon)`: records whose key has this
//!   fingerprint, in segments with a sequence number up to `horizon`, are
//!   dead. The fingerprint is coarse on purpose: it is shared by every key
//!   an insert of the key may drop from the index (same tag, same bucket
//!   pair; see [`fingerprint`]), so one tombstone covers them all. Other keys
//!   that share it are dropped too: a miss, never a wrong value.
//! - the **floors**, one per device class (fast, capacity): segments
//!   written for that class with a sequence number up to its floor are not
//!   trusted at all. A class's floor rises before the flusher reclaims one
//!   of its segments (whose records stay on the device until the slot is
//!   rewritten); both rise on `flush_all` and when the journal wraps onto
//!   tombstones that are still needed. The fast class reclaims far more
//!   often than the capacity class, so one floor for both would leave most
//!   capacity segments below it after a crash. A record's older copy on
//!   the other class is not covered by its own class's floor: the shard
//!   tombstones it instead (`Shard::reclaim_flash`, docs/CRASH.md).
//!
//! Layout: the journal region (on device 0) is an array of *pairs* of 4 KiB
//! blocks. The current pair's content (its entries so far and the floor) is
//! rewritten with every commit, alternating between the pair's two blocks,
//! so a torn write leaves the previous copy whole. Commits are grouped: one
//! thread writes whatever was asked since the last commit (each block
//! durable by itself: [`BlockDevice::write_durable`], an O_DSYNC write on
//! files), then reports the highest ticket that is durable. Recovery reads every valid
//! block and takes the union of their tombstones and each class's highest
//! floor; stale blocks from an earlier pass over the ring only hold
//! tombstones already below both floors, so the union is always safe.
//!
//! The small-object store's tombstones (`(part, generation)` in the
//! horizon, [`small_horizon`]) are not covered by a floor: an object in a
//! set lives under its set's generation indefinitely. The journal keeps
//! each one until the store says its set was rewritten above it, durably
//! ([`Journal::retire_small`]): entering a pair whose live store tombstones
//! are not retired writes them into the pair's new content again, so no
//! write ever drops one (docs/SMALL.md, "Changes of held keys").

use super::class::{DeviceClass, PerClass, CLASSES};
use super::format::{small_horizon, small_of, JournalBlock, JOURNAL_ENTRIES};
use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::device::block::BlockDevice;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The journal fingerprint of a key hash for an engine whose index keeps
/// `geometry.1` bits of position (`geometry.0`, log2 of the shard count, is
/// recorded for the reader but not mixed in): a mix of the key's index
/// class, its tag and position (see [`crate::index::Class`]). An index
/// entry has the same class as its key, so an entry dropped without its
/// key (evicted from a full index) still gets the key's fingerprint.
pub fn fingerprint(hash: u64, geometry: (u8, u32)) -> u32 {
    class_fingerprint(crate::index::Class::of(hash, geometry.1))
}

/// The fingerprint of every key of an index class.
pub fn class_fingerprint(c: crate::index::Class) -> u32 {
    let mut x = u64::from(c.tag) | (u64::from(c.pos) << 11);
    // splitmix64's finalizer.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) as u32
}

/// What the journal held when it was opened: the facts recovery applies.
#[derive(Debug, Default, Clone)]
pub struct Recovered {
    /// Per device class, the floor of its segments.
    pub floors: PerClass<u64>,
    /// The highest horizon of any tombstone (sequence numbers go on above it).
    pub max_horizon: u64,
    /// Per geometry, the highest horizon of each fingerprint.
    pub tombstones: HashMap<(u8, u32), HashMap<u32, u64>>,
    /// A journal block is damaged where no torn write can explain it (not
    /// in the pair being written at the crash): tombstones may be lost, so
    /// nothing on flash can be trusted.
    pub damaged: Option<String>,
    /// Byte offsets of the blocks that do not verify.
    pub invalid_blocks: Vec<u64>,
    /// The highest write counter of a valid block.
    pub max_counter: u64,
}

impl Recovered {
    /// Whether a segment of sequence number `seq` written for device class
    /// `class` is at or below its class's floor.
    pub fn below_floor(&self, seq: u64, class: DeviceClass) -> bool {
        seq <= self.floors[class]
    }

    /// Whether a record of a key with this hash in a segment of sequence
    /// number `seq`, written for device class `class`, is dead.
    pub fn is_dead(&self, hash: u64, seq: u64, class: DeviceClass) -> bool {
        self.damaged.is_some()
            || self.below_floor(seq, class)
            || self
                .tombstones
                .iter()
                .any(|(&g, m)| m.get(&fingerprint(hash, g)).is_some_and(|&h| seq <= h))
    }
}

/// Counters of the journal.
#[derive(Default)]
pub struct JournalStats {
    pub commits: AtomicU64,
    pub tombstones: AtomicU64,
    pub block_writes: AtomicU64,
    /// Floor raises forced by the ring wrapping onto live tombstones.
    pub wrap_floor_raises: AtomicU64,
    /// Small-object store tombstones asked for, and those written again
    /// into a new pair because their set was not rewritten yet.
    pub small_tombstones: AtomicU64,
    pub small_carried: AtomicU64,
}

struct Ring {
    cur: usize,
    entries: Vec<(u32, u64)>,
    /// Geometry of the current pair's entries.
    geometry: (u8, u32),
    /// Highest horizon in each pair (either copy).
    max_h: Vec<u64>,
    /// The copy (0 or 1) each pair's next write goes to.
    next_copy: Vec<u8>,
    /// Per pair, the small-store tombstones (fingerprint, horizon) it
    /// holds (either copy): those still live are carried into its next
    /// content.
    small_in: Vec<Vec<(u32, u64)>>,
    counter: u64,
    written_floors: PerClass<u64>,
    buf: AlignedBuf,
}

struct State {
    pending: Vec<(u32, u64)>,
    last_ticket: u64,
    want_floors: PerClass<u64>,
    /// Taken by the writer while it commits.
    ring: Option<Ring>,
    /// The small-object store's live tombstones: (part, fingerprint) to
    /// generation (asked for, or found at open, and not retired).
    small: HashMap<(u32, u32), u64>,
}

pub struct Journal {
    dev: Arc<dyn BlockDevice>,
    start: u64,
    pairs: usize,
    geometry: AtomicU64,
    state: Mutex<State>,
    work: Condvar,
    done: Condvar,
    durable: AtomicU64,
    /// The durable floor of each device class.
    floors: PerClass<AtomicU64>,
    /// The write counter of the latest durable block.
    counter: AtomicU64,
    failed: AtomicBool,
    stop: AtomicBool,
    recovered: Mutex<Option<Recovered>>,
    /// No block was damaged at open ([`Recovered::damaged`]): the small
    /// store's tombstones read are all there is.
    small_trusted: bool,
    pub stats: JournalStats,
}

impl Journal {
    /// Zeroes the journal region (a new or wiped device).
    pub fn wipe(dev: &dyn BlockDevice, start: u64, bytes: u64) -> io::Result<()> {
        let chunk = (1usize << 20).min(bytes as usize);
        let zero = AlignedBuf::new(chunk);
        let mut at = 0;
        while at < bytes {
            let n = chunk.min((bytes - at) as usize);
            dev.write_at(&zero.as_slice()[..n], start + at)?;
            at += n as u64;
        }
        dev.sync()
    }

    /// Opens the journal region of `bytes` at `start`, reading what it holds.
    pub fn open(dev: Arc<dyn BlockDevice>, start: u64, bytes: u64) -> io::Result<Journal> {
        let pairs = (bytes / (2 * BLOCK as u64)) as usize;
        if pairs < 2 {
            return Err(io::Error::other("the crash journal needs at least 16 KiB"));
        }
        let mut rec = Recovered::default();
        let mut max_h = vec![0u64; pairs];
        let mut next_copy = vec![0u8; pairs];
        // (counter, pair, copy) of the newest block, and per pair the newest copy.
        let mut newest: Option<(u64, usize, JournalBlock)> = None;
        let chunk_blocks = 256usize;
        let mut buf = AlignedBuf::new(chunk_blocks * BLOCK);
        let total = pairs * 2;
        let mut counters = vec![[None::<u64>; 2]; pairs];
        let mut small: HashMap<(u32, u32), u64> = HashMap::new();
        let mut small_in: Vec<Vec<(u32, u64)>> = vec![Vec::new(); pairs];
        // Blocks that are neither zero (never written) nor valid.
        let mut invalid = Vec::new();
        let mut b = 0;
        while b < total {
            let n = chunk_blocks.min(total - b);
            let got = dev.read_at(
                &mut buf.as_mut_slice()[..n * BLOCK],
                start + (b * BLOCK) as u64,
            )?;
            for i in 0..n.min(got / BLOCK) {
                let phys = b + i;
                let raw = &buf.as_slice()[i * BLOCK..(i + 1) * BLOCK];
                let (pair, copy) = (phys / 2, phys % 2);
                let Some(jb) = JournalBlock::read(raw).filter(|jb| jb.logical as usize == pair)
                else {
                    if raw.iter().any(|&x| x != 0) {
                        invalid.push(phys);
                    }
                    continue;
                };
                for (f, jf) in rec.floors.iter_mut().zip(jb.floors) {
                    *f = (*f).max(jf);
                }
                let m = rec.tombstones.entry(jb.geometry).or_default();
                for &(fp, h) in &jb.entries {
                    if let Some((part, gen)) = small_of(h) {
                        let e = small.entry((part, fp)).or_insert(0);
                        *e = (*e).max(gen);
                        small_in[pair].push((fp, h));
                        continue;
                    }
                    let e = m.entry(fp).or_insert(0);
                    *e = (*e).max(h);
                    max_h[pair] = max_h[pair].max(h);
                    rec.max_horizon = rec.max_horizon.max(h);
                }
                counters[pair][copy] = Some(jb.counter);
                if newest.as_ref().is_none_or(|(c, _, _)| jb.counter > *c) {
                    newest = Some((jb.counter, pair, jb));
                }
            }
            b += n;
        }
        for (p, c) in counters.iter().enumerate() {
            // Overwrite the older (or invalid) copy next.
            next_copy[p] = match (c[0], c[1]) {
                (Some(a), Some(b)) => u8::from(a > b),
                (Some(_), None) => 1,
                _ => 0,
            };
        }
        // A crash tears at most the write in flight: a block of the newest
        // pair, or the first block of the pair after it.
        let newest_pair = newest.as_ref().map(|n| n.1);
        if let Some(&phys) = invalid.iter().find(|&&phys| {
            let pair = phys / 2;
            match newest_pair {
                Some(p) => pair != p && pair != (p + 1) % pairs,
                None => pair != 0,
            }
        }) {
            rec.damaged = Some(format!(
                "journal block {phys} (byte {}) of {} does not verify",
                start + (phys * BLOCK) as u64,
                dev.name()
            ));
        }
        rec.invalid_blocks = invalid
            .iter()
            .map(|&phys| start + (phys * BLOCK) as u64)
            .collect();
        // A tombstone is needed while it covers a segment of either class.
        let below_all = rec.floors.into_iter().min().unwrap_or(0);
        for m in rec.tombstones.values_mut() {
            m.retain(|_, h| *h > below_all);
        }
        rec.tombstones.retain(|_, m| !m.is_empty());
        rec.max_counter = newest.as_ref().map_or(0, |n| n.0);
        let (counter, cur, entries, geometry) = match newest {
            Some((c, p, jb)) => (c, p, jb.entries, jb.geometry),
            None => (0, 0, Vec::new(), (0, 0)),
        };
        let floors = rec.floors;
        let small_trusted = rec.damaged.is_none();
        Ok(Journal {
            dev,
            start,
            pairs,
            geometry: AtomicU64::new(0),
            state: Mutex::new(State {
                pending: Vec::new(),
                last_ticket: 0,
                want_floors: floors,
                small,
                ring: Some(Ring {
                    cur,
                    entries,
                    geometry,
                    max_h,
                    next_copy,
                    small_in,
                    counter,
                    written_floors: floors,
                    buf: AlignedBuf::new(BLOCK),
                }),
            }),
            work: Condvar::new(),
            done: Condvar::new(),
            durable: AtomicU64::new(0),
            floors: floors.map(AtomicU64::new),
            counter: AtomicU64::new(counter),
            failed: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            recovered: Mutex::new(Some(rec)),
            small_trusted,
            stats: JournalStats::default(),
        })
    }
}

impl Journal {
    /// The index geometry fingerprints are made for (set at start): log2
    /// of the shard count and the index's position bits.
    pub fn set_geometry(&self, shard_bits: u8, precision: u32) {
        self.geometry.store(
            u64::from(shard_bits) << 32 | u64::from(precision),
            Ordering::Relaxed,
        );
    }

    pub fn geometry(&self) -> (u8, u32) {
        let g = self.geometry.load(Ordering::Relaxed);
        ((g >> 32) as u8, g as u32)
    }

    /// What the journal held at open (once; later calls get None).
    pub fn take_recovered(&self) -> Option<Recovered> {
        self.recovered.lock().take()
    }

    /// Where [`take_recovered`](Self::take_recovered) takes from.
    pub fn recovered_slot(&self) -> parking_lot::MutexGuard<'_, Option<Recovered>> {
        self.recovered.lock()
    }

    /// Zeroes blocks that do not verify (after their damage was dealt with,
    /// so that the next start does not see it again).
    pub fn zero_blocks(&self, offsets: &[u64]) -> io::Result<()> {
        let zero = AlignedBuf::new(BLOCK);
        for &off in offsets {
            self.dev.write_at(zero.as_slice(), off)?;
        }
        self.dev.sync()
    }

    /// The write counter of the latest durable journal block (segment
    /// headers carry it, so that recovery can tell a lost journal).
    pub fn counter(&self) -> u64 {
        self.counter.load(Ordering::Acquire)
    }

    /// The floor of device class `class` that is durable.
    pub fn floor(&self, class: DeviceClass) -> u64 {
        self.floors[class].load(Ordering::Acquire)
    }

    /// Every class's durable floor.
    pub fn floors(&self) -> PerClass<u64> {
        CLASSES.map(|c| self.floor(c))
    }

    /// Queues a tombstone; returns its ticket.
    pub fn add(&self, hash: u64, horizon: u64) -> u64 {
        self.add_fingerprint(fingerprint(hash, self.geometry()), horizon)
    }

    /// [`add`](Self::add) for a fingerprint (of an index class).
    pub fn add_fingerprint(&self, fp: u32, horizon: u64) -> u64 {
        let mut st = self.state.lock();
        st.pending.push((fp, horizon));
        st.last_ticket += 1;
        self.stats.tombstones.fetch_add(1, Ordering::Relaxed);
        self.work.notify_one();
        st.last_ticket
    }

    /// Queues a small-object store tombstone: objects whose key has the
    /// fingerprint `fp`, in blocks of region `part` written at generation
    /// `gen` or before, are dead. It stays in the journal until
    /// [`retire_small`](Self::retire_small). Returns its ticket.
    pub fn add_small(&self, part: u32, fp: u32, gen: u64) -> u64 {
        let mut st = self.state.lock();
        let e = st.small.entry((part, fp)).or_insert(0);
        *e = (*e).max(gen);
        st.pending.push((fp, small_horizon(part, gen)));
        st.last_ticket += 1;
        self.stats.small_tombstones.fetch_add(1, Ordering::Relaxed);
        self.work.notify_one();
        st.last_ticket
    }

    /// The store rewrote the set of a tombstone durably above it: the
    /// journal may drop it (unless a newer one of the fingerprint replaced it).
    pub fn retire_small(&self, part: u32, fp: u32, gen: u64) {
        let mut st = self.state.lock();
        if st.small.get(&(part, fp)).is_some_and(|&g| g <= gen) {
            st.small.remove(&(part, fp));
        }
    }

    /// Whether the small store's tombstones read at open can be trusted:
    /// no journal block was damaged (else one may be lost, and the store's
    /// regions must be dropped).
    pub fn small_trusted(&self) -> bool {
        self.small_trusted
    }

    /// Retires the small-store tombstones of regions `parts` and above (at
    /// start: regions that no longer exist hold nothing they protect).
    pub fn retire_small_parts_from(&self, parts: u32) {
        self.state.lock().small.retain(|&(p, _), _| p < parts);
    }

    /// The live small-store tombstones of region `part` (fingerprint,
    /// generation): those found at open, for the store's recovery.
    pub fn small_tombstones(&self, part: u32) -> Vec<(u32, u64)> {
        let st = self.state.lock();
        let mut v: Vec<(u32, u64)> = st
            .small
            .iter()
            .filter(|((p, _), _)| *p == part)
            .map(|(&(_, fp), &g)| (fp, g))
            .collect();
        v.sort_unstable();
        v
    }

    /// Live small-store tombstones in all, and how many the store may keep
    /// live at once: a quarter of the ring, so that carrying them over when
    /// the ring wraps leaves room for the rest.
    pub fn small_load(&self) -> (usize, usize) {
        (
            self.state.lock().small.len(),
            self.pairs * JOURNAL_ENTRIES / 4,
        )
    }

    /// Asks for every class's floor to rise to `floor` (flush_all, a
    /// journal that cannot be trusted); returns the ticket to wait for.
    pub fn raise_floor(&self, floor: u64) -> u64 {
        self.raise_floors([floor; DeviceClass::COUNT])
    }

    /// Asks for the floor of device class `class` alone to rise to `floor`
    /// (a reclaim of one of its segments); returns the ticket to wait for.
    pub fn raise_class_floor(&self, class: DeviceClass, floor: u64) -> u64 {
        let mut want = [0; DeviceClass::COUNT];
        want[class] = floor;
        self.raise_floors(want)
    }

    fn raise_floors(&self, want: PerClass<u64>) -> u64 {
        let mut st = self.state.lock();
        if want.iter().zip(self.floors()).all(|(&w, f)| w <= f) {
            return 0;
        }
        for (f, w) in st.want_floors.iter_mut().zip(want) {
            *f = (*f).max(w);
        }
        st.last_ticket += 1;
        self.work.notify_one();
        st.last_ticket
    }

    /// The latest ticket handed out: wait for it to have everything asked
    /// so far durable.
    pub fn last_ticket(&self) -> u64 {
        self.state.lock().last_ticket
    }

    /// Whether everything up to `ticket` is durable. A failed journal says
    /// yes to everything: see [`failed`](Self::failed).
    pub fn is_durable(&self, ticket: u64) -> bool {
        self.durable.load(Ordering::Acquire) >= ticket || self.failed()
    }

    /// Waits until `ticket` is durable; false on timeout.
    pub fn wait_durable(&self, ticket: u64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock();
        while !self.is_durable(ticket) {
            if self.done.wait_until(&mut st, deadline).timed_out() {
                return self.is_durable(ticket);
            }
        }
        true
    }

    /// The journal could not be written: crash safety is lost until restart
    /// (the server logs it and stops admitting to flash).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _st = self.state.lock();
        self.work.notify_all();
    }

    /// The writer: commits until [`stop`](Self::stop), calling `wake` after
    /// each commit.
    pub fn run(&self, wake: &dyn Fn()) {
        loop {
            let (entries, upto, want_floors, mut ring) = {
                let mut st = self.state.lock();
                loop {
                    let ring = st.ring.as_ref().expect("one writer");
                    let higher = st
                        .want_floors
                        .iter()
                        .zip(ring.written_floors)
                        .any(|(&w, f)| w > f);
                    if !st.pending.is_empty() || higher {
                        break;
                    }
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    self.work.wait_for(&mut st, Duration::from_millis(100));
                }
                (
                    std::mem::take(&mut st.pending),
                    st.last_ticket,
                    st.want_floors,
                    st.ring.take().expect("one writer"),
                )
            };
            let r = self.commit(&mut ring, entries, want_floors);
            let floors = ring.written_floors;
            let counter = ring.counter;
            self.state.lock().ring = Some(ring);
            match r {
                Ok(()) => {
                    self.counter.store(counter, Ordering::Release);
                    for (f, w) in self.floors.iter().zip(floors) {
                        f.store(w, Ordering::Release);
                    }
                    self.durable.store(upto, Ordering::Release);
                    self.stats.commits.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    if !self.failed.swap(true, Ordering::Relaxed) {
                        tracing::error!(device = self.dev.name(), error = %e,
                            "cannot write the crash journal: a crash from now on loses the flash contents' crash safety; serving from RAM");
                    }
                }
            }
            {
                let _st = self.state.lock();
                self.done.notify_all();
            }
            wake();
        }
    }

    fn commit(
        &self,
        ring: &mut Ring,
        mut entries: Vec<(u32, u64)>,
        want_floors: PerClass<u64>,
    ) -> io::Result<()> {
        let geometry = self.geometry();
        let mut floors = CLASSES.map(|c| want_floors[c].max(ring.written_floors[c]));
        if ring.geometry != geometry && !ring.entries.is_empty() {
            self.enter_next(ring, &mut floors)?;
        }
        ring.geometry = geometry;
        loop {
            let room = JOURNAL_ENTRIES - ring.entries.len();
            let take = room.min(entries.len());
            for &(fp, h) in &entries[..take] {
                match small_of(h) {
                    Some(_) => ring.small_in[ring.cur].push((fp, h)),
                    None => ring.max_h[ring.cur] = ring.max_h[ring.cur].max(h),
                }
            }
            ring.entries.extend(entries.drain(..take));
            if entries.is_empty() {
                self.write_cur(ring, floors)?;
                break;
            }
            // The pair is full: the next one's old tombstones must be below
            // durable floors before it is overwritten.
            self.enter_next(ring, &mut floors)?;
        }
        ring.written_floors = floors;
        Ok(())
    }

    /// Moves the ring to its next pair, first raising every floor over the
    /// tombstones that pair still holds (written into the current pair): a
    /// tombstone covers records of either class.
    fn enter_next(&self, ring: &mut Ring, floors: &mut PerClass<u64>) -> io::Result<()> {
        let next = (ring.cur + 1) % self.pairs;
        if floors.iter().any(|&f| ring.max_h[next] > f) {
            for f in floors.iter_mut() {
                *f = (*f).max(ring.max_h[next]);
            }
            self.stats.wrap_floor_raises.fetch_add(1, Ordering::Relaxed);
        }
        self.write_cur(ring, *floors)?;
        ring.written_floors = *floors;
        ring.cur = next;
        ring.entries.clear();
        ring.max_h[next] = 0;
        // The next pair's small-store tombstones that are still live go
        // into its new content (they fit: they were part of its old one).
        let held = std::mem::take(&mut ring.small_in[next]);
        let carried: Vec<(u32, u64)> = {
            let st = self.state.lock();
            held.into_iter()
                .filter(|&(fp, h)| {
                    // (Carried while a newer one of the fingerprint is
                    // not durable yet, too.)
                    small_of(h).is_some_and(|(part, gen)| {
                        st.small.get(&(part, fp)).is_some_and(|&g| g >= gen)
                    })
                })
                .collect()
        };
        let mut seen = std::collections::HashSet::new();
        for e in carried {
            if seen.insert(e) {
                self.stats.small_carried.fetch_add(1, Ordering::Relaxed);
                ring.small_in[next].push(e);
                ring.entries.push(e);
            }
        }
        Ok(())
    }

    fn write_cur(&self, ring: &mut Ring, floors: PerClass<u64>) -> io::Result<()> {
        ring.counter += 1;
        JournalBlock {
            counter: ring.counter,
            floors,
            logical: ring.cur as u32,
            geometry: ring.geometry,
            entries: ring.entries.clone(),
        }
        .write(ring.buf.as_mut_slice());
        let copy = ring.next_copy[ring.cur];
        let off = self.start + ((2 * ring.cur + copy as usize) * BLOCK) as u64;
        // Durable before the next one: a pair's copies alternate, and a new
        // pair is entered only over a floor already on the device.
        self.dev.write_durable(ring.buf.as_slice(), off)?;
        ring.next_copy[ring.cur] ^= 1;
        self.stats.block_writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
