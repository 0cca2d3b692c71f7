//! The tombstones one shard asked the crash journal for, by fingerprint,
//! and the order they were asked in: forgotten from the oldest, a few at a
//! time (each new tombstone forgets up to two, each sweep up to
//! [`PRUNE_SLICE`]), never by a walk of the whole map under the shard's
//! lock. A walk of 10-20 thousand entries once a second held a sweep's
//! first slice 300-450 us on the CPU at 50,000 new keys a second with a
//! flash file (issue 31).

use std::collections::{HashMap, VecDeque};

/// The most tombstones one sweep forgets (each forget is a map removal).
pub(crate) const PRUNE_SLICE: usize = 512;

/// Tombstones by fingerprint: (horizon, ticket), with their tickets in the
/// order asked (the journal's tickets grow, and a shard asks under its
/// lock, so that order is ascending).
#[derive(Debug, Default)]
pub(crate) struct Tombs {
    by_fp: HashMap<u32, (u64, u64)>,
    order: VecDeque<(u32, u64)>,
    /// Tombstones asked for before this ticket may be forgotten once
    /// durable (they were durable at the previous sweep or are now).
    mark: u64,
}

impl Tombs {
    /// The tombstone of `fp`, if one is remembered: (horizon, ticket).
    pub(crate) fn get(&self, fp: u32) -> Option<(u64, u64)> {
        self.by_fp.get(&fp).copied()
    }

    /// Remembers a tombstone of `fp` (replacing an older one), then
    /// forgets up to two old durable ones.
    pub(crate) fn insert(
        &mut self,
        fp: u32,
        horizon: u64,
        ticket: u64,
        durable: impl Fn(u64) -> bool,
    ) {
        debug_assert!(self.order.back().is_none_or(|&(_, t)| t <= ticket));
        self.by_fp.insert(fp, (horizon, ticket));
        self.order.push_back((fp, ticket));
        self.forget(2, durable);
    }

    /// A sweep: forgets up to [`PRUNE_SLICE`] old durable tombstones, then
    /// moves the mark to `last` (the journal's latest ticket), so that
    /// what is asked for until the next sweep is kept at least that long
    /// (a request retried after waiting for its tombstone finds it).
    pub(crate) fn prune(&mut self, last: u64, durable: impl Fn(u64) -> bool) {
        self.forget(PRUNE_SLICE, durable);
        self.mark = last;
    }

    /// Forgets up to `max` tombstones from the oldest, while they are
    /// older than the mark and durable.
    fn forget(&mut self, max: usize, durable: impl Fn(u64) -> bool) {
        for _ in 0..max {
            let Some(&(fp, t)) = self.order.front() else {
                return;
            };
            if t >= self.mark || !durable(t) {
                return;
            }
            self.order.pop_front();
            // A newer tombstone of the fingerprint replaced it: that one stays.
            if self.by_fp.get(&fp).is_some_and(|&(_, now)| now == t) {
                self.by_fp.remove(&fp);
            }
        }
    }

    /// Tombstones remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_fp.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tombstone_is_kept_until_durable_and_past_a_sweep() {
        let mut t = Tombs::default();
        let durable_to = std::cell::Cell::new(0u64);
        let d = |x: u64| x <= durable_to.get();
        t.insert(7, 100, 1, d);
        t.insert(8, 100, 2, d);
        durable_to.set(2);
        // Durable, but asked for after the mark of the sweep before: kept.
        t.prune(2, d);
        assert_eq!((t.get(7), t.get(8)), (Some((100, 1)), Some((100, 2))));
        // The next sweep forgets what was asked for before its mark (2);
        // the one at the mark is forgotten by the sweep after.
        t.prune(3, d);
        assert_eq!((t.get(7), t.get(8)), (None, Some((100, 2))));
        t.prune(3, d);
        assert_eq!(t.len(), 0);
    }

    #[test]
    fn a_tombstone_not_durable_stays_and_so_does_every_later_one() {
        let mut t = Tombs::default();
        let durable_to = std::cell::Cell::new(0u64);
        let d = |x: u64| x <= durable_to.get();
        for (i, fp) in (1..=10u64).zip(10u32..) {
            t.insert(fp, i, i, d);
        }
        t.prune(10, d);
        durable_to.set(4);
        t.prune(10, d);
        assert_eq!(t.len(), 6);
        assert_eq!(t.get(13), None);
        assert_eq!(t.get(14), Some((5, 5)));
    }

    #[test]
    fn a_replaced_tombstone_leaves_the_newer_one() {
        let mut t = Tombs::default();
        let durable_to = std::cell::Cell::new(0u64);
        let d = |x: u64| x <= durable_to.get();
        t.insert(5, 10, 1, d);
        t.prune(1, d);
        t.insert(5, 20, 2, d);
        durable_to.set(1);
        // Ticket 1 is old and durable: its removal must not take the
        // fingerprint's newer tombstone with it.
        t.prune(3, d);
        assert_eq!(t.get(5), Some((20, 2)));
        durable_to.set(2);
        t.prune(3, d);
        assert_eq!(t.get(5), None);
    }

    #[test]
    fn inserts_forget_old_ones_a_few_at_a_time() {
        let mut t = Tombs::default();
        let d = |_: u64| true;
        for i in 1..=5000u64 {
            t.insert(i as u32, i, i, d);
        }
        t.prune(5000, d);
        // The sweep forgot none (all asked for after the first mark); each
        // insert then forgets two of those before the mark (ticket 5,000,
        // the mark itself, stays until the next sweep).
        assert_eq!(t.len(), 5000);
        for i in 5001..=7500u64 {
            t.insert(i as u32, i, i, d);
        }
        assert_eq!(t.len(), 2501);
        assert_eq!(t.get(4999), None);
        assert_eq!(t.get(5000), Some((5000, 5000)));
        // A sweep forgets at most its slice.
        t.prune(7500, d);
        assert_eq!(t.len(), 2501);
        t.prune(7500, d);
        assert_eq!(t.len(), 2501 - PRUNE_SLICE);
    }
}
