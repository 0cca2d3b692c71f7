//! Listing the cache's keys (`lru_crawler metadump`, `stats cachedump`):
//! [`Engine::dump_keys`] walks the RAM items a segment at a time, one shard
//! lock hold per segment, and says where to resume, so a front end can
//! stream a dump of any size within its output bound.
//!
//! Only items in RAM are listed: a flash-resident item's key is on the
//! device, not in DRAM (the index keeps an 11-bit tag), and finding it
//! would mean reading every flash segment. As with memcached's crawler,
//! the walk is not a snapshot: a key stored, deleted or moved between
//! segments (a reclaim keeping it) while a dump runs may be missed or
//! listed twice.

use crate::item::{self, Header};
use crate::Engine;

/// Where a dump resumes: a shard and a RAM segment id in it. The default
/// is the start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DumpCursor {
    shard: u32,
    seg: u32,
}

impl DumpCursor {
    /// The cursor as one number (for a connection to keep); 0 is the start.
    pub fn to_raw(self) -> u64 {
        u64::from(self.shard) << 32 | u64::from(self.seg)
    }

    pub fn from_raw(raw: u64) -> DumpCursor {
        DumpCursor {
            shard: (raw >> 32) as u32,
            seg: raw as u32,
        }
    }
}

/// One RAM item as a dump lists it.
#[derive(Debug, Clone, Copy)]
pub struct DumpedKey<'a> {
    header: Header,
    key: &'a [u8],
    now: u32,
}

impl<'a> DumpedKey<'a> {
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// Absolute unix seconds; 0 = never expires.
    pub fn exptime(&self) -> u32 {
        self.header.exptime
    }

    /// Last access, absolute unix seconds (kept mod 65536: exact for items
    /// touched in the last 18 hours).
    pub fn last_access(&self) -> u32 {
        item::last_access(self.now, self.header.atime)
    }

    pub fn cas(&self) -> u64 {
        self.header.cas
    }

    /// Whether it was read since it was stored.
    pub fn fetched(&self) -> bool {
        self.header.bits & item::FETCHED != 0
    }

    /// Value bytes.
    pub fn value_len(&self) -> u32 {
        self.header.vlen
    }

    /// Bytes the item occupies in RAM, header included.
    pub fn stored_size(&self) -> usize {
        self.header.size()
    }
}

impl Engine {
    /// Seconds since the last access of the least recently accessed item
    /// among the oldest RAM segments of every shard (memcached's `stats
    /// items` `age`, read from its LRU tail); None with no item in RAM.
    /// One short lock hold per shard, a few segments' headers each.
    pub fn oldest_item_age(&self, now: u32) -> Option<u32> {
        let mut oldest: Option<u32> = None;
        let mut i = 0;
        while let Some(shard) = self.lock_nth(i, now) {
            if let Some(la) = shard.oldest_access(now) {
                oldest = Some(oldest.map_or(la, |o| o.min(la)));
            }
            i += 1;
        }
        oldest.map(|la| now.saturating_sub(la))
    }

    /// Hands `f` the live RAM items of the next segment from `from` (one
    /// shard lock hold), and returns where to resume, or None when every
    /// shard has been walked. Call it again with the cursor until None.
    pub fn dump_keys(
        &self,
        from: DumpCursor,
        now: u32,
        mut f: impl FnMut(DumpedKey<'_>),
    ) -> Option<DumpCursor> {
        let mut at = from;
        while let Some(shard) = self.lock_nth(at.shard as usize, now) {
            let mut each = |key: &[u8], header: Header| f(DumpedKey { header, key, now });
            match shard.dump_segment(at.seg, now, &mut each) {
                Some(seg) => return Some(DumpCursor { seg, ..at }),
                None => {
                    at = DumpCursor {
                        shard: at.shard + 1,
                        seg: 0,
                    }
                }
            }
        }
        None
    }
}
