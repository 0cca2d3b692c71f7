//! Flash records a request needs before it can run. A connection collects
//! them while probing the request's keys, reads them all at once, and runs
//! the request when every read has completed; the records are verified here
//! (sequence number and CRC-32C) before anyone looks at them. A verified
//! record stays in the buffer the device read it into, and the reply is
//! copied straight from there.

use super::format::{self, RecordError};
use super::stats::TierStats;
use crate::device::aligned::{round_up, AlignedBuf, BLOCK};
use crate::index::Loc;
use std::ops::{Deref, Range};
use std::sync::atomic::Ordering;

/// Items at least this large are served from the buffer they were read
/// into; smaller ones are copied out of it.
const KEEP_BUFFER_FROM: usize = BLOCK / 2;

/// A device read to issue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadReq {
    /// Position in the [`Fetched`] list; hand it back to [`Fetched::complete`].
    pub slot: usize,
    pub dev: usize,
    pub offset: u64,
    pub len: usize,
}

/// A verified item's bytes (RAM layout: header, key, value), where they
/// already are: in the buffer a device read filled, or copied out of a
/// write buffer.
#[derive(Debug)]
pub struct ItemBytes {
    held: Held,
    range: Range<usize>,
}

#[derive(Debug)]
enum Held {
    Read(AlignedBuf),
    Copied(Vec<u8>),
}

impl ItemBytes {
    fn copied(item: Vec<u8>) -> ItemBytes {
        ItemBytes {
            range: 0..item.len(),
            held: Held::Copied(item),
        }
    }
}

impl Deref for ItemBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        let all = match &self.held {
            Held::Read(b) => b.as_slice(),
            Held::Copied(v) => v,
        };
        &all[self.range.clone()]
    }
}

#[derive(Debug)]
pub enum FetchState {
    Pending,
    /// The verified item.
    Item(ItemBytes),
    /// Unreadable or not what the index expected: a miss.
    Bad,
    /// A whole 4 KiB block of the small-object store, as read: its reader
    /// verifies it (`small::format::check`, generation, full key).
    Block(AlignedBuf),
}

#[derive(Debug)]
struct Entry {
    loc: Loc,
    /// The sequence number the record must carry.
    seq: u64,
    /// The one [`Fetched::item_seq`] reports: `seq`, except for a record
    /// read from an item's capacity copy on behalf of its entry `loc`
    /// (the entry's own segment's number: the copy stands for it).
    shown_seq: u64,
    dev: usize,
    offset: u64,
    skew: usize,
    state: FetchState,
    started: std::time::Instant,
    /// Read from a copy: a failure is forgotten (read the entry's own
    /// record instead), not a miss.
    alias: bool,
    forgotten: bool,
    /// A block of the small-object store, not a record.
    raw: bool,
}

/// The records fetched for one request.
#[derive(Debug, Default)]
pub struct Fetched {
    entries: Vec<Entry>,
}

impl Fetched {
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn entry(&self, loc: Loc) -> Option<&Entry> {
        self.entries.iter().find(|e| e.loc == loc && !e.forgotten)
    }

    pub fn state(&self, loc: Loc) -> Option<&FetchState> {
        self.entry(loc).map(|e| &e.state)
    }

    /// Whether reading `loc`'s capacity copy failed (read its own record).
    pub fn copy_failed(&self, loc: Loc) -> bool {
        self.entries
            .iter()
            .any(|e| e.loc == loc && e.alias && e.forgotten)
    }

    /// The verified item at `loc`, if it was fetched.
    pub fn item(&self, loc: Loc) -> Option<&[u8]> {
        self.item_seq(loc).map(|(b, _)| b)
    }

    /// The verified item at `loc` and the sequence number of its segment.
    pub fn item_seq(&self, loc: Loc) -> Option<(&[u8], u64)> {
        let e = self.entry(loc)?;
        match &e.state {
            FetchState::Item(b) => Some((&b[..], e.shown_seq)),
            _ => None,
        }
    }

    /// Records an item copied out of a write buffer.
    pub fn insert_resident(&mut self, loc: Loc, item: Vec<u8>, seq: u64) {
        self.entries.push(Entry {
            loc,
            seq,
            shown_seq: seq,
            dev: 0,
            offset: 0,
            skew: 0,
            state: FetchState::Item(ItemBytes::copied(item)),
            started: std::time::Instant::now(),
            alias: false,
            forgotten: false,
            raw: false,
        });
    }

    /// Adds a record to read from a device; returns the first read.
    pub fn add_read(
        &mut self,
        loc: Loc,
        dev: usize,
        offset: u64,
        skew: usize,
        seq: u64,
    ) -> ReadReq {
        self.entries.push(Entry {
            loc,
            seq,
            shown_seq: seq,
            dev,
            offset,
            skew,
            state: FetchState::Pending,
            started: std::time::Instant::now(),
            alias: false,
            forgotten: false,
            raw: false,
        });
        ReadReq {
            slot: self.entries.len() - 1,
            dev,
            offset,
            len: BLOCK,
        }
    }

    /// Adds a read of one 4 KiB block of the small-object store at `offset`
    /// of device `dev`, known by `loc` ([`crate::small`] names its blocks).
    pub fn add_block_read(
        &mut self,
        loc: Loc,
        dev: usize,
        offset: u64,
        stats: &TierStats,
    ) -> ReadReq {
        let r = self.add_read(loc, dev, offset, 0, 0);
        self.entries.last_mut().expect("added").raw = true;
        stats.reads_in_flight.fetch_add(1, Ordering::Relaxed);
        if let Some(d) = stats.devs.get(dev) {
            d.in_flight.fetch_add(1, Ordering::Relaxed);
        }
        r
    }

    /// The block read for `loc`: Some(None) while its read is pending or
    /// when it failed, None when it was never asked for.
    pub fn block(&self, loc: Loc) -> Option<Option<&[u8]>> {
        self.entry(loc).map(|e| match &e.state {
            FetchState::Block(b) => Some(b.as_slice()),
            _ => None,
        })
    }

    /// Forgets what was read for `loc` (it changed since: read it again).
    pub fn forget(&mut self, loc: Loc) {
        for e in self.entries.iter_mut().filter(|e| e.loc == loc) {
            e.forgotten = true;
        }
    }

    /// A read finished: its buffer and the bytes read into it (or it
    /// failed), after waiting `queued_us` for a reader (the rest of its
    /// latency is the device's). Returns a longer read to issue when the
    /// record turned out larger than what was read.
    pub fn complete(
        &mut self,
        slot: usize,
        result: std::io::Result<(AlignedBuf, usize)>,
        queued_us: u64,
        max_record: usize,
        stats: &TierStats,
    ) -> Option<ReadReq> {
        let e = self.entries.get_mut(slot)?;
        stats.reads_in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(d) = stats.devs.get(e.dev) {
            d.in_flight.fetch_sub(1, Ordering::Relaxed);
            d.reads.fetch_add(1, Ordering::Relaxed);
            let us = e.started.elapsed().as_micros() as u64;
            d.latency_us.fetch_add(us, Ordering::Relaxed);
            d.device_us
                .fetch_add(us.saturating_sub(queued_us), Ordering::Relaxed);
            if let Ok((_, n)) = &result {
                d.bytes_read.fetch_add(*n as u64, Ordering::Relaxed);
            }
        }
        let (buf, n) = match result {
            Ok(r) => r,
            Err(err) => {
                stats.read_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, offset = e.offset, "flash read failed; served as a miss");
                e.forgotten = e.alias;
                e.state = FetchState::Bad;
                return None;
            }
        };
        if e.raw {
            e.state = if n >= BLOCK {
                FetchState::Block(buf)
            } else {
                stats.read_errors.fetch_add(1, Ordering::Relaxed);
                FetchState::Bad
            };
            return None;
        }
        stats.objects_read.fetch_add(1, Ordering::Relaxed);
        let cap = buf.len();
        let data = buf.as_slice().get(..n).unwrap_or(&[]);
        stats
            .bytes_read
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let rec = data.get(e.skew..).unwrap_or(&[]);
        match format::check_record(rec, e.seq, max_record) {
            Ok(item) if item.len() < KEEP_BUFFER_FROM => {
                // Small: a copy, and the read buffer goes back for the next
                // read at once (a request waiting behind a slow client keeps
                // what it fetched).
                e.state = FetchState::Item(ItemBytes::copied(item.to_vec()));
                None
            }
            Ok(item) => {
                let start = e.skew + format::RECORD_PREFIX;
                let range = start..start + item.len();
                e.state = FetchState::Item(ItemBytes {
                    held: Held::Read(buf),
                    range,
                });
                None
            }
            Err(RecordError::Truncated { need }) if cap < round_up(e.skew + need, BLOCK) => {
                // Larger than what was read: read all of it. (A short read
                // into a buffer that was large enough is an error below,
                // not a read to repeat.)
                stats.reads_in_flight.fetch_add(1, Ordering::Relaxed);
                if let Some(d) = stats.devs.get(e.dev) {
                    d.in_flight.fetch_add(1, Ordering::Relaxed);
                }
                e.started = std::time::Instant::now();
                Some(ReadReq {
                    slot,
                    dev: e.dev,
                    offset: e.offset,
                    len: round_up(e.skew + need, BLOCK),
                })
            }
            Err(err) => {
                if matches!(err, RecordError::Truncated { .. }) {
                    stats.read_errors.fetch_add(1, Ordering::Relaxed);
                } else {
                    stats.verify_failures.fetch_add(1, Ordering::Relaxed);
                }
                if err != RecordError::WrongSequence {
                    tracing::warn!(
                        ?err,
                        offset = e.offset,
                        "flash record does not verify; served as a miss"
                    );
                }
                e.forgotten = e.alias;
                e.state = FetchState::Bad;
                None
            }
        }
    }

    /// Marks the entry just added for `loc` as read from its capacity copy:
    /// it reports `shown_seq` (the entry's own segment) once verified, and
    /// a failure is forgotten instead of becoming a miss.
    pub fn mark_copy(&mut self, loc: Loc, shown_seq: u64) {
        if let Some(e) = self
            .entries
            .iter_mut()
            .rev()
            .find(|e| e.loc == loc && !e.forgotten)
        {
            e.alias = true;
            e.shown_seq = shown_seq;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::item::{Header, HEADER};

    /// A block holding, at `skew`, the record of `key` with a value of
    /// `vlen` bytes, segment sequence `seq`.
    fn block_with(skew: usize, key: &[u8], vlen: usize, seq: u64) -> (AlignedBuf, usize) {
        let value = vec![b'v'; vlen];
        let mut it = vec![0u8; HEADER + key.len() + vlen];
        Header {
            klen: key.len() as u8,
            vlen: vlen as u32,
            ..Header::default()
        }
        .write(&mut it);
        it[HEADER..HEADER + key.len()].copy_from_slice(key);
        it[HEADER + key.len()..].copy_from_slice(&value);
        let size = format::record_size(key.len(), vlen);
        let mut buf = AlignedBuf::new(round_up(skew + size, BLOCK));
        format::write_record(&mut buf.as_mut_slice()[skew..skew + size], &it, seq, false);
        (buf, size)
    }

    fn loc(off: u32) -> Loc {
        Loc { seg: 1, off }
    }

    #[test]
    fn small_items_are_copied_and_large_ones_served_from_the_read_buffer() {
        let stats = TierStats::default();
        let mut f = Fetched::default();
        for (i, (skew, vlen)) in [(24, 100), (8, 3000)].into_iter().enumerate() {
            let r = f.add_read(loc(i as u32), 0, 0, skew, 7);
            let (buf, _) = block_with(skew, b"k", vlen, 7);
            let n = buf.len();
            assert_eq!(f.complete(r.slot, Ok((buf, n)), 0, 1 << 20, &stats), None);
            let item = f.item(loc(i as u32)).expect("verified");
            assert_eq!(Header::read(item).vlen as usize, vlen);
            assert_eq!(&item[HEADER..HEADER + 1], b"k");
            assert!(item[HEADER + 1..].iter().all(|&b| b == b'v'));
        }
        let held = |i: usize| matches!(&f.entries[i].state, FetchState::Item(b) if matches!(b.held, Held::Read(_)));
        assert!(!held(0), "a 100-byte item keeps its 4 KiB read buffer");
        assert!(held(1), "a 3000-byte item is copied");
    }

    #[test]
    fn a_record_larger_than_the_read_is_read_again_whole_but_a_short_read_is_an_error() {
        let stats = TierStats::default();
        let mut f = Fetched::default();
        // 6000 bytes at 512: the one-block read asks for the rest.
        let r = f.add_read(loc(0), 0, 0, 512, 3);
        let (whole, size) = block_with(512, b"big", 6000, 3);
        let mut first = AlignedBuf::new(BLOCK);
        first
            .as_mut_slice()
            .copy_from_slice(&whole.as_slice()[..BLOCK]);
        let more = f
            .complete(r.slot, Ok((first, BLOCK)), 0, 1 << 20, &stats)
            .expect("a longer read");
        assert_eq!(more.len, round_up(512 + size, BLOCK));
        // That read comes back short (the file was truncated, say): a miss
        // and a read error, not the same read again and again.
        let n = whole.len() - BLOCK;
        assert_eq!(
            f.complete(more.slot, Ok((whole, n)), 0, 1 << 20, &stats),
            None
        );
        assert!(matches!(f.state(loc(0)), Some(FetchState::Bad)));
        assert_eq!(stats.read_errors.load(Ordering::Relaxed), 1);
    }
}
