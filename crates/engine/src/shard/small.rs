//! The shard's side of the small-object store (docs/SMALL.md): items of at
//! most `ext_small_max` bytes of key and value leave RAM into the shard's
//! region of the store instead of the log-structured tier, with no index
//! entry; a lookup that finds nothing in RAM or in the index asks the store,
//! whose blocks the caller reads like records ([`Fetched::add_block_read`]);
//! and a change of a key the store may hold rewrites the key's set without
//! it, durably, before the change goes ahead ([`Shard::small_gate`]).

use super::*;
use crate::small::{format::KEPT_BITS, Obj, SmallStore, Step};

/// `Loc::seg` of a small-store block in a [`Fetched`] list (`off`: the
/// block's number on device 0).
const BLOCK_SEG: u32 = u32::MAX;

/// A shard's small-object store and its admission bound.
pub(crate) struct SmallPart {
    pub(crate) store: SmallStore,
    /// Key and value bytes of the largest item admitted.
    pub(crate) max: usize,
    /// The store's DRAM as last counted in the pool.
    reported: usize,
    /// Set rewrites for changes already charged to the write budget.
    charged: u64,
}

/// What the store says about a key, given the blocks read so far.
pub enum SmallFound {
    /// The item, in the RAM layout (header, key, value).
    Hit(Vec<u8>),
    /// Blocks must be read first.
    Need,
    Absent,
}

fn block_loc(offset: u64) -> Loc {
    Loc {
        seg: BLOCK_SEG,
        off: (offset / crate::device::aligned::BLOCK as u64) as u32,
    }
}

/// What a lookup's step means for the command.
fn found(step: Option<Step>, now: u32) -> SmallFound {
    match step {
        Some(Step::Hit(f)) => SmallFound::Hit(item_bytes(f.obj(), now)),
        Some(Step::Read(_)) => SmallFound::Need,
        Some(Step::Miss) | None => SmallFound::Absent,
    }
}

/// The item bytes (RAM layout) of an object read from the store.
fn item_bytes(o: &Obj, now: u32) -> Vec<u8> {
    let h = Header {
        cas: o.cas,
        exptime: o.exptime,
        flags: o.flags,
        vlen: o.value.len() as u32,
        klen: o.key.len() as u8,
        bits: o.bits & KEPT_BITS,
        atime: now as u16,
    };
    let mut b = vec![0u8; HEADER + o.key.len() + o.value.len()];
    h.write(&mut b);
    b[HEADER..HEADER + o.key.len()].copy_from_slice(&o.key);
    b[HEADER + o.key.len()..].copy_from_slice(&o.value);
    b
}

impl Shard {
    /// Gives the shard its region of the small-object store.
    pub(crate) fn attach_small(&mut self, store: SmallStore, max: usize) {
        let reported = store.dram_bytes() as usize;
        self.shared.pool.add_index_bytes(reported as isize);
        let charged = store.stats.invalidations;
        self.small = Some(SmallPart {
            store,
            max,
            reported,
            charged,
        });
    }

    /// The flash tier (whose wakers retry parked changes).
    pub(crate) fn flash_tier(&self) -> Option<Arc<crate::flash::tier::FlashTier>> {
        self.flash.clone()
    }

    pub(crate) fn has_small(&self) -> bool {
        self.small.is_some()
    }

    /// The store's segment flushes run on the engine's flusher threads.
    pub(crate) fn small_background(&mut self, tx: crossbeam_channel::Sender<u32>) {
        if let Some(p) = self.small.as_mut() {
            p.store.set_background(tx);
        }
    }

    /// Runs `f` on the shard's store (a flusher thread's short phases),
    /// then counts the store's DRAM in the pool again.
    pub(crate) fn with_small_store(&mut self, f: &mut dyn FnMut(&mut SmallStore)) {
        self.mark_hold(super::hold::HoldCause::Small);
        if let Some(p) = self.small.as_mut() {
            f(&mut p.store);
        }
        self.report_small_bytes();
        self.charge_small_writes();
    }

    /// Charges the store's set rewrites for changes made since the last
    /// call to the device write budget (`ext_write_budget`): they are not
    /// admissions and cannot be refused, so admissions pay them back.
    fn charge_small_writes(&mut self) {
        let Some(p) = self.small.as_mut() else {
            return;
        };
        let done = p.store.stats.invalidations;
        let sets = done.saturating_sub(p.charged);
        p.charged = done;
        if let Some(f) = self.flash.as_ref() {
            f.charge_write_budget(sets as usize * crate::device::aligned::BLOCK);
        }
    }

    /// The store's figures for this shard's region; None without one.
    pub fn small_stats(&self) -> Option<crate::small::SmallTotals> {
        let p = self.small.as_ref()?;
        let (filters, log, _) = p.store.dram_parts();
        Some(crate::small::SmallTotals {
            stats: p.store.stats,
            objects: p.store.objects(),
            dram_bytes: p.store.dram_bytes(),
            log_objects: p.store.log_objects(),
            dram_filter_bytes: filters,
            dram_log_bytes: log,
            region_bytes: p.store.config().region_bytes(),
        })
    }

    /// Counts the store's DRAM in the pool again (its log index grows and shrinks).
    /// DRAM the small-object store holds now, as charged to `-m`.
    pub(crate) fn small_dram(&self) -> usize {
        self.small.as_ref().map_or(0, |p| p.reported)
    }

    pub(super) fn report_small_bytes(&mut self) {
        let Some(p) = self.small.as_mut() else {
            return;
        };
        let now = p.store.dram_bytes() as usize;
        self.shared
            .pool
            .add_index_bytes(now as isize - p.reported as isize);
        p.reported = now;
    }

    /// An item leaving RAM that the small store takes: Some(admitted) when
    /// it is small enough to be the store's, None when it is not, when it
    /// was promoted from the log tier (it goes back there), or when
    /// the store's next segment flush must wait (the log-structured tier
    /// takes it then: a key may have a log record and an older store copy
    /// of the same value; any change drops both, through the gate).
    pub(super) fn demote_small(&mut self, hash: u64, loc: Loc, h: &Header) -> Option<bool> {
        let p = self.small.as_ref()?;
        let (klen, vlen) = (h.klen as usize, h.vlen as usize);
        // An item promoted from the log tier may still have its record
        // there, which only the gate's tombstone (asked for by the flash
        // copy bit) keeps dead after a crash; in the store the bit would be
        // lost, and a later change would leave the record to come back.
        if klen + vlen > p.max || p.store.failed() || h.bits & item::FLASH_COPY != 0 {
            return None;
        }
        if p.store
            .flush_deferred(crate::small::format::encoded_size(klen, vlen))
        {
            self.small.as_mut().expect("checked").store.stats.deferred += 1;
            return None;
        }
        let now = self.clock_now;
        // The device write budget is charged what the store will write for
        // the item: its bytes times the store's write amplification so far.
        let wa = p.store.stats.write_amplification().max(1.0);
        let charge = ((h.klen as usize + h.vlen as usize) as f64 * wa) as usize;
        if h.expired(now)
            || self
                .flash
                .as_ref()
                .is_some_and(|f| !f.take_write_budget(charge))
        {
            self.stats.not_demoted += 1;
            return Some(false);
        }
        let obj = Obj {
            key: self.key(loc).to_vec(),
            value: self.value(loc).to_vec(),
            flags: h.flags,
            exptime: h.exptime,
            cas: h.cas,
            bits: h.bits & KEPT_BITS,
        };
        let p = self.small.as_mut().expect("checked");
        match p.store.insert(obj) {
            Ok(true) => {
                let size = h.size() as u64;
                self.index.remove(hash, loc);
                self.update_bits(loc, item::DEAD, 0);
                self.stats.curr_items -= 1;
                self.stats.bytes -= size;
                self.stats.demoted += 1;
                Some(true)
            }
            Ok(false) | Err(_) => {
                self.stats.not_demoted += 1;
                Some(false)
            }
        }
    }

    /// The store's answer for `key` from DRAM and the blocks in `fetched`;
    /// None without a store.
    fn small_step(&mut self, key: &[u8], now: u32, fetched: &Fetched) -> Option<Step> {
        let p = self.small.as_mut()?;
        Some(
            p.store
                .lookup_with(key, now, &|off| fetched.block(block_loc(off)).flatten()),
        )
    }

    /// Looks `key` up in the store with the blocks in `fetched`, adding the
    /// blocks it needs to `reads` (a block that changed is read again).
    pub fn small_find(
        &mut self,
        key: &[u8],
        now: u32,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) -> SmallFound {
        let offsets = match self.small_step(key, now, fetched) {
            Some(Step::Read(offsets)) => offsets,
            step => return found(step, now),
        };
        self.read_small_blocks(offsets, fetched, reads)
    }

    /// Adds the reads of the store's blocks at `offsets` to `reads` (those
    /// not read yet, and those read before they changed); Absent when one
    /// could not be read (asking again would not end).
    fn read_small_blocks(
        &mut self,
        offsets: Vec<u64>,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) -> SmallFound {
        let Some(flash) = self.flash.as_ref() else {
            return SmallFound::Absent;
        };
        for off in offsets {
            let loc = block_loc(off);
            match fetched.state(loc) {
                Some(FetchState::Pending) => continue,
                // Failed: a miss (asking again would not end).
                Some(FetchState::Bad) => return SmallFound::Absent,
                Some(_) => fetched.forget(loc),
                None => {}
            }
            reads.push(fetched.add_block_read(loc, 0, off, &flash.stats));
        }
        SmallFound::Need
    }

    /// Before a change of `key`: whether the store needs blocks that are
    /// not in `fetched` to tell that it holds no copy of the key (its filter
    /// or a log tag said maybe: [`SmallStore::check_with`]). When the blocks
    /// show none, the change will not wait for an invalidation job. The
    /// blocks are the ones a get reads ([`probe`](Self::probe) asks for
    /// them).
    pub(crate) fn small_check_needs_reads(&mut self, key: &[u8], fetched: &Fetched) -> bool {
        let Some(p) = self.small.as_mut() else {
            return false;
        };
        matches!(
            p.store
                .check_with(key, &|off| fetched.block(block_loc(off)).flatten()),
            crate::small::Check::Read(_)
        )
    }

    /// Before a plain set of `key`: the reads of the store's blocks that
    /// [`small_check_needs_reads`](Self::small_check_needs_reads) will ask
    /// for, added to `reads` in the same round as the log tier's (whose
    /// pending reads make [`probe`](Self::probe) leave the store's for a
    /// later round, and the server gives a command three).
    pub(crate) fn small_check_reads(
        &mut self,
        key: &[u8],
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) {
        let Some(p) = self.small.as_mut() else {
            return;
        };
        let check = p
            .store
            .check_with(key, &|off| fetched.block(block_loc(off)).flatten());
        if let crate::small::Check::Read(offsets) = check {
            self.read_small_blocks(offsets, fetched, reads);
        }
    }

    /// [`small_find`](Self::small_find) without reads, for a command that
    /// runs on what was fetched.
    pub fn small_lookup(&mut self, key: &[u8], now: u32, fetched: &Fetched) -> SmallFound {
        let step = self.small_step(key, now, fetched);
        found(step, now)
    }

    /// A get served from the store: copied back to RAM only with
    /// `ext_promote=always` (the store keeps its copy). Under `second`, the
    /// default, a store hit stays on flash: it costs one 4 KiB read, like a
    /// log tier hit, while a promotion evicts RAM items whose admission to
    /// the store costs set writes (small_fit.py: flash hits per second went
    /// from 0.46x the log tier's to 0.85x without promotions).
    pub fn small_hit(&mut self, hash: u64, item_bytes: &[u8]) {
        use crate::flash::tier::Promote;
        self.stats.flash_hits += 1;
        let promote = matches!(
            self.flash.as_ref().map(|f| f.params().promote),
            Some(Promote::Always)
        );
        if promote && self.copy_in(hash, item_bytes).is_ok() {
            self.stats.promoted += 1;
        }
    }

    /// Copies an item read from the store into RAM (before a command that
    /// changes it, or a promotion); its store copy stays until the change.
    pub fn copy_in(&mut self, hash: u64, item_bytes: &[u8]) -> Result<Loc, InsertError> {
        let h = Header::read(item_bytes);
        let size = h.size();
        let q = self.policy.insert_queue(hash);
        let new = self.alloc(q, size)?;
        let key = item::key_of(item_bytes).to_vec();
        if self.find_any(&key, hash).is_some() {
            // The allocation cannot bring the key back, but stay safe.
            self.update_bits(new, item::DEAD, 0);
            return Err(InsertError::NoMemory);
        }
        let o = new.off as usize;
        let len = HEADER + h.klen as usize + h.vlen as usize;
        let seg = self.seg_mut(new.seg);
        seg.data[o..o + len].copy_from_slice(&item_bytes[..len]);
        seg.data[o + item::OFF_BITS] = (h.bits & !item::FREQ_MASK) | item::FETCHED;
        seg.gain(h.exptime);
        self.stats.curr_items += 1;
        self.stats.bytes += size as u64;
        self.index_insert(hash, new);
        Ok(new)
    }

    /// Before a change of `key`: no copy of it may stay in the store.
    /// Some(whether the store held it; false without a store) once none
    /// does; None when the change must wait and be asked again: with a
    /// background flusher, the key's set is rewritten without it by an
    /// invalidation job, in a batch with other changed keys, and the
    /// flash tier's wakers fire when it is committed
    /// ([`SmallStore::gate`]); without one, the set is rewritten here,
    /// durably. None too when the store failed and could not be emptied (a
    /// restart would serve the old value).
    pub(super) fn small_gate(&mut self, key: &[u8]) -> Option<bool> {
        let Some(p) = self.small.as_mut() else {
            return Some(false);
        };
        let r = p.store.gate(key);
        self.charge_small_writes();
        let p = self.small.as_mut().expect("checked");
        match r {
            Ok(crate::small::Gate::Clear(found)) => Some(found),
            Ok(crate::small::Gate::Wait) => None,
            Err(e) => {
                tracing::error!(error = %e, "the small-object store cannot drop a changed key; it is emptied");
                p.store.forget_all().ok().map(|()| false)
            }
        }
    }

    /// Whether a change of `key` must wait for the store's invalidation of
    /// it ([`SmallStore::must_wait`]; the key is queued for one): asked
    /// before a store takes RAM for the new item.
    pub(super) fn small_must_wait(&mut self, key: &[u8]) -> bool {
        self.small.as_mut().is_some_and(|p| p.store.must_wait(key))
    }

    /// Ahead of a change that replaces or deletes `key` whatever it holds
    /// (pipelined behind a change that waits): queues the key's
    /// invalidation now, so that one job serves both
    /// ([`SmallStore::prepare`]).
    pub(crate) fn small_prepare(&mut self, key: &[u8]) {
        if let Some(p) = self.small.as_mut() {
            p.store.prepare(key);
        }
    }

    /// flush_all: the store drops everything, durably.
    pub(super) fn flush_small(&mut self) -> std::io::Result<()> {
        match self.small.as_mut() {
            Some(p) => p.store.clear(),
            None => Ok(()),
        }
    }

    /// A graceful stop: the store's open segment is written.
    pub fn write_small_buffer(&mut self) -> std::io::Result<()> {
        match self.small.as_mut() {
            Some(p) => p.store.flush_buffer(),
            None => Ok(()),
        }
    }
}
