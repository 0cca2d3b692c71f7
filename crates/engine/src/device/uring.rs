//! The io_uring flash reader: one ring per network worker, reads straight
//! from the devices' O_DIRECT file descriptors into 4 KiB-aligned buffers,
//! many in flight, no thread hop on either side.
//!
//! - Submission is batched: [`Reader::submit`] only fills the submission
//!   queue; one `io_uring_enter` per [`Reader::flush`] (the worker calls it
//!   once per turn of its event loop) or [`Reader::reap`], or as soon as the
//!   queue is full.
//! - Each read's buffer lives in the in-flight table (`slots`, indexed by the
//!   SQE's user data) until its completion is reaped; dropping the reader
//!   waits for every read still in the kernel.
//! - **At most `depth` reads of each device are in the kernel** per ring:
//!   `-o ext_read_depth` ([`DEFAULT_DEPTH`]) is the device's, shared out
//!   over the workers' rings ([`per_ring`]); the rest wait in that device's
//!   own queue here, and a read of another device never waits behind them.
//!   With no bound, an open-loop load past a device's rate queued thousands
//!   of reads in the kernel (2,300 on the throttled fast device of the NHC
//!   benchmarks), and the device then served half its rate: `fio` with
//!   io_uring on the same loop device throttled to 10,000 reads/s did
//!   10,000 at 32-128 reads in flight and 5,500-6,400 at 192-2,048
//!   (bench/RESULTS.md, issue 35). Each device's queue is its own, so its
//!   wait is part of that device's latency, which the NHC balance compares
//!   (a queue both classes shared would hide which one is the bottleneck).
//!   The ring is sized for every device's depth (up to the kernel's
//!   32,768 entries), so it does not fill.
//! - Completions are signalled through an eventfd registered with the ring,
//!   which the worker registers in its own epoll set ([`Reader::event_fd`]):
//!   a completion wakes the worker directly, as a socket does.
//! - Negative results become `Err` completions, short reads `Ok` with the
//!   bytes read, exactly as the pool's pread does.
//!
//! One of the engine's two modules with unsafe code (the other maps the
//! index's bucket arrays, `index/buckets.rs`): pushing an SQE that carries
//! a raw buffer pointer.

use super::aligned::{AlignedBuf, BLOCK};
use super::block::BlockDevice;
use super::io::{Completion, ReadOp, Reader};
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Reads of one device in the kernel at most, all workers' rings together,
/// by default (`ext_read_depth`): below the knee of the throttled loop
/// devices (over 128) whatever the worker count, and deep enough for an
/// NVMe device's rate at its latency (64 reads at 100 us is 640,000 reads a
/// second). Measured as 32 a ring with two workers (bench/RESULTS.md,
/// issue 35); a bound per ring let `-t 4` keep 128 of a device in the
/// kernel and `-t 8` 256, past that knee.
pub const DEFAULT_DEPTH: usize = 64;

/// A ring's share of a device's depth over `rings` rings: the depth
/// divided, rounded up, at least 1 (so `rings` rings together keep at most
/// `depth + rings - 1` reads of a device in the kernel).
pub fn per_ring(depth: usize, rings: usize) -> usize {
    depth.div_ceil(rings.max(1)).max(1)
}

/// The most a device's depth may be (the ring holds every device's).
pub const MAX_DEPTH: usize = 4096;

/// The most entries the kernel gives a ring (`IORING_MAX_ENTRIES`).
const MAX_RING_ENTRIES: usize = 1 << 15;

struct Slot {
    token: u64,
    dev: usize,
    buf: AlignedBuf,
}

/// A worker's io_uring reader.
pub struct UringReader {
    ring: IoUring,
    /// Written by the kernel on every completion.
    event: OwnedFd,
    fds: Vec<RawFd>,
    /// Keeps the devices, and so their file descriptors, open.
    _devices: Vec<Arc<dyn BlockDevice>>,
    /// Buffers of reads in the kernel, by SQE user data.
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    /// Reads pushed to the submission queue and not yet completed.
    in_ring: usize,
    /// Of those, pushed but not yet handed to the kernel.
    unsubmitted: usize,
    /// Reads of each device in the ring (at most `depth`).
    in_kernel: Vec<usize>,
    /// Reads of each device waiting for one of its places in the ring.
    waiting: Vec<VecDeque<ReadOp>>,
    depth: usize,
    /// Reads that failed without reaching the kernel.
    ready: Vec<Completion>,
}

impl UringReader {
    /// A ring reading `devices`, which must all have a file descriptor
    /// ([`BlockDevice::raw_fd`]), with at most `depth` reads of each in the
    /// kernel (1 to [`MAX_DEPTH`]); its entries hold every device's depth.
    pub fn new(devices: &[Arc<dyn BlockDevice>], depth: usize) -> io::Result<UringReader> {
        let fds = devices
            .iter()
            .map(|d| {
                d.raw_fd().ok_or_else(|| {
                    io::Error::new(
                        io::ErrorKind::Unsupported,
                        format!(
                            "flash device {} has no file descriptor (every read must go through it)",
                            d.name()
                        ),
                    )
                })
            })
            .collect::<io::Result<Vec<_>>>()?;
        let depth = depth.clamp(1, MAX_DEPTH);
        // io_uring takes at most 32,768 entries: past that (over eight
        // devices at the largest depth) the ring may fill, and `push` then
        // leaves a read in its device's queue until the next flush.
        let entries = (depth * devices.len().max(1))
            .next_power_of_two()
            .min(MAX_RING_ENTRIES) as u32;
        let ring = IoUring::new(entries)?;
        let event = rustix::event::eventfd(
            0,
            rustix::event::EventfdFlags::NONBLOCK | rustix::event::EventfdFlags::CLOEXEC,
        )?;
        ring.submitter().register_eventfd(event.as_raw_fd())?;
        let cap = ring.params().sq_entries() as usize;
        let n = fds.len();
        Ok(UringReader {
            ring,
            event,
            fds,
            _devices: devices.to_vec(),
            slots: (0..cap).map(|_| None).collect(),
            free: (0..cap as u32).rev().collect(),
            in_ring: 0,
            unsubmitted: 0,
            in_kernel: vec![0; n],
            waiting: (0..n).map(|_| VecDeque::new()).collect(),
            depth,
            ready: Vec::new(),
        })
    }

    /// Puts `op` in the submission queue; false if the ring has no room.
    fn push(&mut self, op: ReadOp) -> bool {
        if self.free.is_empty() {
            return false;
        }
        if self.ring.submission().is_full() {
            self.enter();
            if self.ring.submission().is_full() {
                return false;
            }
        }
        let Some(idx) = self.free.pop() else {
            return false;
        };
        let mut buf = AlignedBuf::for_read(op.len);
        let len = buf.len() as u32;
        let ptr = buf.as_mut_slice().as_mut_ptr();
        let sqe = opcode::Read::new(types::Fd(self.fds[op.dev]), ptr, len)
            .offset(op.offset)
            .build()
            .user_data(u64::from(idx));
        // The buffer goes into the table before the kernel can see the SQE.
        // Moving the AlignedBuf moves only its Box pointer, never the heap
        // bytes `ptr` points into.
        self.slots[idx as usize] = Some(Slot {
            token: op.token,
            dev: op.dev,
            buf,
        });
        #[allow(unsafe_code)]
        // SAFETY: `ptr` points to `len` writable bytes of the heap block
        // owned by `slots[idx]`. That slot is only emptied when the
        // completion carrying user data `idx` is reaped (the kernel is done
        // with the buffer), and `Drop` waits for every read still in the
        // kernel before the table is freed, so the buffer outlives the I/O.
        // Nothing else reads or writes the buffer while the read is in flight.
        let pushed = unsafe { self.ring.submission().push(&sqe) };
        if pushed.is_err() {
            self.slots[idx as usize] = None;
            self.free.push(idx);
            return false;
        }
        self.in_ring += 1;
        self.in_kernel[op.dev] += 1;
        self.unsubmitted += 1;
        if self.ring.submission().is_full() {
            self.enter();
        }
        true
    }

    /// Hands the queued SQEs to the kernel (one system call).
    fn enter(&mut self) {
        if self.unsubmitted == 0 {
            return;
        }
        match self.ring.submit() {
            Ok(n) => self.unsubmitted = self.unsubmitted.saturating_sub(n),
            // EBUSY/EAGAIN/EINTR: the SQEs stay queued; the next flush or
            // reap (the worker's loop wakes at least every 100 ms) retries.
            Err(e) => {
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::EBUSY) | Some(libc::EAGAIN) | Some(libc::EINTR)
                ) {
                    tracing::warn!(error = %e, "io_uring submit failed; will retry");
                }
            }
        }
    }

    /// Moves waiting reads into the ring, each device's up to its depth.
    fn fill(&mut self) {
        for dev in 0..self.waiting.len() {
            while self.in_kernel[dev] < self.depth {
                let Some(op) = self.waiting[dev].front().copied() else {
                    break;
                };
                if !self.push(op) {
                    // No slot or no room in the submission queue now (the
                    // kernel refused the last submit): the next flush retries.
                    return;
                }
                self.waiting[dev].pop_front();
            }
        }
    }

    /// A read that fails without reaching the kernel; the eventfd is
    /// written so the worker still wakes up for it.
    fn fail(&mut self, token: u64, e: io::Error) {
        self.ready.push(Completion {
            token,
            result: Err(e),
            queued_us: 0,
        });
        let _ = rustix::io::write(&self.event, &1u64.to_ne_bytes());
    }

    /// Blocks until at least one read completes (or none is in flight),
    /// then reaps. For tests, the start-up probe and callers without an
    /// event loop.
    pub fn wait(&mut self, out: &mut Vec<Completion>) -> io::Result<()> {
        self.fill();
        if self.ready.is_empty() && self.in_ring > 0 {
            loop {
                match self.ring.submit_and_wait(1) {
                    Ok(n) => {
                        self.unsubmitted = self.unsubmitted.saturating_sub(n);
                        break;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        self.reap(out);
        Ok(())
    }

    fn drain_event(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.event, &mut b);
    }
}

impl Reader for UringReader {
    fn submit(&mut self, op: ReadOp) {
        if op.dev >= self.fds.len() {
            let e = io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("no flash device {}", op.dev),
            );
            return self.fail(op.token, e);
        }
        // Straight into the ring while the device has room and nothing of
        // its own waits ahead of this read; else behind them.
        let room = self.in_kernel[op.dev] < self.depth && self.waiting[op.dev].is_empty();
        if !(room && self.push(op)) {
            self.waiting[op.dev].push_back(op);
        }
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        // Reset the eventfd first: a completion posted after this point
        // writes it again, so none is left without a wake-up.
        self.drain_event();
        out.append(&mut self.ready);
        for cqe in self.ring.completion() {
            let idx = cqe.user_data() as usize;
            let Some(slot) = self.slots.get_mut(idx).and_then(Option::take) else {
                continue;
            };
            self.free.push(idx as u32);
            self.in_ring -= 1;
            self.in_kernel[slot.dev] -= 1;
            let res = cqe.result();
            let result = if res < 0 {
                Err(io::Error::from_raw_os_error(-res))
            } else {
                Ok((slot.buf, res as usize))
            };
            out.push(Completion {
                token: slot.token,
                result,
                queued_us: 0,
            });
        }
        self.flush();
    }

    fn flush(&mut self) {
        self.fill();
        self.enter();
    }

    fn in_flight(&self) -> usize {
        self.in_ring + self.waiting.iter().map(VecDeque::len).sum::<usize>() + self.ready.len()
    }

    fn event_fd(&self) -> Option<RawFd> {
        Some(self.event.as_raw_fd())
    }
}

impl Drop for UringReader {
    fn drop(&mut self) {
        // The kernel may still write into buffers of the table: wait for
        // every read to complete before the table is freed.
        while self.in_ring > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
                Err(e) => {
                    tracing::error!(error = %e, reads = self.in_ring,
                        "io_uring: cannot wait for reads in flight; leaking their buffers");
                    std::mem::forget(std::mem::take(&mut self.slots));
                    return;
                }
            }
            for cqe in self.ring.completion() {
                if let Some(s) = self.slots.get_mut(cqe.user_data() as usize) {
                    if s.take().is_some() {
                        self.in_ring -= 1;
                    }
                }
            }
        }
    }
}

/// Whether this process may create an io_uring ring at all.
pub fn available() -> bool {
    // On a thread of its own, as the probe: tearing a ring down can leave
    // work that interrupts the calling thread's next blocking call (EINTR).
    std::thread::spawn(|| IoUring::new(2).is_ok())
        .join()
        .unwrap_or(false)
}

/// Checks that io_uring reads work on `devices`: creates a ring and reads
/// block 0 of each device through it. The error says why not.
pub fn probe(devices: &[Arc<dyn BlockDevice>]) -> Result<(), String> {
    let mut r = UringReader::new(devices, 1).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::ENOSYS) | Some(libc::EACCES) => {
            format!("io_uring is not allowed here ({e}; containers often forbid it)")
        }
        _ => format!("{e}"),
    })?;
    for dev in 0..devices.len() {
        r.submit(ReadOp {
            token: dev as u64,
            dev,
            offset: 0,
            len: BLOCK,
        });
    }
    r.flush();
    let mut out = Vec::new();
    while r.in_flight() > 0 {
        r.wait(&mut out)
            .map_err(|e| format!("waiting for an io_uring read failed: {e}"))?;
    }
    for c in out {
        let name = devices[c.token as usize].name();
        match c.result {
            Ok((_, n)) if n == BLOCK => {}
            Ok((_, n)) => return Err(format!("io_uring read {n} of {BLOCK} bytes from {name}")),
            Err(e) => return Err(format!("io_uring read from {name} failed: {e}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::fault::{FaultDevice, Faults, MemDevice};
    use crate::flash::FileDevice;
    use std::path::PathBuf;

    /// A temporary directory on the real file system (ext4 here), removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            let d = std::env::temp_dir().join(format!("tc-uring-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&d).unwrap();
            TempDir(d)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// A file of `blocks` blocks, block `b` filled with a pattern of `b`.
    fn device(dir: &TempDir, blocks: u64) -> Arc<dyn BlockDevice> {
        let dev = FileDevice::open(&dir.0.join("flash"), blocks * BLOCK as u64).expect("O_DIRECT");
        let mut w = AlignedBuf::new(BLOCK);
        for b in 0..blocks {
            fill(w.as_mut_slice(), b);
            dev.write_at(w.as_slice(), b * BLOCK as u64).unwrap();
        }
        Arc::new(dev)
    }

    fn fill(buf: &mut [u8], b: u64) {
        for (i, x) in buf.iter_mut().enumerate() {
            *x = (b as usize * 31 + i / 8) as u8;
        }
    }

    /// io_uring may be forbidden (seccomp in containers): such hosts skip.
    fn reader(devs: &[Arc<dyn BlockDevice>]) -> Option<UringReader> {
        match UringReader::new(devs, DEFAULT_DEPTH) {
            Ok(r) => Some(r),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => {
                eprintln!("io_uring not available here ({e}): skipped");
                None
            }
            Err(e) => panic!("cannot create a ring: {e}"),
        }
    }

    /// Waits on the eventfd as a worker's epoll would, then reaps.
    fn wait_event(r: &mut UringReader, out: &mut Vec<Completion>) {
        assert_eq!(r.event_fd(), Some(r.event.as_raw_fd()));
        let mut fds = [rustix::event::PollFd::new(
            &r.event,
            rustix::event::PollFlags::IN,
        )];
        let timeout = rustix::event::Timespec {
            tv_sec: 10,
            tv_nsec: 0,
        };
        let n = rustix::event::poll(&mut fds, Some(&timeout)).unwrap();
        assert_eq!(n, 1, "no completion signalled within 10 s");
        r.reap(out);
    }

    #[test]
    fn a_devices_depth_is_shared_out_over_the_rings() {
        assert_eq!(per_ring(64, 2), 32, "the measured setting");
        assert_eq!(per_ring(64, 4), 16);
        assert_eq!(per_ring(64, 8), 8, "-t 8 keeps 64 in the kernel, not 256");
        assert_eq!(per_ring(10, 4), 3, "rounded up");
        assert_eq!(per_ring(2, 8), 1, "every ring may read");
        assert_eq!(per_ring(64, 0), 64, "no worker count: one ring");
        for rings in 1..=16 {
            let total = per_ring(DEFAULT_DEPTH, rings) * rings;
            assert!(
                total < DEFAULT_DEPTH + rings,
                "{rings} rings keep {total} of a device in the kernel"
            );
        }
    }

    #[test]
    fn reads_known_blocks_many_in_flight() {
        let dir = TempDir::new("known");
        let blocks = 64;
        let devs = vec![device(&dir, blocks)];
        let Some(mut r) = reader(&devs) else { return };
        // Many times the device's depth: the rest wait in its queue here.
        let n = 24 * DEFAULT_DEPTH as u64 + 7;
        for t in 0..n {
            let b = (t * 7) % blocks;
            let len = if t % 3 == 0 { 2 * BLOCK } else { BLOCK };
            r.submit(ReadOp {
                token: t,
                dev: 0,
                offset: b.min(blocks - 2) * BLOCK as u64,
                len,
            });
        }
        assert_eq!(r.in_flight(), n as usize);
        r.flush();
        let mut out = Vec::new();
        let mut wakes = 0;
        while r.in_flight() > 0 {
            wait_event(&mut r, &mut out);
            wakes += 1;
        }
        assert_eq!(out.len(), n as usize);
        let mut seen = vec![false; n as usize];
        let mut want = AlignedBuf::new(2 * BLOCK);
        for c in out {
            let t = c.token;
            assert!(
                !std::mem::replace(&mut seen[t as usize], true),
                "token {t} twice"
            );
            let (buf, got) = c.result.expect("read");
            let b = ((t * 7) % blocks).min(blocks - 2);
            let len = if t % 3 == 0 { 2 * BLOCK } else { BLOCK };
            assert_eq!(got, len);
            for k in 0..len / BLOCK {
                fill(&mut want.as_mut_slice()[..BLOCK], b + k as u64);
                assert!(
                    buf.as_slice()[k * BLOCK..(k + 1) * BLOCK] == want.as_slice()[..BLOCK],
                    "token {t}: wrong bytes in block {}",
                    b + k as u64
                );
            }
        }
        assert!(wakes >= 1);
    }

    #[test]
    fn a_device_has_at_most_its_depth_in_the_kernel_and_the_other_waits_behind_none() {
        let (d0, d1) = (TempDir::new("depth0"), TempDir::new("depth1"));
        let devs = vec![device(&d0, 16), device(&d1, 16)];
        let depth = 4;
        let mut r = match UringReader::new(&devs, depth) {
            Ok(r) => r,
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::ENOSYS)) => return,
            Err(e) => panic!("cannot create a ring: {e}"),
        };
        let op = |token: u64, dev| ReadOp {
            token,
            dev,
            offset: (token % 16) * BLOCK as u64,
            len: BLOCK,
        };
        for t in 0..50 {
            r.submit(op(t, 0));
        }
        // Submitted after fifty reads of the other device: in the kernel
        // at once, not behind them (the NHC balance reads each class's
        // wait from its own reads).
        r.submit(op(50, 1));
        r.flush();
        assert_eq!(r.in_kernel, vec![depth, 1]);
        assert_eq!(r.waiting[0].len(), 50 - depth);
        assert_eq!(r.in_flight(), 51);
        let mut out = Vec::new();
        let mut most = 0;
        while r.in_flight() > 0 {
            r.wait(&mut out).unwrap();
            most = most.max(r.in_kernel[0]);
            assert!(r.in_kernel[0] <= depth && r.in_kernel[1] <= 1);
        }
        assert_eq!(most, depth, "the queue refills the device's places");
        out.sort_by_key(|c| c.token);
        assert_eq!(out.len(), 51);
        let mut want = vec![0u8; BLOCK];
        for (c, t) in out.iter().zip(0u64..) {
            assert_eq!(c.token, t);
            let (buf, n) = c.result.as_ref().expect("read");
            assert_eq!(*n, BLOCK);
            fill(&mut want, t % 16);
            assert!(
                buf.as_slice()[..BLOCK] == want[..],
                "token {t}: wrong bytes"
            );
        }
    }

    #[test]
    fn short_read_at_end_of_file() {
        let dir = TempDir::new("short");
        let devs = vec![device(&dir, 8)];
        let Some(mut r) = reader(&devs) else { return };
        // Two blocks asked from the last block: one comes back.
        r.submit(ReadOp {
            token: 1,
            dev: 0,
            offset: 7 * BLOCK as u64,
            len: 2 * BLOCK,
        });
        // Past the end: nothing.
        r.submit(ReadOp {
            token: 2,
            dev: 0,
            offset: 8 * BLOCK as u64,
            len: BLOCK,
        });
        let mut out = Vec::new();
        while r.in_flight() > 0 {
            r.wait(&mut out).unwrap();
        }
        out.sort_by_key(|c| c.token);
        let mut want = vec![0u8; BLOCK];
        fill(&mut want, 7);
        match &out[0].result {
            Ok((buf, n)) => {
                assert_eq!(*n, BLOCK);
                assert!(buf.as_slice()[..BLOCK] == want[..]);
            }
            Err(e) => panic!("short read became an error: {e}"),
        }
        assert_eq!(out[1].result.as_ref().map(|r| r.1).unwrap(), 0);
    }

    /// A device whose descriptor is not open.
    struct BadFd(Arc<dyn BlockDevice>);

    impl BlockDevice for BadFd {
        fn name(&self) -> &str {
            "bad-fd"
        }
        fn size(&self) -> u64 {
            self.0.size()
        }
        fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
            self.0.read_at(buf, off)
        }
        fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
            self.0.write_at(buf, off)
        }
        fn raw_fd(&self) -> Option<RawFd> {
            Some(1 << 20)
        }
    }

    #[test]
    fn errors_become_completions() {
        let dir = TempDir::new("err");
        let good = device(&dir, 8);
        let devs: Vec<Arc<dyn BlockDevice>> = vec![good.clone(), Arc::new(BadFd(good))];
        let Some(mut r) = reader(&devs) else { return };
        let op = |token, dev, offset| ReadOp {
            token,
            dev,
            offset,
            len: BLOCK,
        };
        r.submit(op(1, 1, 0)); // bad descriptor
        r.submit(op(2, 0, 1)); // unaligned offset with O_DIRECT
        r.submit(op(3, 5, 0)); // no such device
        r.submit(op(4, 0, 0)); // fine
        let mut out = Vec::new();
        while r.in_flight() > 0 {
            wait_event(&mut r, &mut out);
        }
        out.sort_by_key(|c| c.token);
        let errno = |i: usize| out[i].result.as_ref().err().and_then(|e| e.raw_os_error());
        assert_eq!(errno(0), Some(libc::EBADF));
        assert_eq!(errno(1), Some(libc::EINVAL));
        assert_eq!(
            out[2].result.as_ref().err().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidInput)
        );
        assert_eq!(out[3].result.as_ref().map(|r| r.1).unwrap(), BLOCK);
        // The bad descriptor also fails the start-up probe.
        let why = probe(&devs).expect_err("probe of a bad fd");
        assert!(why.contains("bad-fd"), "{why}");
        assert!(probe(&devs[..1]).is_ok());
    }

    #[test]
    fn drop_waits_for_reads_in_flight() {
        let dir = TempDir::new("drop");
        let devs = vec![device(&dir, 32)];
        let Some(mut r) = reader(&devs) else { return };
        for t in 0..600 {
            r.submit(ReadOp {
                token: t,
                dev: 0,
                offset: (t % 32) * BLOCK as u64,
                len: BLOCK,
            });
        }
        r.flush();
        drop(r);
    }

    #[test]
    fn devices_without_descriptor_are_refused() {
        let mem: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
        let faulty: Arc<dyn BlockDevice> =
            Arc::new(FaultDevice::new(mem.clone(), Faults::default()));
        for d in [mem, faulty] {
            let e = UringReader::new(std::slice::from_ref(&d), 8)
                .err()
                .expect("refused");
            assert!(e.to_string().contains("no file descriptor"), "{e}");
            assert!(probe(&[d]).unwrap_err().contains("no file descriptor"));
        }
    }
}
