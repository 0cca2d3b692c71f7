//! The flash read path alone, without the network: 4 KiB random reads of a
//! file through the server's own io_uring reader (`UringReader`: O_DIRECT,
//! aligned buffers, batched submission), THREADS rings with QD reads in
//! flight in all, as fio's randread job with the same queue depth. Used by
//! `bench/flash_fio.py` to tell the reader's speed from the server's.
//!
//! usage: flash_randread PATH SIZE_BYTES THREADS QD SECONDS
//! prints one JSON line: {"iops": .., "reads": .., "errors": .., "short": ..}

use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_engine::device::io::{ReadOp, Reader};
use tiercache_engine::device::uring::UringReader;
use tiercache_engine::flash::{BlockDevice, FileDevice};

const BLOCK: u64 = 4096;

struct Args {
    path: std::path::PathBuf,
    size: u64,
    threads: usize,
    qd: usize,
    secs: u64,
}

fn args() -> Result<Args, String> {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 5 {
        return Err("usage: flash_randread PATH SIZE_BYTES THREADS QD SECONDS".into());
    }
    let num = |i: usize, what: &str| -> Result<u64, String> {
        match a[i].parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "{what} must be a positive whole number, not '{}'",
                a[i]
            )),
        }
    };
    let threads = num(2, "THREADS")? as usize;
    let qd = num(3, "QD")? as usize;
    if qd < threads {
        return Err(format!("QD ({qd}) must be at least THREADS ({threads})"));
    }
    Ok(Args {
        path: a[0].clone().into(),
        size: num(1, "SIZE_BYTES")?,
        threads,
        qd,
        secs: num(4, "SECONDS")?,
    })
}

/// Counts of one thread's reads.
#[derive(Default)]
struct Counts {
    reads: u64,
    errors: u64,
    short: u64,
}

fn run(dev: Arc<dyn BlockDevice>, seed: u64, qd: usize, until: Instant) -> Counts {
    let mut r = match UringReader::new(std::slice::from_ref(&dev), 256) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("flash_randread: io_uring refused: {e}");
            std::process::exit(1);
        }
    };
    let blocks = dev.size() / BLOCK;
    let mut x = seed | 1;
    let mut c = Counts::default();
    let mut out = Vec::new();
    let mut in_flight = 0;
    while Instant::now() < until {
        while in_flight < qd {
            // xorshift64: uniform block numbers, as fio's norandommap.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let offset = (x % blocks) * BLOCK;
            r.submit(ReadOp {
                token: 0,
                dev: 0,
                offset,
                len: BLOCK as usize,
            });
            in_flight += 1;
        }
        if let Err(e) = r.wait(&mut out) {
            eprintln!("flash_randread: waiting for reads failed: {e}");
            std::process::exit(1);
        }
        in_flight -= out.len();
        for done in out.drain(..) {
            match done.result {
                Ok((_, n)) if n == BLOCK as usize => c.reads += 1,
                Ok(_) => c.short += 1,
                Err(_) => c.errors += 1,
            }
        }
    }
    c
}

fn main() {
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("flash_randread: {e}");
            std::process::exit(2);
        }
    };
    let dev: Arc<dyn BlockDevice> = match FileDevice::open(&a.path, a.size) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            eprintln!("flash_randread: {e}");
            std::process::exit(1);
        }
    };
    let start = Instant::now();
    let until = start + Duration::from_secs(a.secs);
    let per = a.qd / a.threads;
    let handles: Vec<_> = (0..a.threads)
        .map(|t| {
            let dev = dev.clone();
            let qd = per + usize::from(t < a.qd % a.threads);
            let seed = 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(t as u64 + 1);
            std::thread::spawn(move || run(dev, seed, qd, until))
        })
        .collect();
    let mut total = Counts::default();
    for h in handles {
        let c = h.join().expect("reader thread");
        total.reads += c.reads;
        total.errors += c.errors;
        total.short += c.short;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"iops\": {:.0}, \"reads\": {}, \"errors\": {}, \"short\": {}, \"seconds\": {:.3}}}",
        total.reads as f64 / secs,
        total.reads,
        total.errors,
        total.short,
        secs
    );
}
