//! The flash tier: items evicted from RAM are appended to segment-sized
//! write buffers, written whole and sequentially with O_DIRECT, and read
//! back asynchronously and verified before they are served.
//!
//! - [`aligned`]: 4 KiB-aligned buffers for direct I/O.
//! - [`device`]: the device trait and O_DIRECT files or block devices.
//! - [`fault`]: a fault-injecting device (and an in-memory one) for tests.
//! - [`format`]: the on-flash format, byte by byte.
//! - [`tier`]: slots, write buffers, the flusher, reclaim.
//! - [`fetch`]: records a request waits for, verified on arrival.
//! - [`stats`]: [`FlashStats`], the tier's figures for `stats`, read once.
//! - [`journal`]: tombstones and the trust floor that make crash recovery safe.
//! - [`distrust`]: recording a failed journal so the next start trusts nothing.
//! - [`io`]: per-worker asynchronous readers (thread-pool pread).
//! - [`uring`]: the io_uring reader (one ring per worker).
//! - [`truncated`]: the tier's view of a device whose tail is the small-object store's.

pub mod aligned;
pub mod device;
pub mod distrust;
pub mod fault;
pub mod fetch;
pub mod format;
pub mod io;
pub mod journal;
pub mod stats;
pub mod tier;
pub mod truncated;
pub mod uring;

pub use device::{BlockDevice, DeviceError, FileDevice};
pub use fetch::{FetchState, Fetched, ReadReq};
pub use stats::{ClassStats, FlashStats};
pub use tier::{is_flash, FlashTier, TierParams, FLASH_SEG_BASE};
