//! A fault-injecting device for tests: wraps any [`BlockDevice`] and makes
//! reads or writes fail, return short, come back corrupted or slow, or the
//! whole device vanish, on command. It hides its file descriptor so that
//! every read goes through it (the thread-pool reader is used).

use super::block::BlockDevice;
use parking_lot::Mutex;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What to break. Counters are 1-based: `fail_read_every: 3` fails every
/// third read.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Every Nth read returns an I/O error.
    pub fail_read_every: u64,
    /// Every Nth read returns only half of what was asked.
    pub short_read_every: u64,
    /// Every Nth read has one byte flipped in the middle of its buffer.
    pub corrupt_read_every: u64,
    /// Writes after this many successful ones fail (0 = never).
    pub fail_writes_after: u64,
    /// Every read and write takes at least this long.
    pub latency: Duration,
    /// Everything fails, as if the device was unplugged.
    pub vanished: bool,
}

pub struct FaultDevice {
    inner: Arc<dyn BlockDevice>,
    faults: Mutex<Faults>,
    reads: AtomicU64,
    writes: AtomicU64,
    name: String,
}

impl FaultDevice {
    pub fn new(inner: Arc<dyn BlockDevice>, faults: Faults) -> FaultDevice {
        let name = format!("faulty({})", inner.name());
        FaultDevice {
            inner,
            faults: Mutex::new(faults),
            reads: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            name,
        }
    }

    /// Changes the faults from now on.
    pub fn set(&self, faults: Faults) {
        *self.faults.lock() = faults;
    }

    pub fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
}

fn every(n: u64, count: u64) -> bool {
    n != 0 && count.is_multiple_of(n)
}

impl BlockDevice for FaultDevice {
    fn name(&self) -> &str {
        &self.name
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let f = self.faults.lock().clone();
        let n = self.reads.fetch_add(1, Ordering::Relaxed) + 1;
        if !f.latency.is_zero() {
            std::thread::sleep(f.latency);
        }
        if f.vanished {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        if every(f.fail_read_every, n) {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        let got = self.inner.read_at(buf, off)?;
        if every(f.corrupt_read_every, n) && got > 0 {
            buf[got / 2] ^= 0x5A;
        }
        if every(f.short_read_every, n) {
            return Ok(got / 2);
        }
        Ok(got)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let f = self.faults.lock().clone();
        if !f.latency.is_zero() {
            std::thread::sleep(f.latency);
        }
        if f.vanished {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        let n = self.writes.load(Ordering::Relaxed);
        if f.fail_writes_after != 0 && n >= f.fail_writes_after {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        self.inner.write_at(buf, off)?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        if self.faults.lock().vanished {
            return Err(io::Error::from_raw_os_error(libc::ENODEV));
        }
        self.inner.sync()
    }
}

/// A device in memory, for tests that need no file system.
pub struct MemDevice {
    data: Mutex<Vec<u8>>,
}

impl MemDevice {
    pub fn new(size: usize) -> MemDevice {
        MemDevice::from_image(vec![0; size])
    }

    /// A device holding these bytes (a crash image, a golden file).
    pub fn from_image(data: Vec<u8>) -> MemDevice {
        MemDevice {
            data: Mutex::new(data),
        }
    }

    /// A copy of everything on the device.
    pub fn image(&self) -> Vec<u8> {
        self.data.lock().clone()
    }
}

/// When a [`CrashDevice`] "loses power".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPlan {
    /// Writes before the `at`th (1-based) land; of the `at`th, only its first
    /// `torn` bytes (0 = none of it).
    Cut { at: u64, torn: usize },
    /// Writes before the `at`th land, except those not yet followed by a
    /// sync, which are lost (a volatile device cache).
    DropUnsynced { at: u64 },
}

/// An in-memory device that records what it would hold if power failed at
/// a chosen write, while the engine on it carries on (its later writes are
/// simply not in the image). Tests recover a fresh engine from the image.
pub struct CrashDevice {
    state: Mutex<CrashState>,
}

struct CrashState {
    data: Vec<u8>,
    writes: u64,
    plan: CrashPlan,
    /// (offset, previous bytes) of writes since the last sync, newest last.
    unsynced: Vec<(usize, Vec<u8>)>,
    image: Option<Vec<u8>>,
}

impl CrashDevice {
    pub fn new(size: usize, plan: CrashPlan) -> CrashDevice {
        CrashDevice {
            state: Mutex::new(CrashState {
                data: vec![0; size],
                writes: 0,
                plan,
                unsynced: Vec::new(),
                image: None,
            }),
        }
    }

    /// Sets the crash point from now on (`at` counts all writes so far).
    pub fn arm(&self, plan: CrashPlan) {
        self.state.lock().plan = plan;
    }

    /// Writes so far.
    pub fn writes(&self) -> u64 {
        self.state.lock().writes
    }

    /// The image at the crash point, once the engine got that far.
    pub fn crash_image(&self) -> Option<Vec<u8>> {
        self.state.lock().image.clone()
    }
}

impl BlockDevice for CrashDevice {
    fn name(&self) -> &str {
        "crash-test"
    }

    fn size(&self) -> u64 {
        self.state.lock().data.len() as u64
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let d = &self.state.lock().data;
        let off = off as usize;
        let n = buf.len().min(d.len().saturating_sub(off));
        buf[..n].copy_from_slice(&d[off..off + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut st = self.state.lock();
        let off = off as usize;
        if off + buf.len() > st.data.len() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        st.writes += 1;
        let n = st.writes;
        match st.plan {
            CrashPlan::Cut { at, torn } if at == n => {
                let mut image = st.data.clone();
                let k = torn.min(buf.len());
                image[off..off + k].copy_from_slice(&buf[..k]);
                st.image = Some(image);
            }
            CrashPlan::DropUnsynced { at } if at == n => {
                let mut image = st.data.clone();
                for (o, old) in st.unsynced.iter().rev() {
                    image[*o..*o + old.len()].copy_from_slice(old);
                }
                st.image = Some(image);
            }
            _ => {}
        }
        if matches!(st.plan, CrashPlan::DropUnsynced { at } if n < at) {
            let old = st.data[off..off + buf.len()].to_vec();
            st.unsynced.push((off, old));
        }
        st.data[off..off + buf.len()].copy_from_slice(buf);
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.state.lock().unsynced.clear();
        Ok(())
    }
}

impl BlockDevice for MemDevice {
    fn name(&self) -> &str {
        "memory"
    }

    fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }

    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let d = self.data.lock();
        let off = off as usize;
        if off >= d.len() {
            return Ok(0);
        }
        let n = buf.len().min(d.len() - off);
        buf[..n].copy_from_slice(&d[off..off + n]);
        Ok(n)
    }

    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        let mut d = self.data.lock();
        let off = off as usize;
        if off + buf.len() > d.len() {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        d[off..off + buf.len()].copy_from_slice(buf);
        Ok(())
    }
}
