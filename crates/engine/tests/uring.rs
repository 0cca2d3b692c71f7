//! Choosing the flash reader (`ext_io`) and reading real records through
//! io_uring: an engine on an O_DIRECT file serves every item through its
//! UringReader with hundreds of reads in flight; a device that hides its
//! descriptor (fault injection) forces the thread pool, and a forced
//! io_uring on it is a clear start-up error.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_engine::command::Found;
use tiercache_engine::device::fault::{FaultDevice, Faults, MemDevice};
use tiercache_engine::device::io::{Completion, IoBackend, IoMode, Notify, ReadOp, Reader};
use tiercache_engine::device::uring;
use tiercache_engine::flash::{BlockDevice, Fetched, FileDevice, ReadReq};
use tiercache_engine::{ConfigError, Engine, EngineConfig};

const NOW: u32 = 1_000_000;

fn config(io: IoMode) -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    c.flash.as_mut().unwrap().io = io;
    c
}

fn value_of(i: u64) -> Vec<u8> {
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(900, b'a' + (i % 26) as u8);
    v
}

use common::set;

/// Submits a read of key number `k` (token: key number and slot).
fn submit(reader: &mut Box<dyn Reader>, k: u64, r: ReadReq) {
    reader.submit(ReadOp {
        token: (k << 20) | r.slot as u64,
        dev: r.dev,
        offset: r.offset,
        len: r.len,
    })
}

fn noop() -> Notify {
    Arc::new(|| {})
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("tc-uring-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

#[test]
fn records_on_a_real_file_come_back_through_io_uring() {
    if !uring::available() {
        eprintln!("io_uring not available here: skipped");
        return;
    }
    let dir = tempdir("engine");
    let dev = FileDevice::open(&dir.0.join("flash"), 32 << 20).expect("O_DIRECT file");
    let e = Engine::with_devices(config(IoMode::Uring), vec![Arc::new(dev)]).expect("engine");
    assert_eq!(e.io_backend(), Some(IoBackend::Uring));
    let n = 15_000u64;
    for i in 0..n {
        set(&e, format!("k{i}").as_bytes(), &value_of(i));
    }
    let f = e.flash().unwrap().clone();
    f.seal_open();
    let deadline = Instant::now() + Duration::from_secs(10);
    while f.usage().queued > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut reader = e.reader(noop()).expect("reader");
    assert!(reader.event_fd().is_some(), "not the io_uring reader");

    // Probe every key; the ones on flash all go to the ring at once.
    let keys: Vec<Vec<u8>> = (0..n).map(|i| format!("k{i}").into_bytes()).collect();
    let mut fetched: Vec<Fetched> = (0..n).map(|_| Fetched::default()).collect();
    let mut on_flash = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let mut reads = Vec::new();
        e.probe(key, NOW, &mut fetched[k], &mut reads);
        if !reads.is_empty() {
            on_flash.push(k);
            for r in reads {
                submit(&mut reader, k as u64, r);
            }
        }
    }
    assert!(on_flash.len() > 5_000, "only {} on flash", on_flash.len());
    let peak = reader.in_flight();
    assert!(peak >= on_flash.len());
    reader.flush();
    let mut out: Vec<Completion> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.in_flight() > 0 {
        assert!(Instant::now() < deadline, "reads never completed");
        reader.reap(&mut out);
        for c in out.drain(..) {
            let (k, slot) = ((c.token >> 20) as usize, (c.token & 0xfffff) as usize);
            if let Err(e) = &c.result {
                panic!("read failed: {e}");
            }
            if let Some(more) = fetched[k].complete(slot, c.result, c.queued_us, 8 << 20, &f.stats)
            {
                submit(&mut reader, k as u64, more);
            }
        }
        std::thread::yield_now();
    }
    // Every flash key now resolves from what was read.
    let mut missing = 0;
    for &k in &on_flash {
        let key = &keys[k];
        let got = e.get_with(key, NOW, &fetched[k], true, |found, item| {
            assert_eq!(found, Found::Flash);
            assert!(
                item.value() == &value_of(k as u64)[..],
                "key {k}: wrong value"
            );
        });
        match got {
            Ok(Some(())) => {}
            Ok(None) => missing += 1,
            Err(w) => panic!("key {k}: {w:?} after its reads"),
        }
    }
    assert!(missing <= n as usize / 400, "{missing} missing");
    assert_eq!(
        f.stats
            .verify_failures
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

#[test]
fn devices_without_descriptor_force_the_pool() {
    let mem: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(16 << 20));
    let faulty: Arc<dyn BlockDevice> = Arc::new(FaultDevice::new(mem, Faults::default()));
    // auto: the pool, so that every read goes through the fault device.
    let e = Engine::with_devices(config(IoMode::Auto), vec![faulty.clone()]).expect("engine");
    assert_eq!(e.io_backend(), Some(IoBackend::Pool));
    let r = e.reader(noop()).unwrap();
    assert!(r.event_fd().is_none());
    drop((r, e));
    // uring forced: a start-up error that says why and what to do.
    let err = Engine::with_devices(config(IoMode::Uring), vec![faulty])
        .err()
        .expect("forced io_uring on a fault device");
    assert!(matches!(err, ConfigError::NoUring { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("ext_io=uring"), "{err}");
    assert!(
        msg.contains("no file descriptor") || msg.contains("not allowed"),
        "{err}"
    );
    assert!(msg.contains("ext_io=pool"), "{err}");
}

#[test]
fn pool_is_used_when_asked() {
    let dir = tempdir("pool");
    let dev = FileDevice::open(&dir.0.join("flash"), 16 << 20).expect("O_DIRECT file");
    let e = Engine::with_devices(config(IoMode::Pool), vec![Arc::new(dev)]).expect("engine");
    assert_eq!(e.io_backend(), Some(IoBackend::Pool));
    assert!(e.reader(noop()).unwrap().event_fd().is_none());
}
