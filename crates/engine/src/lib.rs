//! tiercache-engine: the cache as a library, with no network code. The server,
//! the simulator and the tests drive the same engine through one API: the
//! commands of [`command`] (each returning a typed outcome, or what it waits
//! for), the configuration and stats types of [`engine`] and
//! [`flash::FlashStats`], and the flash reader they drive ([`device::io`]).
//! Shards, items, the index and the memory pool are private to the crate.
//!
//! ```text
//!  Engine ──hash──► Mutex<Shard> × N ──► Index (10-slot cache-line buckets, two per key:
//!     │                  │                      11-bit tag + hit bit + segment + offset)
//!     │                  ├─► RAM segments in two FIFO queues (probation, main),
//!     │                  │   evacuated a segment at a time as the policy decides
//!     │                  └─► below: Chain (stores/) ─┬─► LogPart: records in FlashTier segments
//!     │                                              └─► SmallPart: a region of the small store
//!     ├─► Shared: SegmentPool (memory budget: segments + index + write buffers), CAS, flush
//!     └─► FlashTier: write buffers, flusher, reclaim, crash journal, recovery
//! ```
//!
//! - [`item`]: the 24-byte item header inside a segment.
//! - [`index`]: the compact hash index.
//! - [`pool`]: the memory budget.
//! - [`segment`]: a RAM segment.
//! - [`shard`]: the RAM tier: primitives (find, insert, unlink, hit,
//!   evacuation, expiry sweep), the one lookup order (`Shard::locate`), the
//!   RAM side of the stores below (demotion, probes, promotion) and the
//!   crash-safety gate.
//! - `store`: the face of the stores below RAM (which there are, their
//!   lookup order, size routing); `stores`: each store's part of a shard,
//!   and the chain that holds them.
//! - [`command`]: every protocol command as the engine runs it (get, the
//!   storage modes, delete, touch, incr/decr, flush, the meta commands, the
//!   probe that lists a key's flash reads), the crash journal's gate, CAS,
//!   promotion and item bits inside, typed outcomes.
//! - [`ops`]: memcached semantics (storage modes, incr/decr, touch).
//! - [`evacuator`]: the thread that runs evacuations begun ahead, so
//!   that sets do not.
//! - [`engine`]: sharding, flush_all, stats, start-up (snapshot or crash
//!   recovery) and shutdown.
//! - [`error`]: typed configuration and snapshot errors (a device's are
//!   [`flash::DeviceError`]).
//! - [`flash`]: the flash tier (devices, format, write path, reads, journal).
//! - [`persist`]: the shutdown snapshot's layout.
//! - `hash`, `wait`: the floor every layer may import (the key hash, why a
//!   command must run again).
//! - [`clock`], [`credit`]: time and memcached's exptime rules; the
//!   feedback counters behind promotion and verify-before-set.

pub mod clock;
pub mod command;
pub(crate) mod credit;
pub mod device;
pub mod engine;
pub mod error;
pub mod evacuator;
pub mod evictions;
pub mod flash;
pub(crate) mod flushed;
pub(crate) mod hash;
pub(crate) mod index;
pub(crate) mod item;
pub(crate) mod ops;
pub(crate) mod persist;
pub(crate) mod pool;
pub mod priority;
pub(crate) mod segment;
pub(crate) mod shard;
pub mod stat;
pub(crate) mod store;
pub(crate) mod stores;
/// Shard-lock holds by cause, for `stats` and `/metrics`.
pub use shard::hold::{
    hold_bucket_bound_us, HoldCause, HoldStats, CPU_BOUND_US, HOLD_BUCKETS, HOLD_CAUSES,
};
pub mod small;
pub(crate) mod wait;

pub use engine::index_dram_bytes;
pub use engine::{Engine, EngineConfig, EngineStats, FlashConfig};
pub use error::{ConfigError, SnapshotError};
pub use index::{Loc, MAX_SEGMENT_BYTES};
/// Bytes of header each item carries in RAM (the stats' DRAM-per-item figure).
pub use item::HEADER as ITEM_HEADER;
pub use stores::copies::max_copies;
