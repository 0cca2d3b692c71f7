//! The device layer both stores below RAM use (the flash log in
//! [`crate::flash`] and the small-object store in [`crate::small`]): block
//! devices opened with O_DIRECT, aligned buffers, and the readers that
//! submit their reads without blocking a worker.
//!
//! - [`aligned`]: 4 KiB-aligned buffers for direct I/O.
//! - [`block`]: the device trait and O_DIRECT files or block devices.
//! - [`fault`]: a fault-injecting device (and an in-memory one) for tests.
//! - [`io`]: per-worker asynchronous readers (thread-pool pread).
//! - [`uring`]: the io_uring reader (one ring per worker).
//! - [`truncated`]: a device seen shorter (its tail is the small-object store's).

pub mod aligned;
pub mod block;
pub mod fault;
pub mod io;
pub mod truncated;
pub mod uring;

pub use block::{BlockDevice, DeviceError, FileDevice, Undo};
