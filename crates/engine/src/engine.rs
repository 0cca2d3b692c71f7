//! The engine: shards behind mutexes, the shared memory pool and CAS counter,
//! flush_all, the expiry sweeper's entry point, and aggregated stats.

use crate::pool::SegmentPool;
use crate::shard::{hash_key, Shard, ShardStats, Shared};
use parking_lot::{Mutex, MutexGuard};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Engine settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Memory for items and index, in bytes (`-m`).
    pub memory_limit: usize,
    /// Segment size in bytes; an item must fit in one.
    pub segment_size: usize,
    /// Number of shards (a power of two); 0 = choose from memory and threads.
    pub shards: usize,
    /// log2 of the total number of primary index buckets; 0 = choose from memory.
    pub hash_power: u32,
    /// Eviction policy name.
    pub policy: String,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory_limit: 64 << 20,
            segment_size: 1 << 20,
            shards: 0,
            hash_power: 0,
            policy: "s3fifo".into(),
        }
    }
}

/// Why an engine could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

/// Average item size the index is first sized for when no hash power is
/// given; it grows with the item count from there.
const SIZING_ITEM_BYTES: usize = 4096;
/// Smallest initial index per shard, in buckets.
const MIN_BUCKETS_PER_SHARD: usize = 64;
/// Segments each shard should own at least.
const MIN_SEGMENTS_PER_SHARD: usize = 8;

pub struct Engine {
    shards: Vec<Mutex<Shard>>,
    shared: Arc<Shared>,
    mask: u64,
    config: EngineConfig,
}

impl Engine {
    pub fn new(mut config: EngineConfig) -> Result<Engine, ConfigError> {
        let seg = config.segment_size;
        if !(64 * 1024..=crate::index::MAX_SEGMENT_BYTES).contains(&seg) {
            return Err(ConfigError(format!(
                "segment size {seg} must be between 64 KiB and 8 MiB"
            )));
        }
        let segments = config.memory_limit / seg;
        if segments < 4 {
            return Err(ConfigError(format!(
                "memory limit of {} MiB is too small for {} KiB segments: need at least {} MiB",
                config.memory_limit >> 20,
                seg >> 10,
                (4 * seg) >> 20
            )));
        }
        if segments > crate::index::MAX_SEGMENTS as usize {
            return Err(ConfigError(format!(
                "memory limit of {} MiB is too large for {} KiB segments: the index addresses at most {} segments; use segments of at least {} KiB",
                config.memory_limit >> 20,
                seg >> 10,
                crate::index::MAX_SEGMENTS,
                (config.memory_limit / crate::index::MAX_SEGMENTS as usize).div_ceil(1024)
            )));
        }
        if config.shards == 0 {
            let by_memory = (segments / MIN_SEGMENTS_PER_SHARD).max(1);
            config.shards = by_memory.min(64).next_power_of_two();
            if config.shards > by_memory {
                config.shards /= 2;
            }
            config.shards = config.shards.max(1);
        }
        if !config.shards.is_power_of_two() {
            return Err(ConfigError("shard count must be a power of two".into()));
        }
        if config.hash_power == 0 {
            let items = config.memory_limit / SIZING_ITEM_BYTES;
            let buckets = (1usize << crate::index::Index::power_for(items))
                .max(MIN_BUCKETS_PER_SHARD * config.shards);
            config.hash_power = buckets.trailing_zeros();
        }
        let per_shard_power = config
            .hash_power
            .saturating_sub(config.shards.trailing_zeros())
            .max(4);
        if tiercache_policy::by_name(&config.policy).is_none() {
            return Err(ConfigError(format!(
                "unknown eviction policy '{}': choose one of {}",
                config.policy,
                tiercache_policy::POLICY_NAMES.join(", ")
            )));
        }
        let shared = Arc::new(Shared {
            pool: SegmentPool::new(seg, config.memory_limit),
            cas: AtomicU64::new(0),
            flush_gen: AtomicU64::new(0),
            flush_at: AtomicU32::new(0),
            nshards: config.shards,
        });
        let shards = (0..config.shards)
            .map(|_| {
                let policy = tiercache_policy::by_name(&config.policy).expect("checked");
                Mutex::new(Shard::new(per_shard_power, policy, shared.clone()))
            })
            .collect();
        Ok(Engine {
            shards,
            shared,
            mask: (config.shards - 1) as u64,
            config,
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// Hash of a key (pass it to [`Engine::lock`]).
    #[inline]
    pub fn hash(key: &[u8]) -> u64 {
        hash_key(key)
    }

    /// Locks the shard that owns `hash`, applying any pending flush first.
    #[inline]
    pub fn lock(&self, hash: u64, now: u32) -> MutexGuard<'_, Shard> {
        // High bits pick the shard; the index uses the low bits.
        let i = ((hash >> 40) & self.mask) as usize;
        let mut g = self.shards[i].lock();
        g.catch_up(now);
        g
    }

    /// flush_all: as memcached, items go at `now + delay - 1`, so a delay of
    /// 0 or 1 flushes at once; an immediate flush consumes a CAS value.
    pub fn flush_all(&self, delay: i64, now: u32) {
        let at = if delay > 0 {
            crate::clock::absolute_exptime(delay, now).saturating_sub(1)
        } else {
            now
        };
        if at > now {
            self.shared.flush_at.store(at, Ordering::Relaxed);
        } else {
            self.shared.flush_at.store(0, Ordering::Relaxed);
            self.shared.next_cas();
            self.shared.flush_gen.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Background maintenance: applies pending flushes and reclaims expired items.
    pub fn maintain(&self, now: u32) -> u64 {
        let mut reclaimed = 0;
        for s in &self.shards {
            let mut g = s.lock();
            g.catch_up(now);
            reclaimed += g.sweep_expired(now);
        }
        reclaimed
    }

    /// Sum of all shards' counters.
    pub fn stats(&self, now: u32) -> EngineStats {
        let mut total = ShardStats::default();
        let mut index_buckets = 0;
        for s in &self.shards {
            let mut g = s.lock();
            g.catch_up(now);
            let st = g.stats;
            index_buckets += g.index_primary_buckets();
            total.curr_items += st.curr_items;
            total.bytes += st.bytes;
            total.total_items += st.total_items;
            total.evictions += st.evictions;
            total.evicted_unfetched += st.evicted_unfetched;
            total.expired_unfetched += st.expired_unfetched;
            total.reclaimed += st.reclaimed;
            total.reinserted += st.reinserted;
            total.segments += st.segments;
        }
        EngineStats {
            shard: total,
            index_bytes: self.shared.pool.index_bytes() as u64,
            segments_allocated: self.shared.pool.allocated() as u64,
            segment_size: self.shared.pool.seg_size() as u64,
            memory_limit: self.shared.pool.limit() as u64,
            index_buckets: index_buckets as u64,
            shards: self.shards.len() as u64,
        }
    }

    /// Resets the counters that `stats reset` clears.
    pub fn reset_stats(&self) {
        for s in &self.shards {
            let mut g = s.lock();
            g.stats.total_items = 0;
            g.stats.evictions = 0;
            g.stats.evicted_unfetched = 0;
            g.stats.expired_unfetched = 0;
            g.stats.reclaimed = 0;
            g.stats.reinserted = 0;
        }
    }
}

/// Engine-wide figures for `stats`.
#[derive(Debug, Clone, Copy)]
pub struct EngineStats {
    pub shard: ShardStats,
    pub index_bytes: u64,
    pub segments_allocated: u64,
    pub segment_size: u64,
    pub memory_limit: u64,
    pub index_buckets: u64,
    pub shards: u64,
}
