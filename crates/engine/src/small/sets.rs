//! Set rewrites, in three steps so that the device I/O can run without the
//! store: a [`SetPlan`] per set is taken from DRAM (its log entries, its hit
//! bits, a generation), the blocks are read and each set is rebuilt (the
//! set's objects, then its log objects newest first, without the excluded
//! key, evicting by RRIP) and written, off any lock ([`build_set`],
//! [`read_many`], [`write_many`]), and DRAM then follows what was written
//! ([`SmallStore::apply_built`]). The reads and writes of a batch run
//! many at once on the store's I/O pool ([`super::setio`]), so a batch
//! costs about one device round trip rather than one per set. Each set write is
//! independent of the others; the caller's sync (before a log segment is
//! overwritten) or the durable write (a delete) gives the crash rules of
//! docs/SMALL.md, whatever order the writes land in.

use super::format::{self, BlockError, Kind, Obj, BLOCK_PAYLOAD};
use super::log::LogRef;
use super::setio::{copy_of, Batch, Ring};
use super::store::{place, SmallConfig, SmallStore, RRIP_INSERT, RRIP_MAX};
use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

/// An object of a log page read: its set, its tag, its bytes' span.
pub(super) type Span = (u32, u16, usize, usize);

/// The log pages a batch of rebuilds has looked at, by page number.
pub(super) type Decoded = HashMap<u32, Vec<Span>>;

/// A log object a rebuild may take: one of the flushed segment's, or one
/// still in its page's bytes (copied out only if taken).
enum Src<'a> {
    Obj(&'a Obj),
    Span(&'a [u8], usize, usize),
}

impl Src<'_> {
    fn key(&self) -> &[u8] {
        match self {
            Src::Obj(o) => &o.key,
            Src::Span(b, at, _) => format::key_at(b, *at),
        }
    }

    fn obj(&self) -> Obj {
        match self {
            Src::Obj(o) => (*o).clone(),
            Src::Span(b, at, end) => format::obj_at(b, *at, *end),
        }
    }
}

/// What rewriting one set needs from DRAM, taken under the store's owner.
#[derive(Debug, Clone)]
pub(super) struct SetPlan {
    pub set: u32,
    /// The generation the new block is written at.
    pub gen: u64,
    /// The set's log entries, oldest first.
    pub refs: Vec<LogRef>,
    /// Places of the set's objects hit since its last write.
    pub hits: u64,
    /// The set's tombstones (fingerprint, generation): their objects are
    /// left out, and they are retired once the new block is durable.
    pub dead: Vec<(u32, u64)>,
    /// The set's block holds no object (its filter is empty): the rebuild
    /// does not read it.
    pub empty: bool,
}

/// A set's new block and what DRAM must learn of it.
pub(super) struct Built {
    pub set: u32,
    pub gen: u64,
    pub block: AlignedBuf,
    /// Hashes of the keys the new block holds (its filter).
    pub hashes: Vec<u64>,
    /// Objects the old block held as DRAM counted them (0 if it did not verify).
    pub old_count: u64,
    pub moved: u64,
    pub evicted: u64,
    pub verify_failures: u64,
    /// Per excluded key (in the order given): whether it was there, unexpired.
    pub found: Vec<bool>,
    /// Whether a copy of an excluded key was there, expired or not: a set
    /// without one (and that verified) need not be written for a change.
    pub present: bool,
    /// The plan's tombstones, retired when DRAM follows the write.
    pub dead: Vec<(u32, u64)>,
}

/// Where the region's blocks are and how they verify, without the store:
/// what a rebuild off the store's lock needs.
pub(super) struct Layout<'a> {
    pub base: u64,
    pub cfg: SmallConfig,
    pub nonce: u64,
    pub floor: u64,
    pub now: u32,
    /// The generation each log segment was written at.
    pub seg_gen: &'a [u64],
}

/// Device offset of log page `page` of the region at `base`.
pub(super) fn page_offset(base: u64, page: u32) -> u64 {
    base + (1 + page as u64) * BLOCK as u64
}

/// Device offset of set `set` of the region at `base`.
pub(super) fn set_offset(base: u64, cfg: &SmallConfig, set: u32) -> u64 {
    base + (1 + cfg.log_pages() + set as usize) as u64 * BLOCK as u64
}

/// [`format::check`] with the region's nonce; a block at or below the
/// floor holds nothing.
pub(super) fn verify_block(
    b: &[u8],
    kind: Kind,
    number: u32,
    nonce: u64,
    floor: u64,
) -> Result<format::BlockHead, BlockError> {
    match format::check(b, kind, number, nonce) {
        Ok(h) if h.generation <= floor => Err(BlockError::Empty),
        r => r,
    }
}

impl Layout<'_> {
    /// The blocks rebuilding `plans` reads: each set, and its log pages
    /// not already in `pages`.
    pub fn reads_for(&self, plans: &[SetPlan], pages: &HashMap<u32, Vec<Obj>>) -> Vec<u64> {
        let mut offs: Vec<u64> = plans.iter().flat_map(|p| self.reads_of(p, pages)).collect();
        offs.sort_unstable();
        offs.dedup();
        offs
    }

    /// The blocks rebuilding one set reads: the set (unless it holds no
    /// object), and its log pages not already in `pages`.
    pub fn reads_of(&self, p: &SetPlan, pages: &HashMap<u32, Vec<Obj>>) -> Vec<u64> {
        let set = (!p.empty).then(|| set_offset(self.base, &self.cfg, p.set));
        let logs = p.refs.iter().filter(|r| !pages.contains_key(&r.page));
        set.into_iter()
            .chain(logs.map(|r| page_offset(self.base, r.page)))
            .collect()
    }

    /// Where a log page's objects lie, with their sets and tags (hashed
    /// once per page, not once per set that reads it); none if the page
    /// does not verify at its segment's generation (counted).
    fn log_spans(&self, b: &[u8], page: u32, out: &mut Built) -> Vec<Span> {
        let seg = page as usize / self.cfg.seg_pages;
        match verify_block(b, Kind::Log, page, self.nonce, self.floor) {
            Ok(h) if h.generation == self.seg_gen[seg] => format::spans(b, &h)
                .map(|(at, end)| {
                    let (_, set, tag) = place(format::key_at(b, at), self.cfg.sets);
                    (set, tag, at, end)
                })
                .collect(),
            _ => {
                out.verify_failures += 1;
                Vec::new()
            }
        }
    }

    /// A set's new block from the blocks read (`blocks`, by offset) and the
    /// log pages' objects (`pages`, then the pages read, their objects'
    /// places kept in `decoded`).
    pub fn build_set(
        &self,
        p: &SetPlan,
        exclude: &[Vec<u8>],
        pages: &HashMap<u32, Vec<Obj>>,
        blocks: &HashMap<u64, AlignedBuf>,
        decoded: &mut Decoded,
    ) -> Built {
        let (set, now) = (p.set, self.now);
        let mut out = Built {
            set,
            gen: p.gen,
            // Stale bytes of a recycled buffer: `encode` writes every byte.
            block: AlignedBuf::for_read(BLOCK),
            hashes: Vec::new(),
            old_count: 0,
            moved: 0,
            evicted: 0,
            verify_failures: 0,
            found: vec![false; exclude.len()],
            present: false,
            dead: p.dead.clone(),
        };
        // Objects a tombstone covers (their block at or below its generation).
        let dead = |key: &[u8], gen: u64| {
            !p.dead.is_empty() && {
                let fp = super::tomb::fp_of(xxh3_64(key));
                p.dead.iter().any(|&(f, g)| f == fp && gen <= g)
            }
        };
        let mut buried = 0u64;
        let cur = match p.empty {
            // Its filter is empty: the block holds no object (not read).
            true => None,
            false => Some(blocks[&set_offset(self.base, &self.cfg, set)].as_slice()),
        };
        let checked = cur.map_or(Err(BlockError::Empty), |b| {
            verify_block(b, Kind::Set, set, self.nonce, self.floor)
        });
        let mut objs: Vec<Obj> = match checked {
            Ok(h) => {
                out.old_count = h.count as u64;
                format::objects(cur.expect("read"), &h)
                    .enumerate()
                    .map(|(i, mut o)| {
                        if i < 64 && p.hits & (1 << i) != 0 {
                            o.set_rrip(0);
                        }
                        o
                    })
                    .filter(|o| {
                        let d = dead(&o.key, h.generation);
                        buried += u64::from(d);
                        !d
                    })
                    .collect()
            }
            Err(BlockError::Empty) => Vec::new(),
            Err(BlockError::Corrupt) => {
                out.verify_failures += 1;
                Vec::new()
            }
        };
        // Log objects, newest first: the first copy of a key wins.
        let mut fresh: Vec<Obj> = Vec::new();
        for r in p.refs.iter().rev() {
            let page_gen = self.seg_gen[r.page as usize / self.cfg.seg_pages];
            // The page's objects of this set with the entry's tag, newest
            // first: from the segment being flushed, or from the page read
            // (where only those are copied out of the block).
            let srcs: Vec<Src<'_>> = match pages.get(&r.page) {
                Some(objs) => objs
                    .iter()
                    .rev()
                    .filter(|o| {
                        let (_, oset, otag) = place(&o.key, self.cfg.sets);
                        oset == set && otag == r.tag
                    })
                    .map(Src::Obj)
                    .collect(),
                None => {
                    let b = blocks[&page_offset(self.base, r.page)].as_slice();
                    let spans = decoded
                        .entry(r.page)
                        .or_insert_with(|| self.log_spans(b, r.page, &mut out));
                    spans
                        .iter()
                        .rev()
                        .filter(|s| s.0 == set && s.1 == r.tag)
                        .map(|&(_, _, at, end)| Src::Span(b, at, end))
                        .collect()
                }
            };
            for src in srcs {
                let key = src.key();
                if dead(key, page_gen) {
                    buried += 1;
                    continue;
                }
                if !fresh.iter().any(|f| f.key == key) {
                    let mut o = src.obj();
                    o.set_rrip(if r.hit { 0 } else { RRIP_INSERT });
                    fresh.push(o);
                    out.moved += 1;
                }
            }
        }
        objs.retain(|o| !fresh.iter().any(|f| f.key == o.key));
        objs.extend(fresh);
        for (found, k) in out.found.iter_mut().zip(exclude) {
            *found = objs.iter().any(|o| o.key == *k && !o.expired(now));
        }
        out.present = objs.iter().any(|o| exclude.contains(&o.key)) || buried > 0;
        objs.retain(|o| !o.expired(now) && !exclude.contains(&o.key));
        // RRIP eviction: the highest value goes first; age all when none is at the top.
        while objs.iter().map(Obj::size).sum::<usize>() > BLOCK_PAYLOAD {
            match objs.iter().position(|o| o.rrip() == RRIP_MAX) {
                Some(i) => {
                    objs.remove(i);
                    out.evicted += 1;
                }
                None => objs.iter_mut().for_each(|o| o.set_rrip(o.rrip() + 1)),
            }
        }
        format::encode(
            out.block.as_mut_slice(),
            Kind::Set,
            set,
            p.gen,
            self.nonce,
            &objs,
        );
        out.hashes = objs.iter().map(|o| xxh3_64(&o.key)).collect();
        out
    }
}

impl SmallStore {
    /// What rewriting `set` needs from DRAM, with a new generation.
    pub(super) fn plan_set(&mut self, set: u32) -> SetPlan {
        self.generation += 1;
        SetPlan {
            set,
            gen: self.generation,
            refs: self.log.of_set(set).collect(),
            hits: self.filters.hits(set as usize),
            dead: self.tombs.of_set(set, self.cfg.sets),
            empty: !self.filters.holds_any(set as usize),
        }
    }

    /// The region's layout as DRAM knows it now.
    pub(super) fn layout(&self) -> Layout<'_> {
        Layout {
            base: self.base,
            cfg: self.cfg,
            nonce: self.nonce,
            floor: self.floor,
            now: self.now,
            seg_gen: &self.seg_gen,
        }
    }

    /// DRAM follows a set block that was written: its log entries are gone
    /// (their objects are in the set, or dropped), its filter and
    /// generation are the new block's.
    pub(super) fn apply_built(&mut self, b: &Built) {
        self.log.take_set(b.set);
        self.set_objects = self.set_objects.saturating_sub(b.old_count) + b.hashes.len() as u64;
        self.filters
            .rebuild(b.set as usize, b.hashes.iter().copied(), b.gen);
        self.stats.moved += b.moved;
        self.stats.evicted += b.evicted;
        self.stats.verify_failures += b.verify_failures;
        self.stats.sets_written += 1;
        self.stats.set_bytes_written += BLOCK as u64;
        // Durable (every set write is, by its job's sync or a durable
        // write, before DRAM follows it): its tombstones are not needed.
        self.retire_tombs(&b.dead);
    }

    /// Rewrites `sets` on this thread, each with its log objects moved in
    /// (the newest copy of each key), without the keys of `exclude`,
    /// evicting by RRIP. `pages` holds log pages' live objects already
    /// read. Durable when `durable`. Returns whether one of `exclude` was
    /// there (unexpired).
    pub(super) fn rewrite_sets(
        &mut self,
        sets: &[u32],
        exclude: &[Vec<u8>],
        pages: &HashMap<u32, Vec<Obj>>,
        durable: bool,
    ) -> io::Result<bool> {
        if sets.is_empty() {
            return Ok(false);
        }
        let plans: Vec<SetPlan> = sets.iter().map(|&s| self.plan_set(s)).collect();
        let layout = self.layout();
        let offs = layout.reads_for(&plans, pages);
        let built = read_many(&self.dev, &self.ring, &offs).and_then(|blocks| {
            let mut decoded = HashMap::new();
            let built: Vec<Built> = plans
                .iter()
                .map(|p| layout.build_set(p, exclude, pages, &blocks, &mut decoded))
                .collect();
            write_many(&self.dev, &layout, &built, durable)?;
            Ok(built)
        });
        let built = match built {
            Ok(b) => b,
            Err(e) => {
                self.fail(&e);
                return Err(e);
            }
        };
        built.iter().for_each(|b| self.apply_built(b));
        Ok(built.iter().any(|b| b.found.iter().any(|&f| f)))
    }
}

/// Reads 4 KiB blocks at `offs`, many at once ([`super::setio`]).
pub(super) fn read_many(
    dev: &Arc<dyn BlockDevice>,
    ring: &Ring,
    offs: &[u64],
) -> io::Result<HashMap<u64, AlignedBuf>> {
    let mut io = Batch::new(dev, Some(ring));
    for (i, &off) in offs.iter().enumerate() {
        io.read(off, i);
    }
    let mut out = HashMap::with_capacity(offs.len());
    while let Some((i, r)) = io.next() {
        if let Some(b) = r? {
            out.insert(offs[i], b);
        }
    }
    Ok(out)
}

/// Writes the sets' new blocks (at their offsets in `l`'s region), many
/// at once; each durably when `durable`.
pub(super) fn write_many(
    dev: &Arc<dyn BlockDevice>,
    l: &Layout<'_>,
    built: &[Built],
    durable: bool,
) -> io::Result<()> {
    let mut io = Batch::new(dev, None);
    for (i, b) in built.iter().enumerate() {
        io.write(
            set_offset(l.base, &l.cfg, b.set),
            copy_of(&b.block),
            durable,
            i,
        );
    }
    io.finish()
}
