//! The KLog index: one packed entry per object in the small store's flash
//! log (`set / buckets | page | tag:11 | hit:1`), partitioned by set, so
//! that every log object of a set is found in one bucket when the set is
//! rewritten. Entries of a bucket are in write order (newest last). An
//! entry takes as many bytes as the store's geometry needs (issue 32: 4 at
//! the server's 2 GiB file, where a fixed `16 | 20 | 11 | 1` layout took 6
//! and left the store's log objects dearer than the log tier's index
//! entries), at most 6.

/// Bits of key hash an entry keeps to tell keys of one set apart.
pub const TAG_BITS: u32 = 11;
/// Log pages an entry can name.
pub const MAX_PAGES: usize = 1 << 20;
/// Bits of `set / buckets` an entry can hold.
const MAX_HI_BITS: u32 = 16;

/// One log object, as the index knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogRef {
    pub set: u32,
    pub page: u32,
    pub tag: u16,
    pub hit: bool,
}

/// The tag of a key hash.
pub fn tag_of(hash: u64) -> u16 {
    ((hash >> 48) & ((1 << TAG_BITS) - 1)) as u16
}

/// Bits needed to write every number below `n`.
fn bits_below(n: usize) -> u32 {
    usize::BITS - n.saturating_sub(1).leading_zeros()
}

/// Gives back a bucket's spare capacity once it is over half empty: a
/// bucket's capacity would otherwise stay at the most it ever held, which
/// was most of the index's DRAM (spare capacity and vector headers: 9.7
/// bits per object of the store against 0.5 for the entries themselves).
fn shrink(b: &mut Vec<u8>, width: usize) {
    if b.capacity() > 2 * b.len() + 4 * width {
        b.shrink_to(b.len() + (b.len() / width / 4 + 1) * width);
    }
}

/// The buckets are allocated at the first entry (issue 32: a store the
/// choice never uses costs the index nothing). A bucket is a byte vector
/// of `width`-byte little-endian entries.
#[derive(Debug)]
pub struct LogIndex {
    buckets: Vec<Vec<u8>>,
    /// How many buckets there are once allocated.
    n: usize,
    /// Bits of the page field.
    page_bits: u32,
    /// Bytes of an entry.
    width: usize,
    len: usize,
}

impl LogIndex {
    /// An index of about `buckets` buckets for a store of `sets` sets and
    /// `pages` log pages (more buckets when needed, so that `set /
    /// buckets` fits 16 bits); its entries are as wide as these need.
    pub fn new(buckets: usize, sets: usize, pages: usize) -> LogIndex {
        let n = Self::bucket_count(buckets, sets);
        let page_bits = bits_below(pages).max(1);
        let hi_bits = bits_below(sets.div_ceil(n));
        debug_assert!(hi_bits <= MAX_HI_BITS && pages <= MAX_PAGES);
        let bits = hi_bits + page_bits + TAG_BITS + 1;
        LogIndex {
            buckets: Vec::new(),
            n,
            page_bits,
            width: bits.div_ceil(8) as usize,
            len: 0,
        }
    }

    /// Bytes of one entry.
    pub fn entry_bytes(&self) -> usize {
        self.width
    }

    fn bucket_count(buckets: usize, sets: usize) -> usize {
        buckets.max(sets.div_ceil(1 << 16)).max(1)
    }

    /// [`bytes`](Self::bytes) of `LogIndex::new(buckets, sets)` once it
    /// has held an entry, empty.
    pub fn start_bytes(buckets: usize, sets: usize) -> usize {
        Self::bucket_count(buckets, sets) * std::mem::size_of::<Vec<u8>>()
    }

    fn bucket(&self, set: u32) -> usize {
        set as usize % self.n
    }

    fn encode(&self, r: LogRef) -> u64 {
        let hi = (r.set as usize / self.n) as u64;
        debug_assert!(hi < 1 << MAX_HI_BITS, "set {} beyond the index", r.set);
        debug_assert!((r.page as u64) < 1 << self.page_bits, "page {}", r.page);
        hi << (self.page_bits + TAG_BITS + 1)
            | (r.page as u64) << (TAG_BITS + 1)
            | ((r.tag as u64) & ((1 << TAG_BITS) - 1)) << 1
            | r.hit as u64
    }

    fn decode(&self, b: usize, e: &[u8]) -> LogRef {
        let mut x = [0u8; 8];
        x[..e.len()].copy_from_slice(e);
        let v = u64::from_le_bytes(x);
        LogRef {
            set: ((v >> (self.page_bits + TAG_BITS + 1)) as usize * self.n + b) as u32,
            page: ((v >> (TAG_BITS + 1)) & ((1 << self.page_bits) - 1)) as u32,
            tag: ((v >> 1) & ((1 << TAG_BITS) - 1)) as u16,
            hit: v & 1 != 0,
        }
    }

    /// The entries of bucket `b`, as its bytes.
    fn entries(&self, b: usize) -> std::slice::ChunksExact<'_, u8> {
        let bucket: &[u8] = self.buckets.get(b).map_or(&[], |v| v.as_slice());
        bucket.chunks_exact(self.width)
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
        let e = self.encode(r).to_le_bytes();
        let w = self.width;
        let bucket = &mut self.buckets[b];
        if bucket.len() + w > bucket.capacity() {
            // An eighth more, not twice: doubling left much of the index's
            // DRAM spare (9.8 B per 6-byte entry in the test below, 8.0
            // with a quarter more); buckets hold about 60 entries each
            // (issue 32), so an eighth is a few entries at a time.
            bucket.reserve_exact((bucket.len() / w / 8 + 2) * w);
        }
        bucket.extend_from_slice(&e[..w]);
        self.len += 1;
    }

    /// The entries of a set, oldest first.
    pub fn of_set(&self, set: u32) -> impl DoubleEndedIterator<Item = LogRef> + '_ {
        let b = self.bucket(set);
        self.entries(b)
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
        let (b, w) = (self.bucket(set), self.width);
        let mut bucket = std::mem::take(&mut self.buckets[b]);
        let mut taken = Vec::new();
        let mut kept = 0;
        for i in (0..bucket.len()).step_by(w) {
            let r = self.decode(b, &bucket[i..i + w]);
            if r.set == set && drop(&r) {
                taken.push(r);
            } else {
                bucket.copy_within(i..i + w, kept);
                kept += w;
            }
        }
        bucket.truncate(kept);
        shrink(&mut bucket, w);
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
        let (b, w) = (self.bucket(set), self.width);
        for i in (0..self.buckets[b].len()).step_by(w) {
            let r = self.decode(b, &self.buckets[b][i..i + w]);
            if r.set == set && r.page == page && r.tag == tag {
                let e = self.encode(LogRef { hit: true, ..r }).to_le_bytes();
                self.buckets[b][i..i + w].copy_from_slice(&e[..w]);
            }
        }
    }

    /// DRAM bytes held (vectors' capacity and headers).
    pub fn bytes(&self) -> usize {
        self.buckets.len() * std::mem::size_of::<Vec<u8>>()
            + self.buckets.iter().map(|b| b.capacity()).sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills an index with `n` entries of random sets, one page per entry.
    fn filled(buckets: usize, sets: usize, pages: usize, n: u32) -> LogIndex {
        let mut ix = LogIndex::new(buckets, sets, pages);
        let mut x = 12345u64;
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ix.push(LogRef {
                set: ((x >> 33) % sets as u64) as u32,
                page: i % pages as u32,
                tag: (x >> 20) as u16 & 0x7ff,
                hit: false,
            });
        }
        ix
    }

    /// DRAM per entry of an index whose buckets hold a few dozen entries
    /// each, as the store's do (a bucket per two log pages): the entries'
    /// bytes, the buckets' headers, and spare capacity, below the log
    /// tier's index entry (7.1 B).
    #[test]
    fn an_index_holds_its_entries_in_little_more_than_their_bytes() {
        // 4-byte entries: 4 bits of set / buckets, 16 of page, 12 of tag and hit.
        let ix = filled(700, 8192, 40_000, 40_000);
        assert_eq!(ix.entry_bytes(), 4);
        let per_entry = ix.bytes() as f64 / ix.len() as f64;
        println!("{per_entry:.2} B per entry");
        assert!(per_entry < 5.0, "{per_entry:.2} B per entry");
        // The server's region of a 2 GiB file with two shards (half of it
        // the store's, a 10% log): 4 bytes an entry.
        let c = crate::small::SmallConfig::for_region(512 << 20, 10);
        let ix = LogIndex::new(c.log_buckets(), c.sets, c.log_pages());
        assert_eq!(ix.entry_bytes(), 4, "{c:?}");
        // The widest: 16 bits of set / buckets and 20 of page.
        assert_eq!(LogIndex::new(4, 4 << 16, MAX_PAGES).entry_bytes(), 6);
    }

    #[test]
    fn entries_pack_and_are_found_by_set_in_write_order() {
        // The largest set, page and tag an index of 4 buckets names, and
        // of narrower indexes.
        for (sets, pages) in [(4 << 16, MAX_PAGES), (1000, 3), (64, 1), (5, 17)] {
            let mut ix = LogIndex::new(4, sets, pages);
            let r = LogRef {
                set: sets as u32 - 1,
                page: pages as u32 - 1,
                tag: 0x7ff,
                hit: true,
            };
            ix.push(r);
            ix.push(LogRef {
                set: 0,
                page: 0,
                tag: 0,
                hit: false,
            });
            assert_eq!(ix.take_set(r.set), [r], "{sets} sets, {pages} pages");
            assert_eq!(ix.len(), 1);
        }
        let mut ix = LogIndex::new(4, 4 << 16, MAX_PAGES);
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
        assert!(!ix.of_set(1).next().unwrap().hit);
        assert_eq!(ix.remove_in_pages(1, 0..2), 2);
        assert!(!ix.contains(1, 0, 3) && ix.contains(1, 2, 3));
        assert_eq!(ix.take_set(1).len(), 1);
        assert_eq!((ix.len(), ix.count(5), ix.count(2)), (2, 1, 1));
    }

    /// Removing a set's entries keeps the others of its bucket, in order,
    /// and gives back spare capacity.
    #[test]
    fn removals_keep_the_rest_of_a_bucket_in_order() {
        let mut ix = filled(1, 64, 1000, 1000);
        let before: Vec<Vec<LogRef>> = (0..64).map(|s| ix.of_set(s).collect()).collect();
        let full = ix.bytes();
        for s in (0..64).step_by(2) {
            assert_eq!(ix.take_set(s), before[s as usize]);
        }
        for s in (1..64).step_by(2) {
            assert_eq!(ix.of_set(s).collect::<Vec<_>>(), before[s as usize]);
        }
        assert!(ix.bytes() < full * 3 / 4, "{} of {full} bytes", ix.bytes());
    }
}
