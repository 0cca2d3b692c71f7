//! The flash log's records handed back to the shard: a segment's live
//! record being reclaimed by the flusher (moved, or dropped), and after a
//! crash, the records recovery indexed twice under one key (the newest
//! kept). Both are the log's work on the shard's index; the shard counts
//! what they did.

use super::{Dropped, LogPart};
use crate::flash::tier::{AppendError, Dest};
use crate::flash::Fetched;
use crate::index::{Class, Index, Loc};
use crate::item::{self, Header};
use crate::stores::copies::Hit;

/// What became of a reclaimed record's entry ([`LogPart::reclaim`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reclaimed {
    /// Its entry was gone already, or its capacity copy became the entry:
    /// nothing to count.
    Kept,
    /// Written again (hit, or moved to the capacity class): `reinserted`.
    Moved,
    /// The move found no write buffer free and the flusher asked to be
    /// told: nothing changed.
    Wait,
    /// Expired: its entry went (`reclaimed`).
    Expired,
    /// Dropped as an eviction; `unfetched`: never read and not hit.
    Evicted { unfetched: bool },
}

impl LogPart {
    /// A live record of a flash segment being reclaimed: reinsert it when
    /// it was hit (or move it to the capacity class), else drop its entry.
    /// [`Reclaimed::Wait`], with nothing changed: the move found no write
    /// buffer free and `may_wait` asked to be told (the flusher frees one
    /// and asks again); without `may_wait` such a record is dropped,
    /// counted as an eviction.
    ///
    /// The reclaim raised its class's floor over the record and over the
    /// older records of its key in that class. A record with the copy bit
    /// (format.rs) may have an older twin on the other class, which that
    /// floor does not cover (a capacity record promoted into the fast
    /// class, or promoted to RAM and written to flash again), nor, with one
    /// class, a twin in a segment numbered higher than this one (a copy can
    /// land in an older open segment): dropping it asks for a tombstone, or
    /// a later change of the key (finding no entry, so asking for none)
    /// would let the twin come back after a crash.
    pub(crate) fn reclaim(
        &mut self,
        index: &mut Index,
        now: u32,
        hit_record: Hit<'_>,
        (reinsert, may_wait): (bool, bool),
    ) -> Reclaimed {
        let Hit {
            hash,
            loc,
            item_bytes,
        } = hit_record;
        let Some(hit) = index.hit(hash, loc) else {
            return Reclaimed::Kept;
        };
        let h = Header::read(item_bytes);
        if !h.expired(now) && self.fall_back_to_copy(index, hash, loc, hit) {
            return Reclaimed::Kept;
        }
        let dropped = if h.expired(now) {
            Reclaimed::Expired
        } else if (reinsert && hit)
            || (self.tier.as_ref()).is_some_and(|f| f.moves_unhit(loc, h.exptime, now))
        {
            if let Some(f) = &self.tier {
                let dest = Dest::Moved { from: loc };
                match f.append(item_bytes, false, now, &mut 0, dest) {
                    Ok(new) => {
                        if f.class_at(loc) != f.class_at(new) {
                            f.stats
                                .moves
                                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                        index.relocate(hash, loc, new);
                        return Reclaimed::Moved;
                    }
                    Err(AppendError::Busy) if may_wait => return Reclaimed::Wait,
                    Err(_) => {}
                }
            }
            // Refused, or no buffer came in time: dropped, as an eviction.
            Reclaimed::Evicted { unfetched: false }
        } else {
            Reclaimed::Evicted {
                unfetched: h.bits & item::FETCHED == 0 && !hit,
            }
        };
        let twin = h.bits & item::FLASH_COPY != 0 && !h.expired(now);
        if twin {
            self.tombstone(Class::of(hash, index.precision()));
        }
        index.remove(hash, loc);
        dropped
    }

    /// After crash recovery, for a tag under which recovery indexed more
    /// than one record: reads the records under it (blocking; recovery
    /// runs before any request) and keeps, of each key, only the record of
    /// the newest segment, so that the index again holds at most one entry
    /// per key: a delete or change then removes the key's only entry
    /// instead of leaving an older one to be served. A record that cannot
    /// be read back is dropped behind a tombstone (it may read fine after
    /// another restart). Returns the entries found stale; those it dropped
    /// are counted in `dropped`.
    pub(crate) fn dedupe(&mut self, index: &mut Index, hash: u64, dropped: &mut Dropped) -> u64 {
        let Some(flash) = self.tier.clone() else {
            return 0;
        };
        let locs = self.candidates(index, hash);
        if locs.len() < 2 {
            return 0;
        }
        let mut fetched = Fetched::default();
        let mut reads = Vec::new();
        for &loc in &locs {
            flash.fetch(loc, &mut fetched, &mut reads);
        }
        flash.read_blocking(&mut fetched, &mut reads);
        // (key, newest seq, its entry) of each key found under the tag.
        let mut newest: Vec<(&[u8], u64, Loc)> = Vec::new();
        let mut stale = Vec::new();
        for &loc in &locs {
            let Some((item, seq)) = fetched.item_seq(loc) else {
                stale.push(loc);
                continue;
            };
            let key = item::key_of(item);
            match newest.iter_mut().find(|(k, _, _)| *k == key) {
                None => newest.push((key, seq, loc)),
                Some(best) if best.1 < seq => {
                    stale.push(best.2);
                    *best = (key, seq, loc);
                }
                Some(_) => stale.push(loc),
            }
        }
        if stale.iter().any(|&l| fetched.item(l).is_none()) {
            self.tombstone(Class::of(hash, index.precision()));
        }
        for &loc in &stale {
            if self.drop_entry(index, hash, loc) {
                dropped.entries += 1;
            }
        }
        stale.len() as u64
    }
}
