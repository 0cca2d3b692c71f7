//! Crash safety on the shard's side: the journal gate and the permission
//! it grants, tombstones, and the index rebuilt from flash after a crash.

use super::*;

/// Permission to change one key, from [`Shard::journal_gate`] in the same
/// lock hold: the crash journal has made durable every tombstone the change
/// needs. The methods that change or delete an item ask for it, so a front
/// end cannot change a key that may have records on flash without the gate
/// (which would let a crash bring the old value back). Only the engine
/// makes one.
#[derive(Debug)]
pub struct Allowed {
    pub(super) hash: u64,
    /// The small-object store held the key (it no longer does).
    pub(crate) small_found: bool,
}

impl Allowed {
    /// In debug builds: the permission is for the key at `loc`.
    pub(super) fn check(&self, shard: &Shard, loc: Loc) {
        debug_assert_eq!(
            self.hash,
            hash_key(shard.key(loc)),
            "allowed for another key"
        );
    }
}

/// Crash safety (see flash::journal): tombstones before changes, and the
/// index rebuilt from flash after a crash.
impl Shard {
    /// Asks the journal for a tombstone over every record of `hash`'s key
    /// appended so far; returns its ticket (0 without a flash tier).
    pub(super) fn tombstone(&mut self, hash: u64) -> u64 {
        let class = self.class_of(hash);
        self.below.log.tombstone(class)
    }

    /// Call before changing or deleting `key` (in the same lock hold as the
    /// change): the permission the changing methods ask for
    /// ([`Allowed`]), when the change may go ahead. None when a tombstone
    /// for records of the key on flash is not durable yet; it has been asked
    /// for, and the request must be retried (the flash tier's waker fires
    /// when the journal commits). Always allowed without a flash tier.
    pub fn journal_gate(&mut self, key: &[u8], hash: u64) -> Option<Allowed> {
        if !self.journal_gate_ahead(key, hash) {
            return None;
        }
        let small_found = self.below.gate_small(key)?;
        Some(Allowed { hash, small_found })
    }

    /// The crash journal's part of [`journal_gate`](Self::journal_gate)
    /// alone: asks for the tombstones a change of `key` needs; true once
    /// they are durable. For asking ahead of a change (the small store's
    /// part drops the key's copy, which only the change itself may do).
    pub fn journal_gate_ahead(&mut self, key: &[u8], hash: u64) -> bool {
        if self.below.log.tier().is_some() {
            let old = self.find_any(key, hash);
            let on_flash = self.flash_candidates(hash);
            if !self.journal_gate_at(hash, old, &on_flash) {
                return false;
            }
        }
        true
    }

    /// [`journal_gate`](Self::journal_gate) given the key's RAM item and
    /// its flash candidates: the log's part of the gate
    /// ([`LogPart::gate`](crate::stores::log::LogPart::gate)). A RAM item
    /// promoted from flash (the copy bit) may still have its record there:
    /// it needs a tombstone, which covers the record from then on, so the
    /// bit is cleared.
    pub(super) fn journal_gate_at(
        &mut self,
        hash: u64,
        old: Option<Loc>,
        on_flash: &[Loc],
    ) -> bool {
        let copy = match self.below.log.journals() {
            true => old.filter(|&loc| self.header(loc).bits & item::FLASH_COPY != 0),
            false => None,
        };
        let class = self.class_of(hash);
        let passed = self.below.log.gate(class, on_flash, copy.is_some());
        if let Some(loc) = copy {
            self.update_bits(loc, 0, item::FLASH_COPY);
        }
        passed
    }

    /// Crash recovery: indexes a record found on flash. Returns true when
    /// other flash entries already sit under the key's tag: one of them may
    /// be another record of the same key (a copy promoted to RAM and later
    /// written to flash again leaves its first record on the device, with
    /// the same value), so [`dedupe_recovered`](Self::dedupe_recovered)
    /// must run for `hash` once every record is indexed.
    pub fn recover_flash(&mut self, hash: u64, loc: Loc) -> bool {
        let shared_tag = !self.flash_candidates(hash).is_empty();
        self.stats.curr_items += 1;
        self.stats.flash_items += 1;
        self.stats.total_items += 1;
        self.index_insert(hash, loc);
        shared_tag
    }

    /// After crash recovery, for a tag that
    /// [`recover_flash`](Self::recover_flash) reported shared: keeps, of
    /// each key, only the record of the newest segment
    /// ([`LogPart::dedupe`](crate::stores::log::LogPart::dedupe)). Returns
    /// the entries found stale.
    pub fn dedupe_recovered(&mut self, hash: u64) -> u64 {
        let mut dropped = crate::stores::log::Dropped::default();
        let stale = self.below.log.dedupe(&mut self.index, hash, &mut dropped);
        self.stats.curr_items -= dropped.entries;
        self.stats.flash_items -= dropped.entries;
        stale
    }
}
