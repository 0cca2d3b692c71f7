//! tiercache-engine: the cache as a library, with no network code. The server,
//! the simulator and the tests drive the same engine.
//!
//! ```text
//!  Engine ──hash──► Mutex<Shard> × N ──► Index (10-slot cache-line buckets, two per key:
//!     │                  │                      11-bit tag + hit bit + segment + offset)
//!     │                  ├─► RAM segments in two FIFO queues (probation, main),
//!     │                  │   evacuated a segment at a time as the policy decides
//!     │                  └─► flash entries: records in FlashTier segments
//!     ├─► Shared: SegmentPool (memory budget: segments + index + write buffers), CAS, flush
//!     └─► FlashTier: write buffers, flusher, reclaim, crash journal, recovery
//! ```
//!
//! - [`item`]: the 24-byte item header inside a segment.
//! - [`index`]: the compact hash index.
//! - [`pool`]: the memory budget.
//! - [`segment`]: a RAM segment.
//! - [`shard`]: primitives (find, insert, unlink, hit, evacuation, expiry
//!   sweep), the RAM side of the flash tier (demotion, probes, promotion) and
//!   the crash-safety gate.
//! - [`command`]: delete, touch, gat, md and refused stores as engine
//!   commands, the crash journal's gate inside, typed outcomes.
//! - [`ops`]: memcached semantics (storage modes, incr/decr, touch).
//! - [`engine`]: sharding, flush_all, stats, start-up (snapshot or crash
//!   recovery) and shutdown.
//! - [`error`]: typed configuration and snapshot errors (a device's are
//!   [`flash::DeviceError`]).
//! - [`flash`]: the flash tier (devices, format, write path, reads, journal).
//! - [`persist`]: the shutdown snapshot's layout.
//! - [`clock`], [`credit`]: time and memcached's exptime rules; the
//!   feedback counters behind promotion and verify-before-set.

pub mod clock;
pub mod command;
pub mod credit;
pub mod engine;
pub mod error;
pub mod flash;
pub mod flushed;
pub mod index;
pub mod item;
pub mod ops;
pub mod persist;
pub mod pool;
pub mod segment;
pub mod shard;

pub use engine::{Engine, EngineConfig, EngineStats, FlashConfig};
pub use error::{ConfigError, SnapshotError};
pub use index::Loc;
pub use shard::{NewItem, Shard};
