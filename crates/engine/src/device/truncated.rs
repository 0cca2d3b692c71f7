//! A device seen shorter than it is: the flash tier's view of a device
//! whose tail holds the small-object store (docs/SMALL.md). Offsets are
//! the device's own, so the io_uring reader's file descriptor and the
//! small store's reads (issued through the tier's reader, past the tier's
//! end) need no translation.

use super::block::BlockDevice;
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// `inner`, reporting `size` bytes.
pub struct Truncated {
    inner: Arc<dyn BlockDevice>,
    size: u64,
}

impl Truncated {
    pub fn new(inner: Arc<dyn BlockDevice>, size: u64) -> Truncated {
        assert!(size <= inner.size());
        Truncated { inner, size }
    }
}

impl BlockDevice for Truncated {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        self.inner.read_at(buf, off)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.inner.write_at(buf, off)
    }

    fn sync(&self) -> io::Result<()> {
        self.inner.sync()
    }

    fn write_durable(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.inner.write_durable(buf, off)
    }

    fn raw_fd(&self) -> Option<RawFd> {
        self.inner.raw_fd()
    }
}
