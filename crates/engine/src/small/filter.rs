//! The small-object store's DRAM per set: a Bloom filter of the keys the set
//! holds on flash (rebuilt whole at every set write, so it never needs a
//! delete), one hit bit per object place (folded into the objects' RRIP
//! values at the next set write) and the low 16 bits of the set's write
//! generation (a read that raced a rewrite of its set is detected). No
//! per-object pointer: the set of a key is a hash of the key. Nothing is
//! allocated until the first set holds a key (issue 32: a store the
//! choice never uses costs the index nothing).

/// Hash functions per key in a set's filter.
pub const PROBES: u32 = 3;

/// The per-set DRAM of a store with `sets` sets.
#[derive(Debug)]
pub struct SetFilters {
    sets: usize,
    words: usize,
    blooms: Vec<u64>,
    hits: Vec<u64>,
    gens: Vec<u16>,
}

impl SetFilters {
    /// `bits` of Bloom filter per set, rounded up to 64; every set empty,
    /// nothing allocated yet.
    pub fn new(sets: usize, bits: usize) -> SetFilters {
        SetFilters {
            sets,
            words: bits.div_ceil(64).max(1),
            blooms: Vec::new(),
            hits: Vec::new(),
            gens: Vec::new(),
        }
    }

    /// Whether any set has held a key (the arrays are allocated).
    pub fn allocated(&self) -> bool {
        !self.gens.is_empty()
    }

    /// Allocates the arrays (every set empty, generation 0).
    fn allocate(&mut self) {
        if !self.allocated() {
            self.blooms = vec![0; self.sets * self.words];
            self.hits = vec![0; self.sets];
            self.gens = vec![0; self.sets];
        }
    }

    fn bit_positions(&self, hash: u64) -> impl Iterator<Item = usize> {
        let bits = (self.words * 64) as u64;
        // Double hashing on the high half of the key hash (the set number
        // comes from the low half).
        let h1 = (hash >> 32) as u32 as u64;
        let h2 = ((hash >> 16) as u32 as u64) | 1;
        (0..PROBES as u64).map(move |i| ((h1.wrapping_add(i.wrapping_mul(h2))) % bits) as usize)
    }

    /// Whether the set may hold the key (false: it certainly does not).
    pub fn may_contain(&self, set: usize, hash: u64) -> bool {
        if !self.allocated() {
            return false;
        }
        let w = &self.blooms[set * self.words..(set + 1) * self.words];
        self.bit_positions(hash)
            .all(|p| w[p / 64] & (1 << (p % 64)) != 0)
    }

    /// Whether the set's block may hold an object: false when its filter
    /// is empty (the block holds none: every object of a set block is in
    /// its filter), so a rewrite need not read it.
    pub fn holds_any(&self, set: usize) -> bool {
        self.allocated()
            && self.blooms[set * self.words..(set + 1) * self.words]
                .iter()
                .any(|&w| w != 0)
    }

    /// The set was written with these keys (their hashes) and generation.
    /// Before the arrays are allocated, an empty set's rebuild is not
    /// recorded: no lookup reads a set its filter rules out, and only
    /// those read its generation.
    pub fn rebuild(&mut self, set: usize, hashes: impl Iterator<Item = u64>, generation: u64) {
        let mut w = vec![0u64; self.words];
        let mut any = false;
        for h in hashes {
            any = true;
            for p in self.bit_positions(h) {
                w[p / 64] |= 1 << (p % 64);
            }
        }
        if !any && !self.allocated() {
            return;
        }
        self.allocate();
        self.blooms[set * self.words..(set + 1) * self.words].copy_from_slice(&w);
        self.hits[set] = 0;
        self.gens[set] = generation as u16;
    }

    /// Records a hit on the object at `place` in the set.
    pub fn hit(&mut self, set: usize, place: usize) {
        if place < 64 && self.allocated() {
            self.hits[set] |= 1 << place;
        }
    }

    /// The set's hit bits, one per place (bit i: the object at place i).
    pub fn hits(&self, set: usize) -> u64 {
        self.hits.get(set).copied().unwrap_or(0)
    }

    pub fn was_hit(&self, set: usize, place: usize) -> bool {
        place < 64 && self.hits(set) & (1 << place) != 0
    }

    /// The low 16 bits of the generation the set was last written at.
    pub fn generation(&self, set: usize) -> u16 {
        self.gens.get(set).copied().unwrap_or(0)
    }

    /// DRAM bytes held (none until a set holds a key).
    pub fn bytes(&self) -> usize {
        self.blooms.len() * 8 + self.hits.len() * 8 + self.gens.len() * 2
    }

    /// [`bytes`](Self::bytes) of `SetFilters::new(sets, bits)` once a set
    /// holds a key.
    pub fn bytes_for(sets: usize, bits: usize) -> usize {
        sets * (bits.div_ceil(64).max(1) * 8 + 8 + 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use xxhash_rust::xxh3::xxh3_64;

    #[test]
    fn a_filter_has_no_false_negatives_and_few_false_positives() {
        let mut f = SetFilters::new(4, 128);
        let keys: Vec<u64> = (0..26)
            .map(|i| xxh3_64(format!("key{i}").as_bytes()))
            .collect();
        f.rebuild(1, keys.iter().copied(), 5);
        assert!(keys.iter().all(|&h| f.may_contain(1, h)));
        assert!(
            keys.iter().all(|&h| !f.may_contain(0, h)),
            "other sets stay empty"
        );
        let fp = (0..10_000)
            .filter(|i| f.may_contain(1, xxh3_64(format!("other{i}").as_bytes())))
            .count();
        // 26 keys in 128 bits with 3 probes: about 11%.
        assert!(fp < 2000, "false positives {fp} of 10000");
        // A rebuild forgets the old keys and the hit bits.
        f.hit(1, 3);
        assert!(f.was_hit(1, 3));
        f.rebuild(1, std::iter::empty(), 6);
        assert!(!f.was_hit(1, 3) && f.generation(1) == 6);
        assert!(keys.iter().all(|&h| !f.may_contain(1, h)));
    }

    #[test]
    fn filters_take_no_dram_until_a_set_holds_a_key() {
        let mut f = SetFilters::new(1000, 128);
        assert_eq!(f.bytes(), 0);
        // Empty sets (a recovery's scan) allocate nothing.
        f.rebuild(7, std::iter::empty(), 3);
        assert_eq!(f.bytes(), 0);
        f.hit(7, 1);
        assert!(!f.may_contain(7, 42) && f.hits(7) == 0 && f.generation(7) == 0);
        f.rebuild(7, [42u64 << 32].into_iter(), 4);
        assert_eq!(f.bytes(), SetFilters::bytes_for(1000, 128));
        assert!(f.may_contain(7, 42 << 32) && f.generation(7) == 4);
    }
}
