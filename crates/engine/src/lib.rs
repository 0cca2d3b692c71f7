//! tiercache-engine: the cache as a library, with no network code. The server,
//! the simulator and the tests drive the same engine.
//!
//! ```text
//!  Engine ──hash──► Mutex<Shard> × N ──► Index (8-slot buckets: tag + segment + offset)
//!     │                  │
//!     │                  └─► segments in two FIFO queues (probation, main),
//!     │                      evacuated a segment at a time as the policy decides
//!     └─► Shared: SegmentPool (memory budget: segments + index), CAS counter, flush state
//! ```
//!
//! - [`item`]: the 24-byte item header inside a segment.
//! - [`index`]: the compact hash index.
//! - [`pool`]: the memory budget.
//! - [`shard`]: primitives (find, insert, unlink, hit, evacuation, expiry sweep).
//! - [`ops`]: memcached semantics (storage modes, incr/decr, touch).
//! - [`engine`]: sharding, flush_all, stats.

pub mod clock;
pub mod credit;
pub mod engine;
pub mod flash;
pub mod flushed;
pub mod index;
pub mod item;
pub mod ops;
pub mod persist;
pub mod pool;
pub mod segment;
pub mod shard;

pub use engine::{ConfigError, Engine, EngineConfig, EngineStats, FlashConfig};
pub use index::Loc;
pub use shard::{NewItem, Shard};
