//! The store's side of its tombstones ([`super::tomb`]): the journal it
//! writes them to, asking for one on a change of a held key, applying
//! them to reads and rewrites, and retiring them once their set is
//! durable. Kept apart from `tomb.rs`, the table itself, so that the
//! table (which the set and flush code consult) imports nothing of the
//! store.

use super::store::SmallStore;
use super::tomb::{fp_of, Tomb};
use crate::flash::journal::Journal;
use std::sync::Arc;

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
            .map(|fp| super::tomb::place_fp(fp, self.cfg.sets))
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
