//! Overwrites of keys the small-object store holds, through the engine
//! with a background flusher and the crash journal (docs/SMALL.md,
//! "Changes of held keys"): each costs a tombstone in the journal, not a
//! set write, and a crash after the tombstones but before their sets are
//! rewritten never brings an old value back.

mod common;

use std::sync::Arc;
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};

fn config() -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    let f = c.flash.as_mut().unwrap();
    f.small_max = 300;
    f.small_percent = 50;
    f.avg_item_size = 0;
    f.small_background = true;
    c
}

fn key(i: u64) -> Vec<u8> {
    format!("small:{i:08}").into_bytes()
}

fn val(i: u64, ver: u32) -> Vec<u8> {
    let mut b = format!("{i}:{ver}:").into_bytes();
    b.resize(60 + (i as usize * 13) % 120, b'a' + (ver % 26) as u8);
    b
}

const N: u64 = 120_000;

#[test]
fn a_crash_between_overwrites_tombstones_and_their_set_rewrites_never_serves_an_old_value() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(96 << 20));
    let e = Engine::with_devices(config(), vec![dev.clone()]).unwrap();
    for i in 0..N {
        common::set(&e, &key(i), &val(i, 1));
    }
    common::wait_flushed(&e);
    // The oldest keys are in the store: overwrite those it holds (their
    // new values stay in RAM).
    let held: Vec<u64> = (0..30_000)
        .step_by(3)
        .filter(|&i| common::get(&e, &key(i), false).is_some())
        .collect();
    assert!(held.len() > 5_000, "held {}", held.len());
    let before = e.small_stats().unwrap();
    for &i in &held {
        common::set(&e, &key(i), &val(i, 2));
    }
    let after = e.small_stats().unwrap();
    let (s0, s1) = (before.stats, after.stats);
    let overwrites = held.len() as u64;
    assert!(
        s1.tombstones - s0.tombstones > overwrites * 9 / 10,
        "{} tombstones for {overwrites} overwrites",
        s1.tombstones - s0.tombstones
    );
    // Not a set write each: the few that rewrote a set met a flush under way.
    let rewrites = s1.invalidations - s0.invalidations;
    assert!(
        rewrites < overwrites / 10,
        "{rewrites} set rewrites for {overwrites} overwrites"
    );
    assert!(
        after.tombstones_live > overwrites / 2,
        "the crash is to come between the tombstones and their set rewrites: {} live",
        after.tombstones_live
    );
    for &i in &held {
        assert_eq!(common::get(&e, &key(i), false), Some(val(i, 2)), "key {i}");
    }
    // Crash (no graceful stop): the new values were in RAM only.
    drop(e);
    let e = Engine::with_devices(config(), vec![dev]).unwrap();
    let (mut old, mut kept) = (Vec::new(), 0);
    for i in 0..N {
        let Some(got) = common::get(&e, &key(i), false) else {
            continue;
        };
        if held.binary_search(&i).is_ok() {
            if got != val(i, 2) {
                old.push(i);
            }
        } else {
            assert_eq!(got, val(i, 1), "key {i}");
            kept += 1;
        }
    }
    assert!(
        old.is_empty(),
        "{} old values served, e.g. key {}",
        old.len(),
        old[0]
    );
    assert!(kept > N / 3, "only {kept} unchanged keys recovered");
    let live = e.small_stats().unwrap().tombstones_live;
    assert!(
        live > overwrites / 2,
        "the journal's tombstones came back: {live}"
    );
}
