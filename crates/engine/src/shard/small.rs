//! The RAM side of the small-object store (its shard part is
//! `stores/small.rs`): items it takes leave RAM with no index entry, items
//! read from it are copied back into RAM, and the engine's start-up and
//! flusher threads reach the shard's region through these methods.

use super::*;
use crate::small::SmallStore;
use crate::stores::small::{Admitted, SmallPart};

impl Shard {
    /// Gives the shard its region of the small-object store.
    pub(crate) fn attach_small(&mut self, store: SmallStore, max: usize, first: bool) {
        self.below.small = Some(SmallPart::new(store, max, first, &self.shared.pool));
    }

    /// The flash tier (whose wakers retry parked changes).
    pub(crate) fn flash_tier(&self) -> Option<Arc<FlashTier>> {
        self.below.log.tier().cloned()
    }

    pub(crate) fn has_small(&self) -> bool {
        self.below.small.is_some()
    }

    /// The store's segment flushes run on the engine's flusher threads.
    pub(crate) fn small_background(&mut self, tx: crossbeam_channel::Sender<u32>) {
        if let Some(p) = self.below.small.as_mut() {
            p.store.set_background(tx);
        }
    }

    /// Runs `f` on the shard's store (a flusher thread's short phases),
    /// then counts the store's DRAM in the pool again.
    pub(crate) fn with_small_store(&mut self, f: &mut dyn FnMut(&mut SmallStore)) {
        self.mark_hold(super::hold::HoldCause::Small);
        self.below.with_small_store(&self.shared.pool, f);
    }

    /// The store's figures for this shard's region; None without one.
    pub fn small_stats(&self) -> Option<crate::small::SmallTotals> {
        self.below.small_figures()
    }

    /// DRAM the small-object store holds now, as charged to `-m`.
    pub(crate) fn small_dram(&self) -> usize {
        self.below.small_dram()
    }

    /// An item leaving RAM that [`route`](crate::store::route) sent to the
    /// store: Some(admitted) when the store took it or refused it, None
    /// when the log is to take it ([`Admitted::Elsewhere`]).
    ///
    /// The choice (docs/SMALL.md, "How an item's tier is chosen"): the
    /// store takes the item only when the key's index table is at its
    /// budget ([`Index::at_budget`]: the index would otherwise evict an
    /// entry whose item is still on flash for the next new key), and only
    /// while the store's DRAM fits the index's budget beside the index
    /// ([`small_dram_room`](Self::small_dram_room)). Otherwise the log
    /// tier takes it, as without the store.
    pub(super) fn demote_small(&mut self, hash: u64, loc: Loc, h: &Header) -> Option<bool> {
        let first = self.below.small.as_ref()?.first;
        if !first && !self.index.at_budget(hash) {
            self.below.small.as_mut()?.store.stats.index_room += 1;
            return None;
        }
        if !first && !self.small_dram_room() {
            self.below.small.as_mut()?.store.stats.deferred_dram += 1;
            return None;
        }
        let p = self.below.small.as_mut()?;
        let bytes = &self.segs[loc.seg as usize]
            .as_ref()
            .expect("live segment")
            .data[loc.off as usize..];
        let key = item::key_of(bytes);
        let value = &bytes[HEADER + key.len()..HEADER + key.len() + h.vlen as usize];
        let flash = self.below.log.tier().map(|f| &**f);
        match p.admit(h, key, value, self.clock_now, flash) {
            Admitted::Elsewhere => None,
            Admitted::Refused => {
                self.stats.not_demoted += 1;
                Some(false)
            }
            Admitted::Taken => {
                let size = h.size() as u64;
                self.index.remove(hash, loc);
                self.update_bits(loc, item::DEAD, 0);
                self.stats.curr_items -= 1;
                self.stats.bytes -= size;
                self.stats.demoted += 1;
                Some(true)
            }
        }
    }

    /// Before a change of `key`: whether the store needs blocks that are
    /// not in `fetched` to tell that it holds no copy of the key
    /// ([`SmallPart::check_needs_reads`]).
    pub(crate) fn small_check_needs_reads(&mut self, key: &[u8], fetched: &Fetched) -> bool {
        self.below.small_check_needs_reads(key, fetched)
    }

    /// Before a plain set of `key`: the reads of the store's blocks that
    /// [`small_check_needs_reads`](Self::small_check_needs_reads) will ask
    /// for ([`SmallPart::check_reads`]).
    pub(crate) fn small_check_reads(
        &mut self,
        key: &[u8],
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) {
        self.below.small_check_reads(key, fetched, reads);
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
            self.below.log.tier().map(|f| f.params().promote),
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

    /// Ahead of a change that replaces or deletes `key` whatever it holds:
    /// queues the key's invalidation in the store now
    /// ([`Chain::small_prepare`]).
    pub(crate) fn small_prepare(&mut self, key: &[u8], overwrite: bool) {
        self.below.small_prepare(key, overwrite);
    }

    /// A graceful stop: the store's open segment is written.
    pub fn write_small_buffer(&mut self) -> std::io::Result<()> {
        self.below.write_small_buffer()
    }
}
