//! An idle write buffer less than half full is written as a checkpoint and
//! kept open, instead of being sealed (`FlashTier::checkpoint`). Sealing it
//! left most of its slot empty. A slow stream of evictions sealed a buffer
//! every 200 ms, so segments went out a quarter full, and reclaim dropped
//! live items while most of the device was free (found by flash_fuzz.py on
//! 2026-11-24).
//!
//! Its items must still reach the device within the idle time, and survive
//! a crash. A crash here is a drop of the engine without a graceful stop,
//! which writes nothing more. So must the items added after a checkpoint,
//! once the buffer is sealed (the seal rewrites what the checkpoint wrote).
//! Cost: about 2 s.

mod common;

use common::NOW;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::Engine;

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("v{i}-").into_bytes();
    v.resize(900, b'a' + (i % 26) as u8);
    v
}

fn engine(dev: &Arc<MemDevice>) -> Engine {
    // 4 MiB of RAM in 64 KiB segments, 1 MiB flash segments.
    let c = common::flash_config(4 << 20, 64 << 10, 1 << 20);
    let devs: Vec<Arc<dyn BlockDevice>> = vec![dev.clone()];
    Engine::with_devices(c, devs).expect("engine")
}

/// Waits (up to 5 s) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sets keys `k{n}`, ... until a few RAM segments have left for flash (the
/// open buffer holds far less than half of its 1 MiB), then waits for the
/// idle buffer's checkpoint.
fn until_a_checkpoint(e: &Engine, n: &mut usize) {
    while !common::on_flash(e, b"k0") {
        common::set(e, format!("k{n}").as_bytes(), &value(*n));
        *n += 1;
    }
    let f = e.flash().unwrap();
    wait_for("a checkpoint", || f.stats_snapshot().checkpoints >= 1);
}

/// The keys below `n` that are on flash, with their values checked.
fn on_flash(e: &Engine, n: usize) -> Vec<usize> {
    (0..n)
        .filter(|&i| {
            let k = format!("k{i}");
            let found = e.get_blocking(k.as_bytes(), NOW, false, |found, item| {
                assert_eq!(item.value(), value(i), "{k}");
                found
            });
            found == Some(tiercache_engine::command::Found::Flash)
        })
        .collect()
}

#[test]
fn an_idle_buffer_is_checkpointed_and_its_items_survive_a_crash() {
    let dev = Arc::new(MemDevice::new(64 << 20));
    let mut n = 0;
    let (flash_keys, checkpoints) = {
        let e = engine(&dev);
        let f = e.flash().unwrap().clone();
        until_a_checkpoint(&e, &mut n);
        let s = f.stats_snapshot();
        assert_eq!(s.segments_written, 0, "sealed instead of checkpointed");
        (on_flash(&e, n), s.checkpoints)
    };
    assert!(!flash_keys.is_empty());
    eprintln!(
        "{} keys on flash after {checkpoints} checkpoints",
        flash_keys.len()
    );
    // The crash: nothing sealed. Every key that was on flash is back.
    let e = engine(&dev);
    let back = on_flash(&e, n);
    assert_eq!(back, flash_keys, "keys on flash after the crash");
}

#[test]
fn a_buffer_sealed_after_its_checkpoint_keeps_every_item() {
    let dev = Arc::new(MemDevice::new(64 << 20));
    let mut n = 0;
    let flash_keys = {
        let e = engine(&dev);
        let f = e.flash().unwrap().clone();
        until_a_checkpoint(&e, &mut n);
        // More items into the same buffer, and more, until it is sealed
        // and written whole (the first sealed segment is the one the
        // checkpoint wrote part of).
        while f.stats_snapshot().segments_written == 0 {
            common::set(&e, format!("k{n}").as_bytes(), &value(n));
            n += 1;
        }
        common::wait_flushed(&e);
        on_flash(&e, n)
    };
    let e = engine(&dev);
    let back = on_flash(&e, n);
    // Every key on flash came back, but those of a buffer still open at the
    // crash (a new one, after the sealed one).
    let missing: Vec<_> = flash_keys.iter().filter(|k| !back.contains(k)).collect();
    assert!(back.len() > 1_000, "{} back", back.len());
    assert!(
        missing.is_empty(),
        "{} of {} missing: {missing:?}",
        missing.len(),
        flash_keys.len()
    );
}
