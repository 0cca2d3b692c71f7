//! The small-object store's block I/O (issue 32): reads on the store's
//! io_uring ring (or, without one, a standing pool of threads), writes on
//! the pool. A segment flush submits all its set and log page reads at
//! once, so many are at the device together, and rebuilds and
//! writes each set as soon as its blocks are in, while the other reads are
//! still under way ([`Batch`]). Before it, each batch of reads or writes
//! spawned 16 threads, each taking a fixed sixteenth of the batch one I/O
//! after the other, and a flush's reads, rebuilds and writes ran one phase
//! after the other (bench/RESULTS.md, "Issue 32: where a segment flush
//! spends its time"). The threads hold a device only while an I/O of it
//! runs; idle, they hold nothing.

use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::device::io::{ReadOp, Reader};
use crate::device::uring::UringReader;
use crate::flash::BlockDevice;
use crossbeam_channel::{unbounded, Receiver, Sender};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::io;
use std::sync::{Arc, OnceLock};

/// Threads of the pool: the device's queue depth a batch can reach (the
/// device took about 5.4x the 4 KiB random reads and writes a second at
/// depth 32 that it took at depth 1, fio, 2026-12-07).
pub(super) const THREADS: usize = 32;
/// Reads a store's io_uring ring (one device) has in the kernel at
/// once (more wait in the reader's queue).
const RING: usize = 128;

enum Op {
    Read,
    Write(AlignedBuf),
    WriteDurable(AlignedBuf),
}

/// A finished I/O of a batch: its tag, and the block read or written.
pub(super) type Done = (usize, io::Result<Option<AlignedBuf>>);

struct Task {
    dev: Arc<dyn BlockDevice>,
    off: u64,
    op: Op,
    tag: usize,
    reply: Sender<Done>,
}

fn run(t: Task) {
    let r = match t.op {
        Op::Read => {
            let mut b = AlignedBuf::new(BLOCK);
            match t.dev.read_at(b.as_mut_slice(), t.off) {
                Ok(n) if n < BLOCK => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "short read of a small-store block",
                )),
                Ok(_) => Ok(Some(b)),
                Err(e) => Err(e),
            }
        }
        // A written block goes back with the answer, to be freed (or kept
        // for reuse) on the batch's thread: freed here, it would join this
        // thread's spare buffers, up to 2 MiB on each of the 32 (the
        // server's RSS grew 78 MiB so, at 12 M keys).
        Op::Write(b) => t.dev.write_at(b.as_slice(), t.off).map(|()| Some(b)),
        Op::WriteDurable(b) => t.dev.write_durable(b.as_slice(), t.off).map(|()| Some(b)),
    };
    let _ = t.reply.send((t.tag, r));
}

/// The pool's queue; its threads start at the first use.
fn pool() -> &'static Sender<Task> {
    static POOL: OnceLock<Sender<Task>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = unbounded::<Task>();
        for i in 0..THREADS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("small-io-{i}"))
                .spawn(move || rx.iter().for_each(run))
                .expect("spawn a small-store I/O thread");
        }
        tx
    })
}

/// A copy of a block (a write keeps the caller's).
pub(super) fn copy_of(b: &AlignedBuf) -> AlignedBuf {
    let mut c = AlignedBuf::new(b.len());
    c.as_mut_slice().copy_from_slice(b.as_slice());
    c
}

/// A store's io_uring ring for its blocks' reads, made at its first batch
/// (None after a failed try: reads go to the pool), lent to one batch at a
/// time. Only for devices with a file descriptor ([`BlockDevice::raw_fd`]);
/// the others (fault-injecting test devices) read on the pool.
#[derive(Default)]
pub struct RingSlot {
    tried: bool,
    reader: Option<UringReader>,
}

impl Drop for RingSlot {
    /// The ring is torn down on a thread of its own (as the engine's
    /// io_uring probe does: a teardown can interrupt the calling thread's
    /// next blocking call), waited for, so the device is let go.
    fn drop(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = std::thread::Builder::new()
                .name("small-ring-drop".into())
                .spawn(move || drop(r))
                .map(|h| h.join());
        }
    }
}

/// A store's [`RingSlot`], shared with its jobs.
pub type Ring = Arc<Mutex<RingSlot>>;

/// A batch of block I/Os of one device: reads on the store's ring when it
/// has one (one system call submits them all), else on the pool; writes
/// on the pool. Completions are reaped in the order they finish.
pub(super) struct Batch {
    dev: Arc<dyn BlockDevice>,
    tx: Sender<Done>,
    rx: Receiver<Done>,
    outstanding: usize,
    /// The ring, lent by `slot` for the batch, and its reads in flight.
    ring: Option<UringReader>,
    slot: Option<Ring>,
    ring_reads: usize,
    ready: VecDeque<Done>,
}

impl Batch {
    /// A batch on `dev`, reading on `ring`'s io_uring ring if it has one.
    pub fn new(dev: &Arc<dyn BlockDevice>, ring: Option<&Ring>) -> Batch {
        let (tx, rx) = unbounded();
        let reader = ring.and_then(|r| {
            let mut g = r.lock();
            if !g.tried {
                g.tried = true;
                g.reader = dev
                    .raw_fd()
                    .and_then(|_| UringReader::new(std::slice::from_ref(dev), RING).ok());
            }
            g.reader.take()
        });
        Batch {
            dev: dev.clone(),
            tx,
            rx,
            outstanding: 0,
            slot: reader.is_some().then(|| ring.cloned()).flatten(),
            ring: reader,
            ring_reads: 0,
            ready: VecDeque::new(),
        }
    }

    fn submit(&mut self, off: u64, op: Op, tag: usize) {
        self.outstanding += 1;
        let task = Task {
            dev: self.dev.clone(),
            off,
            op,
            tag,
            reply: self.tx.clone(),
        };
        if let Err(e) = pool().send(task) {
            // Never: the pool's threads live as long as the process.
            run(e.0);
        }
    }

    /// Reads the 4 KiB block at `off`.
    pub fn read(&mut self, off: u64, tag: usize) {
        match self.ring.as_mut() {
            Some(r) => {
                self.outstanding += 1;
                self.ring_reads += 1;
                r.submit(ReadOp {
                    token: tag as u64,
                    dev: 0,
                    offset: off,
                    len: BLOCK,
                });
            }
            None => self.submit(off, Op::Read, tag),
        }
    }

    /// Writes `b` at `off`, durably if `durable`.
    pub fn write(&mut self, off: u64, b: AlignedBuf, durable: bool, tag: usize) {
        let op = match durable {
            true => Op::WriteDurable(b),
            false => Op::Write(b),
        };
        self.submit(off, op, tag);
    }

    /// The next I/O to finish (None when none is outstanding).
    pub fn next(&mut self) -> Option<Done> {
        loop {
            if let Some(d) = self.ready.pop_front() {
                self.outstanding -= 1;
                return Some(d);
            }
            if self.outstanding == 0 {
                return None;
            }
            if self.ring_reads == 0 {
                let d = self.rx.recv().expect("the batch holds a sender");
                self.ready.push_back(d);
                continue;
            }
            self.reap_ring();
            while let Ok(d) = self.rx.try_recv() {
                self.ready.push_back(d);
            }
        }
    }

    /// Waits for at least one of the ring's reads; a ring that fails is
    /// given up (its reads fail: the flush fails, the store stops).
    fn reap_ring(&mut self) {
        let Some(r) = self.ring.as_mut() else {
            return;
        };
        let mut out = Vec::new();
        if let Err(e) = r.wait(&mut out) {
            self.ring = None;
            self.slot = None;
            for _ in 0..std::mem::take(&mut self.ring_reads) {
                self.ready
                    .push_back((0, Err(io::Error::new(e.kind(), e.to_string()))));
            }
            return;
        }
        for c in out {
            self.ring_reads -= 1;
            let r = c.result.and_then(|(b, n)| match n < BLOCK {
                true => Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "short read of a small-store block",
                )),
                false => Ok(Some(b)),
            });
            self.ready.push_back((c.token as usize, r));
        }
    }

    /// Waits for every outstanding I/O; the first error wins.
    pub fn finish(&mut self) -> io::Result<()> {
        let mut first = Ok(());
        while let Some((_, r)) = self.next() {
            if let (Err(e), Ok(())) = (r, &first) {
                first = Err(e);
            }
        }
        first
    }
}

impl Drop for Batch {
    /// Outstanding I/Os are waited for: none outlives its batch (a caller
    /// that returns an error has no write still landing behind it); the
    /// ring goes back to its store.
    fn drop(&mut self) {
        let _ = self.finish();
        if let (Some(slot), Some(r)) = (self.slot.take(), self.ring.take()) {
            slot.lock().reader = Some(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::FileDevice;

    /// Writes 200 blocks on the pool and reads them back on the ring (on
    /// a file that takes O_DIRECT and a kernel that allows io_uring; else
    /// on the pool): every block comes back with its bytes, under its tag.
    #[test]
    fn a_batch_reads_back_what_it_wrote() {
        let dir = std::env::temp_dir().join(format!("setio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dev: Arc<dyn BlockDevice> = match FileDevice::open(&dir.join("f"), 1 << 20) {
            Ok(d) => Arc::new(d),
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let n = 200usize;
        let mut w = Batch::new(&dev, None);
        for i in 0..n {
            let mut b = AlignedBuf::new(BLOCK);
            b.as_mut_slice().fill(i as u8);
            w.write((i * BLOCK) as u64, b, false, i);
        }
        // Each written block comes back to this thread (not kept by a
        // pool thread).
        let mut back = 0;
        while let Some((tag, res)) = w.next() {
            let b = res.unwrap().expect("the block written");
            assert!(b.as_slice().iter().all(|&x| x == tag as u8));
            back += 1;
        }
        assert_eq!(back, n);
        drop(w);
        let ring: Ring = Default::default();
        let mut r = Batch::new(&dev, Some(&ring));
        let on_ring = r.ring.is_some();
        for i in (0..n).rev() {
            r.read((i * BLOCK) as u64, i);
        }
        let mut seen = vec![false; n];
        while let Some((tag, res)) = r.next() {
            let b = res.unwrap().expect("a block");
            assert!(b.as_slice().iter().all(|&x| x == tag as u8), "block {tag}");
            assert!(!seen[tag]);
            seen[tag] = true;
        }
        assert!(seen.iter().all(|&s| s));
        drop(r);
        // The ring went back to the store for its next batch.
        assert_eq!(ring.lock().reader.is_some(), on_ring);
        drop(ring);
        drop(dev);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
