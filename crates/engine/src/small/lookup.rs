//! Reads: where a key's object is ([`SmallStore::lookup_with`]: the open
//! buffer, the sealed segments, the log, then its set), as steps that name
//! the blocks to read, so that device reads can run off the shard's lock.

use super::format::{self, Kind, Obj};
use super::store::{place, SmallStore};
use crate::device::aligned::{AlignedBuf, BLOCK};
use std::collections::HashMap;

/// A get's answer and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    Buffer(Obj),
    Log(Obj),
    Set(Obj),
}

impl Found {
    pub fn obj(&self) -> &Obj {
        match self {
            Found::Buffer(o) | Found::Log(o) | Found::Set(o) => o,
        }
    }
}

impl SmallStore {
    /// Looks a key up, reading the device on this thread (the simulator,
    /// tests): [`lookup_with`](Self::lookup_with) with blocking reads.
    pub fn get(&mut self, key: &[u8], now: u32) -> Option<Found> {
        let mut have: HashMap<u64, AlignedBuf> = HashMap::new();
        for _ in 0..4 {
            let step = self.lookup_with(key, now, &|off| have.get(&off).map(|b| b.as_slice()));
            match step {
                Step::Hit(f) => return Some(f),
                Step::Miss => return None,
                Step::Read(offs) => {
                    for off in offs {
                        have.insert(off, self.read_block(off, BLOCK).ok()?);
                    }
                }
            }
        }
        None
    }

    /// Which device (of the engine's) and where the region is.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Looks a key up in DRAM and in the blocks `have` holds (by device
    /// offset, as read): the buffer, then the key's log copies newest
    /// first, then its set. Every object read is verified (block checksum,
    /// number, nonce, generation, full key). [`Step::Read`] lists the blocks
    /// to read first (again, for a block that changed since it was read).
    pub fn lookup_with<'a>(
        &mut self,
        key: &[u8],
        now: u32,
        have: &dyn Fn(u64) -> Option<&'a [u8]>,
    ) -> Step {
        if self.failed {
            return Step::Miss;
        }
        self.now = self.now.max(now);
        // While a flush writes, the blocks it replaces are read from its
        // view: they are what DRAM describes until it commits.
        match self.jobs.front().cloned() {
            None => self.lookup_in(key, now, have),
            Some(job) => job.with_view(|view| {
                self.lookup_in(key, now, &|off| {
                    view.get(&off).map(|b| b.as_slice()).or_else(|| have(off))
                })
            }),
        }
    }

    fn lookup_in<'b>(
        &mut self,
        key: &[u8],
        now: u32,
        have: &dyn Fn(u64) -> Option<&'b [u8]>,
    ) -> Step {
        let (h, set, tag) = place(key, self.cfg.sets);
        let unwritten = if self.maybe_unwritten(h) {
            self.unwritten()
                .find(|(ph, o)| *ph == h && o.key == key)
                .map(|(_, o)| o.clone())
        } else {
            None
        };
        if let Some(o) = unwritten {
            if o.expired(now) {
                return Step::Miss;
            }
            self.stats.hits_buffer += 1;
            return Step::Hit(Found::Buffer(o));
        }
        let mut missing = Vec::new();
        for page in self.key_pages(set, tag) {
            match self.log_page_in(page, have) {
                PageIn::Missing(off) | PageIn::Stale(off) => missing.push(off),
                PageIn::Bad => self.stats.verify_failures += 1,
                PageIn::Current(b, hd) => {
                    // The newest copy in the page is the last one.
                    let found = format::objects(b, &hd).filter(|o| o.key == key).last();
                    if found.is_some() && self.tombs.kills(super::tomb::fp_of(h), hd.generation) {
                        // The newest copy is dead: the older ones too.
                        return if missing.is_empty() {
                            Step::Miss
                        } else {
                            Step::Read(missing)
                        };
                    }
                    if let Some(o) = found {
                        if !missing.is_empty() {
                            return Step::Read(missing);
                        }
                        self.stats.reads += 1;
                        self.log.mark_hit(set, page, tag);
                        if o.expired(now) {
                            return Step::Miss;
                        }
                        self.stats.hits_log += 1;
                        return Step::Hit(Found::Log(o));
                    }
                    self.stats.reads += 1;
                }
            }
        }
        if !self.filters.may_contain(set as usize, h) {
            return if missing.is_empty() {
                Step::Miss
            } else {
                Step::Read(missing)
            };
        }
        let off = self.set_offset(set);
        let Some(b) = have(off) else {
            missing.push(off);
            return Step::Read(missing);
        };
        if !missing.is_empty() {
            return Step::Read(missing);
        }
        match self.verify(b, Kind::Set, set) {
            Ok(hd) if hd.generation as u16 == self.filters.generation(set as usize) => {
                self.stats.reads += 1;
                match format::find(b, &hd, key) {
                    _ if self.tombs.kills(super::tomb::fp_of(h), hd.generation) => Step::Miss,
                    Some((place, o)) if !o.expired(now) => {
                        self.filters.hit(set as usize, place);
                        self.stats.hits_set += 1;
                        Step::Hit(Found::Set(o))
                    }
                    Some(_) => Step::Miss,
                    None => {
                        self.stats.false_positive_reads += 1;
                        Step::Miss
                    }
                }
            }
            Ok(_) => Step::Read(vec![off]),
            Err(_) => {
                self.stats.verify_failures += 1;
                Step::Miss
            }
        }
    }
}

impl SmallStore {
    /// The log pages that may hold a copy of a key of `set` with `tag`
    /// (its log entries'), newest first, each once.
    pub(super) fn key_pages(&self, set: u32, tag: u16) -> Vec<u32> {
        let mut pages: Vec<u32> = Vec::new();
        for r in self.log.of_set(set).rev().filter(|r| r.tag == tag) {
            if !pages.contains(&r.page) {
                pages.push(r.page);
            }
        }
        pages
    }

    /// A log page as `have` holds it, verified against DRAM.
    pub(super) fn log_page_in<'b>(
        &self,
        page: u32,
        have: &dyn Fn(u64) -> Option<&'b [u8]>,
    ) -> PageIn<'b> {
        let off = self.page_offset(page);
        let Some(b) = have(off) else {
            return PageIn::Missing(off);
        };
        let seg = page as usize / self.cfg.seg_pages;
        match self.verify(b, Kind::Log, page) {
            Ok(hd) if hd.generation == self.seg_gen[seg] => PageIn::Current(b, hd),
            Ok(_) => PageIn::Stale(off),
            Err(_) => PageIn::Bad,
        }
    }
}

/// A log page read for a key ([`SmallStore::log_page_in`]).
pub(super) enum PageIn<'b> {
    /// Not read yet: read it at this offset.
    Missing(u64),
    /// Read before the page was written again: read it anew.
    Stale(u64),
    /// It does not verify.
    Bad,
    /// What DRAM describes.
    Current(&'b [u8], format::BlockHead),
}

/// What [`SmallStore::lookup_with`] needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Hit(Found),
    Miss,
    /// Read these blocks (device offsets, 4 KiB each), then ask again.
    Read(Vec<u64>),
}
