//! The device phases of a segment flush or an invalidation job
//! ([`super::flush`]): the read of the log segment a flush writes over,
//! then the set reads, rebuilds and writes, the sync and the sealed
//! segment's write, all without the store's owner.

use super::flush::{FlushTimes, Job, Phase, Plan, Written};
use super::format::{self, Kind, Obj};
use super::setio::Batch;
use super::sets::{page_offset, read_many, set_offset, write_many, Built, Layout};
use crate::device::aligned::{AlignedBuf, BLOCK};
use std::collections::{HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};

/// The tag of a set write in a flush's [`Batch`] (reads are tagged by
/// their index).
const WRITE: usize = usize::MAX;

impl Job {
    /// Reads the segment the job writes over (phase 2; no owner needed).
    pub fn read_old(&self) -> io::Result<Option<AlignedBuf>> {
        let t = *self.inner.lock().started.get_or_insert_with(Instant::now);
        if self.old_gen == 0 {
            return Ok(None);
        }
        let r = self.read_segment();
        self.inner.lock().old_read_us = t.elapsed().as_micros() as u64;
        r
    }

    fn read_segment(&self) -> io::Result<Option<AlignedBuf>> {
        let pages = self.cfg.seg_pages;
        let first = (self.seg * pages) as u32;
        let mut b = AlignedBuf::new(pages * BLOCK);
        let n = self
            .dev
            .read_at(b.as_mut_slice(), page_offset(self.base, first))?;
        if n < b.len() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "short read of a log segment",
            ));
        }
        Ok(Some(b))
    }

    /// Phase 4: the sets rebuilt and written, the device synced, the sealed
    /// segment written; no owner needed. Runs once, after the plan.
    pub fn write(&self) {
        let plan = self.inner.lock().plan.take().expect("planned");
        let result = plan.and_then(|p| match self.invalidate {
            true => self.write_invalidation(p),
            false => self.write_planned(p),
        });
        let mut g = self.inner.lock();
        g.result = Some(result);
        g.phase = Phase::Done;
        self.cond.notify_all();
    }

    /// The region's layout as the plan saw it.
    fn layout<'a>(&self, p: &'a Plan) -> Layout<'a> {
        Layout {
            base: self.base,
            cfg: self.cfg,
            nonce: self.nonce,
            floor: p.floor,
            now: p.now,
            seg_gen: &p.seg_gen,
        }
    }

    /// A segment flush's write: its sets' blocks are read many at once, and
    /// each set is rebuilt and its write submitted as soon as its blocks
    /// are in (in the plan's order), while the other reads are under way;
    /// then the device is synced and the sealed segment written.
    fn write_planned(&self, p: Plan) -> io::Result<Written> {
        let layout = self.layout(&p);
        let mut times = self.times_so_far();
        let t0 = Instant::now();
        if let Some(old) = &p.old {
            // Gets read the blocks the job replaces from its view until the
            // commit: what DRAM still describes. The segment written over
            // first; each block read enters it as it arrives, before any
            // write of its set.
            let mut g = self.inner.lock();
            let first = (self.seg * self.cfg.seg_pages) as u32;
            for (i, page) in old.as_slice().chunks(BLOCK).enumerate() {
                let mut b = AlignedBuf::new(BLOCK);
                b.as_mut_slice().copy_from_slice(page);
                g.view.insert(page_offset(self.base, first + i as u32), b);
            }
        }
        let needs: Vec<Vec<u64>> = p
            .moves
            .iter()
            .map(|m| layout.reads_of(m, &p.pages))
            .collect();
        let mut seen = HashSet::new();
        let offs: Vec<u64> = needs
            .iter()
            .flatten()
            .copied()
            .filter(|&o| seen.insert(o))
            .collect();
        times.reads = offs.len() as u64;
        let mut io = Batch::new(&self.dev, Some(&self.ring));
        for (i, &off) in offs.iter().enumerate() {
            io.read(off, i);
        }
        let (mut reads_left, mut next) = (offs.len(), 0);
        let mut reads_done = t0;
        let mut built: Vec<Built> = Vec::with_capacity(p.moves.len());
        let mut decoded = HashMap::new();
        loop {
            while next < p.moves.len() {
                let tb = Instant::now();
                let mut b = {
                    let g = self.inner.lock();
                    if reads_left > 0 && !needs[next].iter().all(|o| g.view.contains_key(o)) {
                        break;
                    }
                    layout.build_set(&p.moves[next], &[], &p.pages, &g.view, &mut decoded)
                };
                times.lap(tb, |x| &mut x.build_us);
                let at = set_offset(self.base, &self.cfg, b.set);
                // The commit needs the rest of `b`, not its block.
                let block = std::mem::replace(&mut b.block, AlignedBuf::empty());
                io.write(at, block, false, WRITE);
                built.push(b);
                next += 1;
            }
            let Some((tag, r)) = io.next() else {
                break;
            };
            // An error: the batch waits for its other I/Os as it goes.
            let r = r?;
            if tag != WRITE {
                let b = r.expect("a read returns its block");
                self.inner.lock().view.insert(offs[tag], b);
                reads_left -= 1;
                if reads_left == 0 {
                    reads_done = Instant::now();
                }
            }
        }
        times.read_us += reads_done.duration_since(t0).as_micros() as u64;
        let t = times.lap(reads_done, |x| &mut x.write_us);
        if !built.is_empty() {
            // Set writes that replaced older copies are durable before the
            // log copies that supersede them are overwritten. (Every job
            // that wrote sets synced them so: a job that wrote none has
            // nothing to make durable.)
            self.dev.sync()?;
        }
        times.lap(t, |x| &mut x.sync_us);
        let pages = self.cfg.seg_pages;
        let first = (self.seg * pages) as u32;
        let mut buf = AlignedBuf::new(pages * BLOCK);
        for (i, chunk) in buf.as_mut_slice().chunks_mut(BLOCK).enumerate() {
            let objs: Vec<Obj> = self
                .sealed
                .get(i)
                .map(|pg| pg.iter().map(|(_, o)| o.clone()).collect())
                .unwrap_or_default();
            format::encode(
                chunk,
                Kind::Log,
                first + i as u32,
                p.new_gen,
                self.nonce,
                &objs,
            );
        }
        let at = page_offset(self.base, first);
        let t = Instant::now();
        if p.old.is_some() {
            // Objects of the old segment that DRAM forgets at the commit
            // (dropped from the log) must not come back after a crash.
            self.dev.write_durable(buf.as_slice(), at)?;
        } else {
            // A segment never written since the region was formatted (or
            // its floor raised) holds nothing that verifies: overwriting it
            // need not wait for the device (the log's first pass writes at
            // sequential speed). Should a crash lose the write, its objects
            // are lost, never stale: a change of one rewrites its set above
            // the segment's generation, durably.
            self.dev.write_at(buf.as_slice(), at)?;
        }
        times.lap(t, |x| &mut x.log_write_us);
        Ok(Written {
            built,
            drops: p.drops,
            live: p.live,
            new_gen: p.new_gen,
            took: self.took(),
            found: Vec::new(),
            times,
        })
    }

    fn took(&self) -> Duration {
        self.inner
            .lock()
            .started
            .map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// The job's times up to its write phase: its wait in the queue and
    /// the read of the segment it writes over.
    fn times_so_far(&self) -> FlushTimes {
        let g = self.inner.lock();
        FlushTimes {
            queued_us: g.started.map_or(0, |t| {
                t.saturating_duration_since(self.sealed_at).as_micros() as u64
            }),
            old_read_us: g.old_read_us,
            ..FlushTimes::default()
        }
    }

    /// An invalidation's write: its sets are read and rebuilt without the
    /// keys; those that held a copy of one (or did not verify) are written
    /// and the device synced, before the commit lets the changes go ahead.
    /// A set that held none is left as it is (a filter's false positive).
    fn write_invalidation(&self, p: Plan) -> io::Result<Written> {
        let layout = self.layout(&p);
        let blocks = read_many(&self.dev, &self.ring, &layout.reads_for(&p.moves, &p.pages))?;
        let mut decoded = HashMap::new();
        let mut found = Vec::new();
        let mut built = Vec::new();
        for (m, keys) in p.moves.iter().zip(&p.exclude) {
            let b = layout.build_set(m, keys, &p.pages, &blocks, &mut decoded);
            found.extend(
                keys.iter()
                    .zip(&b.found)
                    .map(|(k, &f)| (xxhash_rust::xxh3::xxh3_64(k), k.clone(), f)),
            );
            if b.present || b.verify_failures > 0 {
                built.push(b);
            }
        }
        self.inner.lock().view = blocks;
        write_many(&self.dev, &layout, &built, false)?;
        if !built.is_empty() {
            self.dev.sync()?;
        }
        Ok(Written {
            built,
            drops: Vec::new(),
            live: Vec::new(),
            new_gen: 0,
            took: self.took(),
            found,
            times: FlushTimes::default(),
        })
    }
}

impl super::SmallStore {
    /// Counts a committed segment flush's times.
    pub(super) fn count_times(&mut self, t: &FlushTimes) {
        let s = &mut self.stats;
        s.flush_queue_us += t.queued_us;
        s.flush_old_read_us += t.old_read_us;
        s.flush_reads += t.reads;
        s.flush_read_us += t.read_us;
        s.flush_build_us += t.build_us;
        s.flush_write_us += t.write_us;
        s.flush_sync_us += t.sync_us;
        s.flush_log_write_us += t.log_write_us;
    }
}
