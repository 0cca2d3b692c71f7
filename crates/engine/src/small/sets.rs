//! Set rewrites, batched: the sets a log segment's objects move into (or
//! the one set a delete rewrites) are read all at once, rebuilt in memory
//! (the set's objects, then its log objects newest first, without the
//! excluded key, evicting by RRIP), and written all at once. The reads and
//! writes run in parallel on a few threads, so a segment flush costs about
//! one device round trip per phase rather than one per set. Each set write
//! is independent of the others; the caller's sync (before a log segment is
//! overwritten) or the durable write (a delete) gives the crash rules of
//! docs/SMALL.md, whatever order the writes land in.

use super::format::{self, BlockError, Kind, Obj, BLOCK_PAYLOAD};
use super::store::{place, SmallStore, RRIP_INSERT, RRIP_MAX};
use crate::flash::aligned::{AlignedBuf, BLOCK};
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::io;
use xxhash_rust::xxh3::xxh3_64;

/// Threads a batch of set reads or writes runs on.
const IO_THREADS: usize = 16;
/// Batches smaller than this run on the caller's thread (a thread costs
/// more than a few fast I/Os).
const PARALLEL_FROM: usize = 8;

impl SmallStore {
    /// Rewrites `sets`, each with its log objects moved in (the newest
    /// copy of each key), without `exclude`, evicting by RRIP. `pages`
    /// holds log pages' live objects already read. Durable when `durable`.
    /// Returns whether `exclude` was there (unexpired).
    pub(super) fn rewrite_sets(
        &mut self,
        sets: &[u32],
        exclude: Option<&[u8]>,
        pages: &HashMap<u32, Vec<Obj>>,
        durable: bool,
    ) -> io::Result<bool> {
        if sets.is_empty() {
            return Ok(false);
        }
        let mut offs = Vec::new();
        for &set in sets {
            offs.push(self.set_offset(set));
            for r in self.log.of_set(set) {
                if !pages.contains_key(&r.page) {
                    offs.push(self.page_offset(r.page));
                }
            }
        }
        offs.sort_unstable();
        offs.dedup();
        let blocks = match read_many(&*self.dev, &offs) {
            Ok(b) => b,
            Err(e) => {
                self.fail(&e);
                return Err(e);
            }
        };
        let mut decoded: HashMap<u32, Vec<Obj>> = HashMap::new();
        let mut writes = Vec::with_capacity(sets.len());
        let mut found = false;
        for &set in sets {
            let (b, f) = self.build_set(set, exclude, pages, &blocks, &mut decoded);
            found |= f;
            writes.push((self.set_offset(set), b));
        }
        if let Err(e) = write_many(&*self.dev, &writes, durable) {
            self.fail(&e);
            return Err(e);
        }
        self.stats.sets_written += writes.len() as u64;
        self.stats.set_bytes_written += (writes.len() * BLOCK) as u64;
        Ok(found)
    }

    /// A set's new block from the blocks read (`blocks`, by offset) and the
    /// log pages' objects (`pages`, then `decoded` as verified here); the
    /// DRAM side (filter, generation, counts) is updated to it.
    fn build_set(
        &mut self,
        set: u32,
        exclude: Option<&[u8]>,
        pages: &HashMap<u32, Vec<Obj>>,
        blocks: &HashMap<u64, AlignedBuf>,
        decoded: &mut HashMap<u32, Vec<Obj>>,
    ) -> (AlignedBuf, bool) {
        let now = self.now;
        let s = set as usize;
        let cur = blocks[&self.set_offset(set)].as_slice();
        let mut objs: Vec<Obj> = match self.verify(cur, Kind::Set, set) {
            Ok(h) => {
                self.set_objects -= (h.count as u64).min(self.set_objects);
                format::objects(cur, &h)
                    .enumerate()
                    .map(|(i, mut o)| {
                        if self.filters.was_hit(s, i) {
                            o.set_rrip(0);
                        }
                        o
                    })
                    .collect()
            }
            Err(BlockError::Empty) => Vec::new(),
            Err(BlockError::Corrupt) => {
                self.stats.verify_failures += 1;
                Vec::new()
            }
        };
        // Log objects, newest first: the first copy of a key wins.
        let refs = self.log.take_set(set);
        let mut fresh: Vec<Obj> = Vec::new();
        for r in refs.iter().rev() {
            if !pages.contains_key(&r.page) && !decoded.contains_key(&r.page) {
                let b = blocks[&self.page_offset(r.page)].as_slice();
                let seg = r.page as usize / self.cfg.seg_pages;
                let objs = match self.verify(b, Kind::Log, r.page) {
                    Ok(h) if h.generation == self.seg_gen[seg] => format::objects(b, &h).collect(),
                    _ => {
                        self.stats.verify_failures += 1;
                        Vec::new()
                    }
                };
                decoded.insert(r.page, objs);
            }
            let page_objs = pages
                .get(&r.page)
                .or_else(|| decoded.get(&r.page))
                .expect("read");
            for o in page_objs.iter().rev() {
                let (_, oset, otag) = place(&o.key, self.cfg.sets);
                if oset == set && otag == r.tag && !fresh.iter().any(|f| f.key == o.key) {
                    let mut o = o.clone();
                    o.set_rrip(if r.hit { 0 } else { RRIP_INSERT });
                    fresh.push(o);
                    self.stats.moved += 1;
                }
            }
        }
        objs.retain(|o| !fresh.iter().any(|f| f.key == o.key));
        objs.extend(fresh);
        let found = exclude.is_some_and(|k| objs.iter().any(|o| o.key == k && !o.expired(now)));
        objs.retain(|o| !o.expired(now) && Some(&o.key[..]) != exclude);
        // RRIP eviction: the highest value goes first; age all when none is at the top.
        while objs.iter().map(Obj::size).sum::<usize>() > BLOCK_PAYLOAD {
            match objs.iter().position(|o| o.rrip() == RRIP_MAX) {
                Some(i) => {
                    objs.remove(i);
                    self.stats.evicted += 1;
                }
                None => objs.iter_mut().for_each(|o| o.set_rrip(o.rrip() + 1)),
            }
        }
        self.generation += 1;
        let gen = self.generation;
        let mut b = AlignedBuf::new(BLOCK);
        format::encode(b.as_mut_slice(), Kind::Set, set, gen, self.nonce, &objs);
        self.set_objects += objs.len() as u64;
        self.filters
            .rebuild(s, objs.iter().map(|o| xxh3_64(&o.key)), gen);
        (b, found)
    }
}

/// Runs `f` over `items` on up to [`IO_THREADS`] threads (on this one for
/// fewer than [`PARALLEL_FROM`] items); the first error wins.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> io::Result<R> + Sync,
) -> io::Result<Vec<R>> {
    if items.len() < PARALLEL_FROM {
        return items.iter().map(&f).collect();
    }
    let per = items.len().div_ceil(IO_THREADS);
    std::thread::scope(|sc| {
        let handles: Vec<_> = items
            .chunks(per)
            .map(|chunk| sc.spawn(|| chunk.iter().map(&f).collect::<io::Result<Vec<R>>>()))
            .collect();
        let mut out = Vec::with_capacity(items.len());
        for h in handles {
            out.extend(
                h.join()
                    .map_err(|_| io::Error::other("a set I/O thread panicked"))??,
            );
        }
        Ok(out)
    })
}

/// Reads 4 KiB blocks at `offs`, in parallel.
fn read_many(dev: &dyn BlockDevice, offs: &[u64]) -> io::Result<HashMap<u64, AlignedBuf>> {
    let bufs = parallel(offs, |&off| {
        let mut b = AlignedBuf::new(BLOCK);
        let n = dev.read_at(b.as_mut_slice(), off)?;
        if n < BLOCK {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "short read of a set",
            ));
        }
        Ok((off, b))
    })?;
    Ok(bufs.into_iter().collect())
}

/// Writes the blocks, in parallel; each durably when `durable`.
fn write_many(
    dev: &dyn BlockDevice,
    writes: &[(u64, AlignedBuf)],
    durable: bool,
) -> io::Result<()> {
    parallel(writes, |(off, b)| {
        if durable {
            dev.write_durable(b.as_slice(), *off)
        } else {
            dev.write_at(b.as_slice(), *off)
        }
    })
    .map(drop)
}
