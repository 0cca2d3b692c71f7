//! The device phases of a segment flush or an invalidation job
//! ([`super::flush`]): the read of the log segment a flush writes over,
//! then the set reads, rebuilds and writes, the sync and the sealed
//! segment's write, all without the store's owner.

use super::flush::{Job, Phase, Plan, Written};
use super::format::{self, Kind, Obj};
use super::sets::{page_offset, read_many, write_many, Built, Layout};
use crate::device::aligned::{AlignedBuf, BLOCK};
use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

impl Job {
    /// Reads the segment the job writes over (phase 2; no owner needed).
    pub fn read_old(&self) -> io::Result<Option<AlignedBuf>> {
        self.inner.lock().started.get_or_insert_with(Instant::now);
        if self.old_gen == 0 {
            return Ok(None);
        }
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

    fn write_planned(&self, p: Plan) -> io::Result<Written> {
        let layout = self.layout(&p);
        let blocks = read_many(&*self.dev, &layout.reads_for(&p.moves, &p.pages))?;
        let mut decoded = HashMap::new();
        let built: Vec<Built> = p
            .moves
            .iter()
            .map(|m| layout.build_set(m, &[], &p.pages, &blocks, &mut decoded))
            .collect();
        {
            // Gets read these until the commit: what DRAM still describes.
            let mut g = self.inner.lock();
            g.view = blocks;
            if let Some(old) = &p.old {
                let first = (self.seg * self.cfg.seg_pages) as u32;
                for (i, page) in old.as_slice().chunks(BLOCK).enumerate() {
                    let mut b = AlignedBuf::new(BLOCK);
                    b.as_mut_slice().copy_from_slice(page);
                    g.view.insert(page_offset(self.base, first + i as u32), b);
                }
            }
        }
        write_many(&*self.dev, &layout, &built, false)?;
        if !built.is_empty() {
            // Set writes that replaced older copies are durable before the
            // log copies that supersede them are overwritten. (Every job
            // that wrote sets synced them so: a job that wrote none has
            // nothing to make durable.)
            self.dev.sync()?;
        }
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
        Ok(Written {
            built,
            drops: p.drops,
            live: p.live,
            new_gen: p.new_gen,
            took: self.took(),
            found: Vec::new(),
        })
    }

    fn took(&self) -> Duration {
        self.inner
            .lock()
            .started
            .map_or(Duration::ZERO, |t| t.elapsed())
    }

    /// An invalidation's write: its sets are read and rebuilt without the
    /// keys; those that held a copy of one (or did not verify) are written
    /// and the device synced, before the commit lets the changes go ahead.
    /// A set that held none is left as it is (a filter's false positive).
    fn write_invalidation(&self, p: Plan) -> io::Result<Written> {
        let layout = self.layout(&p);
        let blocks = read_many(&*self.dev, &layout.reads_for(&p.moves, &p.pages))?;
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
        write_many(&*self.dev, &layout, &built, false)?;
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
        })
    }
}
