//! The control for lock-hold figures measured on the thread CPU clock
//! (issue 31): a thread that repeats one fixed unit of work, a walk of a
//! buffer as an evacuation slice walks items, and times each unit on its
//! own CPU clock and on the wall clock. The work never changes, so a unit
//! that took longer on the CPU clock took it for reasons outside the code:
//! interrupts and softirqs (network, disk) charged to the running thread
//! (this kernel has no IRQ time accounting), page reclaim, the hypervisor.
//! Run beside a server under load (`bench/lock_holds.sh` does), its count
//! of units over 256 us says how many of the server's maintenance holds
//! over that bound the machine alone would explain.
//!
//! With `--gap-us` it sleeps that long between units (a maintenance
//! thread's rhythm, and little CPU taken from the server beside it).
//!
//!   cpu_noise [--secs 8] [--unit-us 30] [--gap-us 0]

use std::time::{Duration, Instant};

fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// One unit: `steps` dependent reads and writes over `buf` (a stride that
/// misses the cache as index and segment walks do). Returns a value the
/// compiler cannot drop.
fn unit(buf: &mut [u64], steps: usize, mut at: usize) -> usize {
    let mask = buf.len() - 1;
    for _ in 0..steps {
        let v = buf[at];
        buf[at] = v.wrapping_add(1);
        at = (at.wrapping_mul(31).wrapping_add(v as usize | 1) + 4099) & mask;
    }
    at
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| {
                eprintln!("cpu_noise: {name} wants a number");
                std::process::exit(2)
            }),
        None => default,
    }
}

fn main() {
    let secs = arg("--secs", 8);
    let unit_us = arg("--unit-us", 30);
    let gap = Duration::from_micros(arg("--gap-us", 0));
    // 4 MiB: larger than the L2 cache, as a shard's segments and index are.
    let mut buf = vec![0u64; 1 << 19];
    let mut at = 0;
    // Calibration: the steps that take `unit_us` at the median of a few
    // tries, with the gap between them (a unit after a sleep finds the
    // caches cold and costs several times one run back to back).
    let mut per_step = Vec::new();
    for _ in 0..101 {
        let c = thread_cpu_ns();
        at = unit(&mut buf, 1_000, at);
        per_step.push((thread_cpu_ns() - c) as f64 / 1_000.0);
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
    }
    per_step.sort_by(f64::total_cmp);
    let steps = ((unit_us as f64 * 1000.0) / per_step[per_step.len() / 2]).max(1.0) as usize;
    let mut cpu = Vec::new();
    let mut wall = Vec::new();
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        let (c, w) = (thread_cpu_ns(), Instant::now());
        at = unit(&mut buf, steps, at);
        cpu.push((thread_cpu_ns() - c) / 1000);
        wall.push(w.elapsed().as_micros() as u64);
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
    }
    std::hint::black_box(at);
    for (name, mut v) in [("cpu", cpu), ("wall", wall)] {
        v.sort_unstable();
        let q = |p: f64| v[((v.len() - 1) as f64 * p) as usize];
        let over = v.iter().filter(|&&u| u > 256).count();
        println!(
            "cpu_noise {name}: {} units of {steps} steps, median {} us, p99 {} us, p99.99 {} us, max {} us, {over} over 256 us",
            v.len(),
            q(0.5),
            q(0.99),
            q(0.9999),
            v[v.len() - 1]
        );
    }
}
