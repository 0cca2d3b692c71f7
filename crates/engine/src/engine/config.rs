//! The engine's configuration: RAM, shards, policy, and the flash tier's
//! settings (devices, reader, small-object store).
//!
//! [`FlashConfig`] (with its [`TierParams`]) is the server's `[flash]`
//! section: its serde names and defaults are the TOML file's and `-o`'s
//! (the option without `ext_`). What the front end gives by a name it
//! parses and checks (the devices of `ext_path`, `ext_io`, the snapshot
//! next to the first device) is skipped by serde and set at start.

use crate::device::io::IoMode;
use crate::flash::TierParams;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Flash tier settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct FlashConfig {
    /// Files or block devices with their sizes in bytes (0 = whole block
    /// device; from `ext_path`).
    #[serde(skip)]
    pub paths: Vec<(PathBuf, u64)>,
    /// The flash log's settings; a front end reads them beside these, as
    /// the server's `[flash]` section does (serde skips them here: a
    /// struct flattened into another must not flatten one itself).
    #[serde(skip)]
    pub params: TierParams,
    /// Threads of the pread pool (`ext_threads`).
    #[serde(rename = "threads")]
    pub read_threads: usize,
    /// Which reader to use (`ext_io`).
    #[serde(skip)]
    pub io: IoMode,
    /// Reads of one device in the kernel at most, the io_uring rings of all
    /// workers together (`ext_read_depth`, 1..=4096, default 64): each of
    /// the `readers` rings keeps its share ([`crate::device::uring::per_ring`]);
    /// more wait in the device's own queue in the reader (`device/uring.rs`
    /// says why).
    pub read_depth: usize,
    /// The rings that share `read_depth`: the server's network workers
    /// (`-t`), each with its own reader.
    #[serde(skip)]
    pub readers: usize,
    /// A hint, 0 = none: expected bytes per item on flash
    /// (`ext_avg_item_size`). The index then starts sized for the devices
    /// full of such items and does not shrink below that; without it the
    /// index starts small. Either way it grows and shrinks with the items
    /// it holds (see index.rs).
    pub avg_item_size: usize,
    /// Where a graceful shutdown writes the snapshot the next start reads.
    #[serde(skip)]
    pub snapshot: Option<PathBuf>,
    /// Items of at most this many bytes of key and value leave RAM for the
    /// small-object store (`ext_small_max`; 0, the default, = no store; at
    /// most 4044). docs/SMALL.md.
    pub small_max: usize,
    /// Percent of the first device the small-object store takes
    /// (`ext_small_share`, 1..=90, default 50).
    #[serde(rename = "small_share")]
    pub small_percent: u64,
    /// A segment flush of the store waits this many times its own duration
    /// after the previous one, and items that would need it go to the
    /// log-structured tier meanwhile (`ext_small_flush_duty`, default 3;
    /// 0: never waits, as the simulator and tests have it). See
    /// `SmallStore::set_flush_duty`.
    pub small_flush_duty: u32,
    /// The store's segment flushes run on background threads, their set
    /// I/O off the shard's lock (`ext_small_background`, the default);
    /// false: on the inserting thread (the simulator, tests).
    pub small_background: bool,
    /// Small items take the store whether or not the log tier's index has
    /// room for them (`ext_small_first=1`; tests of the store, the
    /// simulator's store runs). The default, false: a small item goes to
    /// the store only once its index table is at its DRAM budget
    /// (docs/SMALL.md, "How an item's tier is chosen").
    pub small_first: bool,
    /// Log objects of one set needed to move them into it when the oldest
    /// leaves the store's log (`ext_small_threshold`, 1..=8, default 2; 0 =
    /// the store's default, 2). Higher: fewer set writes, more objects
    /// dropped.
    pub small_threshold: usize,
    /// Percent of the store's region its log takes (`ext_small_log`,
    /// 1..=50, default 10; 0 = 10). A larger log batches more objects per set write
    /// (less write amplification) for more DRAM in the log's index.
    /// Another value than the store was made with formats it anew (it
    /// starts empty).
    #[serde(rename = "small_log")]
    pub small_log_percent: u64,
    /// Files that record a failed crash journal outside the devices (see
    /// `flash::distrust`; `flash::distrust::default_files` gives the usual
    /// ones). A start that finds one recovers nothing from the devices.
    #[serde(skip)]
    pub untrusted_marks: Vec<PathBuf>,
}

impl Default for FlashConfig {
    /// The server's defaults.
    fn default() -> Self {
        FlashConfig {
            paths: Vec::new(),
            params: TierParams::default(),
            read_threads: 4,
            io: IoMode::Auto,
            read_depth: crate::device::uring::DEFAULT_DEPTH,
            readers: 1,
            avg_item_size: 0,
            snapshot: None,
            small_max: 0,
            small_percent: 50,
            small_flush_duty: 3,
            small_background: true,
            small_first: false,
            small_threshold: 2,
            small_log_percent: 10,
            untrusted_marks: Vec::new(),
        }
    }
}

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
    /// The flash tier, if any.
    pub flash: Option<FlashConfig>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory_limit: 64 << 20,
            segment_size: 1 << 20,
            shards: 0,
            hash_power: 0,
            policy: "s3fifo".into(),
            flash: None,
        }
    }
}
