//! The stores below RAM, each as its part of one shard, and the chain
//! that holds them (one field of `Shard`, the RAM tier): [`chain`] the one
//! lookup order and the chain-wide operations, [`log`] the flash log's
//! part (its tier, reservations, tombstones, credits), [`copies`] the
//! log's records kept on both device classes, [`small`] the small-object
//! store's part. Their face (which stores, their order, size routing) is
//! [`crate::store`]. Nothing here imports the shard: a part is given the
//! shard's index and memory pool ([`Entries`]) when it must see them.

pub(crate) mod chain;
pub(crate) mod copies;
pub(crate) mod log;
pub(crate) mod small;

pub(crate) use chain::Chain;

use crate::index::Index;
use crate::pool::SegmentPool;

/// What a store's part may see and change of the RAM tier above it: the
/// shard's index (its flash entries), the memory pool its DRAM is charged
/// to, and the time of the shard's latest request.
pub(crate) struct Entries<'a> {
    pub index: &'a mut Index,
    pub pool: &'a SegmentPool,
    pub now: u32,
}
