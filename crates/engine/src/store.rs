//! The face of the stores below RAM: which stores there are ([`Lower`]),
//! the order a lookup asks them in ([`CHAIN`]), where an item leaving RAM
//! goes ([`route`]: the size routing, in one place), and what a store says
//! about a key ([`Located`]). The stores' per-shard parts are in
//! [`crate::stores`] (`Chain`, one field of the RAM tier's `Shard`), which
//! dispatches on [`Lower`] with a `match`: no trait objects on the hot path.
//!
//! The type is `Lower`, not `Store`: [`crate::command::Store`] names the
//! storage request.

use crate::index::Loc;

/// A store below RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lower {
    /// The flash log (`flash/`; its shard part `stores/log.rs`): records
    /// indexed by the shard's index, one entry per key.
    Log,
    /// The dense small-object store (`small/`; its shard part
    /// `stores/small.rs`): no index entry, a filter per set.
    Small,
}

/// The lookup order below RAM: a key missing in RAM is looked for in the
/// flash log, then in the small store (whose blocks are read only when the
/// log has no verified record of the key).
pub(crate) const CHAIN: [Lower; 2] = [Lower::Log, Lower::Small];

/// The stores after `lower` in [`CHAIN`]: asked when `lower` held the key
/// but its item could not be used (no RAM to copy it into).
pub(crate) fn after(lower: Lower) -> &'static [Lower] {
    let at = CHAIN
        .iter()
        .position(|&l| l == lower)
        .map_or(CHAIN.len(), |i| i + 1);
    &CHAIN[at..]
}

/// What the stores below RAM say about a key, given the records fetched.
#[derive(Debug)]
pub(crate) enum Located {
    /// In RAM: the item's location (only `Shard::locate`, which asks RAM
    /// before the chain, answers so).
    Ram(Loc),
    /// Its verified log record: the index entry (its bytes are in the
    /// `Fetched` the lookup was given).
    Log(Loc),
    /// The small store's copy, in the RAM layout (header, key, value).
    Small(Vec<u8>),
    /// Blocks or records must be read first.
    Need,
    /// Not below RAM (or its records could not be reached).
    Absent,
}

/// An item leaving RAM, as [`route`] sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leaving {
    /// Its stored size in RAM (header, key, value, padding).
    pub size: usize,
    /// Key and value bytes.
    pub key_value: usize,
    /// It was promoted from the flash log and may still have its record
    /// there (the item's flash copy bit).
    pub from_log: bool,
}

/// Size routing: the store an item leaving RAM goes to, or None when it
/// stays out (a jumbo item, larger than `seg_size`: a log record holds at
/// most a segment, see `Shard::alloc_jumbo`). Items of at most
/// `small_max` bytes of key and value go to the small store when there is
/// one, except an item promoted from the log: only the gate's tombstone,
/// asked for by its copy bit, keeps its log record dead after a crash, and
/// in the small store the bit would be lost. Everything else goes to the
/// log. The store may still refuse it (a full write budget, a small store
/// whose flush must wait: the log takes it then).
pub(crate) fn route(item: Leaving, seg_size: usize, small_max: Option<usize>) -> Option<Lower> {
    if item.size > seg_size {
        return None;
    }
    match small_max {
        Some(max) if item.key_value <= max && !item.from_log => Some(Lower::Small),
        _ => Some(Lower::Log),
    }
}
