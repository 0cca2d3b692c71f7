//! A shard's part of the shutdown snapshot (see persist.rs).

use super::*;

/// Snapshot (graceful restart) of a shard: see persist.rs for the layout.
impl Shard {
    pub fn save<W: std::io::Write>(
        &self,
        w: &mut crate::persist::SnapWriter<W>,
    ) -> std::io::Result<()> {
        for v in persisted(&mut self.stats.clone()) {
            w.u64(*v)?;
        }
        w.u32(self.segs.len() as u32)?;
        for s in &self.segs {
            match s {
                None => w.u8(0)?,
                Some(seg) => {
                    w.u8(1)?;
                    w.u8(seg.queue as u8)?;
                    w.u32(seg.write as u32)?;
                    w.u32(seg.live_items)?;
                    w.bytes_of(&seg.data[..seg.write])?;
                }
            }
        }
        w.list(self.free_ids.iter().copied())?;
        for q in &self.queues {
            w.list(q.iter().copied())?;
        }
        self.index.save(w)
    }

    /// Loads a snapshot into this (new, empty) shard.
    pub fn load<R: std::io::Read>(
        &mut self,
        r: &mut crate::persist::SnapReader<R>,
    ) -> std::io::Result<()> {
        use crate::persist::invalid;
        for v in persisted(&mut self.stats) {
            *v = r.u64()?;
        }
        let n = r.u32()? as usize;
        if n >= crate::flash::FLASH_SEG_BASE as usize {
            return Err(invalid("more RAM segments than a shard can hold"));
        }
        let seg_size = self.shared.pool.seg_size();
        let mut over = 0;
        for _ in 0..n {
            if r.u8()? == 0 {
                self.segs.push(None);
                continue;
            }
            let queue = match r.u8()? {
                0 => Queue::Probation,
                _ => Queue::Main,
            };
            let write = r.u32()? as usize;
            let live_items = r.u32()?;
            // A segment larger than the segment size is a jumbo segment:
            // one item, its buffer exactly its size (`Shard::alloc_jumbo`).
            let jumbo = write > seg_size;
            let pool = &self.shared.pool;
            if jumbo && (write > pool.limit() || !write.is_multiple_of(crate::item::ALIGN)) {
                return Err(invalid("a segment larger than the memory limit"));
            }
            // Over the budget when the index or the small-object store now
            // take more of -m than when the snapshot was written (the store's
            // log index is rebuilt by its scan): kept, and given back as the
            // cache evicts, rather than refusing to start.
            let taken = if jumbo {
                pool.take_jumbo(write)
            } else {
                pool.take()
            };
            let mut data = match taken {
                Some(d) => d,
                // A quarter over at most: a damaged count is refused before
                // its memory is (the checksum is only known at the end).
                None if pool.allocated() < pool.max_segments() * 5 / 4 + 4 => {
                    over += 1;
                    if jumbo {
                        pool.take_jumbo_over_budget(write)
                    } else {
                        pool.take_over_budget()
                    }
                }
                None => return Err(invalid("the snapshot holds more RAM than -m allows")),
            };
            r.bytes_into(&mut data[..write])?;
            let mut seg = Segment::new(data, queue);
            seg.write = write;
            seg.live_items = live_items;
            // Not in the snapshot: the first sweep walks it and knows.
            seg.soonest_expiry = 0;
            self.segs.push(Some(seg));
        }
        self.free_ids = r.list(n)?;
        for q in 0..2 {
            let ids = r.list(n)?;
            if ids
                .iter()
                .any(|&id| self.segs.get(id as usize).is_none_or(|s| s.is_none()))
            {
                return Err(invalid("queue names a missing segment"));
            }
            self.queues[q] = ids.into_iter().collect();
        }
        self.index = Index::load(r)?;
        self.account_index();
        if over > 0 {
            tracing::warn!(
                segments = over,
                "the snapshot's RAM segments are over the memory budget now (the index or the small-object store takes more of -m): they are kept and given back as the cache evicts"
            );
        }
        Ok(())
    }
}

impl Shard {
    /// After a snapshot's load: drops the flash entries whose segment the
    /// tier did not restore (`sealed[slot]` false: its header on the device
    /// no longer matches, as when the file was deleted or replaced while
    /// the snapshot stayed). Left in, they were counted as items, read on
    /// every lookup of a key of their class (a tag miss or a failed
    /// verification, each time) and made sets of new keys ask the crash
    /// journal for tombstones. Their records are not on the device: no
    /// tombstone is needed. Returns how many went.
    pub fn drop_unrestored_flash_entries(&mut self, sealed: &[bool]) -> u64 {
        let base = crate::flash::FLASH_SEG_BASE;
        let dropped = self.index.retain(|loc| {
            !is_flash(loc)
                || sealed
                    .get((loc.seg - base) as usize)
                    .copied()
                    .unwrap_or(false)
        }) as u64;
        self.stats.curr_items = self.stats.curr_items.saturating_sub(dropped);
        self.stats.flash_items = self.stats.flash_items.saturating_sub(dropped);
        dropped
    }
}

/// The counters a snapshot keeps, in file order (see persist.rs).
fn persisted(st: &mut ShardStats) -> [&mut u64; 9] {
    [
        &mut st.curr_items,
        &mut st.bytes,
        &mut st.total_items,
        &mut st.flash_items,
        &mut st.segments,
        &mut st.evictions,
        &mut st.reclaimed,
        &mut st.reinserted,
        &mut st.demoted,
    ]
}
