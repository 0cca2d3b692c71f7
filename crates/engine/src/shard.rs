//! One shard of the cache: its index, its segments in two FIFO queues
//! (probation and main), and its eviction policy. All methods run under the
//! shard's lock; the engine hashes keys to shards.
//!
//! Space is reclaimed a whole segment at a time: the oldest segment of the
//! queue the policy names is *evacuated*: each live item is either evicted or
//! copied to the head of a queue (reinsertion), as the policy decides. A
//! spare segment per shard guarantees that evacuation always has room.

use crate::credit::Credit;
use crate::flash::tier::{AppendError, FlashTier};
use crate::flash::{is_flash, FetchState, Fetched, ReadReq};
use crate::index::{Index, Loc};
use crate::item::{self, Header, HEADER};
use crate::pool::SegmentPool;
use crate::segment::Segment;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use tiercache_policy::{EvictionPolicy, HitAction, Queue, TailAction};

/// State shared by all shards.
pub struct Shared {
    pub pool: SegmentPool,
    /// Last CAS value handed out; memcached numbers from 1.
    pub cas: AtomicU64,
    /// Bumped by every flush_all; shards catch up lazily.
    pub flush_gen: AtomicU64,
    /// Unix time of a pending delayed flush_all (0 = none).
    pub flush_at: AtomicU32,
    pub nshards: usize,
}

impl Shared {
    pub fn next_cas(&self) -> u64 {
        self.cas.fetch_add(1, Ordering::Relaxed) + 1
    }
}

/// Counters a shard keeps under its lock.
#[derive(Debug, Default, Clone, Copy)]
pub struct ShardStats {
    pub curr_items: u64,
    /// Bytes of live items as stored (header, key, value, padding).
    pub bytes: u64,
    pub total_items: u64,
    pub evictions: u64,
    pub evicted_unfetched: u64,
    pub expired_unfetched: u64,
    pub reclaimed: u64,
    pub reinserted: u64,
    pub segments: u64,
    /// Index entries of items on flash (included in `curr_items`).
    pub flash_items: u64,
    /// Items moved from RAM to flash.
    pub demoted: u64,
    /// Items copied from flash back to RAM.
    pub promoted: u64,
    /// Second flash hits left on flash because promoted items were not
    /// getting hit in RAM (see `promote_credit`).
    pub promote_declined: u64,
    /// Requests served from flash.
    pub flash_hits: u64,
    /// Evicted from RAM without going to flash (too small, refused, expired).
    pub not_demoted: u64,
    /// Lookups that found their key's item expired (memcached's
    /// `get_expired`: any command's lookup, as its `do_item_get`).
    pub get_expired: u64,
    /// Lookups of a key whose item flush_all dropped (`get_flushed`; see
    /// [`crate::flushed`]).
    pub get_flushed: u64,
}

/// A new item's metadata.
#[derive(Debug, Clone, Copy, Default)]
pub struct NewItem {
    pub flags: u32,
    pub exptime: u32,
    /// CAS to give the item; 0 = take the next one.
    pub cas: u64,
    /// Initial bits (stale, token sent, binary key).
    pub bits: u8,
}

/// Why an insert failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertError {
    /// The item does not fit in a segment.
    TooLarge,
    /// No memory could be reclaimed (should not happen with a sane budget).
    NoMemory,
    /// The flash tier is behind: retry when it has written (back-pressure).
    Busy,
}

/// What a key is, as far as the flash tier is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// In RAM, or not cached at all: run the request as is.
    Ram,
    Absent,
    /// On flash; its verified record is in the [`Fetched`] list.
    Flash(Loc),
    /// Records must be read first (their reads were added).
    Need,
}

const MAX_EVICT_PASSES: usize = 32;

pub struct Shard {
    index: Index,
    segs: Vec<Option<Segment>>,
    free_ids: Vec<u32>,
    queues: [VecDeque<u32>; 2],
    spare: Option<Box<[u8]>>,
    policy: Box<dyn EvictionPolicy>,
    shared: Arc<Shared>,
    flush_gen: u64,
    index_bytes_reported: usize,
    /// Time of the latest request, for classifying evicted items in stats.
    clock_now: u32,
    flash: Option<Arc<FlashTier>>,
    /// Flash buffer rollovers reserved for the evacuation in progress.
    flash_reserved: usize,
    /// Tombstones this shard asked the crash journal for, by fingerprint:
    /// (horizon, ticket). Kept a while after they are durable so that a
    /// request retried after waiting for one finds it.
    tombs: std::collections::HashMap<u32, (u64, u64)>,
    /// Tombstones asked for before this ticket are forgotten at the next sweep.
    tombs_prune_mark: u64,
    /// The latest ticket in `tombs`: once it is durable, all of them are.
    tombs_last: u64,
    /// Whether reading a new key's same-tag flash records pays: up when a
    /// read showed them to be other keys' (kept), down when it found the key
    /// itself (dropped anyway). See [`Shard::worth_verifying`].
    verify_credit: Credit,
    /// Whether promoting flash hits pays: up when a promoted item is hit in
    /// RAM, down when it reaches a RAM queue's tail unhit.
    /// Gates [`Promote::Second`](crate::flash::tier::Promote::Second).
    promote_credit: Credit,
    pub stats: ShardStats,
    /// RAM items the last flush_all dropped, until the next sweep.
    flushed: crate::flushed::Flushed,
    /// Whether the index may grow: true when every indexed item's key is in
    /// DRAM, so its hash can be recomputed (turn off for a flash tier).
    pub can_grow: bool,
}

/// Permission to change one key, from [`Shard::journal_gate`] in the same
/// lock hold: the crash journal has made durable every tombstone the change
/// needs. The methods that change or delete an item ask for it, so a front
/// end cannot change a key that may have records on flash without the gate
/// (which would let a crash bring the old value back). Only the engine
/// makes one.
#[derive(Debug)]
pub struct Allowed {
    hash: u64,
}

impl Allowed {
    /// In debug builds: the permission is for the key at `loc`.
    fn check(&self, shard: &Shard, loc: Loc) {
        debug_assert_eq!(
            self.hash,
            hash_key(shard.key(loc)),
            "allowed for another key"
        );
    }
}

/// Key hash used by index, shards and the ghost list.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

impl Shard {
    pub fn new(
        buckets: usize,
        policy: Box<dyn EvictionPolicy>,
        shared: Arc<Shared>,
        flash: Option<Arc<FlashTier>>,
    ) -> Shard {
        let can_grow = flash.is_none();
        let index = Index::with_buckets(buckets);
        let bytes = index.memory_bytes();
        shared.pool.add_index_bytes(bytes as isize);
        let spare = shared.pool.take();
        Shard {
            index,
            segs: Vec::new(),
            free_ids: Vec::new(),
            queues: [VecDeque::new(), VecDeque::new()],
            spare,
            policy,
            shared,
            flush_gen: 0,
            index_bytes_reported: bytes,
            clock_now: 0,
            flash,
            flash_reserved: 0,
            tombs: std::collections::HashMap::new(),
            tombs_prune_mark: 0,
            tombs_last: 0,
            verify_credit: Credit::default(),
            promote_credit: Credit::default(),
            stats: ShardStats::default(),
            flushed: crate::flushed::Flushed::default(),
            can_grow,
        }
    }

    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    pub fn index_primary_buckets(&self) -> usize {
        self.index.primary_buckets()
    }

    /// Applies a flush_all that happened since this shard last looked.
    #[inline]
    pub fn catch_up(&mut self, now: u32) {
        self.clock_now = now;
        let at = self.shared.flush_at.load(Ordering::Relaxed);
        if at != 0
            && now >= at
            && self
                .shared
                .flush_at
                .compare_exchange(at, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.shared.flush_gen.fetch_add(1, Ordering::Relaxed);
        }
        let gen = self.shared.flush_gen.load(Ordering::Relaxed);
        if gen != self.flush_gen {
            self.flush_gen = gen;
            self.flush();
        }
    }

    fn seg(&self, id: u32) -> &Segment {
        self.segs[id as usize].as_ref().expect("live segment")
    }

    fn seg_mut(&mut self, id: u32) -> &mut Segment {
        self.segs[id as usize].as_mut().expect("live segment")
    }

    #[inline]
    fn bytes_at(&self, loc: Loc) -> &[u8] {
        &self.seg(loc.seg).data[loc.off as usize..]
    }

    #[inline]
    pub fn header(&self, loc: Loc) -> Header {
        Header::read(self.bytes_at(loc))
    }

    #[inline]
    pub fn key(&self, loc: Loc) -> &[u8] {
        item::key_of(self.bytes_at(loc))
    }

    #[inline]
    pub fn value(&self, loc: Loc) -> &[u8] {
        let b = self.bytes_at(loc);
        let h = Header::read(b);
        let start = HEADER + h.klen as usize;
        &b[start..start + h.vlen as usize]
    }

    fn field_mut(&mut self, loc: Loc, off: usize, len: usize) -> &mut [u8] {
        let o = loc.off as usize + off;
        &mut self.seg_mut(loc.seg).data[o..o + len]
    }

    /// Sets the item's exptime (touch, gat, mg T, ma T).
    pub fn set_exptime(&mut self, loc: Loc, exptime: u32, ok: &Allowed) {
        ok.check(self, loc);
        self.write_exptime(loc, exptime);
    }

    pub(crate) fn write_exptime(&mut self, loc: Loc, exptime: u32) {
        self.field_mut(loc, item::OFF_EXPTIME, 4)
            .copy_from_slice(&exptime.to_le_bytes());
    }

    pub(crate) fn set_cas(&mut self, loc: Loc, cas: u64) {
        self.field_mut(loc, item::OFF_CAS, 8)
            .copy_from_slice(&cas.to_le_bytes());
    }

    /// Sets and clears bits in the item's flag byte.
    pub(crate) fn update_bits(&mut self, loc: Loc, set: u8, clear: u8) {
        let b = &mut self.field_mut(loc, item::OFF_BITS, 1)[0];
        *b = (*b & !clear) | set;
    }

    /// Meta's win token was handed out for this item (mg W; a later mg
    /// says Z). Changes no value, so it needs no journal gate.
    pub fn mark_token_sent(&mut self, loc: Loc) {
        self.update_bits(loc, item::TOKEN_SENT, 0);
    }

    /// md with I: the item becomes stale (mg X, a win token for the next
    /// client), with a new CAS and, if given, a new exptime.
    pub fn invalidate(&mut self, loc: Loc, exptime: Option<u32>, ok: &Allowed) {
        ok.check(self, loc);
        if let Some(e) = exptime {
            self.write_exptime(loc, e);
        }
        self.update_bits(loc, item::STALE, item::TOKEN_SENT);
        let cas = self.shared.next_cas();
        self.set_cas(loc, cas);
    }

    /// Overwrites the value in place (same length).
    pub fn overwrite_value(&mut self, loc: Loc, value: &[u8]) {
        let h = self.header(loc);
        debug_assert_eq!(h.vlen as usize, value.len());
        let start = HEADER + h.klen as usize;
        self.field_mut(loc, start, value.len())
            .copy_from_slice(value);
    }

    /// Looks a key up, dropping it if it has expired. Counts `get_expired`
    /// (or `get_flushed`) as memcached's lookup does.
    #[inline]
    pub fn find(&mut self, key: &[u8], hash: u64, now: u32) -> Option<Loc> {
        let Some(loc) = self.find_any(key, hash) else {
            if self.flushed.take(hash) {
                self.stats.get_flushed += 1;
            }
            return None;
        };
        let h = self.header(loc);
        if h.expired(now) {
            self.stats.get_expired += 1;
            self.unlink_item(hash, loc);
            return None;
        }
        Some(loc)
    }

    /// Looks a key up in RAM whether expired or not.
    #[inline]
    fn find_any(&self, key: &[u8], hash: u64) -> Option<Loc> {
        self.index
            .find(hash, |loc| !is_flash(loc) && self.key(loc) == key)
    }

    /// Flash entries with the key's tag (the key itself is on flash).
    fn flash_candidates(&self, hash: u64) -> Vec<Loc> {
        let mut v = Vec::new();
        if self.flash.is_some() {
            self.index.find(hash, |loc| {
                if is_flash(loc) {
                    v.push(loc);
                }
                false
            });
        }
        v
    }

    /// Drops a flash item's index entry (delete of a probed flash item).
    pub fn unlink_flash(&mut self, hash: u64, loc: Loc, ok: &Allowed) {
        debug_assert_eq!(ok.hash, hash, "allowed for another key");
        self.drop_flash_entry(hash, loc);
    }

    /// Drops a flash index entry whose record is gone, stale, or covered by
    /// a tombstone or the floor (no gate needed).
    pub(crate) fn drop_flash_entry(&mut self, hash: u64, loc: Loc) {
        if self.index.remove(hash, loc) {
            self.stats.curr_items -= 1;
            self.stats.flash_items -= 1;
            if let Some(f) = &self.flash {
                f.release(loc);
            }
        }
    }

    /// Before a new item goes in: drops every flash entry that may be an
    /// older copy of the key. A colliding entry of another key goes too; that
    /// costs a miss, never a stale value.
    pub fn purge_flash(&mut self, hash: u64, ok: &Allowed) {
        debug_assert_eq!(ok.hash, hash, "allowed for another key");
        for loc in self.flash_candidates(hash) {
            self.drop_flash_entry(hash, loc);
        }
    }

    /// Records a hit: frequency, fetched bit and access time; LRU moves the item.
    pub fn hit(&mut self, hash: u64, loc: Loc, now: u32) -> Loc {
        let h = self.header(loc);
        if h.bits & (item::FLASH_COPY | item::FREQ_MASK) == item::FLASH_COPY {
            // The first hit of a promoted item: the promotion paid.
            self.promote_credit.score(4);
        }
        let (freq, action) = self.policy.on_hit(h.bits & item::FREQ_MASK);
        let bits = (h.bits & !item::FREQ_MASK) | freq | item::FETCHED;
        self.field_mut(loc, item::OFF_BITS, 1)[0] = bits;
        self.field_mut(loc, item::OFF_ATIME, 2)
            .copy_from_slice(&(now as u16).to_le_bytes());
        if action == HitAction::MoveToHead {
            let q = self.seg(loc.seg).queue;
            let is_head = self.queues[q as usize].back() == Some(&loc.seg);
            if !is_head {
                let size = h.size();
                let copy = self.bytes_at(loc)[..size].to_vec();
                if let Ok(new) = self.alloc(q, size) {
                    // Allocation may have evicted the old copy; only move if still linked.
                    if self.index.contains(hash, loc) {
                        self.write_at(new, &copy);
                        self.index.relocate(hash, loc, new);
                        self.seg_mut(loc.seg).live_items -= 1;
                        self.update_bits(loc, item::DEAD, 0);
                        self.seg_mut(new.seg).live_items += 1;
                        return new;
                    }
                }
            }
        }
        loc
    }

    fn write_at(&mut self, loc: Loc, bytes: &[u8]) {
        let o = loc.off as usize;
        self.seg_mut(loc.seg).data[o..o + bytes.len()].copy_from_slice(bytes);
    }

    /// Removes an item from the index (md of a found item).
    pub fn unlink(&mut self, hash: u64, loc: Loc, ok: &Allowed) {
        ok.check(self, loc);
        self.unlink_item(hash, loc);
    }

    pub(crate) fn unlink_item(&mut self, hash: u64, loc: Loc) {
        if self.index.remove(hash, loc) {
            let size = self.header(loc).size() as u64;
            self.update_bits(loc, item::DEAD, 0);
            self.seg_mut(loc.seg).live_items -= 1;
            self.stats.curr_items -= 1;
            self.stats.bytes -= size;
        }
    }

    /// Removes the key if present (expired or not); true if it was live.
    pub fn remove_key(&mut self, key: &[u8], hash: u64, now: u32, ok: &Allowed) -> bool {
        debug_assert_eq!(ok.hash, hash, "allowed for another key");
        match self.find(key, hash, now) {
            Some(loc) => {
                self.unlink_item(hash, loc);
                true
            }
            None => false,
        }
    }

    /// Whether an item of this key and value length fits in a segment.
    pub fn fits(&self, klen: usize, vlen: usize) -> bool {
        klen <= 255 && item::stored_size(klen, vlen) <= self.shared.pool.seg_size()
    }

    /// Stores a new item (value given in parts, concatenated), replacing any
    /// existing item under the key. Returns its location; its CAS is set.
    pub fn insert(
        &mut self,
        key: &[u8],
        hash: u64,
        new: NewItem,
        parts: &[&[u8]],
    ) -> Result<Loc, InsertError> {
        self.insert_keeping(key, hash, new, parts, &[])
    }

    /// [`insert`](Self::insert), keeping the flash entries in `keep`: those
    /// that [`other_keys_on_flash`](Self::other_keys_on_flash) found to be
    /// other keys' records during this same lock hold. Every other entry
    /// under the key's tag is dropped, as it may be an older copy of the key.
    pub fn insert_keeping(
        &mut self,
        key: &[u8],
        hash: u64,
        new: NewItem,
        parts: &[&[u8]],
        keep: &[Loc],
    ) -> Result<Loc, InsertError> {
        let vlen: usize = parts.iter().map(|p| p.len()).sum();
        if !self.fits(key.len(), vlen) {
            return Err(InsertError::TooLarge);
        }
        let size = item::stored_size(key.len(), vlen);
        let q = self.policy.insert_queue(hash);
        // Room first: if none can be had, the old item must stay.
        let loc = self.alloc(q, size)?;
        // After the allocation, which may have moved the old item to flash:
        // older copies on flash need a durable tombstone before they go.
        let old = self.find_any(key, hash);
        let mut on_flash = self.flash_candidates(hash);
        on_flash.retain(|&loc| !keep.contains(&loc) && !self.resident_other_key(loc, key));
        if !self.journal_gate_at(hash, old, &on_flash) {
            Header {
                vlen: vlen as u32,
                klen: key.len() as u8,
                bits: item::DEAD,
                ..Header::default()
            }
            .write(&mut self.seg_mut(loc.seg).data[loc.off as usize..]);
            return Err(InsertError::Busy);
        }
        if let Some(old) = old {
            self.unlink_item(hash, old);
        }
        // Every flash entry that may be an older copy of the key goes (a
        // colliding entry of another key too: a miss, never a stale value).
        for loc in on_flash {
            self.drop_flash_entry(hash, loc);
        }
        let cas = if new.cas == 0 {
            self.shared.next_cas()
        } else {
            new.cas
        };
        let h = Header {
            cas,
            exptime: new.exptime,
            flags: new.flags,
            vlen: vlen as u32,
            klen: key.len() as u8,
            bits: new.bits & !(item::DEAD | item::FREQ_MASK),
            // Linking is an access (memcached sets the item's time then):
            // `mg l` and `me`'s `la` count from here.
            atime: self.clock_now as u16,
        };
        let o = loc.off as usize;
        let seg = self.seg_mut(loc.seg);
        h.write(&mut seg.data[o..o + HEADER]);
        let mut p = o + HEADER;
        seg.data[p..p + key.len()].copy_from_slice(key);
        p += key.len();
        for part in parts {
            seg.data[p..p + part.len()].copy_from_slice(part);
            p += part.len();
        }
        seg.live_items += 1;
        self.index.insert(hash, loc);
        self.stats.curr_items += 1;
        self.stats.total_items += 1;
        self.stats.bytes += size as u64;
        self.account_index();
        self.maybe_grow_index();
        Ok(loc)
    }

    fn account_index(&mut self) {
        let now = self.index.memory_bytes();
        if now != self.index_bytes_reported {
            self.shared
                .pool
                .add_index_bytes(now as isize - self.index_bytes_reported as isize);
            self.index_bytes_reported = now;
        }
    }

    /// Room for `size` bytes at the head of queue `q`.
    fn alloc(&mut self, q: Queue, size: usize) -> Result<Loc, InsertError> {
        if let Some(loc) = self.bump(q, size) {
            return Ok(loc);
        }
        let buf = match self.shared.pool.take() {
            Some(b) => b,
            None => self.reclaim()?,
        };
        self.open_segment(q, buf);
        self.bump(q, size).ok_or(InsertError::TooLarge)
    }

    fn bump(&mut self, q: Queue, size: usize) -> Option<Loc> {
        let id = *self.queues[q as usize].back()?;
        let seg = self.seg_mut(id);
        if seg.room() < size {
            return None;
        }
        let off = seg.write;
        seg.write += size;
        Some(Loc {
            seg: id,
            off: off as u32,
        })
    }

    fn open_segment(&mut self, q: Queue, buf: Box<[u8]>) {
        let seg = Segment::new(buf, q);
        let id = match self.free_ids.pop() {
            Some(id) => {
                self.segs[id as usize] = Some(seg);
                id
            }
            None => {
                self.segs.push(Some(seg));
                (self.segs.len() - 1) as u32
            }
        };
        self.queues[q as usize].push_back(id);
        self.stats.segments += 1;
    }

    fn close_segment(&mut self, id: u32) -> Box<[u8]> {
        let seg = self.segs[id as usize].take().expect("live segment");
        self.free_ids.push(id);
        self.stats.segments -= 1;
        seg.data
    }

    /// Frees one segment's worth of space by evacuating the oldest segment
    /// of the queue the policy names; returns the freed buffer.
    fn reclaim(&mut self) -> Result<Box<[u8]>, InsertError> {
        for pass in 0..MAX_EVICT_PASSES {
            let seg_size = self.shared.pool.seg_size() as u64;
            let pb = self.queues[0].len() as u64 * seg_size;
            let mb = self.queues[1].len() as u64 * seg_size;
            let capacity =
                (self.shared.pool.max_segments() / self.shared.nshards.max(1)) as u64 * seg_size;
            let mut q = self.policy.victim_queue(pb, mb, capacity);
            if self.queues[q as usize].is_empty() {
                q = other(q);
            }
            let Some(&victim) = self.queues[q as usize].front() else {
                return Err(InsertError::NoMemory);
            };
            if let Some(f) = &self.flash {
                let seg = self.seg(victim);
                // Worst case: every record pads out a block.
                let worst = 2
                    * (seg.write + seg.live_items as usize * crate::flash::format::RECORD_PREFIX)
                    + 2 * crate::flash::aligned::BLOCK;
                if seg.live_items > 0 && !f.degraded() {
                    match f.reserve(worst.min(f.segment_size() - crate::flash::aligned::BLOCK)) {
                        Ok(n) => self.flash_reserved = n,
                        Err(_) => return Err(InsertError::Busy),
                    }
                }
            }
            self.queues[q as usize].pop_front();
            let force = pass + 1 == MAX_EVICT_PASSES;
            let used_spare = self.evacuate(victim, q, force);
            if let Some(f) = &self.flash {
                f.unreserve(std::mem::take(&mut self.flash_reserved));
            }
            let buf = self.close_segment(victim);
            if used_spare {
                self.spare = Some(buf);
                continue;
            }
            // When the index has grown past the budget, give memory back first.
            if self.shared.pool.over_budget() && pass + 1 < MAX_EVICT_PASSES {
                self.shared.pool.give(buf);
                continue;
            }
            return Ok(buf);
        }
        Err(InsertError::NoMemory)
    }

    /// Evicts or reinserts every live item of a segment that has left its
    /// queue. Returns whether the spare segment was used.
    fn evacuate(&mut self, victim: u32, q: Queue, force: bool) -> bool {
        let mut used_spare = false;
        let end = self.seg(victim).write;
        let mut off = 0usize;
        while off < end {
            let loc = Loc {
                seg: victim,
                off: off as u32,
            };
            let h = self.header(loc);
            let size = h.size();
            off += size;
            if h.bits & item::DEAD != 0 {
                continue;
            }
            let hash = hash_key(self.key(loc));
            if !self.index.contains(hash, loc) {
                continue;
            }
            if h.bits & item::FLASH_COPY != 0 && !force {
                self.score_promotion(&h);
            }
            let (action, freq) = if force {
                (TailAction::Evict, 0)
            } else {
                self.policy.on_tail(q, hash, h.bits & item::FREQ_MASK)
            };
            let target = match action {
                TailAction::Evict => None,
                TailAction::Reinsert(to) => self.evac_alloc(to, size, &mut used_spare),
            };
            if target.is_none() && self.demote(hash, loc, &h) {
                self.seg_mut(victim).live_items -= 1;
                continue;
            }
            match target {
                Some(new) => {
                    let bytes = self.bytes_at(loc)[..size].to_vec();
                    self.write_at(new, &bytes);
                    let bits = (h.bits & !item::FREQ_MASK) | freq;
                    self.field_mut(new, item::OFF_BITS, 1)[0] = bits;
                    self.index.relocate(hash, loc, new);
                    self.seg_mut(new.seg).live_items += 1;
                    self.stats.reinserted += 1;
                }
                None => {
                    if h.expired(self.clock_now) {
                        self.stats.reclaimed += 1;
                    } else {
                        self.stats.evictions += 1;
                        if h.bits & item::FETCHED == 0 {
                            self.stats.evicted_unfetched += 1;
                        }
                        if h.bits & item::FLASH_COPY != 0 {
                            // Its record on flash is no longer tracked.
                            self.tombstone(hash);
                        }
                    }
                    self.index.remove(hash, loc);
                    self.stats.curr_items -= 1;
                    self.stats.bytes -= size as u64;
                }
            }
            self.seg_mut(victim).live_items -= 1;
        }
        used_spare
    }

    /// Room at a queue head during evacuation: the head, else the spare.
    fn evac_alloc(&mut self, q: Queue, size: usize, used_spare: &mut bool) -> Option<Loc> {
        if let Some(loc) = self.bump(q, size) {
            return Some(loc);
        }
        let buf = self.spare.take()?;
        *used_spare = true;
        self.open_segment(q, buf);
        self.bump(q, size)
    }

    /// Drops every item, returning segments to the pool.
    pub fn flush(&mut self) {
        self.remember_flushed();
        self.index.clear();
        self.account_index();
        for q in 0..2 {
            while let Some(id) = self.queues[q].pop_front() {
                let buf = self.close_segment(id);
                self.shared.pool.give(buf);
            }
        }
        self.stats.curr_items = 0;
        self.stats.flash_items = 0;
        self.stats.bytes = 0;
    }

    /// Before a flush drops the RAM items: their hashes, up to a bound
    /// (1/256 of the memory limit over the shards, 8 bytes each), for
    /// `get_flushed`; the rest count as reclaimed now.
    fn remember_flushed(&mut self) {
        let left = self.flushed.drain();
        self.stats.reclaimed += left.items;
        self.stats.expired_unfetched += left.unfetched;
        let cap = (self.shared.pool.limit() / 256 / 8 / self.shared.nshards.max(1)).max(64);
        let ram_items = self.stats.curr_items - self.stats.flash_items;
        let mut remembered = 0;
        'segments: for q in 0..2 {
            for i in 0..self.queues[q].len() {
                let id = self.queues[q][i];
                let end = self.seg(id).write;
                let mut off = 0usize;
                while off < end {
                    let loc = Loc {
                        seg: id,
                        off: off as u32,
                    };
                    let h = self.header(loc);
                    off += h.size();
                    if h.bits & item::DEAD != 0 {
                        continue;
                    }
                    let hash = hash_key(self.key(loc));
                    if self.index.contains(hash, loc) {
                        if !self
                            .flushed
                            .remember(hash, h.bits & item::FETCHED != 0, cap)
                        {
                            break 'segments;
                        }
                        remembered += 1;
                    }
                }
            }
        }
        self.stats.reclaimed += ram_items.saturating_sub(remembered);
    }

    /// Unlinks expired items and frees segments that hold nothing live.
    /// Returns the number of items reclaimed.
    pub fn sweep_expired(&mut self, now: u32) -> u64 {
        self.prune_tombs();
        let mut reclaimed = 0;
        let left = self.flushed.sweep();
        self.stats.reclaimed += left.items;
        self.stats.expired_unfetched += left.unfetched;
        reclaimed += left.items;
        let ids: Vec<u32> = self.queues.iter().flat_map(|q| q.iter().copied()).collect();
        for id in ids {
            let end = self.seg(id).write;
            let mut off = 0usize;
            while off < end {
                let loc = Loc {
                    seg: id,
                    off: off as u32,
                };
                let h = self.header(loc);
                off += h.size();
                if h.bits & item::DEAD == 0 && h.expired(now) {
                    let hash = hash_key(self.key(loc));
                    if self.index.contains(hash, loc) {
                        if h.bits & item::FETCHED == 0 {
                            self.stats.expired_unfetched += 1;
                        }
                        self.unlink_item(hash, loc);
                        self.stats.reclaimed += 1;
                        reclaimed += 1;
                    }
                }
            }
        }
        // Free empty segments that are not a queue's open head.
        for q in 0..2 {
            let head = self.queues[q].back().copied();
            let empty: Vec<u32> = self.queues[q]
                .iter()
                .copied()
                .filter(|&id| Some(id) != head && self.seg(id).live_items == 0)
                .collect();
            for id in empty {
                self.queues[q].retain(|&x| x != id);
                let buf = self.close_segment(id);
                self.shared.pool.give(buf);
            }
        }
        reclaimed
    }

    /// Bytes of memory this shard's index uses.
    pub fn index_bytes(&self) -> usize {
        self.index.memory_bytes()
    }

    /// Doubles the index once it passes its design load, when every entry's
    /// hash can be recomputed from its key in DRAM (`can_grow`). The memory
    /// budget follows: a bigger index leaves room for fewer segments.
    fn maybe_grow_index(&mut self) {
        if !self.can_grow || !self.index.wants_grow() {
            return;
        }
        let segs = &self.segs;
        self.index.grow(|loc| {
            let seg = segs[loc.seg as usize].as_ref().expect("live segment");
            let b = &seg.data[loc.off as usize..];
            hash_key(&b[HEADER..HEADER + b[20] as usize])
        });
        self.account_index();
    }
}

fn other(q: Queue) -> Queue {
    match q {
        Queue::Main => Queue::Probation,
        Queue::Probation => Queue::Main,
    }
}

/// The flash tier's side of a shard.
impl Shard {
    /// Moves an item leaving RAM to flash; false when it is not admitted.
    fn demote(&mut self, hash: u64, loc: Loc, h: &Header) -> bool {
        let Some(f) = &self.flash else {
            return false;
        };
        if h.expired(self.clock_now) || !f.admits_size(h.vlen as usize) {
            self.stats.not_demoted += 1;
            return false;
        }
        let size = h.size();
        let mut reserved = self.flash_reserved;
        let res = f.append(
            &self.bytes_at(loc)[..size],
            true,
            self.clock_now,
            &mut reserved,
        );
        self.flash_reserved = reserved;
        match res {
            Ok(new) => {
                self.index.relocate(hash, loc, new);
                self.stats.demoted += 1;
                self.stats.flash_items += 1;
                self.stats.bytes -= size as u64;
                true
            }
            Err(AppendError::Refused | AppendError::Busy) => {
                self.stats.not_demoted += 1;
                false
            }
        }
    }

    /// Where `key` is, reading flash records into `fetched` as needed:
    /// records still in write buffers are copied at once, others get a read
    /// pushed to `reads`. Stale and corrupt entries are dropped on the way.
    pub fn probe(
        &mut self,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) -> Probe {
        if self.find(key, hash, now).is_some() {
            return Probe::Ram;
        }
        let Some(flash) = self.flash.clone() else {
            return Probe::Absent;
        };
        let mut need = false;
        let mut best: Option<(Loc, u64)> = None;
        for loc in self.flash_candidates(hash) {
            if fetched.state(loc).is_none() && !flash.fetch(loc, fetched, reads) {
                self.drop_flash_entry(hash, loc);
                continue;
            }
            match fetched.state(loc) {
                Some(FetchState::Pending) => need = true,
                Some(FetchState::Bad) => {
                    // The record may read fine after a restart: no longer
                    // tracked, it needs a tombstone.
                    self.tombstone(hash);
                    self.drop_flash_entry(hash, loc)
                }
                Some(FetchState::Item(item)) => {
                    if !self.still_valid(&flash, loc, fetched) {
                        continue;
                    }
                    if item::key_of(item) != key {
                        flash
                            .stats
                            .tag_misses
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        continue;
                    }
                    if Header::read(item).expired(now) {
                        self.drop_flash_entry(hash, loc);
                        self.stats.reclaimed += 1;
                        continue;
                    }
                    // At most one entry per key is the rule (recovery
                    // dedupes); should two match, the newest record wins
                    // and the older entry goes (a record of the key older
                    // than one that is indexed is covered by whatever covers
                    // the newer one: its tombstone horizon or the floor).
                    let seq = fetched.item_seq(loc).map_or(0, |(_, s)| s);
                    match best {
                        Some((_, best_seq)) if best_seq >= seq => self.drop_flash_entry(hash, loc),
                        Some((old, _)) => {
                            self.drop_flash_entry(hash, old);
                            best = Some((loc, seq));
                        }
                        None => best = Some((loc, seq)),
                    }
                }
                None => {}
            }
        }
        if let Some((loc, _)) = best {
            return Probe::Flash(loc);
        }
        if need {
            Probe::Need
        } else {
            Probe::Absent
        }
    }

    /// The flash item for `key` among records already fetched (read-only
    /// [`probe`](Self::probe), for running a request after its reads).
    pub fn flash_lookup(&self, key: &[u8], hash: u64, now: u32, fetched: &Fetched) -> Option<Loc> {
        if fetched.is_empty() {
            return None;
        }
        let flash = self.flash.as_ref()?;
        self.flash_candidates(hash)
            .into_iter()
            .filter_map(|loc| {
                let (item, seq) = fetched.item_seq(loc)?;
                (item::key_of(item) == key
                    && !Header::read(item).expired(now)
                    && self.still_valid(flash, loc, fetched))
                .then_some((seq, loc))
            })
            .max_by_key(|&(seq, _)| seq)
            .map(|(_, loc)| loc)
    }

    /// The flash entries under `key`'s tag whose fetched records are other
    /// keys' (verified and still current): a store of `key` may keep them
    /// ([`insert_keeping`](Self::insert_keeping)) instead of dropping every
    /// same-tag entry. Valid until the shard lock is released. Scores the
    /// reads for [`worth_verifying`](Self::worth_verifying).
    pub fn other_keys_on_flash(&mut self, key: &[u8], hash: u64, fetched: &Fetched) -> Vec<Loc> {
        let Some(flash) = self.flash.clone().filter(|_| !fetched.is_empty()) else {
            return Vec::new();
        };
        let mut keep = Vec::new();
        let mut same = 0;
        for loc in self.flash_candidates(hash) {
            let Some(item) = fetched.item(loc) else {
                continue;
            };
            if !self.still_valid(&flash, loc, fetched) {
                continue;
            }
            if item::key_of(item) == key {
                same += 1;
            } else {
                keep.push(loc);
            }
        }
        let score = 4 * keep.len() as i32 - same;
        self.verify_credit.score(score);
        keep
    }

    /// Whether a store of a key that is not in RAM should first read the
    /// flash records under its tag, to keep those of other keys (a tag
    /// collision) instead of dropping them. Yes while such reads have been
    /// finding other keys' records; when they mostly find the key itself
    /// (overwrites of items on flash, whose old record must go anyway), only
    /// one store in 64 reads, to notice when that changes.
    pub fn worth_verifying(&mut self, hash: u64) -> bool {
        if self.flash.is_none() || self.index.find(hash, is_flash).is_none() {
            return false;
        }
        self.verify_credit.allow()
    }

    /// Whether the flash record at `loc` is still in a write buffer and
    /// belongs to another key than `key` (known without a device read; an
    /// item demoted by this very insert's allocation is such a record).
    fn resident_other_key(&self, loc: Loc, key: &[u8]) -> bool {
        let Some(flash) = &self.flash else {
            return false;
        };
        match flash.locate(loc) {
            crate::flash::tier::Where::Resident(item, _) => item::key_of(&item) != key,
            _ => false,
        }
    }

    /// Whether a fetched record still belongs to the segment its entry
    /// points into (the slot was not reclaimed and reused meanwhile).
    fn still_valid(&self, flash: &FlashTier, loc: Loc, fetched: &Fetched) -> bool {
        fetched
            .item_seq(loc)
            .is_some_and(|(_, seq)| flash.seq_of(loc) == Some(seq))
    }

    /// Whether `hash` has flash entries not fetched yet: a get that missed
    /// in RAM must read them before it can say "not found".
    pub fn needs_fetch(&self, hash: u64, fetched: &Fetched) -> bool {
        self.flash_candidates(hash)
            .into_iter()
            .any(|loc| fetched.state(loc).is_none())
    }

    /// A read served from flash: remember the hit (reclaim reinserts hit
    /// items) and copy the item back to RAM if the promotion policy says so.
    pub fn flash_hit(&mut self, hash: u64, loc: Loc, item_bytes: &[u8]) {
        use crate::flash::tier::Promote;
        self.stats.flash_hits += 1;
        let promote = self.flash.as_ref().map(|f| f.params().promote);
        let was_hit = self.index.hit(hash, loc) == Some(true);
        match promote {
            Some(Promote::Always) => {}
            Some(Promote::Second) if was_hit && self.promote_credit.allow() => {}
            _ => {
                if was_hit && promote == Some(Promote::Second) {
                    self.stats.promote_declined += 1;
                }
                self.index.set_hit(hash, loc);
                return;
            }
        }
        // Best effort: when RAM is not to be had, the item stays on flash.
        if self.promote(hash, loc, item_bytes).is_err() {
            self.index.set_hit(hash, loc);
        }
    }

    /// A promoted item (still carrying its flash copy) that reached a RAM
    /// queue's tail: one left unhit since it came back (or since its last
    /// reinsertion) was a wasted promotion.
    fn score_promotion(&mut self, h: &Header) {
        if h.bits & item::FREQ_MASK == 0 {
            self.promote_credit.score(-1);
        }
    }

    /// Copies a fetched flash item back into RAM (before a request that
    /// changes it, or when the promotion policy says so).
    pub fn promote(&mut self, hash: u64, loc: Loc, item_bytes: &[u8]) -> Result<Loc, InsertError> {
        if !self.index.contains(hash, loc) {
            return Err(InsertError::NoMemory);
        }
        let h = Header::read(item_bytes);
        let size = h.size();
        let q = self.policy.insert_queue(hash);
        let new = self.alloc(q, size)?;
        let o = new.off as usize;
        let len = HEADER + h.klen as usize + h.vlen as usize;
        let seg = self.seg_mut(new.seg);
        seg.data[o..o + len].copy_from_slice(&item_bytes[..len]);
        seg.data[o + item::OFF_BITS] =
            (h.bits & !item::FREQ_MASK) | item::FETCHED | item::FLASH_COPY;
        // Allocation cannot reclaim flash (the flusher needs this shard's
        // lock), but stay safe: without the entry the copy is dead space.
        if !self.index.contains(hash, loc) {
            self.update_bits(new, item::DEAD, 0);
            return Err(InsertError::NoMemory);
        }
        self.seg_mut(new.seg).live_items += 1;
        self.index.relocate(hash, loc, new);
        if let Some(f) = &self.flash {
            f.release(loc);
        }
        self.stats.flash_items -= 1;
        self.stats.promoted += 1;
        self.stats.bytes += size as u64;
        Ok(new)
    }

    /// A live record of a flash segment being reclaimed: reinsert it when
    /// it was hit, else drop its entry.
    pub fn reclaim_flash(&mut self, hash: u64, loc: Loc, item_bytes: &[u8], reinsert: bool) {
        let Some(hit) = self.index.hit(hash, loc) else {
            return;
        };
        let h = Header::read(item_bytes);
        if h.expired(self.clock_now) {
            self.stats.reclaimed += 1;
        } else if reinsert && hit {
            if let Some(f) = &self.flash {
                if let Ok(new) = f.append(item_bytes, false, self.clock_now, &mut 0) {
                    self.index.relocate(hash, loc, new);
                    self.stats.reinserted += 1;
                    return;
                }
            }
        } else {
            self.stats.evictions += 1;
            if h.bits & item::FETCHED == 0 && !hit {
                self.stats.evicted_unfetched += 1;
            }
        }
        self.index.remove(hash, loc);
        self.stats.curr_items -= 1;
        self.stats.flash_items -= 1;
    }
}

/// Crash safety (see flash::journal): tombstones before changes, and the
/// index rebuilt from flash after a crash.
impl Shard {
    /// Asks the journal for a tombstone over every record of `hash`'s key
    /// appended so far; returns its ticket (0 without a flash tier).
    fn tombstone(&mut self, hash: u64) -> u64 {
        let Some(f) = self.flash.as_ref().filter(|f| f.params().crash_journal) else {
            return 0;
        };
        let j = f.journal();
        let h = f.max_seq();
        let t = j.add(hash, h);
        self.tombs.insert(
            super::flash::journal::fingerprint(hash, j.geometry()),
            (h, t),
        );
        self.tombs_last = t;
        t
    }

    /// Call before changing or deleting `key` (in the same lock hold as the
    /// change): the permission the changing methods ask for
    /// ([`Allowed`]), when the change may go ahead. None when a tombstone
    /// for records of the key on flash is not durable yet; it has been asked
    /// for, and the request must be retried (the flash tier's waker fires
    /// when the journal commits). Always allowed without a flash tier.
    pub fn journal_gate(&mut self, key: &[u8], hash: u64) -> Option<Allowed> {
        if self.flash.is_some() {
            let old = self.find_any(key, hash);
            let on_flash = self.flash_candidates(hash);
            if !self.journal_gate_at(hash, old, &on_flash) {
                return None;
            }
        }
        Some(Allowed { hash })
    }

    /// [`journal_gate`](Self::journal_gate) given the key's RAM item and
    /// its flash candidates.
    fn journal_gate_at(&mut self, hash: u64, old: Option<Loc>, on_flash: &[Loc]) -> bool {
        let Some(f) = self.flash.as_ref().filter(|f| f.params().crash_journal) else {
            return true;
        };
        let j = f.journal();
        let mut need = if on_flash.is_empty() {
            None
        } else {
            let floor = j.floor();
            on_flash
                .iter()
                .filter_map(|&loc| f.seq_of(loc))
                .max()
                .filter(|&m| m > floor)
        };
        let copy = old.filter(|&loc| self.header(loc).bits & item::FLASH_COPY != 0);
        if copy.is_some() {
            need = Some(f.max_seq());
        }
        // The common case: nothing of the key on flash, no tombstone pending.
        if need.is_none() && j.is_durable(self.tombs_last) {
            return true;
        }
        let j = j.clone();
        if let Some(loc) = copy {
            self.update_bits(loc, 0, item::FLASH_COPY);
        }
        let fp = super::flash::journal::fingerprint(hash, j.geometry());
        if let Some(m) = need {
            if self.tombs.get(&fp).is_none_or(|&(h, _)| h < m) {
                self.tombstone(hash);
            }
        }
        self.tombs.get(&fp).is_none_or(|&(_, t)| j.is_durable(t))
    }

    /// Forgets tombstones that were durable at the previous sweep.
    fn prune_tombs(&mut self) {
        let Some(f) = &self.flash else {
            return;
        };
        let j = f.journal();
        let mark = self.tombs_prune_mark;
        self.tombs
            .retain(|_, &mut (_, t)| t >= mark || !j.is_durable(t));
        self.tombs_prune_mark = j.last_ticket();
    }

    /// Crash recovery: indexes a record found on flash. Returns true when
    /// other flash entries already sit under the key's tag: one of them may
    /// be another record of the same key (a copy promoted to RAM and later
    /// written to flash again leaves its first record on the device, with
    /// the same value), so [`dedupe_recovered`](Self::dedupe_recovered)
    /// must run for `hash` once every record is indexed.
    pub fn recover_flash(&mut self, hash: u64, loc: Loc) -> bool {
        let shared_tag = !self.flash_candidates(hash).is_empty();
        self.index.insert(hash, loc);
        self.stats.curr_items += 1;
        self.stats.flash_items += 1;
        self.stats.total_items += 1;
        self.account_index();
        shared_tag
    }

    /// After crash recovery, for a tag that [`recover_flash`]
    /// (Self::recover_flash) reported shared: reads the records under it
    /// (blocking; recovery runs before any request) and keeps, of each key,
    /// only the record of the newest segment, so that the index again holds
    /// at most one entry per key: a delete or change then removes the key's
    /// only entry instead of leaving an older one to be served. A record that
    /// cannot be read back is dropped behind a tombstone (it may read fine
    /// after another restart). Returns the entries dropped.
    pub fn dedupe_recovered(&mut self, hash: u64) -> u64 {
        let Some(flash) = self.flash.clone() else {
            return 0;
        };
        let locs = self.flash_candidates(hash);
        if locs.len() < 2 {
            return 0;
        }
        let mut fetched = Fetched::default();
        let mut reads = Vec::new();
        for &loc in &locs {
            flash.fetch(loc, &mut fetched, &mut reads);
        }
        flash.read_blocking(&mut fetched, &mut reads);
        // (key, newest seq, its entry) of each key found under the tag.
        let mut newest: Vec<(&[u8], u64, Loc)> = Vec::new();
        let mut stale = Vec::new();
        for &loc in &locs {
            let Some((item, seq)) = fetched.item_seq(loc) else {
                stale.push(loc);
                continue;
            };
            let key = item::key_of(item);
            match newest.iter_mut().find(|(k, _, _)| *k == key) {
                None => newest.push((key, seq, loc)),
                Some(best) if best.1 < seq => {
                    stale.push(best.2);
                    *best = (key, seq, loc);
                }
                Some(_) => stale.push(loc),
            }
        }
        if stale.iter().any(|&l| fetched.item(l).is_none()) {
            self.tombstone(hash);
        }
        for &loc in &stale {
            self.drop_flash_entry(hash, loc);
        }
        stale.len() as u64
    }
}

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
            if write > seg_size {
                return Err(invalid("segment larger than the segment size"));
            }
            let mut data = self
                .shared
                .pool
                .take()
                .ok_or_else(|| invalid("the snapshot holds more RAM than -m allows"))?;
            r.bytes_into(&mut data[..write])?;
            let mut seg = Segment::new(data, queue);
            seg.write = write;
            seg.live_items = live_items;
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
        Ok(())
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
