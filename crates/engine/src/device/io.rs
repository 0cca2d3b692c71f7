//! Reading flash without blocking a network worker. Each worker owns a
//! [`Reader`]: it submits reads and later reaps their completions from its
//! event loop. [`PoolReader`] hands reads to a small shared thread pool that
//! uses pread (works everywhere, and sees every read of a fault-injecting
//! device); the io_uring reader lives in `uring.rs`. [`IoMode`] is the
//! configured choice, [`IoBackend`] the one in use.

use super::aligned::AlignedBuf;
use super::block::BlockDevice;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Which reader the flash tier uses (`ext_io`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoMode {
    /// io_uring where it works, else the thread pool.
    #[default]
    Auto,
    /// io_uring or a start-up error.
    Uring,
    /// The pread thread pool.
    Pool,
}

impl std::str::FromStr for IoMode {
    type Err = String;

    fn from_str(s: &str) -> Result<IoMode, String> {
        match s {
            "" | "auto" => Ok(IoMode::Auto),
            "uring" | "io_uring" => Ok(IoMode::Uring),
            "pool" => Ok(IoMode::Pool),
            _ => Err(format!("ext_io={s}: choose auto, uring or pool")),
        }
    }
}

/// The reader actually in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoBackend {
    Uring,
    Pool,
}

impl IoBackend {
    pub fn name(self) -> &'static str {
        match self {
            IoBackend::Uring => "uring",
            IoBackend::Pool => "pool",
        }
    }
}

/// A read to perform; `token` comes back with its completion.
#[derive(Debug, Clone, Copy)]
pub struct ReadOp {
    pub token: u64,
    pub dev: usize,
    pub offset: u64,
    pub len: usize,
}

/// A finished read: the bytes read (possibly fewer than asked) or the error.
pub struct Completion {
    pub token: u64,
    pub result: io::Result<(AlignedBuf, usize)>,
    /// Microseconds the read waited for a reader before it went to the
    /// device (the pread pool's queue; 0 for io_uring, which submits at
    /// once): the rest of its latency is the device's.
    pub queued_us: u64,
}

/// Called (from any thread) when completions are ready to reap.
pub type Notify = Arc<dyn Fn() + Send + Sync>;

/// A worker's asynchronous reader.
pub trait Reader: Send {
    fn submit(&mut self, op: ReadOp);
    /// Moves finished reads into `out`.
    fn reap(&mut self, out: &mut Vec<Completion>);
    /// Hands reads submitted so far to the device, for readers that batch
    /// submissions (io_uring); the worker calls it once per loop turn.
    fn flush(&mut self) {}
    /// Reads submitted and not yet reaped.
    fn in_flight(&self) -> usize;
    /// A file descriptor that becomes readable when completions are ready,
    /// for readers that cannot call [`Notify`] (io_uring).
    fn event_fd(&self) -> Option<std::os::unix::io::RawFd> {
        None
    }
}

struct Job {
    op: ReadOp,
    /// When the worker handed it to the pool.
    submitted: std::time::Instant,
    reply: Sender<Completion>,
    notify: Notify,
    /// Set while a wake-up is pending: completions that arrive before the
    /// worker reaps ride on the same wake-up (one syscall, not one per read).
    woken: Arc<AtomicBool>,
}

/// Threads doing pread for every worker's [`PoolReader`].
pub struct ReadPool {
    jobs: Option<Sender<Job>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Drop for ReadPool {
    /// Waits for the threads (they hold the devices, and with them the
    /// files' locks), once every worker's reader is gone.
    fn drop(&mut self) {
        self.jobs = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl ReadPool {
    pub fn new(devices: Vec<Arc<dyn BlockDevice>>, threads: usize) -> ReadPool {
        let (jobs, rx) = unbounded::<Job>();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            let devices = devices.clone();
            let t = std::thread::Builder::new()
                .name(format!("flash-read-{i}"))
                .spawn(move || {
                    for job in rx.iter() {
                        let queued_us = job.submitted.elapsed().as_micros() as u64;
                        let mut buf = AlignedBuf::for_read(job.op.len);
                        let result = devices[job.op.dev]
                            .read_at(buf.as_mut_slice(), job.op.offset)
                            .map(|n| (buf, n));
                        let _ = job.reply.send(Completion {
                            token: job.op.token,
                            result,
                            queued_us,
                        });
                        if !job.woken.swap(true, Ordering::AcqRel) {
                            (job.notify)();
                        }
                    }
                })
                .expect("spawn flash reader thread");
            handles.push(t);
        }
        ReadPool {
            jobs: Some(jobs),
            threads: handles,
        }
    }

    /// A reader for one worker; `notify` wakes that worker's event loop.
    pub fn reader(&self, notify: Notify) -> PoolReader {
        let (tx, rx) = unbounded();
        PoolReader {
            jobs: self.jobs.clone().expect("pool running"),
            tx,
            rx,
            notify,
            woken: Arc::new(AtomicBool::new(false)),
            in_flight: 0,
        }
    }
}

pub struct PoolReader {
    jobs: Sender<Job>,
    tx: Sender<Completion>,
    rx: Receiver<Completion>,
    notify: Notify,
    woken: Arc<AtomicBool>,
    in_flight: usize,
}

impl Reader for PoolReader {
    fn submit(&mut self, op: ReadOp) {
        self.in_flight += 1;
        let job = Job {
            op,
            submitted: std::time::Instant::now(),
            reply: self.tx.clone(),
            notify: self.notify.clone(),
            woken: self.woken.clone(),
        };
        if let Err(e) = self.jobs.send(job) {
            // The pool is gone (shutting down): fail the read.
            let _ = self.tx.send(Completion {
                token: e.0.op.token,
                result: Err(io::Error::other("flash read pool stopped")),
                queued_us: 0,
            });
        }
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        // Clear first: a completion sent after this will wake us again.
        self.woken.store(false, Ordering::Release);
        while let Ok(c) = self.rx.try_recv() {
            self.in_flight -= 1;
            out.push(c);
        }
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::fault::{FaultDevice, Faults, MemDevice};
    use std::time::{Duration, Instant};

    #[test]
    fn pool_reads_report_their_wait_for_a_thread() {
        // One thread over a device that takes 20 ms a read: of three reads
        // submitted at once, the last waits for the two before it.
        let slow = Faults {
            latency: Duration::from_millis(20),
            ..Faults::default()
        };
        let dev: Arc<dyn BlockDevice> =
            Arc::new(FaultDevice::new(Arc::new(MemDevice::new(1 << 20)), slow));
        let pool = ReadPool::new(vec![dev], 1);
        let mut r = pool.reader(Arc::new(|| {}));
        let t0 = Instant::now();
        for token in 0..3 {
            r.submit(ReadOp {
                token,
                dev: 0,
                offset: 0,
                len: 4096,
            });
        }
        let mut done = Vec::new();
        while done.len() < 3 {
            r.reap(&mut done);
            std::thread::sleep(Duration::from_millis(1));
        }
        let total = t0.elapsed().as_micros() as u64;
        done.sort_by_key(|c| c.token);
        assert!(done.iter().all(|c| c.result.is_ok()));
        assert!(done.iter().all(|c| c.queued_us <= total));
        // In order, one thread: the third started after two reads of 20 ms.
        assert!(done[2].queued_us >= 40_000, "{}", done[2].queued_us);
        assert!(done[1].queued_us >= 20_000, "{}", done[1].queued_us);
        assert!(done[0].queued_us < done[2].queued_us);
    }
}
