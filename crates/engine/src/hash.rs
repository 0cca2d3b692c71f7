//! The key hash every layer shares (index, shards, flash recovery, the ghost
//! list): a floor module, importing nothing of the engine.

/// Key hash used by index, shards and the ghost list.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}
