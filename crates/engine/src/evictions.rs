//! Evictions as they happen, for memcached's `watch evictions`: the server
//! installs a sink ([`crate::Engine::watch_evictions`]); a shard that
//! evicts an unexpired item from RAM (its segment reclaimed, or its index
//! entry dropped for room) reports it while it still has the item. Items
//! dropped from flash are counted in `evictions` but not reported: their
//! keys are on the device, not in memory.
//!
//! Cost when nobody watches: the sink's [`EvictionSink::wants`], one
//! relaxed load in the server's; nothing without a sink.

/// An item leaving the cache for room.
#[derive(Debug, Clone, Copy)]
pub struct Eviction<'a> {
    pub key: &'a [u8],
    /// Whether it was ever read.
    pub fetched: bool,
    /// Seconds it had left to live; -1 for no expiry (memcached's `ttl=`).
    pub ttl: i64,
    /// Seconds since it was last accessed (memcached's `la=`).
    pub idle: u32,
    /// Bytes of its value.
    pub value_len: u32,
}

/// Where evictions go.
pub trait EvictionSink: Send + Sync {
    /// Whether anyone wants them now (checked before an eviction is made
    /// into an [`Eviction`]).
    fn wants(&self) -> bool;
    fn evicted(&self, e: &Eviction<'_>);
}
