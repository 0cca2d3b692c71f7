//! The store's tombstones (docs/SMALL.md, "Changes of held keys"): a
//! change of a key the store holds is made durable by a tombstone in the
//! crash journal (its group commit) instead of a set rewrite: "objects of
//! this fingerprint in blocks of this region written at generation `gen`
//! or before are dead". The store keeps each in DRAM, applies it to reads,
//! drops the dead objects whenever it rewrites their set anyway, and
//! retires it (here and in the journal) once that set write is durable.
//!
//! The fingerprint is the low 32 bits of the key's hash, of which the set
//! is a function ([`set_of`]), so the tombstones of a set are one range of
//! the table and a tombstone recovered from the journal (no key) still
//! names its set. Keys of a set sharing the fingerprint are dropped too: a
//! miss, never a wrong value.

use super::store::SmallStore;
use crate::flash::journal::Journal;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A key's tombstone fingerprint (of its xxh3 hash).
pub(super) fn fp_of(h: u64) -> u32 {
    h as u32
}

/// The set of keys with this fingerprint ([`super::store::place`]'s rule).
#[cfg(test)]
pub(super) fn set_of(fp: u32, sets: usize) -> u32 {
    super::store::place_fp(fp, sets)
}

/// The first fingerprint of `set`.
fn first_fp(set: u32, sets: usize) -> u64 {
    (u64::from(set) << 32).div_ceil(sets as u64)
}

/// One tombstone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tomb {
    /// Objects of blocks written at this generation or before are dead.
    pub gen: u64,
    /// The journal ticket that makes it durable (0: durable already).
    pub ticket: u64,
    /// The change went ahead: reads no longer see the dead objects.
    pub applied: bool,
    /// The key was admitted again since (a newer copy may be on flash
    /// above `gen`): a next change needs a new tombstone.
    pub readmitted: bool,
}

/// The tombstones of one region, by fingerprint.
#[derive(Default)]
pub(super) struct Tombs {
    map: BTreeMap<u32, Tomb>,
}

impl Tombs {
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The fingerprints, in order (so their sets are too).
    pub fn fps(&self) -> impl Iterator<Item = u32> + '_ {
        self.map.keys().copied()
    }

    pub fn get(&self, fp: u32) -> Option<&Tomb> {
        self.map.get(&fp)
    }

    pub fn get_mut(&mut self, fp: u32) -> Option<&mut Tomb> {
        self.map.get_mut(&fp)
    }

    pub fn put(&mut self, fp: u32, t: Tomb) {
        self.map.insert(fp, t);
    }

    /// Whether an object of fingerprint `fp` in a block written at `gen`
    /// is dead for reads (an applied tombstone covers it).
    pub fn kills(&self, fp: u32, gen: u64) -> bool {
        self.map.get(&fp).is_some_and(|t| t.applied && gen <= t.gen)
    }

    /// Whether a set rewrite must leave it out: any tombstone covers it
    /// (one whose change has not gone ahead yet too: a miss meanwhile).
    pub fn covers(&self, fp: u32, gen: u64) -> bool {
        self.map.get(&fp).is_some_and(|t| gen <= t.gen)
    }

    /// A key of fingerprint `fp` admitted again.
    pub fn readmitted(&mut self, fp: u32) {
        if let Some(t) = self.map.get_mut(&fp) {
            t.readmitted = true;
        }
    }

    /// The tombstones of `set` (fingerprint, generation).
    pub fn of_set(&self, set: u32, sets: usize) -> Vec<(u32, u64)> {
        let lo = first_fp(set, sets);
        let hi = first_fp(set + 1, sets);
        if lo >= hi || lo > u64::from(u32::MAX) {
            return Vec::new();
        }
        let hi = (hi - 1).min(u64::from(u32::MAX)) as u32;
        self.map
            .range(lo as u32..=hi)
            .map(|(&fp, t)| (fp, t.gen))
            .collect()
    }

    /// A rewrite of their set left these out and is durable: those not
    /// replaced since are retired (returned, for the journal).
    pub fn retire(&mut self, dead: &[(u32, u64)]) -> Vec<(u32, u64)> {
        let mut out = Vec::new();
        for &(fp, gen) in dead {
            if self.map.get(&fp).is_some_and(|t| t.gen == gen) {
                self.map.remove(&fp);
                out.push((fp, gen));
            }
        }
        out
    }

    /// Every tombstone (fingerprint, generation), emptying the table.
    pub fn take_all(&mut self) -> Vec<(u32, u64)> {
        std::mem::take(&mut self.map)
            .into_iter()
            .map(|(fp, t)| (fp, t.gen))
            .collect()
    }

    /// The highest generation of any tombstone.
    pub fn max_gen(&self) -> u64 {
        self.map.values().map(|t| t.gen).max().unwrap_or(0)
    }

    /// DRAM of the table: a B-tree node's share per entry (about 1.5 times
    /// its key and value).
    pub fn bytes(&self) -> usize {
        self.map.len() * (std::mem::size_of::<(u32, Tomb)>() * 3 / 2)
    }
}

impl SmallStore {
    /// Changes of keys the store holds are made durable by tombstones in
    /// this crash journal from now on (with a background flusher); `live`
    /// are the region's tombstones the journal held at start, which
    /// [`attach`](Self::attach) applied.
    pub fn set_journal(&mut self, journal: Arc<Journal>) {
        self.journal = Some(journal);
    }

    /// Tombstones whose set is not rewritten yet.
    pub fn tombstones_live(&self) -> u64 {
        self.tombs.len() as u64
    }

    /// Before a plain overwrite of `key` (its hash `h`), when a copy of it
    /// may be on flash: Some(whether the change must wait) when a tombstone
    /// in the crash journal makes it durable, asked for now if need be (the
    /// flash tier's wakers fire at the journal's commit); None when the
    /// change must rewrite the key's set instead (no journal, a sealed
    /// segment holds the key, or too many tombstones are live).
    pub(super) fn tomb_ask(&mut self, key: &[u8], h: u64) -> Option<bool> {
        let journal = self.journal.clone().filter(|j| !j.failed())?;
        // A sealed copy of the key is written at a generation its job's
        // plan gives it, which may come after the tombstone's. (A job
        // planned already writes its sets at generations it took before,
        // at or below the tombstone's, which covers the key's copies there
        // too; one planned later leaves the covered objects out; a dropped
        // set's covered objects are not readmitted.)
        if self.jobs.iter().any(|j| j.seals(h, key)) {
            return None;
        }
        let fp = fp_of(h);
        if let Some(t) = self.tombs.get(fp).filter(|t| !t.readmitted) {
            return Some(!t.applied && !journal.is_durable(t.ticket));
        }
        let (live, room) = journal.small_load();
        // Past its share of the journal's room, a change rewrites its set
        // again.
        let cap = room / self.parts.max(1) as usize;
        if self.tombs.len() >= cap || live >= room {
            return None;
        }
        // Every block written so far is at or below this generation; every
        // later one is above it, and leaves the key's older copies out.
        let gen = self.generation;
        let ticket = journal.add_small(self.part, fp, gen);
        self.tombs.put(
            fp,
            Tomb {
                gen,
                ticket,
                applied: false,
                readmitted: false,
            },
        );
        self.stats.tombstones += 1;
        Some(!journal.is_durable(ticket))
    }

    /// The change of `key` goes ahead: its durable tombstone (if it has
    /// one) now hides the key's older copies from reads.
    pub(super) fn tomb_apply(&mut self, h: u64) {
        if let Some(t) = self.tombs.get_mut(fp_of(h)) {
            if !t.readmitted {
                t.applied = true;
            }
        }
    }

    /// A set write that left these tombstones' objects out is durable.
    pub(super) fn retire_tombs(&mut self, dead: &[(u32, u64)]) {
        if dead.is_empty() {
            return;
        }
        let gone = self.tombs.retire(dead);
        self.stats.tombstones_retired += gone.len() as u64;
        if let Some(j) = &self.journal {
            for (fp, gen) in gone {
                j.retire_small(self.part, fp, gen);
            }
        }
    }

    /// Every tombstone retired (the region's floor or nonce, durable,
    /// covers their objects).
    pub(super) fn retire_all_tombs(&mut self) {
        let all = self.tombs.take_all();
        self.stats.tombstones_retired += all.len() as u64;
        if let Some(j) = &self.journal {
            for (fp, gen) in all {
                j.retire_small(self.part, fp, gen);
            }
        }
    }

    /// Rewrites the sets of every tombstone, durably, retiring them (at a
    /// start without a crash journal to keep them).
    pub fn settle_tombs(&mut self) -> std::io::Result<()> {
        let mut sets: Vec<u32> = self
            .tombs
            .fps()
            .map(|fp| super::store::place_fp(fp, self.cfg.sets))
            .collect();
        sets.dedup();
        for chunk in sets.chunks(256) {
            self.rewrite_sets(chunk, &[], &Default::default(), true)?;
        }
        Ok(())
    }

    /// At start: the region's tombstones the journal holds, applied (their
    /// changes went ahead before the stop or crash). Whether a copy of
    /// their keys was admitted after them is not known: as if one was (a
    /// next change of the key asks for a tombstone of its own).
    pub(super) fn load_tombs(&mut self, live: &[(u32, u64)]) {
        for &(fp, gen) in live {
            self.tombs.put(
                fp,
                Tomb {
                    gen,
                    ticket: 0,
                    applied: true,
                    readmitted: true,
                },
            );
        }
        // Blocks written from now on are above every tombstone.
        self.generation = self.generation.max(self.tombs.max_gen() + 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sets_tombstones_are_its_fingerprints_range() {
        let sets = 1000;
        let mut t = Tombs::default();
        let fps: Vec<u32> = (0..5000u64)
            .map(|i| fp_of(i.wrapping_mul(0x9E37_79B9_7F4A_7C15)))
            .collect();
        for (i, &fp) in fps.iter().enumerate() {
            t.put(
                fp,
                Tomb {
                    gen: i as u64,
                    ticket: 0,
                    applied: true,
                    readmitted: false,
                },
            );
        }
        let mut seen = 0;
        for set in 0..sets as u32 {
            for (fp, _) in t.of_set(set, sets) {
                assert_eq!(set_of(fp, sets), set);
                seen += 1;
            }
        }
        assert_eq!(seen, t.len());
    }
}
