//! A shard's RAM items for a key dump (`lru_crawler metadump`, `stats
//! cachedump`): one whole segment per call, so a dump never holds the shard
//! lock for more than one segment's walk.

use super::*;

impl Shard {
    /// Walks the first RAM segment whose id is `from` or more and calls `f`
    /// with the key and header of each of its live, unexpired items (linked
    /// in the index). Returns the id to continue from, or None when no
    /// segment is left from `from` on.
    pub(crate) fn dump_segment(
        &self,
        from: u32,
        now: u32,
        f: &mut dyn FnMut(&[u8], Header),
    ) -> Option<u32> {
        let start = (from as usize).min(self.segs.len());
        let id = (start..self.segs.len()).find(|&i| self.segs[i].is_some())? as u32;
        let end = self.seg(id).write;
        let mut off = 0usize;
        while let Some((loc, h)) = self.next_item(id, &mut off, end) {
            if h.bits & item::DEAD != 0 || h.expired(now) {
                continue;
            }
            let key = self.key(loc);
            if self.index.contains(hash_key(key), loc) {
                f(key, h);
            }
        }
        Some(id + 1)
    }
}

impl Shard {
    /// The earliest last access (unix seconds) among the live items of the
    /// oldest segment of each RAM queue that holds one: the items the next
    /// reclaims judge, as memcached's `age` reads its LRU tail. At most a
    /// few segments are walked per queue; None when they hold no live item.
    pub(crate) fn oldest_access(&self, now: u32) -> Option<u32> {
        let mut oldest: Option<u32> = None;
        for queue in &self.queues {
            for &id in queue.iter().take(4) {
                let end = self.seg(id).write;
                let mut off = 0usize;
                let mut found = false;
                while let Some((loc, h)) = self.next_item(id, &mut off, end) {
                    if h.bits & item::DEAD != 0
                        || h.expired(now)
                        || !self.index.contains(hash_key(self.key(loc)), loc)
                    {
                        continue;
                    }
                    let la = crate::item::last_access(now, h.atime);
                    oldest = Some(oldest.map_or(la, |o| o.min(la)));
                    found = true;
                }
                if found {
                    break;
                }
            }
        }
        oldest
    }
}
