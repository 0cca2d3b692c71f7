//! `[flash]`: the flash tier's settings (memcached's `ext_*` options and
//! tiercache's own), as the TOML file and `--print-config` spell them.

use super::*;

/// Flash tier settings (memcached's `ext_*` options).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlashSection {
    /// Devices as `path:size` or `path:size:class` (`ext_path`,
    /// repeatable); size like 64G, and may be left out for a block device;
    /// class `fast` (default; memcached's `default`, `lowttl`) or
    /// `capacity` (memcached's `compact`, `coldcompact`, `old`). Empty = no
    /// flash tier.
    pub paths: Vec<String>,
    /// Flash segment size in bytes (`ext_page_size`, in MB as memcached;
    /// 0 = 4 MiB, or more for large RAM segments).
    pub page_size: usize,
    /// Write buffers of one segment each (`ext_wbuf_count`).
    pub wbuf_count: usize,
    /// Values shorter than this stay in RAM (`ext_item_size`).
    pub item_size: usize,
    /// Threads of the pread reader pool (`ext_threads`).
    pub threads: usize,
    /// Reinsert items that were read while on flash when their segment is reclaimed.
    pub reinsert: bool,
    /// Device write budget, bytes per second (0 = unlimited; `ext_write_budget`).
    pub write_budget: u64,
    /// Erase devices holding something else (`ext_wipe`).
    pub wipe: bool,
    /// Expected bytes per flash item (`ext_avg_item_size`), a hint: the index
    /// starts sized for the devices full of such items and does not shrink
    /// below that. 0 (the default): it starts small; it grows and shrinks
    /// with the items either way.
    pub avg_item_size: usize,
    /// Which flash hits copy the item back to RAM: never, second, always (`ext_promote`).
    pub promote: String,
    /// Milliseconds a RAM evacuation waits for flash write-buffer room
    /// before it evicts what it cannot write (`ext_max_write_wait`; 0 = as
    /// long as the device needs: sets throttled to its speed).
    pub max_write_wait: u64,
    /// Items expiring within this many seconds get their own flash segments
    /// (`ext_low_ttl`; 0 = off; needs ext_wbuf_count >= 3).
    pub low_ttl: u32,
    /// Flash reader (`ext_io`): auto (io_uring where it works, else the
    /// pread pool), uring (or a start-up error) or pool.
    pub io: String,
    /// Keep the crash journal (`ext_crash_safe`, default on), so that flash
    /// items come back after a crash and nothing deleted or overwritten
    /// does. Off: changes to flash items never wait for the journal, and
    /// after a crash the flash tier starts empty (docs/CRASH.md).
    pub crash_safe: bool,
    /// Non-hierarchical caching between the fast and the capacity class
    /// (`ext_nhc`, default on; only with both classes). Off: classic caching.
    pub nhc: bool,
    /// What the scheduler's feedback measures (`ext_nhc_feedback`):
    /// `balance` (the classes' read latencies, the default) or `throughput`
    /// (flash reads served per second). docs/CLASSES.md.
    pub nhc_feedback: String,
    /// Copies of hot fast items on the capacity class (`ext_nhc_copies`):
    /// `auto` (the default: while the scheduler finds the fast class queued
    /// and the capacity class with headroom), `always` or `never`.
    /// docs/CLASSES.md, "Copies where they pay".
    pub nhc_copies: String,
    /// Items of at most this many bytes of key and value go to the dense
    /// small-object store instead of the log-structured tier (`ext_small_max`;
    /// 0, the default, = no store; at most 4044). docs/SMALL.md.
    pub small_max: usize,
    /// Percent of the first flash device the small-object store takes
    /// (`ext_small_share`, 1..=90, default 50).
    pub small_share: u64,
    /// After a segment flush of the small-object store that took T, the next
    /// waits this many times T and items leaving RAM meanwhile go to the
    /// log-structured tier (`ext_small_flush_duty`, default 3: flushes take at
    /// most a quarter of the time; 0: never defer, requests that need a
    /// flush, or a place in the queue of sealed segments, wait for it).
    pub small_flush_duty: u32,
    /// The small-object store's segment flushes run on background threads,
    /// their set reads and writes off the shard's lock
    /// (`ext_small_background`, default 1; 0: on the thread whose item
    /// filled the segment, holding its shard's lock, as before).
    pub small_background: bool,
    /// Log objects of one 4 KiB set the small-object store needs before it
    /// moves them into the set (`ext_small_threshold`, 1..=8, default 2;
    /// higher: less write amplification, more objects dropped). docs/SMALL.md.
    pub small_threshold: usize,
    /// Percent of the small-object store's region its log takes
    /// (`ext_small_log`, 1..=50, default 10). Changing it formats the store
    /// anew (it starts empty). docs/SMALL.md.
    pub small_log: u64,
}

impl Default for FlashSection {
    fn default() -> Self {
        FlashSection {
            paths: Vec::new(),
            page_size: 0,
            wbuf_count: 4,
            item_size: 0,
            threads: 4,
            reinsert: true,
            write_budget: 0,
            wipe: false,
            avg_item_size: 0,
            promote: "second".into(),
            low_ttl: 3600,
            max_write_wait: 10,
            io: "auto".into(),
            crash_safe: true,
            nhc: true,
            nhc_feedback: "balance".into(),
            nhc_copies: "auto".into(),
            small_max: 0,
            small_share: 50,
            small_flush_duty: 3,
            small_background: true,
            small_threshold: 2,
            small_log: 10,
        }
    }
}

/// The largest RAM segment (an index entry addresses 8 MiB), and with a
/// flash tier (a flash segment of at most 8 MiB holds two). Items larger
/// than the segment size (`-I` above it) get a jumbo segment each.
pub const MAX_SEGMENT: usize = tiercache_engine::MAX_SEGMENT_BYTES;
pub const MAX_SEGMENT_WITH_FLASH: usize = 3 << 20;

/// The flash file the binary uses when nothing else is configured.
pub const DEFAULT_FLASH: &str = "tiercache.flash:1G";
/// The largest `ext_small_max`: one object (20 bytes of header) in a 4 KiB
/// set after its 32-byte header.
pub const SMALL_MAX_LIMIT: usize = 4096 - 32 - 20;
