//! A segment: a fixed-size buffer that items are appended to, in one queue,
//! with a bound on the soonest expiry of what it holds (the expiry sweep
//! skips a segment in which nothing can have expired yet).

use tiercache_policy::Queue;

/// No item here expires (exptime 0 is "never").
pub const NEVER: u32 = u32::MAX;

pub struct Segment {
    pub data: Box<[u8]>,
    /// Bytes written so far (next item's offset).
    pub write: usize,
    /// Items written here that are still linked in the index.
    pub live_items: u32,
    pub queue: Queue,
    /// No item here expires before this (a lower bound, [`NEVER`] when
    /// none has an exptime): items written or retimed fold in, and the
    /// sweep tightens it after a walk of the whole segment.
    pub soonest_expiry: u32,
    /// The same bound over what was written or retimed since the sweep
    /// began its walk of this segment: at the walk's end the bound becomes
    /// what the walk saw, folded with this.
    pub expiry_since_walk: u32,
    /// Set aside by a flush_all, its items dropped, until it is given back
    /// (`shard/flushing.rs`).
    pub set_aside: bool,
}

impl Segment {
    pub fn new(data: Box<[u8]>, queue: Queue) -> Segment {
        Segment {
            data,
            write: 0,
            live_items: 0,
            queue,
            soonest_expiry: NEVER,
            expiry_since_walk: NEVER,
            set_aside: false,
        }
    }

    pub fn room(&self) -> usize {
        self.data.len() - self.write
    }

    /// An item written here (or whose exptime changed) expires at `exptime`.
    #[inline]
    pub fn note_expiry(&mut self, exptime: u32) {
        if exptime != 0 {
            self.soonest_expiry = self.soonest_expiry.min(exptime);
            self.expiry_since_walk = self.expiry_since_walk.min(exptime);
        }
    }

    /// An item expiring at `exptime` was written here and linked.
    #[inline]
    pub fn gain(&mut self, exptime: u32) {
        self.live_items += 1;
        self.note_expiry(exptime);
    }

    /// Whether an item here may have expired by `now`.
    #[inline]
    pub fn may_hold_expired(&self, now: u32) -> bool {
        self.soonest_expiry <= now
    }
}
