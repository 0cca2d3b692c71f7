//! Flash records a request needs before it can run. A connection collects
//! them while probing the request's keys, reads them all at once, and runs
//! the request when every read has completed; the records are verified here
//! (sequence number and CRC-32C) before anyone looks at them. A verified
//! record stays in the buffer the device read it into, and the reply is
//! copied straight from there.

use super::aligned::{round_up, AlignedBuf, BLOCK};
use super::format::{self, RecordError};
use super::tier::TierStats;
use crate::index::Loc;
use std::ops::{Deref, Range};
use std::sync::atomic::Ordering;

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
}

#[derive(Debug)]
struct Entry {
    loc: Loc,
    seq: u64,
    dev: usize,
    offset: u64,
    skew: usize,
    state: FetchState,
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

    pub fn state(&self, loc: Loc) -> Option<&FetchState> {
        self.entries.iter().find(|e| e.loc == loc).map(|e| &e.state)
    }

    /// The verified item at `loc`, if it was fetched.
    pub fn item(&self, loc: Loc) -> Option<&[u8]> {
        self.item_seq(loc).map(|(b, _)| b)
    }

    /// The verified item at `loc` and the sequence number of its segment.
    pub fn item_seq(&self, loc: Loc) -> Option<(&[u8], u64)> {
        let e = self.entries.iter().find(|e| e.loc == loc)?;
        match &e.state {
            FetchState::Item(b) => Some((&b[..], e.seq)),
            _ => None,
        }
    }

    /// Records an item copied out of a write buffer.
    pub fn insert_resident(&mut self, loc: Loc, item: Vec<u8>, seq: u64) {
        self.entries.push(Entry {
            loc,
            seq,
            dev: 0,
            offset: 0,
            skew: 0,
            state: FetchState::Item(ItemBytes {
                range: 0..item.len(),
                held: Held::Copied(item),
            }),
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
            dev,
            offset,
            skew,
            state: FetchState::Pending,
        });
        ReadReq {
            slot: self.entries.len() - 1,
            dev,
            offset,
            len: BLOCK,
        }
    }

    /// A read finished: its buffer and the bytes read into it (or it
    /// failed). Returns a longer read to issue when the record turned out
    /// larger than what was read.
    pub fn complete(
        &mut self,
        slot: usize,
        result: std::io::Result<(AlignedBuf, usize)>,
        max_record: usize,
        stats: &TierStats,
    ) -> Option<ReadReq> {
        let e = self.entries.get_mut(slot)?;
        stats.reads_in_flight.fetch_sub(1, Ordering::Relaxed);
        let (buf, n) = match result {
            Ok(r) => r,
            Err(err) => {
                stats.read_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %err, offset = e.offset, "flash read failed; served as a miss");
                e.state = FetchState::Bad;
                return None;
            }
        };
        stats.objects_read.fetch_add(1, Ordering::Relaxed);
        let data = buf.as_slice().get(..n).unwrap_or(&[]);
        stats
            .bytes_read
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let rec = data.get(e.skew..).unwrap_or(&[]);
        match format::check_record(rec, e.seq, max_record) {
            Ok(item) => {
                let start = e.skew + format::RECORD_PREFIX;
                let range = start..start + item.len();
                e.state = FetchState::Item(ItemBytes {
                    held: Held::Read(buf),
                    range,
                });
                None
            }
            Err(RecordError::Truncated { need }) if data.len() < round_up(e.skew + need, BLOCK) => {
                // Larger than one block (or a short read): read all of it.
                stats.reads_in_flight.fetch_add(1, Ordering::Relaxed);
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
                e.state = FetchState::Bad;
                None
            }
        }
    }
}
