//! Crash recovery: the real engine runs a workload of sets, overwrites,
//! deletes and gets (which promote flash items back to RAM) on a device
//! that records what it would hold if power failed at a chosen write: a
//! clean cut, a torn last write, or the loss of every write not yet synced.
//! A fresh engine recovers from that image and must never return a value
//! that was deleted or overwritten before the crash, nor a torn one; and
//! after a crash with everything written it must bring back every flash
//! item nothing touched.

mod common;

use common::{delete, get, set, NOW};
use std::collections::HashSet;
use std::sync::Arc;
use tiercache_engine::device::fault::{CrashDevice, CrashPlan, MemDevice};
use tiercache_engine::flash::journal::fingerprint;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};
use tiercache_policy::rng::Rng;

const KEYS: u64 = 12_000;

fn config() -> EngineConfig {
    common::flash_config(4 << 20, 64 << 10, 256 << 10)
}

fn key(i: u64) -> Vec<u8> {
    format!("key-{i}").into_bytes()
}

/// Version `v` of key `i`: says which it is, and a length that varies.
fn value(i: u64, v: u64) -> Vec<u8> {
    let mut b = format!("{i}:{v}:").into_bytes();
    let len = 500 + ((i * 7919 + v * 104_729) % 2500) as usize;
    while b.len() < len {
        b.push(b'a' + ((i + v + b.len() as u64) % 26) as u8);
    }
    b
}

/// Whether key `i` is on flash (not in RAM) now.
fn on_flash(e: &Engine, i: u64) -> bool {
    common::on_flash(e, &key(i))
}

/// One change as the client saw it: the device's write count before it
/// started and after it returned, and the key's value afterwards.
struct Change {
    before: u64,
    after: u64,
    version: Option<u64>,
}

/// Runs the workload on `dev`, returning every key's changes.
fn workload(e: &Engine, dev: &CrashDevice, ops: u64, seed: u64) -> Vec<Vec<Change>> {
    let mut rng = Rng::xorshift(seed);
    let mut history: Vec<Vec<Change>> = (0..KEYS).map(|_| Vec::new()).collect();
    let mut version = 0u64;
    for _ in 0..ops {
        let r = rng.next_u64();
        let i = (r >> 8) % KEYS;
        let k = key(i);
        let before = dev.writes();
        match r % 100 {
            0..=54 => {
                version += 1;
                set(e, &k, &value(i, version));
                let after = dev.writes();
                history[i as usize].push(Change {
                    before,
                    after,
                    version: Some(version),
                });
            }
            55..=69 => {
                delete(e, &k);
                let after = dev.writes();
                history[i as usize].push(Change {
                    before,
                    after,
                    version: None,
                });
            }
            _ => {
                get(e, &k, true);
            }
        }
    }
    history
}

/// After a crash at write `at`: each key is absent, or holds its value as
/// of the last change acknowledged before the crash, or the value of a
/// change under way at the crash; never an older or deleted one.
fn check_recovery(image: Vec<u8>, history: &[Vec<Change>], at: u64) -> u64 {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_image(image));
    let e = Engine::with_devices(config(), vec![dev]).expect("recovering engine");
    let rec = e.last_recovery().expect("a crash recovery ran");
    let mut present = 0;
    for (i, changes) in history.iter().enumerate() {
        let i = i as u64;
        let Some(got) = get(&e, &key(i), false) else {
            continue;
        };
        present += 1;
        let mut allowed: Vec<Option<u64>> = changes
            .iter()
            .filter(|c| c.before < at && c.after >= at)
            .map(|c| c.version)
            .collect();
        let acked = changes.iter().rev().find(|c| c.after < at);
        allowed.push(acked.and_then(|c| c.version));
        let ok = allowed.iter().flatten().any(|&v| got == value(i, v));
        assert!(
            ok,
            "crash at write {at}: key-{i} came back as {:?}, allowed {allowed:?} ({rec:?}); changes {:?}",
            String::from_utf8_lossy(&got[..got.len().min(24)]),
            changes.iter().map(|c| (c.before, c.after, c.version)).collect::<Vec<_>>()
        );
    }
    present
}

/// Runs the workload on a fresh device with a crash at the workload's
/// `at`th write (after formatting); returns the workload's writes and the
/// keys recovery brought back.
fn crash_run(at: u64, plan: fn(u64) -> CrashPlan, ops: u64, seed: u64) -> (u64, u64, u64) {
    let dev = Arc::new(CrashDevice::new(8 << 20, CrashPlan::Cut { at: 0, torn: 0 }));
    let e = Engine::with_devices(config(), vec![dev.clone() as Arc<dyn BlockDevice>]).unwrap();
    let base = dev.writes();
    let at = base.saturating_add(at);
    dev.arm(plan(at));
    let history = workload(&e, &dev, ops, seed);
    let total = dev.writes() - base;
    let reclaimed = e
        .flash()
        .unwrap()
        .stats
        .segments_reclaimed
        .load(std::sync::atomic::Ordering::Relaxed);
    drop(e);
    match dev.crash_image() {
        Some(image) => (total, check_recovery(image, &history, at), reclaimed),
        None => (total, 0, reclaimed),
    }
}

#[test]
fn no_stale_deleted_or_torn_value_after_a_crash_at_any_write() {
    const OPS: u64 = 20_000;
    // A first run to learn how many writes the workload makes.
    let (total, _, reclaimed) = crash_run(u64::MAX, |at| CrashPlan::Cut { at, torn: 0 }, OPS, 7);
    assert!(
        reclaimed > 5,
        "the workload must wrap the device: {reclaimed} segments reclaimed"
    );
    let mut recovered = 0;
    let points = 12;
    // Torn writes: half a journal block; a segment's header and two blocks
    // and a bit of the next (which cuts a record).
    type Plan = fn(u64) -> CrashPlan;
    let plans: [(&str, Plan); 4] = [
        ("cut", |at| CrashPlan::Cut { at, torn: 0 }),
        ("torn half block", |at| CrashPlan::Cut { at, torn: 2048 }),
        ("torn mid record", |at| CrashPlan::Cut {
            at,
            torn: 3 * 4096 + 100,
        }),
        ("unsynced lost", |at| CrashPlan::DropUnsynced { at }),
    ];
    for p in 1..=points {
        let at = total * p / (points + 1);
        for (name, plan) in plans {
            let (writes, present, _) = crash_run(at, plan, OPS, 7 + p);
            eprintln!("{name} at write {at} of {writes}: {present} keys back");
            recovered += present;
        }
    }
    assert!(recovered > 0, "recovery brought nothing back at any point");
}

#[test]
fn a_crash_with_everything_written_keeps_every_untouched_flash_item() {
    let mem = Arc::new(MemDevice::new(48 << 20));
    let dev: Arc<dyn BlockDevice> = mem.clone();
    let e = Engine::with_devices(config(), vec![dev.clone()]).unwrap();
    for i in 0..KEYS {
        set(&e, &key(i), &value(i, 0));
    }
    let flash_keys: Vec<u64> = (0..KEYS).filter(|&i| on_flash(&e, i)).collect();
    assert!(flash_keys.len() > 1000, "{} on flash", flash_keys.len());
    // Change some of them: overwrite a fifth, delete a fifth; promote some.
    let (mut overwritten, mut deleted, mut promoted) =
        (HashSet::new(), HashSet::new(), HashSet::new());
    for (n, &i) in flash_keys.iter().enumerate() {
        match n % 5 {
            0 => {
                set(&e, &key(i), &value(i, 1));
                overwritten.insert(i);
            }
            1 => {
                assert!(delete(&e, &key(i)));
                deleted.insert(i);
            }
            2 => {
                get(&e, &key(i), true);
                get(&e, &key(i), true);
                promoted.insert(i);
            }
            _ => {}
        }
    }
    common::wait_flushed(&e);
    let f = e.flash().unwrap().clone();
    let geometry = f.journal().geometry();
    let reclaimed = f
        .stats
        .segments_reclaimed
        .load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reclaimed, 0, "the device is large enough for no reclaim");
    drop(e); // kill -9: no snapshot
    let changed: HashSet<u32> = overwritten
        .iter()
        .chain(&deleted)
        .map(|&i| fingerprint(Engine::hash(&key(i)), geometry))
        .collect();

    let e = Engine::with_devices(config(), vec![dev]).unwrap();
    let rec = e.last_recovery().unwrap();
    let (mut kept, mut collateral) = (0, 0);
    for &i in &flash_keys {
        let got = get(&e, &key(i), false);
        if deleted.contains(&i) {
            assert_eq!(got, None, "key-{i} was deleted before the crash");
        } else if overwritten.contains(&i) {
            assert!(
                got.is_none() || got == Some(value(i, 1)),
                "key-{i} came back with its old value"
            );
        } else if changed.contains(&fingerprint(Engine::hash(&key(i)), geometry))
            || promoted.contains(&i)
        {
            // Shares a tombstone's fingerprint with a changed key; or was
            // copied to RAM, where an eviction that cannot demote it drops
            // it with a tombstone.
            assert!(got.is_none() || got == Some(value(i, 0)));
            collateral += u64::from(got.is_none());
        } else {
            assert_eq!(got, Some(value(i, 0)), "key-{i} was on flash, untouched");
            kept += 1;
        }
    }
    assert!(kept > 0 && rec.items >= kept, "{rec:?}");
    assert!(
        collateral * 50 <= flash_keys.len() as u64,
        "{collateral} keys lost to shared fingerprints"
    );
    std::mem::drop(mem);
}

#[test]
fn a_device_used_without_the_journal_is_never_recovered_from() {
    let mem = Arc::new(MemDevice::new(24 << 20));
    let dev: Arc<dyn BlockDevice> = mem.clone();
    let with_journal = |on: bool| {
        let mut c = config();
        c.flash.as_mut().unwrap().params.crash_journal = on;
        Engine::with_devices(c, vec![dev.clone()]).unwrap()
    };
    let flush = common::wait_flushed;
    // Without the journal: deletes of flash items leave no tombstone.
    let e = with_journal(false);
    for i in 0..KEYS {
        set(&e, &key(i), &value(i, 0));
    }
    for i in 0..KEYS / 2 {
        delete(&e, &key(i));
    }
    flush(&e);
    assert!(e.stats(NOW).shard.flash_items > 1000);
    drop(e); // crash
             // With it again: nothing of the unjournaled run is trusted...
    let e = with_journal(true);
    let rec = e.last_recovery().unwrap();
    assert_eq!(rec.items, 0, "{rec:?}");
    assert!(rec.untrusted_segments > 0);
    assert!((0..KEYS).all(|i| get(&e, &key(i), false).is_none()));
    // ...while what this run writes is.
    let b = |i: u64| format!("b-{i}").into_bytes();
    for i in 0..KEYS {
        set(&e, &b(i), &value(i, 1));
    }
    flush(&e);
    drop(e); // crash
    let e = with_journal(true);
    assert!(e.last_recovery().unwrap().items > 1000);
    assert!((0..KEYS).all(|i| get(&e, &key(i), false).is_none()));
    let back = (0..KEYS)
        .filter(|&i| get(&e, &b(i), false).is_some_and(|v| v == value(i, 1)))
        .count();
    assert!(back > 1000, "{back}");
}

/// The reproduction: items on flash are read twice (promoted to
/// RAM, their flash records left on the device), then pushed back to flash
/// by new items, so each has two records with the same value. After a crash
/// recovery must keep one entry per key: a delete then leaves nothing to
/// serve (before the fix, the older record was served after the delete).
#[test]
fn a_promoted_item_written_to_flash_again_is_one_entry_after_a_crash() {
    let mem = Arc::new(MemDevice::new(48 << 20));
    let dev: Arc<dyn BlockDevice> = mem.clone();
    let e = Engine::with_devices(config(), vec![dev.clone()]).unwrap();
    for i in 0..KEYS {
        set(&e, &key(i), &value(i, 0));
    }
    let first: Vec<u64> = (0..KEYS / 2).filter(|&i| on_flash(&e, i)).collect();
    assert!(first.len() > 1000, "{} on flash", first.len());
    for &i in &first {
        get(&e, &key(i), true);
        get(&e, &key(i), true);
    }
    let promoted = e.stats(NOW).shard.promoted;
    assert!(promoted > 500, "{promoted} promoted");
    // New items push the promoted copies out of RAM, to flash again.
    let other = |i: u64| format!("other-{i}").into_bytes();
    for i in 0..KEYS {
        set(&e, &other(i), &value(i, 2));
    }
    let again = first.iter().filter(|&&i| on_flash(&e, i)).count();
    assert!(
        again > 500,
        "only {again} promoted items went back to flash"
    );
    common::wait_flushed(&e);
    drop(e); // kill -9
    let e = Engine::with_devices(config(), vec![dev]).unwrap();
    let rec = e.last_recovery().unwrap();
    assert!(rec.duplicates > 0, "{rec:?}");
    let mut served = 0;
    for &i in &first {
        let was = get(&e, &key(i), false);
        assert!(was.is_none() || was == Some(value(i, 0)));
        delete(&e, &key(i));
        if get(&e, &key(i), false).is_some() {
            served += 1;
        }
    }
    assert_eq!(served, 0, "keys served after their delete");
    std::mem::drop(mem);
}
