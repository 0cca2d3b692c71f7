//! A segment flush of the small-object store in phases, so that its device
//! I/O runs without the lock of whoever owns the store (docs/SMALL.md,
//! "Flushes off the request path"):
//!
//! 1. **seal** (owner): the full buffer becomes the job's sealed segment;
//!    gets still find its objects, new objects go to a fresh buffer;
//! 2. **read** (no owner): the oldest log segment, which the sealed one
//!    will overwrite;
//! 3. **plan** (owner): its live objects, the sets they move into (or
//!    drop from the log), what rebuilding those sets needs from DRAM, and
//!    the generations of the writes;
//! 4. **write** (no owner): the sets are read, rebuilt and written, the
//!    device synced, the sealed segment written over the oldest; before
//!    the first write the blocks as they were are kept in the job's *view*,
//!    where gets read them until DRAM follows;
//! 5. **commit** (owner): DRAM follows what was written.
//!
//! While a job runs, a change of a key whose set the job touches (or which
//! the sealed segment holds) finishes the job first ([`SmallStore::finish_job`]:
//! it waits for the write, or does the rest itself before the write began),
//! so that a set is never rewritten by two hands at once and a deleted key
//! cannot come back from the job's blocks. Without a background owner the
//! same phases run one after the other on the inserting thread
//! (the simulator, the tests).

use super::format::{self, Kind, Obj};
use super::log::{tag_of, LogRef};
use super::sets::{verify_block, Built, SetPlan};
use super::store::{place, Hashes, SmallConfig, SmallStore};
use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::flash::BlockDevice;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Keys one invalidation job takes at most: its blocks (each set it reads
/// and writes, 4 KiB each, with their log pages) stay in DRAM until it
/// commits; the next key starts another job.
const MAX_JOB_KEYS: usize = 256;

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Sealed; the oldest segment is being read.
    Reading,
    /// Planned; its writes are under way.
    Planned,
    /// Written (or failed); DRAM has not followed yet.
    Done,
    Committed,
}

/// What the plan fixed, for the write and the commit.
pub(super) struct Plan {
    pub(super) moves: Vec<SetPlan>,
    /// Sets whose live objects of the oldest segment leave the log without
    /// a set write (fewer than the threshold); the commit readmits those hit.
    pub(super) drops: Vec<u32>,
    /// Live objects of the oldest segment: (set, page, key hash, object).
    pub(super) live: Vec<(u32, u32, u64, Obj)>,
    /// The same objects by page, for the set rebuilds.
    pub(super) pages: HashMap<u32, Vec<Obj>>,
    /// The oldest segment as read (for the view), if it held anything.
    pub(super) old: Option<AlignedBuf>,
    pub(super) seg_gen: Vec<u64>,
    pub(super) floor: u64,
    pub(super) now: u32,
    /// The sealed segment's generation, above every set write of the job.
    pub(super) new_gen: u64,
    /// An invalidation job: per entry of `moves`, the keys its set is
    /// rewritten without.
    pub(super) exclude: Vec<Vec<Vec<u8>>>,
}

/// What the write did, for the commit.
pub(super) struct Written {
    pub(super) built: Vec<Built>,
    pub(super) drops: Vec<u32>,
    pub(super) live: Vec<(u32, u32, u64, Obj)>,
    pub(super) new_gen: u64,
    pub(super) took: Duration,
    /// An invalidation job: each key (its hash, the key) and whether a set held it.
    pub(super) found: Vec<(u64, Vec<u8>, bool)>,
    pub(super) times: FlushTimes,
}

pub(super) struct Inner {
    pub(super) phase: Phase,
    pub(super) plan: Option<io::Result<Plan>>,
    pub(super) result: Option<io::Result<Written>>,
    /// Sets the plan moves into or drops from (with `sealed_sets`, the
    /// sets a change must wait for).
    pub(super) sets: HashSet<u32>,
    /// Blocks as they were before the job wrote, by device offset.
    pub(super) view: HashMap<u64, AlignedBuf>,
    /// When its device work began (its read), for the flush duty.
    pub(super) started: Option<Instant>,
    /// An invalidation job's keys (hash, key), until its plan takes them.
    pub(super) keys: Vec<(u64, Vec<u8>)>,
    /// How long the read of the segment written over took.
    pub(super) old_read_us: u64,
}

/// One segment flush (see the module's documentation), or an
/// *invalidation*: the sets of changed keys rewritten without them, many
/// keys in one batch, with the phases of a flush (no sealed segment, no
/// log segment written), so that a delete or overwrite of a key the store
/// holds waits for the batch ([`SmallStore::gate`]) instead of writing
/// its set durably under the shard's lock.
pub struct Job {
    /// An invalidation job (see above), not a segment flush.
    pub(super) invalidate: bool,
    /// The store's number for the job (invalidations name the job that
    /// answers them).
    pub(super) id: u64,
    /// The log segment written over.
    pub(super) seg: usize,
    /// Its generation when sealed (0: never written, nothing to move).
    pub(super) old_gen: u64,
    /// The objects of the segment being written, by page: (key hash, object).
    pub(super) sealed: Vec<Vec<(u64, Obj)>>,
    /// The key hashes of `sealed` (the buffer's, moved with it).
    pub(super) sealed_hashes: Hashes,
    pub(super) sealed_sets: HashSet<u32>,
    pub(super) dev: Arc<dyn BlockDevice>,
    /// The store's io_uring ring for the job's reads.
    pub(super) ring: super::setio::Ring,
    pub(super) base: u64,
    pub(super) cfg: SmallConfig,
    pub(super) nonce: u64,
    pub(super) inner: Mutex<Inner>,
    pub(super) cond: Condvar,
    /// When it was sealed (its wait in the queue, for `stats`).
    pub(super) sealed_at: Instant,
}

impl Job {
    /// Adds a key to an invalidation job nobody has planned yet; false
    /// when it is planned (the key needs a job of its own).
    pub(super) fn add_key(&self, h: u64, key: &[u8]) -> bool {
        let mut g = self.inner.lock();
        if !self.invalidate || g.phase != Phase::Reading || g.keys.len() >= MAX_JOB_KEYS {
            return false;
        }
        g.keys.push((h, key.to_vec()));
        true
    }

    pub(super) fn phase(&self) -> Phase {
        self.inner.lock().phase
    }

    /// Whether the job's sealed segment holds `key` (its hash `h`).
    pub(super) fn seals(&self, h: u64, key: &[u8]) -> bool {
        self.sealed_hashes.has(h)
            && self
                .sealed
                .iter()
                .flatten()
                .any(|(ph, o)| *ph == h && o.key == key)
    }

    /// Whether a change of a key in `set` must finish the job first.
    pub(super) fn touches(&self, set: u32) -> bool {
        self.sealed_sets.contains(&set) || self.inner.lock().sets.contains(&set)
    }

    /// The block at `off` as it was before the job wrote, if the job holds it.
    pub(super) fn with_view<R>(&self, f: impl FnOnce(&HashMap<u64, AlignedBuf>) -> R) -> R {
        f(&self.inner.lock().view)
    }
}

/// Gives a store to a closure, holding its owner's lock meanwhile.
pub type WithStore<'a> = &'a dyn Fn(&mut dyn FnMut(&mut SmallStore));

/// What [`run_job`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// Nothing to run, or a segment flush.
    Flush,
    /// An invalidation job was committed: changes that waited for it may go
    /// ahead (wake them).
    Invalidation,
    /// The next job is a segment flush that the flush duty holds back this
    /// long: call again then (meanwhile, run other stores' jobs).
    Later(Duration),
}

/// Runs the job the store has sealed, with its I/O outside the store's
/// owner: `with` gives the store (locking it) for the short phases. What a
/// background flusher thread does for each job it is told of. It never
/// sleeps: a flush the duty holds back is [`Ran::Later`] (one flusher
/// serves every shard, whose invalidations must not wait for another's
/// duty).
pub fn run_job(with: WithStore<'_>) -> Ran {
    let (mut job, mut wait) = (None, Duration::ZERO);
    with(&mut |st| (job, wait) = (st.job_to_run(), st.duty_wait()));
    if !wait.is_zero() {
        // The flush duty holds for queued jobs too: the device's share of
        // flushes stays bounded.
        return Ran::Later(wait);
    }
    let Some(job) = job else {
        return Ran::Flush;
    };
    let mut old = Some(job.read_old());
    let mut planned = false;
    with(&mut |st| {
        let t = Instant::now();
        planned = st.plan_job(&job, old.take().expect("once"));
        st.held_lock(t);
    });
    if !planned {
        return Ran::Flush;
    }
    job.write();
    with(&mut |st| {
        let t = Instant::now();
        let _ = st.commit_job(&job);
        st.held_lock(t);
    });
    match job.invalidate {
        true => Ran::Invalidation,
        false => Ran::Flush,
    }
}

/// [`run_job`] on this thread, sleeping while the flush duty holds the job
/// back (a store's own flusher, as in the tests). True when it committed an
/// invalidation job.
pub fn run_sealed_job(with: WithStore<'_>) -> bool {
    loop {
        match run_job(with) {
            Ran::Later(d) => std::thread::sleep(d),
            r => return r == Ran::Invalidation,
        }
    }
}

impl SmallStore {
    /// Phase 1: the full buffer becomes a job's sealed segment, queued
    /// behind the jobs under way (it writes over the segment after theirs).
    pub(super) fn seal(&mut self) -> Arc<Job> {
        debug_assert!(self.flush_jobs() < self.cfg.log_segments);
        let seg = (self.head + self.flush_jobs()) % self.cfg.log_segments;
        let sealed = std::mem::replace(&mut self.buffer, vec![Vec::new()]);
        let sealed_hashes = std::mem::take(&mut self.buffered);
        // A change waiting for an invalidation of a key the segment holds
        // asks again: the invalidation runs before this segment is written.
        if !self.invals.is_empty() {
            self.invals.retain(|h, _| !sealed_hashes.has(*h));
        }
        self.buffer_used = 0;
        let sealed_sets = sealed
            .iter()
            .flatten()
            .map(|(_, o)| place(&o.key, self.cfg.sets).1)
            .collect();
        let old_gen = self.seg_gen[seg];
        let job = self.new_job(seg, old_gen, sealed, sealed_hashes, sealed_sets, Vec::new());
        self.jobs.push_back(job.clone());
        job
    }

    /// A job: a segment flush over `seg`, or an invalidation of `keys`
    /// (not empty; no sealed segment then).
    fn new_job(
        &mut self,
        seg: usize,
        old_gen: u64,
        sealed: Vec<Vec<(u64, Obj)>>,
        sealed_hashes: Hashes,
        sealed_sets: HashSet<u32>,
        keys: Vec<(u64, Vec<u8>)>,
    ) -> Arc<Job> {
        self.job_ids += 1;
        Arc::new(Job {
            invalidate: !keys.is_empty(),
            id: self.job_ids,
            seg,
            old_gen,
            sealed,
            sealed_hashes,
            sealed_sets,
            dev: self.dev.clone(),
            ring: self.ring.clone(),
            base: self.base,
            cfg: self.cfg,
            nonce: self.nonce,
            sealed_at: Instant::now(),
            inner: Mutex::new(Inner {
                phase: Phase::Reading,
                plan: None,
                result: None,
                sets: HashSet::new(),
                view: HashMap::new(),
                started: None,
                keys,
                old_read_us: 0,
            }),
            cond: Condvar::new(),
        })
    }

    /// Queues an invalidation job for `key` behind every job under way
    /// (or adds the key to the last one, if it is an invalidation nobody
    /// has planned); returns the job's number and whether the job is new.
    pub(super) fn queue_invalidation(&mut self, h: u64, key: &[u8]) -> (u64, bool) {
        if let Some(last) = self.jobs.back() {
            if last.add_key(h, key) {
                return (last.id, false);
            }
        }
        let keys = vec![(h, key.to_vec())];
        let job = self.new_job(
            usize::MAX,
            0,
            Vec::new(),
            Hashes::default(),
            HashSet::new(),
            keys,
        );
        self.jobs.push_back(job);
        self.stats.invalidate_jobs += 1;
        (self.job_ids, true)
    }

    /// The store's next job, if nobody has planned it yet (jobs run one
    /// after the other, oldest first).
    pub fn job_to_run(&self) -> Option<Arc<Job>> {
        self.jobs
            .front()
            .filter(|j| j.phase() == Phase::Reading)
            .cloned()
    }

    /// Phase 3, given what phase 2 read: false if the job is no longer
    /// this store's to plan (a change finished it meanwhile).
    pub fn plan_job(&mut self, job: &Arc<Job>, old: io::Result<Option<AlignedBuf>>) -> bool {
        if !self.jobs.front().is_some_and(|j| Arc::ptr_eq(j, job)) {
            return false;
        }
        let mut g = job.inner.lock();
        if g.phase != Phase::Reading {
            return false;
        }
        let plan = match job.invalidate {
            true => Ok(self.plan_invalidation(std::mem::take(&mut g.keys))),
            false => old.map(|old| self.plan_with(job, old)),
        };
        if let Ok(p) = &plan {
            g.sets = p
                .moves
                .iter()
                .map(|m| m.set)
                .chain(p.drops.iter().copied())
                .collect();
        }
        g.plan = Some(plan);
        g.phase = Phase::Planned;
        true
    }

    fn plan_with(&mut self, job: &Job, old: Option<AlignedBuf>) -> Plan {
        let pages = self.cfg.seg_pages;
        let first = (job.seg * pages) as u32;
        let mut live = Vec::new();
        if let Some(buf) = &old {
            for (i, chunk) in buf.as_slice().chunks(BLOCK).enumerate() {
                let page = first + i as u32;
                match verify_block(chunk, Kind::Log, page, self.nonce, self.floor) {
                    Ok(h) if h.generation == self.seg_gen[job.seg] => {
                        for o in format::objects(chunk, &h) {
                            let (hash, set, tag) = place(&o.key, self.cfg.sets);
                            if self.log.contains(set, page, tag) {
                                live.push((set, page, hash, o));
                            }
                        }
                    }
                    _ => self.stats.verify_failures += 1,
                }
            }
        }
        let mut sets: Vec<u32> = live.iter().map(|l| l.0).collect();
        sets.sort_unstable();
        sets.dedup();
        let (mut moves, mut drops) = (Vec::new(), Vec::new());
        for set in sets {
            let old_copy = live
                .iter()
                .any(|(s, _, h, _)| *s == set && self.filters.may_contain(set as usize, *h));
            if self.log.count(set) >= self.cfg.move_threshold || old_copy {
                moves.push(self.plan_set(set));
            } else {
                drops.push(set);
            }
        }
        let mut by_page: HashMap<u32, Vec<Obj>> = HashMap::new();
        for (_, page, _, o) in &live {
            by_page.entry(*page).or_default().push(o.clone());
        }
        self.generation += 1;
        Plan {
            moves,
            drops,
            live,
            pages: by_page,
            old,
            seg_gen: self.seg_gen.clone(),
            floor: self.floor,
            now: self.now,
            new_gen: self.generation,
            exclude: Vec::new(),
        }
    }

    /// An invalidation's plan: each key's set, with the keys it is
    /// rewritten without (and, like any set rewrite, its log objects).
    fn plan_invalidation(&mut self, keys: Vec<(u64, Vec<u8>)>) -> Plan {
        let mut by_set: std::collections::BTreeMap<u32, Vec<Vec<u8>>> = Default::default();
        for (_, key) in keys {
            let set = place(&key, self.cfg.sets).1;
            let ks = by_set.entry(set).or_default();
            if !ks.contains(&key) {
                ks.push(key);
            }
        }
        self.stats.invalidate_keys += by_set.values().map(|k| k.len() as u64).sum::<u64>();
        let (mut moves, mut exclude) = (Vec::new(), Vec::new());
        for (set, ks) in by_set {
            moves.push(self.plan_set(set));
            exclude.push(ks);
        }
        Plan {
            moves,
            drops: Vec::new(),
            live: Vec::new(),
            pages: HashMap::new(),
            old: None,
            seg_gen: self.seg_gen.clone(),
            floor: self.floor,
            now: self.now,
            new_gen: 0,
            exclude,
        }
    }

    /// Phase 5: DRAM follows what the job wrote (nothing if it already
    /// did). The job's write error, if any, stops the store.
    pub fn commit_job(&mut self, job: &Arc<Job>) -> io::Result<()> {
        let result = {
            let mut g = job.inner.lock();
            if g.phase != Phase::Done {
                debug_assert_eq!(g.phase, Phase::Committed);
                return Ok(());
            }
            g.phase = Phase::Committed;
            g.view = HashMap::new();
            g.result.take().expect("written")
        };
        if self.jobs.front().is_some_and(|j| Arc::ptr_eq(j, job)) {
            self.jobs.pop_front();
        }
        // The next job, sealed meanwhile, can start.
        if !self.jobs.is_empty() {
            self.tell_flusher();
        }
        let w = match result {
            Ok(w) => w,
            Err(e) => {
                self.fail(&e);
                return Err(e);
            }
        };
        if self.failed {
            return Ok(());
        }
        if job.invalidate {
            self.follow_invalidation(job, w);
            return Ok(());
        }
        let readmit = self.follow(job, w);
        for (h, o) in readmit {
            // A commit never seals a new job: whoever finished the queue
            // (a change, flush_all, a stop) relies on it staying empty. A
            // hit object that does not fit the open segment is dropped.
            if self.readmit_would_seal(o.size()) {
                self.stats.dropped += 1;
                continue;
            }
            self.stats.readmitted += 1;
            self.append(h, o)?;
        }
        Ok(())
    }

    /// The DRAM side of an invalidation: the sets written, and each key's
    /// answer for the changes that wait for it (unless the key was admitted
    /// again meanwhile: they ask anew).
    fn follow_invalidation(&mut self, job: &Job, w: Written) {
        for b in &w.built {
            self.apply_built(b);
        }
        self.stats.invalidations += w.built.len() as u64;
        for (h, key, found) in w.found {
            if let Some(e) = self.invals.get_mut(&h).filter(|e| e.key == key) {
                if e.state == super::inval::InvalState::Queued(job.id) {
                    e.state = super::inval::InvalState::Done { found };
                }
            }
        }
    }

    /// The DRAM side of a written job; returns the dropped objects to append again.
    fn follow(&mut self, job: &Job, w: Written) -> Vec<(u64, Obj)> {
        for b in &w.built {
            self.apply_built(b);
        }
        let pages = self.cfg.seg_pages;
        let range = (job.seg * pages) as u32..((job.seg + 1) * pages) as u32;
        let mut readmit = Vec::new();
        for &set in &w.drops {
            let refs: Vec<LogRef> = self.log.of_set(set).collect();
            let before = readmit.len();
            for (s, page, h, o) in &w.live {
                if *s != set {
                    continue;
                }
                let tag = tag_of(*h);
                let hit = refs
                    .iter()
                    .any(|r| r.hit && r.page == *page && r.tag == tag);
                // A newer copy (or a key sharing the tag) in a newer
                // segment, the sealed one or the buffer: not readmitted.
                let newer = refs
                    .iter()
                    .any(|r| r.tag == tag && !range.contains(&r.page))
                    || (job.sealed_hashes.has(*h) || self.buffered.has(*h))
                        && job
                            .sealed
                            .iter()
                            .chain(self.buffer.iter())
                            .flatten()
                            .any(|(bh, bo)| bh == h && bo.key == o.key);
                // A copy a tombstone covers is dead (its change went, or
                // is going, ahead).
                let dead = self
                    .tombs
                    .covers(super::tomb::fp_of(*h), self.seg_gen[job.seg]);
                if hit && !newer && !dead {
                    readmit.push((*h, o.clone()));
                }
            }
            let n = self.log.remove_in_pages(set, range.clone());
            self.stats.dropped += n.saturating_sub(readmit.len() - before) as u64;
        }
        self.stats.log_bytes_written += (pages * BLOCK) as u64;
        self.stats.log_segments_written += 1;
        self.seg_gen[job.seg] = w.new_gen;
        for (i, page) in job.sealed.iter().enumerate() {
            for (h, o) in page {
                let set = place(&o.key, self.cfg.sets).1;
                self.log.push(LogRef {
                    set,
                    page: range.start + i as u32,
                    tag: tag_of(*h),
                    hit: false,
                });
            }
        }
        self.head = (job.seg + 1) % self.cfg.log_segments;
        self.stats.flush_us += w.took.as_micros() as u64;
        self.count_times(&w.times);
        self.flushed(w.took);
        readmit
    }

    /// Runs the rest of the queued jobs on this thread, or waits for the
    /// write under way, and commits them: before a change that touches
    /// one, a stop, a flush_all.
    pub(super) fn finish_jobs(&mut self) -> io::Result<()> {
        self.finish_jobs_to(self.jobs.len())
    }

    /// [`finish_jobs`](Self::finish_jobs) for the first `n` queued jobs
    /// only (the later ones do not touch what the caller changes).
    pub(super) fn finish_jobs_to(&mut self, n: usize) -> io::Result<()> {
        if n == 0 || self.jobs.is_empty() {
            return Ok(());
        }
        self.stats.flush_waits += 1;
        let t = Instant::now();
        let r = self.finish_queued(n);
        self.held_lock(t);
        r
    }

    fn finish_queued(&mut self, n: usize) -> io::Result<()> {
        for _ in 0..n {
            let Some(job) = self.jobs.front().cloned() else {
                break;
            };
            let phase = {
                let mut g = job.inner.lock();
                while g.phase == Phase::Planned {
                    job.cond.wait(&mut g);
                }
                g.phase
            };
            match phase {
                Phase::Reading => self.run_inline(&job)?,
                Phase::Done => self.commit_job(&job)?,
                Phase::Planned | Phase::Committed => {
                    self.jobs.pop_front();
                }
            }
        }
        Ok(())
    }

    /// Counts flush work done since `t` holding the owner's lock.
    pub(super) fn held_lock(&mut self, t: Instant) {
        let us = t.elapsed().as_micros() as u64;
        self.stats.flush_locked_us += us;
        self.stats.flush_locked_max_us = self.stats.flush_locked_max_us.max(us);
    }

    /// Every phase of a sealed job, here.
    pub(super) fn run_inline(&mut self, job: &Arc<Job>) -> io::Result<()> {
        let old = job.read_old();
        if self.plan_job(job, old) {
            job.write();
        }
        self.commit_job(job)
    }
}

/// Where a segment flush's time went, in microseconds (the store's
/// `small_flush_*_us` counters): from its seal to the start of its device
/// work (the queue and the flush duty), the read of the segment it writes
/// over, the set and log page reads (and how many), the rebuilds (CPU),
/// the set writes, the sync and the sealed segment's write.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct FlushTimes {
    pub queued_us: u64,
    pub old_read_us: u64,
    pub reads: u64,
    pub read_us: u64,
    pub build_us: u64,
    pub write_us: u64,
    pub sync_us: u64,
    pub log_write_us: u64,
}

impl FlushTimes {
    /// Adds the time since `t` to the field `f` picks; returns now.
    pub(super) fn lap(
        &mut self,
        t: Instant,
        f: impl FnOnce(&mut FlushTimes) -> &mut u64,
    ) -> Instant {
        let now = Instant::now();
        *f(self) += now.duration_since(t).as_micros() as u64;
        now
    }
}
