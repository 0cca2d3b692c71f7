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

use std::collections::BTreeMap;

/// A key's tombstone fingerprint (of its xxh3 hash).
pub(super) fn fp_of(h: u64) -> u32 {
    h as u32
}

/// The set of keys with this fingerprint ([`super::store::place`]'s rule).
#[cfg(test)]
pub(super) fn set_of(fp: u32, sets: usize) -> u32 {
    place_fp(fp, sets)
}

/// The set of a key whose hash's low 32 bits are `low` (its fingerprint):
/// the store places keys by it, so a tombstone names its set.
pub(super) fn place_fp(low: u32, sets: usize) -> u32 {
    ((u64::from(low) * sets as u64) >> 32) as u32
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
