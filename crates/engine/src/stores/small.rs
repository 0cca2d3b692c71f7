//! The small-object store's part of one shard (docs/SMALL.md): items of at
//! most `ext_small_max` bytes of key and value leave RAM into the shard's
//! region of the store instead of the flash log, with no index entry; a
//! lookup that finds nothing in RAM or in the log asks the store, whose
//! blocks the caller reads like records ([`Fetched::add_block_read`]); and
//! a change of a key the store may hold rewrites the key's set without it,
//! durably, before the change goes ahead ([`SmallPart::gate`]).

use crate::flash::{FetchState, Fetched, FlashTier, ReadReq};
use crate::index::Loc;
use crate::item::{Header, HEADER};
use crate::pool::SegmentPool;
use crate::small::{format::KEPT_BITS, Obj, SmallStore, Step};
use crate::store::Located;

/// `Loc::seg` of a small-store block in a [`Fetched`] list (`off`: the
/// block's number on device 0).
const BLOCK_SEG: u32 = u32::MAX;

/// A shard's region of the small-object store and its admission bound.
pub(crate) struct SmallPart {
    pub(crate) store: SmallStore,
    /// Key and value bytes of the largest item admitted.
    pub(crate) max: usize,
    /// Small items take the store whether the log tier's index has room or
    /// not (`ext_small_first`).
    pub(crate) first: bool,
    /// The store's DRAM as last counted in the pool.
    reported: usize,
    /// Of it, the filters and the log index ([`lasting`](Self::lasting)).
    lasting: usize,
    /// Set rewrites for changes already charged to the write budget.
    charged: u64,
}

fn block_loc(offset: u64) -> Loc {
    Loc {
        seg: BLOCK_SEG,
        off: (offset / crate::device::aligned::BLOCK as u64) as u32,
    }
}

/// What a lookup's step means for the command.
fn found(step: Step, now: u32) -> Located {
    match step {
        Step::Hit(f) => Located::Small(item_bytes(f.obj(), now)),
        Step::Read(_) => Located::Need,
        Step::Miss => Located::Absent,
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

/// What the store did with an item leaving RAM ([`SmallPart::admit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// It holds the item now: the RAM copy goes.
    Taken,
    /// Refused (expired, write budget spent, a write failed): evicted.
    Refused,
    /// Not now (the store failed, or its next segment flush must wait):
    /// the flash log takes it instead. A key may then have a log record
    /// and an older store copy of the same value; any change drops both,
    /// through the gate.
    Elsewhere,
}

impl SmallPart {
    /// The shard's region, its DRAM counted in `pool`.
    pub(crate) fn new(store: SmallStore, max: usize, first: bool, pool: &SegmentPool) -> SmallPart {
        let (filters, log, other) = store.dram_parts();
        let reported = (filters + log + other) as usize;
        pool.add_index_bytes(reported as isize);
        let charged = store.stats.invalidations;
        SmallPart {
            store,
            max,
            first,
            reported,
            lasting: (filters + log) as usize,
            charged,
        }
    }

    /// Charges the store's set rewrites for changes made since the last
    /// call to the device write budget (`ext_write_budget`): they are not
    /// admissions and cannot be refused, so admissions pay them back.
    pub(crate) fn charge_writes(&mut self, flash: Option<&FlashTier>) {
        let done = self.store.stats.invalidations;
        let sets = done.saturating_sub(self.charged);
        self.charged = done;
        if let Some(f) = flash {
            f.charge_write_budget(sets as usize * crate::device::aligned::BLOCK);
        }
    }

    /// The store's figures for this shard's region.
    pub(crate) fn figures(&self) -> crate::small::SmallTotals {
        let (filters, log, _) = self.store.dram_parts();
        crate::small::SmallTotals {
            stats: self.store.stats,
            objects: self.store.objects(),
            dram_bytes: self.store.dram_bytes(),
            log_objects: self.store.log_objects(),
            dram_filter_bytes: filters,
            dram_log_bytes: log,
            tombstones_live: self.store.tombstones_live(),
            region_bytes: self.store.config().region_bytes(),
        }
    }

    /// DRAM the store holds now, as charged to `-m`.
    pub(crate) fn dram(&self) -> usize {
        self.reported
    }

    /// Of [`dram`](Self::dram), what lasts as long as the store holds its
    /// objects: its filters and its log index, as last counted. The index
    /// gives room for these, not for the segment buffers, which come and
    /// go with the flushes (an index entry given up for a passing buffer
    /// would be lost for good).
    pub(crate) fn lasting(&self) -> usize {
        self.lasting
    }

    /// Counts the store's DRAM in the pool again (its log index grows and
    /// shrinks).
    pub(crate) fn report_bytes(&mut self, pool: &SegmentPool) {
        let (filters, log, other) = self.store.dram_parts();
        let now = (filters + log + other) as usize;
        pool.add_index_bytes(now as isize - self.reported as isize);
        self.reported = now;
        self.lasting = (filters + log) as usize;
    }

    /// An item leaving RAM that [`route`](crate::store::route) sent here
    /// (small enough, not promoted from the log), given its header, key and
    /// value.
    pub(crate) fn admit(
        &mut self,
        h: &Header,
        key: &[u8],
        value: &[u8],
        now: u32,
        flash: Option<&FlashTier>,
    ) -> Admitted {
        let (klen, vlen) = (h.klen as usize, h.vlen as usize);
        if self.store.failed() {
            return Admitted::Elsewhere;
        }
        if self
            .store
            .flush_deferred(crate::small::format::encoded_size(klen, vlen))
        {
            self.store.stats.deferred += 1;
            return Admitted::Elsewhere;
        }
        // The device write budget is charged what the store will write for
        // the item: its bytes times the store's write amplification so far.
        let wa = self.store.stats.write_amplification().max(1.0);
        let charge = ((klen + vlen) as f64 * wa) as usize;
        if h.expired(now) || flash.is_some_and(|f| !f.take_write_budget(charge)) {
            return Admitted::Refused;
        }
        let obj = Obj {
            key: key.to_vec(),
            value: value.to_vec(),
            flags: h.flags,
            exptime: h.exptime,
            cas: h.cas,
            bits: h.bits & KEPT_BITS,
        };
        match self.store.insert(obj) {
            Ok(true) => Admitted::Taken,
            Ok(false) | Err(_) => Admitted::Refused,
        }
    }

    /// The store's answer for `key` from DRAM and the blocks in `fetched`.
    fn step(&mut self, key: &[u8], now: u32, fetched: &Fetched) -> Step {
        self.store
            .lookup_with(key, now, &|off| fetched.block(block_loc(off)).flatten())
    }

    /// Looks `key` up in the store with the blocks in `fetched`, adding the
    /// blocks it needs to `reads` (a block that changed is read again).
    pub(crate) fn find(
        &mut self,
        key: &[u8],
        now: u32,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
        flash: Option<&FlashTier>,
    ) -> Located {
        match self.step(key, now, fetched) {
            Step::Read(offsets) => read_blocks(offsets, fetched, reads, flash),
            step => found(step, now),
        }
    }

    /// [`find`](Self::find) without reads, for a command that runs on what
    /// was fetched.
    pub(crate) fn lookup(&mut self, key: &[u8], now: u32, fetched: &Fetched) -> Located {
        let step = self.step(key, now, fetched);
        found(step, now)
    }

    /// Before a change of `key`: whether the store needs blocks that are
    /// not in `fetched` to tell that it holds no copy of the key (its filter
    /// or a log tag said maybe: [`SmallStore::check_with`]). When the blocks
    /// show none, the change will not wait for an invalidation job. The
    /// blocks are the ones a get reads (`Shard::probe` asks for them).
    pub(crate) fn check_needs_reads(&mut self, key: &[u8], fetched: &Fetched) -> bool {
        matches!(
            self.store
                .check_with(key, &|off| fetched.block(block_loc(off)).flatten()),
            crate::small::Check::Read(_)
        )
    }

    /// Before a plain set of `key`: the reads of the store's blocks that
    /// [`check_needs_reads`](Self::check_needs_reads) will ask for, added
    /// to `reads` in the same round as the log's (whose pending reads make
    /// `Shard::probe` leave the store's for a later round, and the server
    /// gives a command three).
    pub(crate) fn check_reads(
        &mut self,
        key: &[u8],
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
        flash: Option<&FlashTier>,
    ) {
        let check = self
            .store
            .check_with(key, &|off| fetched.block(block_loc(off)).flatten());
        if let crate::small::Check::Read(offsets) = check {
            read_blocks(offsets, fetched, reads, flash);
        }
    }

    /// Before a change of `key`: no copy of it may stay in the store.
    /// Some(whether the store held it) once none does; None when the change
    /// must wait and be asked again: with a background flusher, the key's
    /// set is rewritten without it by an invalidation job, in a batch with
    /// other changed keys, and the flash tier's wakers fire when it is
    /// committed ([`SmallStore::gate`]); without one, the set is rewritten
    /// here, durably. None too when the store failed and could not be
    /// emptied (a restart would serve the old value).
    pub(crate) fn gate(
        &mut self,
        key: &[u8],
        replace: bool,
        flash: Option<&FlashTier>,
    ) -> Option<bool> {
        let r = match replace {
            true => self.store.gate_replace(key),
            false => self.store.gate(key),
        };
        self.charge_writes(flash);
        match r {
            Ok(crate::small::Gate::Clear(found)) => Some(found),
            Ok(crate::small::Gate::Wait) => None,
            Err(e) => {
                tracing::error!(error = %e, "the small-object store cannot drop a changed key; it is emptied");
                self.store.forget_all().ok().map(|()| false)
            }
        }
    }
}

/// Adds the reads of the store's blocks at `offsets` to `reads` (those not
/// read yet, and those read before they changed); Absent when one could
/// not be read (asking again would not end), or without a flash tier.
fn read_blocks(
    offsets: Vec<u64>,
    fetched: &mut Fetched,
    reads: &mut Vec<ReadReq>,
    flash: Option<&FlashTier>,
) -> Located {
    let Some(flash) = flash else {
        return Located::Absent;
    };
    for off in offsets {
        let loc = block_loc(off);
        match fetched.state(loc) {
            Some(FetchState::Pending) => continue,
            // Failed: a miss (asking again would not end).
            Some(FetchState::Bad) => return Located::Absent,
            Some(_) => fetched.forget(loc),
            None => {}
        }
        reads.push(fetched.add_block_read(loc, 0, off, &flash.stats));
    }
    Located::Need
}
