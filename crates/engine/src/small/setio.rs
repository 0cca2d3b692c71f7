//! The small-object store's block I/O on a standing pool of threads
//! (issue 32): a segment flush submits all its set and log page reads at
//! once, so up to [`THREADS`] are at the device together, and rebuilds and
//! writes each set as soon as its blocks are in, while the other reads are
//! still under way ([`Batch`]). Before it, each batch of reads or writes
//! spawned 16 threads, each taking a fixed sixteenth of the batch one I/O
//! after the other, and a flush's reads, rebuilds and writes ran one phase
//! after the other (bench/RESULTS.md, "Issue 32: where a segment flush
//! spends its time"). The threads hold a device only while an I/O of it
//! runs; idle, they hold nothing.

use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::flash::BlockDevice;
use crossbeam_channel::{unbounded, Receiver, Sender};
use std::io;
use std::sync::{Arc, OnceLock};

/// Threads of the pool: the device's queue depth a batch can reach (the
/// device took about 5.4x the 4 KiB random reads and writes a second at
/// depth 32 that it took at depth 1, fio, 2026-12-07).
pub(super) const THREADS: usize = 32;

enum Op {
    Read,
    Write(AlignedBuf),
    WriteDurable(AlignedBuf),
}

/// A finished I/O of a batch: its tag, and the block read (None for a write).
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
        Op::Write(b) => t.dev.write_at(b.as_slice(), t.off).map(|()| None),
        Op::WriteDurable(b) => t.dev.write_durable(b.as_slice(), t.off).map(|()| None),
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

/// A batch of block I/Os of one device, submitted to the pool and reaped
/// in the order they finish.
pub(super) struct Batch {
    dev: Arc<dyn BlockDevice>,
    tx: Sender<Done>,
    rx: Receiver<Done>,
    outstanding: usize,
}

impl Batch {
    pub fn new(dev: &Arc<dyn BlockDevice>) -> Batch {
        let (tx, rx) = unbounded();
        Batch {
            dev: dev.clone(),
            tx,
            rx,
            outstanding: 0,
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
        self.submit(off, Op::Read, tag);
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
        if self.outstanding == 0 {
            return None;
        }
        let d = self.rx.recv().expect("the batch holds a sender");
        self.outstanding -= 1;
        Some(d)
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
    /// that returns an error has no write still landing behind it).
    fn drop(&mut self) {
        let _ = self.finish();
    }
}
