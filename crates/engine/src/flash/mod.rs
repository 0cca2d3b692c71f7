//! The flash tier: items evicted from RAM are appended to segment-sized
//! write buffers, written whole and sequentially with O_DIRECT, and read
//! back asynchronously and verified before they are served.
//!
//! - [`class`]: the device classes (fast, capacity) and arrays indexed by them.
//! - [`format`]: the on-flash format, byte by byte.
//! - [`tier`]: slots, write buffers, the flusher, reclaim.
//! - [`fetch`]: records a request waits for, verified on arrival.
//! - [`stats`]: [`FlashStats`], the tier's figures for `stats`, read once.
//! - [`journal`]: tombstones and the trust floor that make crash recovery safe.
//! - [`distrust`]: recording a failed journal so the next start trusts nothing.
//!
//! The devices it writes and reads are in [`crate::device`].

pub mod class;
pub mod distrust;
pub mod fetch;
pub mod format;
pub mod journal;
#[cfg(test)]
mod journal_tests;
pub mod stats;
pub mod tier;

pub use crate::device::{BlockDevice, DeviceError, FileDevice};
pub use class::{DeviceClass, PerClass, CLASSES};
pub use fetch::{FetchState, Fetched, ReadReq};
pub use stats::{ClassStats, FlashStats};
pub use tier::{is_flash, FlashTier, TierParams, FLASH_SEG_BASE};
