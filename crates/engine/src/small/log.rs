//! The KLog index: one packed 6-byte entry per object in the small store's
//! flash log (`set / buckets:16 | page:20 | tag:11 | hit:1`), partitioned by set, so
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

/// An entry as a bucket holds it, 6 bytes little-endian: `set / buckets:16
/// | page:20 | tag:11 | hit:1` (the bucket is `set % buckets`, so the rest
/// of the set number is known from it).
type Entry = [u8; 6];

/// The tag of a key hash.
pub fn tag_of(hash: u64) -> u16 {
    ((hash >> 48) & ((1 << TAG_BITS) - 1)) as u16
}

/// Gives back a bucket's spare capacity once it is over half empty: a
/// bucket's capacity would otherwise stay at the most it ever held, which
/// was most of the index's DRAM (spare capacity and vector headers: 9.7
/// bits per object of the store against 0.5 for the entries themselves).
fn shrink(b: &mut Vec<Entry>) {
    if b.capacity() > 2 * b.len() + 4 {
        b.shrink_to(b.len() + b.len() / 4 + 1);
    }
}

/// The buckets are allocated at the first entry (issue 32: a store the
/// choice never uses costs the index nothing).
#[derive(Debug)]
pub struct LogIndex {
    buckets: Vec<Vec<Entry>>,
    /// How many buckets there are once allocated.
    n: usize,
    len: usize,
}

impl LogIndex {
    /// An index of about `buckets` buckets for a store of `sets` sets
    /// (more buckets when needed, so that `set / buckets` fits 16 bits).
    pub fn new(buckets: usize, sets: usize) -> LogIndex {
        LogIndex {
            buckets: Vec::new(),
            n: Self::bucket_count(buckets, sets),
            len: 0,
        }
    }

    fn bucket_count(buckets: usize, sets: usize) -> usize {
        buckets.max(sets.div_ceil(1 << 16)).max(1)
    }

    /// [`bytes`](Self::bytes) of `LogIndex::new(buckets, sets)` once it
    /// has held an entry, empty.
    pub fn start_bytes(buckets: usize, sets: usize) -> usize {
        Self::bucket_count(buckets, sets) * std::mem::size_of::<Vec<Entry>>()
    }

    fn bucket(&self, set: u32) -> usize {
        set as usize % self.n
    }

    fn encode(&self, r: LogRef) -> Entry {
        let hi = (r.set as usize / self.n) as u64;
        debug_assert!(hi < 1 << 16, "set {} beyond the index", r.set);
        let v = hi << 32
            | (r.page as u64) << 12
            | ((r.tag as u64) & ((1 << TAG_BITS) - 1)) << 1
            | r.hit as u64;
        v.to_le_bytes()[..6].try_into().expect("6 bytes")
    }

    fn decode(&self, b: usize, e: &Entry) -> LogRef {
        let mut x = [0u8; 8];
        x[..6].copy_from_slice(e);
        let v = u64::from_le_bytes(x);
        LogRef {
            set: ((v >> 32) as usize * self.n + b) as u32,
            page: ((v >> 12) & (MAX_PAGES as u64 - 1)) as u32,
            tag: ((v >> 1) & ((1 << TAG_BITS) - 1)) as u16,
            hit: v & 1 != 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn push(&mut self, r: LogRef) {
        if self.buckets.is_empty() {
            self.buckets = vec![Vec::new(); self.n];
        }
        let b = self.bucket(r.set);
        let e = self.encode(r);
        let bucket = &mut self.buckets[b];
        if bucket.len() == bucket.capacity() {
            // An eighth more, not twice: doubling left much of the index's
            // DRAM spare (9.8 B per 6-byte entry in the test below, 8.0
            // with a quarter more); buckets hold about 60 entries each
            // (issue 32), so an eighth is a few entries at a time.
            bucket.reserve_exact(bucket.len() / 8 + 2);
        }
        bucket.push(e);
        self.len += 1;
    }

    /// The entries of a set, oldest first.
    pub fn of_set(&self, set: u32) -> impl DoubleEndedIterator<Item = LogRef> + '_ {
        let b = self.bucket(set);
        let bucket: &[Entry] = self.buckets.get(b).map_or(&[], |v| v.as_slice());
        bucket
            .iter()
            .map(move |e| self.decode(b, e))
            .filter(move |r| r.set == set)
    }

    /// How many entries a set has.
    pub fn count(&self, set: u32) -> usize {
        self.of_set(set).count()
    }

    /// Removes the entries of `set` for which `drop` holds; returns them,
    /// oldest first.
    fn remove_where(&mut self, set: u32, mut drop: impl FnMut(&LogRef) -> bool) -> Vec<LogRef> {
        if self.buckets.is_empty() {
            return Vec::new();
        }
        let b = self.bucket(set);
        let mut bucket = std::mem::take(&mut self.buckets[b]);
        let mut taken = Vec::new();
        bucket.retain(|e| {
            let r = self.decode(b, e);
            let gone = r.set == set && drop(&r);
            if gone {
                taken.push(r);
            }
            !gone
        });
        shrink(&mut bucket);
        self.buckets[b] = bucket;
        self.len -= taken.len();
        taken
    }

    /// Removes every entry of a set; returns them, oldest first.
    pub fn take_set(&mut self, set: u32) -> Vec<LogRef> {
        self.remove_where(set, |_| true)
    }

    /// Removes the entries of one set that point into `pages`.
    pub fn remove_in_pages(&mut self, set: u32, pages: std::ops::Range<u32>) -> usize {
        self.remove_where(set, |r| pages.contains(&r.page)).len()
    }

    /// Whether an entry of this set, page and tag is still indexed.
    pub fn contains(&self, set: u32, page: u32, tag: u16) -> bool {
        self.of_set(set).any(|r| r.page == page && r.tag == tag)
    }

    /// Marks the entries of (set, page, tag) hit.
    pub fn mark_hit(&mut self, set: u32, page: u32, tag: u16) {
        if self.buckets.is_empty() {
            return;
        }
        let b = self.bucket(set);
        for i in 0..self.buckets[b].len() {
            let r = self.decode(b, &self.buckets[b][i]);
            if r.set == set && r.page == page && r.tag == tag {
                self.buckets[b][i] = self.encode(LogRef { hit: true, ..r });
            }
        }
    }

    /// DRAM bytes held (vectors' capacity and headers).
    pub fn bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Vec<Entry>>()
            + self
                .buckets
                .iter()
                .map(|b| b.capacity() * std::mem::size_of::<Entry>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DRAM per entry of an index whose buckets hold a few dozen entries
    /// each, as the store's do (a bucket per two log pages): the entries'
    /// 6 B, the buckets' headers, and spare capacity, below the log tier's
    /// index entry (7.1 B).
    #[test]
    fn an_index_holds_its_entries_in_little_more_than_their_bytes() {
        let (buckets, sets) = (700, 8192);
        let mut ix = LogIndex::new(buckets, sets);
        let mut x = 12345u64;
        for page in 0..40_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ix.push(LogRef {
                set: ((x >> 33) % sets as u64) as u32,
                page: page % MAX_PAGES as u32,
                tag: (x >> 20) as u16 & 0x7ff,
                hit: false,
            });
        }
        let per_entry = ix.bytes() as f64 / ix.len() as f64;
        println!("{per_entry:.2} B per entry");
        assert!(per_entry < 7.0, "{per_entry:.2} B per entry");
    }

    #[test]
    fn entries_pack_and_are_found_by_set_in_write_order() {
        // The largest set, page and tag an index of 4 buckets names.
        let mut ix = LogIndex::new(4, 4 << 16);
        let r = LogRef {
            set: (4 << 16) - 1,
            page: MAX_PAGES as u32 - 1,
            tag: 0x7ff,
            hit: true,
        };
        ix.push(r);
        assert_eq!(ix.take_set(r.set), [r]);
        assert!(ix.is_empty());
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
