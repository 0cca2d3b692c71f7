//! A flash device that fails under load, then comes back: changes made while
//! its crash journal could not be written have no tombstones, so the next
//! start must not rebuild the index from the device (issue 19: a clean
//! restart after the file system shut down served 17,530 overwritten or
//! deleted values). Through the real engine on a fault-injecting device.
//!
//! Cost: about 2 s.

mod common;

use common::{delete, get, set};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_engine::device::fault::{FaultDevice, Faults, MemDevice};
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};

const KEYS: u64 = 6_000;

fn key(i: u64) -> Vec<u8> {
    format!("dev-fail-{i}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("{i:08}").repeat(120).into_bytes()
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The engine on `dev`, with its snapshot where it cannot be written (as
/// when the device's file system is gone) and the given mark files.
fn config(marks: Vec<PathBuf>) -> EngineConfig {
    let mut c = common::flash_config(4 << 20, 64 << 10, 256 << 10);
    let f = c.flash.as_mut().unwrap();
    f.snapshot = Some(PathBuf::from("/nonexistent-dir/tiercache.snapshot"));
    f.untrusted_marks = marks;
    c
}

/// Loads items to flash, breaks the device, deletes every flash key while it
/// is broken (the journal fails; the deletes are answered). Returns the keys
/// that were on flash.
fn load_break_delete(e: &Engine, dev: &FaultDevice) -> Vec<u64> {
    for i in 0..KEYS {
        set(e, &key(i), &value(i));
    }
    let f = e.flash().unwrap();
    f.seal_open();
    let deadline = Instant::now() + Duration::from_secs(20);
    while f.usage().queued > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let on_flash: Vec<u64> = (0..KEYS)
        .filter(|&i| common::on_flash(e, &key(i)))
        .collect();
    assert!(on_flash.len() > 1000, "{} on flash", on_flash.len());
    dev.set(Faults {
        vanished: true,
        ..Faults::default()
    });
    for &i in &on_flash {
        delete(e, &key(i));
        assert_eq!(get(e, &key(i), false), None, "deleted while failing");
    }
    // A delete whose record could not be read asked for a tombstone without
    // waiting for it: the journal thread notices the failure on its commit.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f.journal().failed() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(f.journal().failed(), "the journal noticed the failure");
    on_flash
}

/// Every deleted key stays deleted at the next start, whichever record of
/// the failure survived.
fn restart_and_check(dev: Arc<dyn BlockDevice>, marks: Vec<PathBuf>, deleted: &[u64]) -> u64 {
    let e = Engine::with_devices(config(marks), vec![dev]).unwrap();
    let rec = e
        .last_recovery()
        .expect("no snapshot: a crash recovery ran");
    for &i in deleted {
        assert!(
            get(&e, &key(i), false).is_none(),
            "dev-fail-{i} was deleted while the device failed and came back ({rec:?})"
        );
    }
    rec.items
}

#[test]
fn a_mark_file_keeps_a_device_that_refused_every_write_untrusted() {
    let dir = tempdir("devfail-mark");
    let mark = dir.join("flash.untrusted");
    let mem = Arc::new(MemDevice::new(24 << 20));
    let fault = Arc::new(FaultDevice::new(mem.clone(), Faults::default()));
    let e = Engine::with_devices(config(vec![mark.clone()]), vec![fault.clone()]).unwrap();
    let deleted = load_break_delete(&e, &fault);
    assert!(e.persist().is_err(), "the snapshot cannot be written");
    assert!(mark.exists(), "the failure was recorded in the mark file");
    drop(e);
    // The device works again (remounted); its superblock was never marked.
    fault.set(Faults::default());
    let items = restart_and_check(fault.clone(), vec![mark.clone()], &deleted);
    assert_eq!(items, 0, "nothing recovered from an untrusted device");
    assert!(
        !mark.exists(),
        "the mark goes once the floor covers the device"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_device_that_comes_back_is_marked_in_its_superblock() {
    let mem = Arc::new(MemDevice::new(24 << 20));
    let fault = Arc::new(FaultDevice::new(mem.clone(), Faults::default()));
    // No mark file can be written: only the superblock can record it.
    let nowhere = vec![PathBuf::from("/nonexistent-dir/flash.untrusted")];
    let e = Engine::with_devices(config(nowhere.clone()), vec![fault.clone()]).unwrap();
    let deleted = load_break_delete(&e, &fault);
    // The device comes back while the server still runs: the flusher's
    // retry marks the superblock.
    fault.set(Faults::default());
    let f = e.flash().unwrap().clone();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f.distrust.recorded() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        f.distrust.recorded(),
        "the idle flusher's retry marked the superblock"
    );
    drop(f);
    assert!(e.persist().is_err(), "the snapshot cannot be written");
    drop(e);
    assert_eq!(restart_and_check(fault.clone(), nowhere, &deleted), 0);
}
