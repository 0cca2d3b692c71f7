//! One shard of the cache: its index, its segments in two FIFO queues
//! (probation and main), and its eviction policy. All methods run under the
//! shard's lock; the engine hashes keys to shards.
//!
//! Space is reclaimed a whole segment at a time: the oldest segment of the
//! queue the policy names is *evacuated*: each live item is either evicted or
//! copied to the head of a queue (reinsertion), as the policy decides. A
//! reinsertion that finds its head full takes a spare segment from the
//! pool's reserve, shared by the shards, and the victim's buffer goes back.
//!
//! The stores below RAM are one field, [`Chain`] (`stores/`): the shard
//! holds them, asks them in one order ([`Shard::locate`]) and moves items
//! between RAM and them.
//!
//! This file holds the RAM log (find, insert, unlink, hit, flush, expiry);
//! `eviction` reclaims segments, `tiering` is the RAM side of the chain
//! below (demotion, probes, lookups, promotion), `small` the RAM side of
//! the small store, `crash` the journal gate and crash recovery,
//! `snapshot` the shard's part of the shutdown snapshot.

use crate::flash::tier::{AppendError, FlashTier};
use crate::flash::{is_flash, Fetched, ReadReq};
use crate::hash::hash_key;
use crate::index::{Class, Evicted, Index, Loc};
use crate::item::{self, Header, HEADER};
use crate::pool::SegmentPool;
use crate::segment::Segment;
use crate::stat::stats_struct;
use crate::store::{Located, Lower, CHAIN};
use crate::stores::log::LogPart;
use crate::stores::Chain;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use tiercache_policy::{EvictionPolicy, HitAction, Queue, TailAction};

mod ahead;
mod crash;
mod dump;
mod eviction;
mod flushing;
pub mod hold;
mod indexing;
mod small;
mod snapshot;
mod sweep;
mod tiering;

pub use crash::Allowed;

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
    /// The most [`SegmentPool::index_bytes`] (indexes and flash write
    /// buffers) may reach: an index grows only while it stays under, and
    /// evicts when full instead.
    pub index_cap: std::sync::atomic::AtomicUsize,
    /// Where evictions are reported (`watch evictions`), once set.
    pub evictions: std::sync::OnceLock<std::sync::Arc<dyn crate::evictions::EvictionSink>>,
    /// memcached's item size limit (see [`crate::Engine::set_item_size_max`]).
    pub item_size_max: std::sync::atomic::AtomicUsize,
    /// Segments asked for by shards holding less than their fair share
    /// (at most one per shard at a time); shards above theirs give one to
    /// the pool per reclaim until none is wanted.
    pub segments_wanted: std::sync::atomic::AtomicUsize,
    /// Runs the evacuations begun ahead, when a thread is attached.
    pub evacuator: crate::evacuator::Evacuator,
}

impl Shared {
    /// [`Shared::index_cap`] now.
    pub fn index_cap(&self) -> usize {
        self.index_cap.load(Ordering::Relaxed)
    }

    pub fn next_cas(&self) -> u64 {
        self.cas.fetch_add(1, Ordering::Relaxed) + 1
    }
}

stats_struct! {
    /// Counters a shard keeps under its lock, with their `stats` names, in
    /// the order `stats` shows them (those marked `reset` are cleared by
    /// `stats reset`).
    #[derive(Debug, Default, Clone, Copy)]
    pub struct ShardStats {
        /// Items evicted to make room (memcached's name).
        evictions: counter reset => "evictions";
        /// Expired items freed, by the expiry sweep or an evacuation.
        reclaimed: counter reset => "reclaimed";
        /// Items held (flash items included).
        curr_items: gauge => "curr_items";
        /// Items stored since the start.
        total_items: counter reset => "total_items";
        /// Items that expired, or were evicted, never read.
        expired_unfetched: counter reset => "expired_unfetched";
        evicted_unfetched: counter reset => "evicted_unfetched";
        /// Segments whose items were evicted, reinserted or demoted at once to
        /// make room (`segment_evacuations`), the time that took holding the
        /// shard's lock (`segment_evacuate_us`) and the longest single one
        /// since the start (`segment_evacuate_max_us`; a max, not a sum, across
        /// shards).
        evacuations: counter => "segment_evacuations";
        evacuate_us: counter => "segment_evacuate_us";
        evacuate_max_us: max => "segment_evacuate_max_us";
        /// Evacuations a request waited for whole, or for the rest of
        /// (`segment_evacuations_waited`): the others were done ahead, a slice
        /// per insert (see `Shard::evacuate_ahead`).
        evacuations_waited: counter => "segment_evacuations_waited";
        /// Evacuations ahead a set needed the segment of while much was left,
        /// and got a segment over the budget instead of waiting
        /// (`segment_evacuations_late`; see `Shard::head_over_budget`).
        evacuations_late: counter => "segment_evacuations_late";
        /// Inserts that found the memory over its budget by a segment per
        /// shard with an evacuation ahead far from done (the evacuator thread
        /// starved of CPU): each ran one slice of it and waited (retried
        /// later) rather than finishing it in its lock hold
        /// (`segment_evacuation_waits`; see `Shard::reclaim_for_insert`).
        evacuation_waits: counter => "segment_evacuation_waits";
        /// Items the policy would have kept that were evicted for want of room
        /// at their queue's head and of a spare segment
        /// (`segment_evacuation_reinserts_refused`; see `Shard::evac_alloc`).
        reinserts_refused: counter => "segment_evacuation_reinserts_refused";
        /// Spare segments evacuations took over the memory budget (the
        /// reserve spent, or segments lent to sets while the evacuator
        /// lagged), so as to keep the items the policy keeps
        /// (`segment_evacuation_spares_over_budget`; see `Shard::evac_alloc`).
        spares_over_budget: counter => "segment_evacuation_spares_over_budget";
        /// Evacuation slices run by sets (inline, on a worker) and by the
        /// evacuator thread (`segment_evacuation_slices_*`).
        evacuation_slices_sets: counter => "segment_evacuation_slices_sets";
        evacuation_slices_evacuator: counter => "segment_evacuation_slices_evacuator";
        /// Segments the expiry sweep walked, and those it skipped because
        /// nothing in them could have expired (`sweep_segments_*`).
        sweep_segments_walked: counter reset => "sweep_segments_walked";
        sweep_segments_skipped: counter reset => "sweep_segments_skipped";
        /// Bytes of live items as stored (header, key, value, padding).
        bytes: gauge => "bytes";
        /// RAM segments holding items.
        segments: gauge => "segments_in_use";
        /// Items the policy kept, copied to the head of a queue.
        reinserted: counter reset => "reinserted";
        /// Index entries of items on flash (included in `curr_items`).
        flash_items: gauge => "extstore_objects_used" in Extstore;
        /// Requests served from flash.
        flash_hits: counter => "get_extstore" in Extstore, "flash_hits" in Flash;
        /// Items copied from flash back to RAM.
        promoted: counter => "recache_from_extstore" in Extstore, "flash_promoted" in Flash;
        /// Second flash hits left on flash because promoted items were not
        /// getting hit in RAM (see `promote_credit`).
        promote_declined: counter => "flash_promote_declined" in Flash;
        /// Items moved from RAM to flash.
        demoted: counter => "flash_demoted" in Flash;
        /// Evicted from RAM without going to flash (too small, refused, expired).
        not_demoted: counter => "flash_not_demoted" in Flash;
        /// Evacuations that went on without flash write-buffer room once the
        /// tier had refused this shard for `TierParams::max_write_wait`: what
        /// they could not write was evicted (`flash_write_waits_expired`).
        /// Without that bound, sets of 4 KiB values at 50,000/s (200 MB/s, more
        /// than the device took) had a p99 of 2.2-4.6 s (median of 3 runs 3.6 s; bench/RESULTS.md
        /// "4 KiB values under writes"), where memcached's extstore evicts at
        /// once.
        flash_waits_expired: counter => "flash_write_waits_expired" in Flash;
        /// Entries a full index dropped to make room (also in `evictions`).
        index_evictions: counter => "index_evictions", "flash_index_evictions" in Flash;
        /// Index tables rebuilt larger or smaller (`index_resizes`, counted
        /// as each rebuild starts), and the lock holds their steps took
        /// (`index_resize_steps`): a rebuild moves a few buckets a hold.
        index_resizes: counter => "index_resizes";
        index_resize_steps: counter => "index_resize_steps";
        /// Lookups that found their key's item expired (memcached's
        /// `get_expired`: any command's lookup, as its `do_item_get`); the
        /// server adds them to its own counter of that name.
        get_expired: counter reset => "get_expired" in Hidden;
        /// Lookups of a key whose item flush_all dropped (`get_flushed`; see
        /// [`crate::flushed`]); added to the server's counter of that name.
        get_flushed: counter reset => "get_flushed" in Hidden;
    }
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

const MAX_EVICT_PASSES: usize = 32;

pub struct Shard {
    index: Index,
    segs: Vec<Option<Segment>>,
    free_ids: Vec<u32>,
    queues: [VecDeque<u32>; 2],
    /// An evacuation begun ahead of need, a slice per insert, and the
    /// segment it freed, waiting for the next allocation.
    ahead: Option<ahead::Ahead>,
    ready: Option<Box<[u8]>>,
    /// The expiry sweep in progress, between its slices.
    sweep: Option<sweep::Sweep>,
    policy: Box<dyn EvictionPolicy>,
    shared: Arc<Shared>,
    flush_gen: u64,
    index_bytes_reported: usize,
    /// Time of the latest request, for classifying evicted items in stats.
    clock_now: u32,
    /// The stores below RAM: the flash log's part, the small store's.
    below: Chain,
    pub stats: ShardStats,
    /// RAM items the last flush_all dropped, until the next sweep.
    flushed: crate::flushed::Flushed,
    /// What the last flush_all set aside, until it is given back.
    flushing: Option<flushing::Flushing>,
    /// The fewest buckets the index shrinks to (`ext_avg_item_size`'s hint).
    index_floor: usize,
    /// Maintenance that ran in the current lock hold ([`Shard::mark_hold`]).
    hold_mark: Option<hold::HoldCause>,
    /// The thread's CPU clock when the current hold's maintenance began.
    hold_cpu: Option<u64>,
    /// Lock holds by cause ([`hold`]).
    holds: hold::HoldStats,
    /// Waits for the lock by the waiter's cause ([`hold`]).
    waits: hold::HoldStats,
    /// Threads waiting for this shard's lock (shared with its
    /// [`hold::ShardLock`]): maintenance under the lock ends its slice early
    /// when a request waits.
    lock_waiters: std::sync::Arc<std::sync::atomic::AtomicU32>,
    /// This shard's bit in the evacuator's requests.
    evacuator_bit: u64,
}

impl Shard {
    /// A shard whose index keeps `precision` bits of position and starts
    /// with `buckets` buckets (also the fewest it shrinks to).
    pub fn new(
        precision: u32,
        buckets: usize,
        policy: Box<dyn EvictionPolicy>,
        shared: Arc<Shared>,
        flash: Option<Arc<FlashTier>>,
    ) -> Shard {
        let index = Index::new(precision, buckets);
        let bytes = index.memory_bytes();
        shared.pool.add_index_bytes(bytes as isize);
        // From the memory limit at start (`cache_memlimit` leaves it).
        let max_copies = crate::stores::copies::max_copies(shared.pool.limit(), shared.nshards);
        Shard {
            index,
            segs: Vec::new(),
            free_ids: Vec::new(),
            queues: [VecDeque::new(), VecDeque::new()],
            ahead: None,
            ready: None,
            sweep: None,
            policy,
            shared,
            flush_gen: 0,
            index_bytes_reported: bytes,
            clock_now: 0,
            below: Chain::new(LogPart::new(flash, max_copies)),
            stats: ShardStats::default(),
            flushed: crate::flushed::Flushed::default(),
            flushing: None,
            index_floor: buckets,
            hold_mark: None,
            hold_cpu: None,
            holds: hold::HoldStats::default(),
            waits: hold::HoldStats::default(),
            lock_waiters: Default::default(),
            evacuator_bit: 1,
        }
    }

    /// Shard `i` of the engine: its bit in the evacuator's requests.
    pub(crate) fn set_position(&mut self, i: usize) {
        self.evacuator_bit = 1 << (i % 64);
    }

    pub fn shared(&self) -> &Shared {
        &self.shared
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    pub fn index_buckets(&self) -> usize {
        self.index.buckets()
    }

    /// (entries, slots) of the index.
    pub fn index_usage(&self) -> (usize, usize) {
        (self.index.len(), self.index.slots())
    }

    /// The index's position bits (the crash journal's geometry).
    pub fn index_precision(&self) -> u32 {
        self.index.precision()
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
        self.seg_mut(loc.seg).note_expiry(exptime);
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

    /// Overwrites the value in place: `value`, then `pad` up to the
    /// item's value length (which stays).
    pub fn overwrite_value_padded(&mut self, loc: Loc, value: &[u8], pad: u8) {
        let h = self.header(loc);
        debug_assert!(value.len() <= h.vlen as usize);
        let start = HEADER + h.klen as usize;
        let field = self.field_mut(loc, start, h.vlen as usize);
        let (head, tail) = field.split_at_mut(value.len());
        head.copy_from_slice(value);
        tail.fill(pad);
    }

    /// Looks a key up, dropping it if it has expired. Counts `get_expired`
    /// (or `get_flushed`) as memcached's lookup does.
    #[inline]
    pub fn find(&mut self, key: &[u8], hash: u64, now: u32) -> Option<Loc> {
        let Some(loc) = self.find_any(key, hash) else {
            if self.flushed.take(hash) || self.take_set_aside(key, hash) {
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
        self.below.log.candidates(&self.index, hash)
    }

    /// Where `key`'s item is: the one lookup order, RAM first
    /// ([`find`](Self::find)), then the stores of `ask` below it with the
    /// records and blocks in `fetched` ([`Chain::locate`]; `ask` is
    /// [`CHAIN`], or the log alone for a change whose gate already cleared
    /// the small store).
    pub(crate) fn locate(
        &mut self,
        key: &[u8],
        hash: u64,
        now: u32,
        fetched: &Fetched,
        ask: &[Lower],
    ) -> Located {
        if let Some(loc) = self.find(key, hash, now) {
            return Located::Ram(loc);
        }
        self.below.locate(ask, &self.index, key, hash, now, fetched)
    }

    /// Drops a flash item's index entry (delete of a probed flash item).
    pub fn unlink_flash(&mut self, hash: u64, loc: Loc, ok: &Allowed) {
        debug_assert_eq!(ok.hash, hash, "allowed for another key");
        self.drop_flash_entry(hash, loc);
    }

    /// Drops a flash index entry whose record is gone, stale, or covered by
    /// a tombstone or the floor (no gate needed).
    pub(crate) fn drop_flash_entry(&mut self, hash: u64, loc: Loc) {
        if self.below.log.drop_entry(&mut self.index, hash, loc) {
            self.stats.curr_items -= 1;
            self.stats.flash_items -= 1;
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
            self.below.log.promotion_paid();
        }
        let (freq, action) = self.policy.on_hit(h.bits & item::FREQ_MASK);
        let bits = (h.bits & !item::FREQ_MASK) | freq | item::FETCHED;
        self.field_mut(loc, item::OFF_BITS, 1)[0] = bits;
        self.field_mut(loc, item::OFF_ATIME, 2)
            .copy_from_slice(&(now as u16).to_le_bytes());
        if action == HitAction::MoveToHead {
            let q = self.seg(loc.seg).queue;
            let is_head = self.queues[q as usize].back() == Some(&loc.seg);
            if !is_head && self.is_jumbo(loc.seg) {
                // Its own segment moves, not the item.
                let id = loc.seg;
                self.queues[q as usize].retain(|&x| x != id);
                self.queue_behind_head(q, id);
            } else if !is_head {
                let size = h.size();
                let copy = self.bytes_at(loc)[..size].to_vec();
                if let Ok(new) = self.alloc(q, size) {
                    // Allocation may have evicted the old copy; only move if still linked.
                    if self.index.contains(hash, loc) {
                        self.write_at(new, &copy);
                        self.index.relocate(hash, loc, new);
                        self.seg_mut(loc.seg).live_items -= 1;
                        self.update_bits(loc, item::DEAD, 0);
                        self.seg_mut(new.seg).gain(h.exptime);
                        return new;
                    }
                }
            }
        }
        loc
    }

    /// The item at `*off` in segment `seg` and its header, stepping `*off`
    /// past it; None at `end` (the segment's write offset when the walk
    /// began). Walks see dead items too.
    fn next_item(&self, seg: u32, off: &mut usize, end: usize) -> Option<(Loc, Header)> {
        if *off >= end {
            return None;
        }
        let loc = Loc {
            seg,
            off: *off as u32,
        };
        let h = self.header(loc);
        *off += h.size();
        Some((loc, h))
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

    /// Whether an item of this key, value length and client flags can be
    /// stored: in a segment, or larger, in a jumbo segment of its own of at
    /// most half the memory limit (memcached's bound on `-I`); and within
    /// the item size limit if one is set.
    pub fn fits(&self, klen: usize, vlen: usize, flags: u32) -> bool {
        let size = item::stored_size(klen, vlen);
        let max = self.shared.item_size_max.load(Ordering::Relaxed);
        let limits = tiercache_proto::text::Limits {
            item_size_max: max,
            ..Default::default()
        };
        klen <= 255
            && (size <= self.shared.pool.seg_size() || size <= self.shared.pool.limit() / 2)
            && (max == 0 || !limits.too_large(klen, flags, vlen))
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
        if !self.fits(key.len(), vlen, new.flags) {
            return Err(InsertError::TooLarge);
        }
        let size = item::stored_size(key.len(), vlen);
        let q = self.policy.insert_queue(hash);
        // A change that waits for the small store asks before it takes RAM
        // (each retry would take a new slot, evicting items for nothing).
        if self.below.small_must_wait(key) {
            return Err(InsertError::Busy);
        }
        // Room first: if none can be had, the old item must stay.
        let loc = self.alloc(q, size)?;
        // After the allocation, which may have moved the old item to flash:
        // older copies on flash need a durable tombstone before they go.
        let old = self.find_any(key, hash);
        let mut on_flash = self.flash_candidates(hash);
        on_flash
            .retain(|&loc| !keep.contains(&loc) && !self.below.log.resident_other_key(loc, key));
        if !self.journal_gate_at(hash, old, &on_flash) || !self.below.gate_small_replace(key) {
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
        seg.gain(h.exptime);
        self.stats.curr_items += 1;
        self.stats.total_items += 1;
        self.stats.bytes += size as u64;
        self.index_insert(hash, loc);
        Ok(loc)
    }
}
