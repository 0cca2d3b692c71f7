//! Sizing a configuration: shards, the indexes' start and cap, the memory
//! minimum, and the error that names it.

use super::*;

/// The fewest RAM segments (of the memory left after the index and the
/// flash write buffers) a configuration starts with. Without a flash tier
/// one shard runs on three (its two queue heads and the pool's reserve of
/// spares), so that `-m 4` works with 1 MiB segments next to its index; a
/// running server already goes below that when the index grows for small
/// items.
pub(super) fn min_segments(shards: usize, flash: bool) -> usize {
    2 * shards + SegmentPool::reserve_for(shards) + usize::from(flash)
}

/// Shards for a number of RAM segments (when not configured).
pub(super) fn shards_for(segments: usize) -> usize {
    let by_memory = (segments / MIN_SEGMENTS_PER_SHARD).max(1);
    let mut shards = by_memory.min(64).next_power_of_two();
    if shards > by_memory {
        shards /= 2;
    }
    shards.max(1)
}

/// DRAM the index takes for `entries` items at its target load (nine
/// 7-byte entries to a 64-byte bucket, 89% full; it resizes itself between
/// 70% and 95%): the formula `tiercache-sim plan` charges flash items.
pub fn index_dram_bytes(entries: u64) -> u64 {
    crate::index::Index::bytes_for_buckets(crate::index::Index::buckets_for(entries as usize))
        as u64
}

/// How a configuration's indexes start.
pub(super) struct IndexSizing {
    /// Buckets per shard at start (and the fewest it shrinks to).
    pub(super) buckets: usize,
    /// Position bits of every shard's index.
    pub(super) precision: u32,
    /// log2 of the total buckets at start, for `stats`.
    pub(super) hash_power: u32,
}

/// The index a configuration starts with: `config.shards` must be set.
/// The precision lets one shard's index grow to all of `-m` and shrink to
/// 1/128 of that; it starts at 2^hashpower over the shards when given, else
/// at what RAM items of 4 KiB need, and, with `ext_avg_item_size`, flash
/// devices full of items of that size (a hint: the index grows and shrinks
/// with the items either way, within [`index_cap`]).
pub(super) fn index_size(config: &EngineConfig, device_bytes: u64) -> IndexSizing {
    let precision = crate::index::Index::precision_for(config.memory_limit / config.shards);
    let per_shard = if config.hash_power != 0 {
        (1usize << config.hash_power) >> config.shards.trailing_zeros()
    } else {
        let mut items = config.memory_limit / SIZING_ITEM_BYTES;
        if let Some(fc) = config.flash.as_ref().filter(|f| f.avg_item_size > 0) {
            items += (device_bytes / fc.avg_item_size.max(64) as u64) as usize;
        }
        crate::index::Index::buckets_for(items).div_ceil(config.shards)
    };
    let per_shard = per_shard.clamp(
        crate::index::min_buckets(precision),
        // A hint never takes more than half of the index budget.
        (index_cap(config) / 2 / config.shards / crate::index::Index::bytes_for_buckets(1))
            .max(crate::index::min_buckets(precision)),
    );
    IndexSizing {
        buckets: per_shard,
        precision,
        hash_power: (per_shard * config.shards)
            .next_power_of_two()
            .trailing_zeros(),
    }
}

/// The most the indexes and flash write buffers may take of `-m`: all but
/// an eighth (the RAM tier keeps at least that, and the segments a
/// configuration needs to start).
pub(super) fn index_cap(config: &EngineConfig) -> usize {
    let segments = min_segments(config.shards, config.flash.is_some()) * config.segment_size;
    config
        .memory_limit
        .saturating_sub(segments.max(config.memory_limit / 8))
}

/// `config` with its shard count chosen as [`Engine::with_devices`]
/// chooses it when not configured.
fn shards_chosen(config: &EngineConfig) -> EngineConfig {
    let mut c = config.clone();
    if c.shards == 0 {
        c.shards = shards_for(c.memory_limit / c.segment_size);
    }
    c
}

/// Whether `config` (its `memory_limit`) passes the start-up size checks:
/// the same sizing as [`Engine::with_devices`].
pub(super) fn memory_fits(config: &EngineConfig, device_bytes: u64) -> bool {
    let seg = config.segment_size;
    let segments = config.memory_limit / seg;
    if segments < 4 {
        return false;
    }
    let c = shards_chosen(config);
    let index =
        c.shards * crate::index::Index::bytes_for_buckets(index_size(&c, device_bytes).buckets);
    let buffers = c.flash.as_ref().map_or(0, |fc| {
        fc.params.write_buffers.max(2) * fc.params.segment_size
    });
    let small = small_start_dram(&c, device_bytes);
    let left = c.memory_limit.saturating_sub(index + buffers + small) / seg;
    left >= min_segments(c.shards, c.flash.is_some())
}

/// The smallest memory limit, in MiB, this configuration starts with.
pub fn min_memory_mb(config: &EngineConfig, device_bytes: u64) -> Option<usize> {
    (1..=1 << 20).find(|&mb| {
        let mut c = config.clone();
        c.memory_limit = mb << 20;
        memory_fits(&c, device_bytes)
    })
}

/// The error for a memory limit below what the configuration needs: it
/// names the real minimum, and for a flash tier what it costs and how to
/// run without one.
pub(super) fn too_small(config: &EngineConfig, device_bytes: u64, detail: String) -> ConfigError {
    let flash = config.flash.as_ref().map(|_| {
        let ram_only = EngineConfig {
            flash: None,
            ..config.clone()
        };
        FlashShare {
            device_mb: device_bytes >> 20,
            ram_only_needs_mb: min_memory_mb(&ram_only, 0),
            hinted: config.flash.as_ref().is_some_and(|f| f.avg_item_size > 0),
            small_mb: small_start_dram(&shards_chosen(config), device_bytes).div_ceil(1 << 20),
        }
    });
    ConfigError::MemoryTooSmall {
        memory_mb: config.memory_limit >> 20,
        detail,
        needs_mb: min_memory_mb(config, device_bytes),
        flash,
    }
}

/// Bytes of each shard's part of the small-object store: `ext_small_share`
/// percent of the first device, split over the shards, in whole blocks.
pub(super) fn small_part_bytes(fc: &FlashConfig, shards: usize, first_device: u64) -> u64 {
    use crate::device::aligned::BLOCK;
    let bytes = first_device / 100 * fc.small_percent.clamp(1, 90);
    bytes / shards as u64 / BLOCK as u64 * BLOCK as u64
}

/// The share of a small-object store part its log takes (percent).
pub(super) fn small_log_percent(fc: &FlashConfig) -> u64 {
    if fc.small_log_percent == 0 {
        10
    } else {
        fc.small_log_percent
    }
}

/// DRAM the small-object store holds at start, all shards' parts (their
/// filters, empty log indexes and buffers; see
/// [`SmallConfig::start_dram_bytes`](crate::small::SmallConfig::start_dram_bytes)),
/// taking `device_bytes` as the first device's size (the store's home; with
/// several devices this counts more than it takes). It comes out of `-m`.
pub(super) fn small_start_dram(config: &EngineConfig, device_bytes: u64) -> usize {
    let Some(fc) = config.flash.as_ref().filter(|fc| fc.small_max > 0) else {
        return 0;
    };
    let part = small_part_bytes(fc, config.shards, device_bytes);
    crate::small::SmallConfig::for_region(part, small_log_percent(fc)).start_dram_bytes()
        * config.shards
}
