//! Why an engine could not be built ([`ConfigError`]) and why the shutdown
//! snapshot was refused ([`SnapshotError`]); a device's own errors are
//! [`DeviceError`]. Each message says what to do about it; the server prints
//! them as they are at start, and tests and scripts match on their text, so
//! the text of a variant's message does not change.

use crate::device::DeviceError;
use std::io;
use std::path::PathBuf;

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A flash device could not be opened, checked or formatted.
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("segment size {size} must be between 64 KiB and 8 MiB")]
    SegmentSize { size: usize },
    #[error("flash segment size {size} must be a multiple of 4 KiB between 64 KiB and 8 MiB")]
    FlashSegmentSize { size: usize },
    #[error(
        "flash segment size ({flash_kib} KiB) must be at least twice the RAM segment size ({ram_kib} KiB) plus 8 KiB"
    )]
    FlashSegmentTooSmall { flash_kib: usize, ram_kib: usize },
    /// `-m` leaves too little room; the message names the smallest `-m`
    /// this configuration starts with.
    #[error(
        "memory limit of {memory_mb} MiB is too small{detail}{}",
        memory_advice(.needs_mb, .flash)
    )]
    MemoryTooSmall {
        memory_mb: usize,
        /// What took the memory (empty when -m holds too few segments).
        detail: String,
        /// The smallest -m that works, if any does.
        needs_mb: Option<usize>,
        /// With a flash tier: what it costs and the RAM-only way out.
        flash: Option<FlashShare>,
    },
    #[error(
        "memory limit of {memory_mb} MiB is too large for {segment_kib} KiB segments: the index addresses at most {max_segments} segments; use segments of at least {min_segment_kib} KiB"
    )]
    TooManySegments {
        memory_mb: usize,
        segment_kib: usize,
        max_segments: u32,
        min_segment_kib: usize,
    },
    #[error(
        "{segments} segments of {segment_kib} KiB over {shards} shards is more than the index can address per shard; use larger segments (-o segment_size) or more shards"
    )]
    TooManySegmentsPerShard {
        segments: usize,
        segment_kib: usize,
        shards: usize,
    },
    #[error("shard count must be a power of two")]
    ShardCount { shards: usize },
    #[error(
        "unknown eviction policy '{name}': choose one of {}",
        tiercache_policy::POLICY_NAMES.join(", ")
    )]
    UnknownPolicy { name: String },
    #[error("flash configured without a device")]
    NoFlashDevice,
    #[error("grouping by TTL (ext_low_ttl) needs at least 3 write buffers (ext_wbuf_count)")]
    TtlGroupsNeedBuffers { write_buffers: usize },
    #[error("flash devices hold {segments} segments of {segment_kib} KiB; need at least {needed}")]
    TooFewFlashSegments {
        segments: usize,
        segment_kib: usize,
        needed: usize,
    },
    #[error("ext_io=uring: io_uring cannot be used: {why}; use ext_io=auto or ext_io=pool")]
    NoUring { why: String },
    /// A thread the engine needs could not be started.
    #[error("cannot start {thread}: {error}")]
    Thread {
        thread: &'static str,
        error: io::Error,
    },
    /// The shutdown snapshot is there but cannot be used.
    #[error(
        "snapshot {} cannot be used: {error}; start with -o ext_wipe to discard it (and the flash contents)",
        .path.display()
    )]
    Snapshot { path: PathBuf, error: SnapshotError },
}

/// What a flash tier takes out of `-m`, for [`ConfigError::MemoryTooSmall`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlashShare {
    /// Flash configured, in MiB (the index is sized for it).
    pub device_mb: u64,
    /// The smallest -m of the same configuration without flash.
    pub ram_only_needs_mb: Option<usize>,
    /// Whether `ext_avg_item_size` sized the index for the devices.
    pub hinted: bool,
    /// The small-object store's DRAM at start, MiB (0: no store).
    pub small_mb: usize,
}

fn memory_advice(needs_mb: &Option<usize>, flash: &Option<FlashShare>) -> String {
    let mut msg = match needs_mb {
        Some(min) => format!("; this configuration needs at least -m {min}"),
        None => "; raise -m".to_string(),
    };
    if let Some(f) = flash {
        let index = if f.hinted {
            format!(
                " and its index (sized for {} MiB of flash at ext_avg_item_size)",
                f.device_mb
            )
        } else {
            String::new()
        };
        let small = if f.small_mb > 0 {
            format!(
                " and the small-object store's filters and buffers ({} MiB)",
                f.small_mb
            )
        } else {
            String::new()
        };
        msg.push_str(&format!(
            " (the flash tier's write buffers{index}{small} come out of -m): raise -m, use less flash, lower ext_wbuf_count{}{}, or run RAM-only with -o ext_path=none",
            if f.hinted { ", raise ext_avg_item_size" } else { "" },
            if f.small_mb > 0 { ", lower ext_small_share" } else { "" },
        ));
        if let Some(min) = f.ram_only_needs_mb {
            msg.push_str(&format!(", which needs at least -m {min}"));
        }
    }
    msg
}

/// Why the shutdown snapshot cannot be used (inside
/// [`ConfigError::Snapshot`], which names the file and the way out).
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("not a tiercache snapshot")]
    NotASnapshot,
    #[error("snapshot format version {found}, this build reads {expected}")]
    OtherVersion { found: u32, expected: u32 },
    /// Written by a server with another geometry (`setting` indexes the
    /// snapshot's fingerprint: RAM segment size, shards, flash segment
    /// size, flash slots).
    #[error(
        "written with another configuration (setting {setting}: {found}, now {expected}); restart with the same -m, -I, shards and ext_* options"
    )]
    OtherConfiguration {
        setting: usize,
        found: u64,
        expected: u64,
    },
    /// Truncated, a checksum mismatch, or a value no snapshot of this
    /// configuration can hold.
    #[error("{0}")]
    Damaged(io::Error),
    /// The file could not be read.
    #[error("{0}")]
    Io(io::Error),
    /// Read, but it could not be removed (a later crash would restore it
    /// again).
    #[error("cannot remove it after reading: {0}")]
    Remove(io::Error),
}

/// The snapshot readers report through `io::Error`: invalid values
/// ([`crate::persist::invalid`], a checksum mismatch) and a short file are
/// damage, anything else an I/O error.
impl From<io::Error> for SnapshotError {
    fn from(e: io::Error) -> SnapshotError {
        match e.kind() {
            io::ErrorKind::InvalidData | io::ErrorKind::UnexpectedEof => SnapshotError::Damaged(e),
            _ => SnapshotError::Io(e),
        }
    }
}
