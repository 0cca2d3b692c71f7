//! Shared by the flash tests: the engine's commands run to their end on the
//! test's thread (the device reads a command asks for done in place of the
//! server's asynchronous reader, retrying while the crash journal or the
//! flusher is behind). Each test binary uses part of it.
#![allow(dead_code)]

use std::time::{Duration, Instant};
use tiercache_engine::command::{Found, Mode, Store, StoreResult, Wait};
use tiercache_engine::flash::TierParams;
use tiercache_engine::flash::{Fetched, FlashTier, ReadReq};
use tiercache_engine::{Engine, EngineConfig, FlashConfig};

/// The tests' clock.
pub const NOW: u32 = 1_000_000;

/// The flash tests' engine: `memory` bytes of RAM in `ram_segment`-byte
/// segments over 2 shards, flash segments of `flash_segment` bytes with 3
/// write buffers, the index sized for 1 KiB items; tests adjust the rest.
/// Sets wait for the device as long as it needs (`ext_max_write_wait=0`):
/// with the default bound, a flusher starved of CPU on a loaded machine
/// makes evacuations evict what it has not written within 10 ms, and the
/// tests that count what is kept would count the machine's load
/// (tests/slow_device.rs tests the bound).
pub fn flash_config(memory: usize, ram_segment: usize, flash_segment: usize) -> EngineConfig {
    EngineConfig {
        memory_limit: memory,
        segment_size: ram_segment,
        shards: 2,
        hash_power: 0,
        policy: "s3fifo".into(),
        flash: Some(FlashConfig {
            paths: vec![],
            params: TierParams {
                segment_size: flash_segment,
                write_buffers: 3,
                max_write_wait: Duration::ZERO,
                ..TierParams::default()
            },
            read_threads: 1,
            read_depth: FlashConfig::default().read_depth,
            readers: 1,
            avg_item_size: 1024,
            small_max: 0,
            small_percent: 50,
            small_flush_duty: 0,
            small_background: false,
            small_first: true,
            small_threshold: 0,
            small_log_percent: 0,
            snapshot: None,
            untrusted_marks: Vec::new(),
            io: Default::default(),
        }),
    }
}

/// Reads every pending record (and any longer follow-up read) synchronously.
pub fn read_all(flash: &FlashTier, fetched: &mut Fetched, reads: &mut Vec<ReadReq>) {
    flash.read_blocking(fetched, reads);
}

/// Runs an engine command to its end on this thread
/// (`Engine::run_blocking`: it reads the key's flash records when the
/// command asks), retrying while the crash journal or the flusher is behind
/// (`Wait::Busy`), as the server does.
pub fn run<R>(e: &Engine, k: &[u8], cmd: impl FnMut(&Fetched, bool) -> Result<R, Wait>) -> R {
    run_at(e, k, NOW, cmd)
}

/// [`run`] at time `now`.
pub fn run_at<R>(
    e: &Engine,
    k: &[u8],
    now: u32,
    mut cmd: impl FnMut(&Fetched, bool) -> Result<R, Wait>,
) -> R {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "command never ran");
        match e.run_blocking(k, now, &mut cmd) {
            Ok(r) => return r,
            Err(_) => std::thread::sleep(Duration::from_micros(200)),
        }
    }
}

/// A plain set of `k` (no flags, no exptime).
pub fn plain_set<'a>(k: &'a [u8], v: &'a [u8]) -> Store<'a> {
    Store {
        mode: Mode::Set,
        key: k,
        flags: 0,
        exptime: 0,
        data: v,
        compare_cas: 0,
        set_stale: false,
        binary_key: false,
    }
}

/// A plain set, through the engine's command; panics unless stored.
pub fn set(e: &Engine, k: &[u8], v: &[u8]) {
    set_at(e, &plain_set(k, v), NOW)
}

/// Runs a storage command at `now` without reading the flash records
/// under its tag first (a plain set's reads are the test's choice: see
/// flash.rs `set_verified`); panics unless stored.
pub fn set_at(e: &Engine, st: &Store<'_>, now: u32) {
    match run_at(e, st.key, now, |fetched, _| {
        e.store(st, now, fetched, false)
    }) {
        StoreResult::Stored { .. } => {}
        r => panic!("set: {r:?}"),
    }
}

/// Where a get finds the key (None: a miss), without recording a hit.
pub fn found(e: &Engine, k: &[u8]) -> Option<Found> {
    e.get_blocking(k, NOW, false, |found, _| found)
}

/// Whether the key is on flash (and not in RAM).
pub fn on_flash(e: &Engine, k: &[u8]) -> bool {
    found(e, k) == Some(Found::Flash)
}

/// Whether the key is in RAM.
pub fn in_ram(e: &Engine, k: &[u8]) -> bool {
    e.peek_ram(k, NOW, |_| ()).is_some()
}

/// Sets other keys (`fill0`, `fill1`... of 900 bytes, numbered on from
/// `filler`) until `k` is on flash only.
pub fn push_to_flash(e: &Engine, k: &[u8], filler: &mut u64) {
    while !on_flash(e, k) {
        let f = format!("fill{filler}");
        set(e, f.as_bytes(), &[b'f'; 900]);
        *filler += 1;
        assert!(*filler < 100_000, "never reached flash");
    }
}

/// The key's flash records, read as the server's probe reads them.
pub fn read_records(e: &Engine, k: &[u8]) -> Fetched {
    let mut fetched = Fetched::default();
    let mut reads: Vec<ReadReq> = Vec::new();
    e.probe(k, NOW, &mut fetched, &mut reads);
    read_all(e.flash().unwrap(), &mut fetched, &mut reads);
    fetched
}

/// A get; `promote` lets the hit count (toward promotion, too) as a server
/// get does; without it, a peek.
pub fn get(e: &Engine, k: &[u8], promote: bool) -> Option<Vec<u8>> {
    e.get_blocking(k, NOW, promote, |_, item| item.value().to_vec())
}

pub fn delete(e: &Engine, k: &[u8]) -> bool {
    run(e, k, |fetched, may_read| {
        e.delete(k, NOW, fetched, may_read)
    })
}

/// Seals the open write buffer and waits (up to 20 s) until every queued
/// segment is written to the device.
pub fn wait_flushed(e: &Engine) {
    let f = e.flash().unwrap();
    f.seal_open();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Queued and being written: a write that fails drops its items after
    // it ends (a test that counts items before then saw a few go between
    // two passes).
    while f.usage().queued + f.usage().writing > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A new directory under the system's temp dir, unique to this process:
/// `tc-{name}-{pid}`. The test removes it when done.
pub fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs `f` with the engine's evacuator thread running beside it when
/// `evacuator` (as in the server), else with sets running the slices.
pub fn with_evacuator<R>(e: &Engine, evacuator: bool, f: impl FnOnce() -> R) -> R {
    if !evacuator {
        return f();
    }
    /// Stops the evacuator also when `f` panics (a failed assertion), so
    /// that the scope's join does not wait for it forever.
    struct Stop<'a>(&'a std::sync::atomic::AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| e.run_evacuator(&stop));
        let _stop = Stop(&stop);
        f()
    })
}
