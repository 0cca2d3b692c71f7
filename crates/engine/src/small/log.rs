//! The KLog index: one packed 8-byte entry per object in the small store's
//! flash log (`set:32 | page:20 | tag:11 | hit:1`), partitioned by set, so
//! that every log object of a set is found in one bucket when the set is
//! rewritten. Entries of a bucket are in write order (newest last).

/// Bits of key hash an entry keeps to tell keys of one set apart.
pub const TAG_BITS: u32 = 11;
/// Log pages an entry can name.
pub const MAX_PAGES: usize = 1 << 20;

/// One log object, as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRef {
    pub set: u32,
    pub page: u32,
    pub tag: u16,
    pub hit: bool,
}

impl LogRef {
    fn pack(self) -> u64 {
        (self.set as u64) << 32
            | (self.page as u64) << 12
            | ((self.tag as u64) & ((1 << TAG_BITS) - 1)) << 1
            | self.hit as u64
    }

    fn unpack(e: u64) -> LogRef {
        LogRef {
            set: (e >> 32) as u32,
            page: ((e >> 12) & (MAX_PAGES as u64 - 1)) as u32,
            tag: ((e >> 1) & ((1 << TAG_BITS) - 1)) as u16,
            hit: e & 1 != 0,
        }
    }
}

/// The tag of a key hash.
pub fn tag_of(hash: u64) -> u16 {
    ((hash >> 48) & ((1 << TAG_BITS) - 1)) as u16
}

/// Gives back a bucket's spare capacity once it is over half empty: a
/// bucket's capacity would otherwise stay at the most it ever held, which
/// was most of the index's DRAM (spare capacity and vector headers: 9.7
/// bits per object of the store against 0.5 for the entries themselves).
fn shrink(b: &mut Vec<u64>) {
    if b.capacity() > 2 * b.len() + 4 {
        b.shrink_to(b.len() + b.len() / 4 + 1);
    }
}

#[derive(Debug)]
pub struct LogIndex {
    buckets: Vec<Vec<u64>>,
    len: usize,
}

impl LogIndex {
    pub fn new(buckets: usize) -> LogIndex {
        LogIndex {
            buckets: vec![Vec::new(); buckets.max(1)],
            len: 0,
        }
    }

    fn bucket(&self, set: u32) -> usize {
        set as usize % self.buckets.len()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, r: LogRef) {
        let b = self.bucket(r.set);
        self.buckets[b].push(r.pack());
        self.len += 1;
    }

    /// The entries of a set, oldest first.
    pub fn of_set(&self, set: u32) -> impl DoubleEndedIterator<Item = LogRef> + '_ {
        self.buckets[self.bucket(set)]
            .iter()
            .map(|&e| LogRef::unpack(e))
            .filter(move |r| r.set == set)
    }

    /// How many entries a set has.
    pub fn count(&self, set: u32) -> usize {
        self.of_set(set).count()
    }

    /// Removes every entry of a set; returns them, oldest first.
    pub fn take_set(&mut self, set: u32) -> Vec<LogRef> {
        let b = self.bucket(set);
        let mut taken = Vec::new();
        self.buckets[b].retain(|&e| {
            let r = LogRef::unpack(e);
            let keep = r.set != set;
            if !keep {
                taken.push(r);
            }
            keep
        });
        self.len -= taken.len();
        shrink(&mut self.buckets[b]);
        taken
    }

    /// Removes the entries of one set that point into `pages`.
    pub fn remove_in_pages(&mut self, set: u32, pages: std::ops::Range<u32>) -> usize {
        let b = self.bucket(set);
        let before = self.buckets[b].len();
        self.buckets[b].retain(|&e| {
            let r = LogRef::unpack(e);
            r.set != set || !pages.contains(&r.page)
        });
        let n = before - self.buckets[b].len();
        self.len -= n;
        shrink(&mut self.buckets[b]);
        n
    }

    /// Whether an entry of this set, page and tag is still indexed.
    pub fn contains(&self, set: u32, page: u32, tag: u16) -> bool {
        self.of_set(set).any(|r| r.page == page && r.tag == tag)
    }

    /// Marks the entries of (set, page, tag) hit.
    pub fn mark_hit(&mut self, set: u32, page: u32, tag: u16) {
        let b = self.bucket(set);
        for e in self.buckets[b].iter_mut() {
            let r = LogRef::unpack(*e);
            if r.set == set && r.page == page && r.tag == tag {
                *e = LogRef { hit: true, ..r }.pack();
            }
        }
    }

    /// DRAM bytes held (vectors' capacity and headers).
    pub fn bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Vec<u64>>()
            + self.buckets.iter().map(|b| b.capacity() * 8).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_pack_and_are_found_by_set_in_write_order() {
        let r = LogRef {
            set: u32::MAX,
            page: MAX_PAGES as u32 - 1,
            tag: 0x7ff,
            hit: true,
        };
        assert_eq!(LogRef::unpack(r.pack()), r);
        let mut ix = LogIndex::new(4);
        for (set, page) in [(1, 0), (5, 0), (1, 1), (2, 1), (1, 2)] {
            ix.push(LogRef {
                set,
                page,
                tag: 3,
                hit: false,
            });
        }
        assert_eq!(ix.of_set(1).map(|r| r.page).collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(ix.count(5), 1);
        ix.mark_hit(1, 1, 3);
        assert!(ix.of_set(1).nth(1).unwrap().hit);
        assert_eq!(ix.remove_in_pages(1, 0..2), 2);
        assert!(!ix.contains(1, 0, 3) && ix.contains(1, 2, 3));
        assert_eq!(ix.take_set(1).len(), 1);
        assert_eq!((ix.len(), ix.count(5), ix.count(2)), (2, 1, 1));
    }
}
