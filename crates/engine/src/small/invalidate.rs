//! Changes of keys the store may hold: the gate a change passes
//! ([`SmallStore::gate`]), the invalidation jobs it queues for the flusher
//! (their set rewrites batched, one device sync), and the durable set
//! rewrite on the caller's thread without a flusher
//! ([`SmallStore::invalidate`]). docs/SMALL.md has the crash rules.

use super::format::{self, BlockError, Kind};
use super::inval::{Inval, InvalState};
use super::lookup::PageIn;
use super::store::{place, SmallStore};
use std::collections::HashMap;
use std::io;
use xxhash_rust::xxh3::xxh3_64;

/// What a change of a key must do first ([`SmallStore::gate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Go ahead: no copy of the key is left (true: the store held it).
    Clear(bool),
    /// Ask again once the flusher has run the key's invalidation.
    Wait,
}

/// What a change of a key needs read first ([`SmallStore::check_with`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Nothing: the gate decides.
    Ready,
    /// Read these blocks (device offsets, 4 KiB each), then ask again.
    Read(Vec<u64>),
}

/// What a change of a key waits for ([`SmallStore::must_wait`]).
enum Asked {
    Go,
    /// An invalidation job (queued now, or before).
    Job,
    /// The commit of its tombstone in the crash journal.
    Tomb,
}

/// Whether blocks show no copy of a key ([`SmallStore::check_with`]).
enum Absent {
    Yes,
    No,
    Read(Vec<u64>),
}

/// Keys answered [`Gate::Clear`] kept per region (each spares a change of
/// its key a wait while its set's filter still says maybe); past it they are
/// forgotten, and a change of one waits for an invalidation again.
const DONE_KEPT: usize = 4096;

impl SmallStore {
    /// Whether the store may hold a copy of the key (a change to the key
    /// must [`SmallStore::invalidate`] it first).
    pub fn may_contain(&self, key: &[u8]) -> bool {
        if self.emptied {
            return false;
        }
        if self.failed {
            return true;
        }
        let (h, set, tag) = place(key, self.cfg.sets);
        (self.maybe_unwritten(h) && self.unwritten().any(|(ph, o)| *ph == h && o.key == key))
            || self.log.of_set(set).any(|r| r.tag == tag)
            || self.filters.may_contain(set as usize, h)
    }

    /// Before a change of `key` (delete, overwrite, touch...), with a
    /// background flusher: [`Gate::Clear`] when no copy of the key is left
    /// on flash, else [`Gate::Wait`] with the key queued for an
    /// invalidation job, which the flusher runs in a batch with the other
    /// changed keys (their sets rewritten without them, one device sync);
    /// the change asks again when it is committed. Nothing is read or
    /// written on the caller's thread, and the store is unchanged until the
    /// job commits: a get meanwhile still finds the old value, as the
    /// change has not happened. Without a flusher, or after a failure:
    /// [`invalidate`](Self::invalidate), here (Err: the store failed).
    pub fn gate(&mut self, key: &[u8]) -> io::Result<Gate> {
        self.gate_with(key, false)
    }

    /// [`gate`](Self::gate) for a change that replaces the key whatever it
    /// held (a plain `set`): with a crash journal, a copy of the key on
    /// flash is dropped by a tombstone in the journal (its group commit)
    /// and a lazy set rewrite instead of an invalidation job
    /// ([`super::tomb`]); `Clear` does not say whether the store held it.
    pub fn gate_replace(&mut self, key: &[u8]) -> io::Result<Gate> {
        self.gate_with(key, true)
    }

    fn gate_with(&mut self, key: &[u8], replace: bool) -> io::Result<Gate> {
        if self.notify.is_none() || self.failed {
            if !self.may_contain(key) {
                return Ok(Gate::Clear(false));
            }
            return self.invalidate(key).map(Gate::Clear);
        }
        if self.must_wait_with(key, replace) {
            return Ok(Gate::Wait);
        }
        let (h, now) = (xxh3_64(key), self.now);
        self.tomb_apply(h);
        let found = match self.invals.get_mut(&h).filter(|e| e.key == key) {
            // Flash holds no copy; one admitted since is in the buffer (a
            // sealed one took the entry away). The answer is taken.
            Some(e) => {
                std::mem::replace(&mut e.state, InvalState::Done { found: false })
                    == InvalState::Done { found: true }
            }
            None => false,
        };
        let buffered = self.buffered_unexpired(key, h, now);
        self.drop_buffered(key, h);
        Ok(Gate::Clear(found || buffered))
    }

    /// Whether a change of `key` must wait for an invalidation job (with a
    /// background flusher): its job is queued, or a copy of the key may be
    /// on flash (its set's filter, a log entry with its tag, a sealed
    /// segment) and no job has answered for it since its last admission;
    /// the key is queued then. Takes no answer: for a change that asks
    /// before it takes RAM (a retry must not take a new slot each time).
    pub fn must_wait(&mut self, key: &[u8]) -> bool {
        self.must_wait_with(key, false)
    }

    /// [`must_wait`](Self::must_wait) for a change that replaces the key
    /// whatever it held ([`gate_replace`](Self::gate_replace)).
    pub fn must_wait_replace(&mut self, key: &[u8]) -> bool {
        self.must_wait_with(key, true)
    }

    fn must_wait_with(&mut self, key: &[u8], replace: bool) -> bool {
        if self.notify.is_none() || self.failed {
            return false;
        }
        match self.ask(key, replace) {
            Asked::Go => false,
            Asked::Job => {
                self.stats.invalidate_waits += 1;
                true
            }
            Asked::Tomb => {
                self.stats.tombstone_waits += 1;
                true
            }
        }
    }

    /// [`must_wait`](Self::must_wait) with a flusher: true when the key's
    /// job is queued, or is queued now, or (`replace`) its tombstone is
    /// not durable yet.
    fn ask(&mut self, key: &[u8], replace: bool) -> Asked {
        let (h, set, tag) = place(key, self.cfg.sets);
        // (The answer of a job is looked for first: the job's set rewrite
        // took the key out of its filter.)
        if let Some(e) = self.invals.get(&h).filter(|e| e.key == key) {
            return match e.state {
                InvalState::Queued(_) => Asked::Job,
                InvalState::Done { .. } => Asked::Go,
            };
        }
        // An applied tombstone with no copy admitted since: every copy of
        // the key on flash is dead (those its filter or tag still show).
        if self
            .tombs
            .get(super::tomb::fp_of(h))
            .is_some_and(|t| t.applied && !t.readmitted)
        {
            return Asked::Go;
        }
        let on_flash = self.jobs.iter().any(|j| j.seals(h, key))
            || self.log.of_set(set).any(|r| r.tag == tag)
            || self.filters.may_contain(set as usize, h);
        if !on_flash {
            return Asked::Go;
        }
        match replace.then(|| self.tomb_ask(key, h)).flatten() {
            Some(true) => Asked::Tomb,
            Some(false) => Asked::Go,
            None => {
                self.queue_key(h, key);
                Asked::Job
            }
        }
    }

    /// Queues the invalidation a change of `key` will wait for, ahead of
    /// the change (with a background flusher; nothing otherwise, or when
    /// it is queued or answered already, or when no copy of the key can be
    /// on flash). Only for a change that replaces or deletes the key
    /// whatever it holds: the key's copy is dropped when the job commits.
    /// `overwrite`: a plain set, which asks for the key's tombstone
    /// ([`gate_replace`](Self::gate_replace)) rather than a job.
    pub fn prepare(&mut self, key: &[u8], overwrite: bool) {
        // (Past the bound of kept answers, changes ask for themselves.)
        if self.notify.is_some() && !self.failed && self.invals.len() < DONE_KEPT {
            self.ask(key, overwrite);
        }
    }

    /// Before a change of `key`, with a background flusher: when its set's
    /// filter or a log entry with its tag says the store may hold it (a
    /// false positive, for a key it never held), the blocks that would hold
    /// a copy, its log pages and its set, are read like a get's
    /// ([`Check::Read`]: read them into `have`, then ask again); when they
    /// show no copy, the key is answered as an invalidation job would answer
    /// it (no copy on flash since its last admission), so that the change
    /// does not wait for one ([`must_wait`](Self::must_wait) finds the
    /// answer). [`Check::Ready`] otherwise: nothing to read, or a copy is
    /// there (or a block did not verify), which the gate's job drops.
    pub fn check_with<'a>(&mut self, key: &[u8], have: &dyn Fn(u64) -> Option<&'a [u8]>) -> Check {
        if self.notify.is_none() || self.failed {
            return Check::Ready;
        }
        let (h, set, tag) = place(key, self.cfg.sets);
        if self.invals.get(&h).is_some_and(|e| e.key == key)
            || self.jobs.iter().any(|j| j.seals(h, key))
            || self.tombs.get(super::tomb::fp_of(h)).is_some()
        {
            return Check::Ready;
        }
        let filter = self.filters.may_contain(set as usize, h);
        let pages = self.key_pages(set, tag);
        if !filter && pages.is_empty() {
            return Check::Ready;
        }
        // While a flush writes, the blocks it replaces are read from its
        // view: they are what DRAM describes until it commits.
        let verdict = match self.jobs.front().cloned() {
            None => self.absent_in(key, set, &pages, filter, have),
            Some(job) => job.with_view(|view| {
                self.absent_in(key, set, &pages, filter, &|off| {
                    view.get(&off).map(|b| b.as_slice()).or_else(|| have(off))
                })
            }),
        };
        match verdict {
            Absent::Yes => {
                self.make_room();
                self.invals.insert(
                    h,
                    Inval {
                        key: key.to_vec(),
                        state: InvalState::Done { found: false },
                    },
                );
                self.stats.change_checks += 1;
                Check::Ready
            }
            Absent::No => Check::Ready,
            Absent::Read(offsets) => Check::Read(offsets),
        }
    }

    /// Whether the blocks DRAM describes for `key` (its log `pages`, its
    /// set if `filter`) hold no copy of it, expired or not.
    fn absent_in<'b>(
        &self,
        key: &[u8],
        set: u32,
        pages: &[u32],
        filter: bool,
        have: &dyn Fn(u64) -> Option<&'b [u8]>,
    ) -> Absent {
        let mut missing = Vec::new();
        for &page in pages {
            match self.log_page_in(page, have) {
                PageIn::Missing(off) | PageIn::Stale(off) => missing.push(off),
                PageIn::Bad => return Absent::No,
                PageIn::Current(b, hd) => {
                    if format::objects(b, &hd).any(|o| o.key == key) {
                        return Absent::No;
                    }
                }
            }
        }
        if filter {
            let off = self.set_offset(set);
            match have(off).map(|b| (b, self.verify(b, Kind::Set, set))) {
                None => missing.push(off),
                Some((b, Ok(hd)))
                    if hd.generation as u16 == self.filters.generation(set as usize) =>
                {
                    if format::find(b, &hd, key).is_some() {
                        return Absent::No;
                    }
                }
                Some((_, Ok(_))) => missing.push(off),
                Some((_, Err(BlockError::Empty))) => {}
                Some((_, Err(_))) => return Absent::No,
            }
        }
        if missing.is_empty() {
            Absent::Yes
        } else {
            Absent::Read(missing)
        }
    }

    /// Past the bound of kept answers: forgets those a change has taken
    /// first. An answer still to be taken ("the store held it") is kept for
    /// its change, which asks again within milliseconds, unless its
    /// connection went away; those go past four times the bound.
    fn make_room(&mut self) {
        if self.invals.len() >= DONE_KEPT {
            self.invals
                .retain(|_, e| e.state != InvalState::Done { found: false });
            if self.invals.len() >= DONE_KEPT * 4 {
                self.invals
                    .retain(|_, e| matches!(e.state, InvalState::Queued(_)));
            }
        }
    }

    /// Queues `key` for an invalidation job and notes that its change waits.
    fn queue_key(&mut self, h: u64, key: &[u8]) {
        self.make_room();
        let (id, new) = self.queue_invalidation(h, key);
        self.invals.insert(
            h,
            Inval {
                key: key.to_vec(),
                state: InvalState::Queued(id),
            },
        );
        if new && self.jobs.len() == 1 && !self.tell_flusher() {
            // No flusher (it stopped): the job runs here, now; the change
            // finds its answer when it asks again.
            let _ = self.finish_jobs();
        }
    }

    /// Whether the open buffer holds an unexpired copy of the key.
    fn buffered_unexpired(&self, key: &[u8], h: u64, now: u32) -> bool {
        self.buffered.has(h)
            && self
                .buffer
                .iter()
                .flatten()
                .any(|(ph, o)| *ph == h && o.key == key && !o.expired(now))
    }

    /// Makes sure no copy of the key survives, durably, before a delete or
    /// an overwrite is answered: the key's set is rewritten without it (its
    /// generation then kills the older log copies too). Returns whether the
    /// key was held (unexpired).
    pub fn invalidate(&mut self, key: &[u8]) -> io::Result<bool> {
        if self.failed {
            return Err(io::Error::other("small-object store failed"));
        }
        let (h, set, tag) = place(key, self.cfg.sets);
        // The key's set is rewritten: a flush under way that rewrites it,
        // or writes the key to the log, ends first (never two hands on one
        // set). A key the store does not hold waits for nothing. (A commit
        // never seals a new job, so this ends; the loop is a safeguard.)
        let held = loop {
            let held = self.holds_on_flash(key, h, set, tag)?;
            let sealed = self.jobs.iter().any(|j| j.seals(h, key));
            match self.jobs.iter().rposition(|j| j.touches(set)) {
                Some(last) if held || sealed => self.finish_jobs_to(last + 1)?,
                _ => break held,
            }
            if self.failed {
                return Err(io::Error::other("small-object store failed"));
            }
        };
        let buffered = self.buffered_unexpired(key, h, self.now);
        self.drop_buffered(key, h);
        if held {
            self.stats.invalidations += 1;
            let on_flash = self.rewrite_sets(&[set], &[key.to_vec()], &HashMap::new(), true)?;
            return Ok(buffered || on_flash);
        }
        Ok(buffered)
    }

    /// Whether a block the key's copies could be in (its log pages, its
    /// set) holds it, expired or not, read from the device: a filter's
    /// false positive or a tag shared with another key costs a read, not a
    /// durable set rewrite. A block that does not verify, or changed since
    /// DRAM saw it, counts as holding it.
    fn holds_on_flash(&mut self, key: &[u8], h: u64, set: u32, tag: u16) -> io::Result<bool> {
        if !self.log.of_set(set).any(|r| r.tag == tag) && !self.filters.may_contain(set as usize, h)
        {
            return Ok(false);
        }
        let pages: Vec<u32> = self
            .log
            .of_set(set)
            .filter(|r| r.tag == tag)
            .map(|r| r.page)
            .collect();
        for page in pages {
            let b = self.read_viewed(self.page_offset(page))?;
            let seg = page as usize / self.cfg.seg_pages;
            match self.verify(b.as_slice(), Kind::Log, page) {
                Ok(hd) if hd.generation == self.seg_gen[seg] => {
                    if format::objects(b.as_slice(), &hd).any(|o| o.key == key) {
                        return Ok(true);
                    }
                }
                _ => return Ok(true),
            }
        }
        if !self.filters.may_contain(set as usize, h) {
            return Ok(false);
        }
        let b = self.read_viewed(self.set_offset(set))?;
        Ok(match self.verify(b.as_slice(), Kind::Set, set) {
            Ok(hd) if hd.generation as u16 == self.filters.generation(set as usize) => {
                format::find(b.as_slice(), &hd, key).is_some()
            }
            Err(BlockError::Empty) => false,
            _ => true,
        })
    }
}
