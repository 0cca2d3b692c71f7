//! Graceful restart: persist, build a new engine on the same devices, and
//! every item comes back with its value, flags, exptime and CAS; the
//! snapshot is consumed; a damaged or foreign snapshot is refused with a
//! clear message unless wiping is asked for.

mod common;

use std::sync::Arc;
use tiercache_engine::command::Store;
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{ConfigError, Engine, EngineConfig, SnapshotError};

const NOW: u32 = 1_000_000;

fn config(snapshot: &std::path::Path, wipe: bool) -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    let f = c.flash.as_mut().unwrap();
    f.params.wipe = wipe;
    f.snapshot = Some(snapshot.to_path_buf());
    c
}

fn value(i: u64) -> Vec<u8> {
    format!("{i:08}").repeat(90).into_bytes()
}

fn set(e: &Engine, i: u64) {
    let key = format!("k{i}");
    let value = value(i);
    let st = Store {
        flags: i as u32,
        exptime: if i.is_multiple_of(3) { NOW + 1000 } else { 0 },
        ..common::plain_set(key.as_bytes(), &value)
    };
    common::set_at(e, &st, NOW);
}

/// (value, flags, exptime, cas) of key i, reading flash as needed.
fn get(e: &Engine, i: u64) -> Option<(Vec<u8>, u32, u32, u64)> {
    let key = format!("k{i}");
    e.get_blocking(key.as_bytes(), NOW, false, |_, item| {
        (
            item.value().to_vec(),
            item.flags(),
            item.exptime(),
            item.cas(),
        )
    })
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tc-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn graceful_restart_keeps_every_item() {
    let dir = tempdir("restart");
    let snap = dir.join("flash.snapshot");
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    let n = 20_000u64;
    let before: Vec<_> = {
        let e = Engine::with_devices(config(&snap, false), vec![dev.clone()]).unwrap();
        for i in 0..n {
            set(&e, i);
        }
        let st = e.stats(NOW).shard;
        assert!(st.flash_items > 5_000 && st.curr_items - st.flash_items > 1_000);
        let before = (0..n).map(|i| get(&e, i)).collect();
        let (items, _) = e.persist().unwrap();
        assert_eq!(items, st.curr_items);
        before
    };
    assert!(snap.exists());
    let e = Engine::with_devices(config(&snap, false), vec![dev.clone()]).unwrap();
    assert!(!snap.exists(), "the snapshot is consumed before serving");
    let mut present = 0;
    for i in 0..n {
        let got = get(&e, i);
        assert!(got == before[i as usize], "k{i} differs after restart");
        if let Some((v, flags, _, _)) = got {
            assert_eq!((v, flags), (value(i), i as u32));
            present += 1;
        }
    }
    assert!(present > n - n / 400, "{present} of {n}");
    // New writes after the restart work, with fresh CAS values.
    let cas_before = before.iter().flatten().map(|x| x.3).max().unwrap();
    set(&e, n + 1);
    assert!(get(&e, n + 1).unwrap().3 > cas_before);
    drop(e);
    // No snapshot now (as after a crash): the flash items come back from
    // the device (crash.rs tests this in depth); RAM items are gone.
    let e = Engine::with_devices(config(&snap, false), vec![dev]).unwrap();
    let rec = e.last_recovery().expect("recovered after the crash");
    let mut back = 0;
    for i in 0..n {
        if let Some(got) = get(&e, i) {
            assert!(Some(&got) == before[i as usize].as_ref(), "k{i} differs");
            back += 1;
        }
    }
    assert!(back > 5_000 && back == rec.items, "{back} back, {rec:?}");
    assert!(get(&e, n + 1).is_none(), "was only in RAM");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The flash file deleted or replaced while its snapshot stayed: the
/// snapshot's RAM items come back, and its flash entries, whose segments
/// the new device does not hold, are dropped at start. Kept, they were
/// counted in curr_items (1.69 M items after 1 M sets in a server run),
/// each lookup of their class read the device for a record of another key
/// (a tag miss or a failed verification), and sets of new keys asked the
/// crash journal for tombstones.
#[test]
fn a_snapshot_over_a_replaced_device_drops_its_flash_entries() {
    let dir = tempdir("replaced");
    let snap = dir.join("flash.snapshot");
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    let n = 20_000u64;
    let ram_items = {
        let e = Engine::with_devices(config(&snap, false), vec![dev]).unwrap();
        for i in 0..n {
            set(&e, i);
        }
        let st = e.stats(NOW).shard;
        assert!(st.flash_items > 5_000, "{st:?}");
        e.persist().unwrap();
        st.curr_items - st.flash_items
    };
    let fresh: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    let e = Engine::with_devices(config(&snap, false), vec![fresh]).unwrap();
    let st = e.stats(NOW).shard;
    assert_eq!((st.curr_items, st.flash_items), (ram_items, 0));
    // The flash keys miss without reading the device; the RAM ones are
    // served.
    let mut present = 0;
    for i in 0..n {
        if let Some((v, flags, _, _)) = get(&e, i) {
            assert_eq!((v, flags), (value(i), i as u32));
            present += 1;
        }
    }
    assert_eq!(present, ram_items);
    let f = e.flash().unwrap().stats_snapshot();
    assert_eq!((f.objects_read, f.verify_failures, f.tag_misses), (0, 0, 0));
    // Sets of other keys need no tombstones.
    for i in n..n + 5_000 {
        set(&e, i);
    }
    assert_eq!(e.flash().unwrap().stats_snapshot().journal_tombstones, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Keys [`damaged_or_foreign_snapshots_are_refused`] sets: over what 8 MiB
/// of RAM holds (about 5,800 of them), so that some are on flash.
const KEYS: u64 = 8_000;

#[test]
fn damaged_or_foreign_snapshots_are_refused() {
    let dir = tempdir("badsnap");
    let snap = dir.join("flash.snapshot");
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    {
        let e = Engine::with_devices(config(&snap, false), vec![dev.clone()]).unwrap();
        for i in 0..KEYS {
            set(&e, i);
        }
        e.persist().unwrap();
    }
    let good = std::fs::read(&snap).unwrap();
    // A flipped byte: refused, the file is left alone.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    std::fs::write(&snap, &bad).unwrap();
    let err = Engine::with_devices(config(&snap, false), vec![dev.clone()])
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            ConfigError::Snapshot {
                error: SnapshotError::Damaged(_),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("ext_wipe"), "{err}");
    assert!(snap.exists(), "nothing is removed silently");
    // Not ours at all.
    std::fs::write(&snap, b"hello").unwrap();
    let err = Engine::with_devices(config(&snap, false), vec![dev.clone()])
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            ConfigError::Snapshot {
                error: SnapshotError::Damaged(_) | SnapshotError::NotASnapshot,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("cannot be used"), "{err}");
    // Another configuration (more shards, as a larger -m picks): the engine
    // starts anyway, from the flash devices as after a crash, and keeps
    // what they hold; the snapshot is not read again.
    std::fs::write(&snap, &good).unwrap();
    let mut other = config(&snap, false);
    other.shards = 4;
    {
        let e = Engine::with_devices(other, vec![dev.clone()]).expect("starts from the devices");
        assert!(!snap.exists(), "the snapshot is removed");
        let r = e.last_recovery().expect("a scan of the devices");
        assert!(r.items > 100, "{r:?}");
        let mut back = 0;
        for i in 0..KEYS {
            if let Some((v, ..)) = get(&e, i) {
                assert_eq!(v, value(i), "{i}");
                back += 1;
            }
        }
        assert_eq!(back, r.items, "every recovered item reads back");
    }
    // A snapshot of another format version (written by an older build):
    // also started from the devices, never refused.
    let mut old = good.clone();
    old[8..12].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&snap, &old).unwrap();
    {
        let e = Engine::with_devices(config(&snap, false), vec![dev.clone()])
            .expect("starts from the devices");
        assert!(!snap.exists(), "the snapshot is removed");
        let r = e.last_recovery().expect("a scan of the devices");
        assert!(r.items > 100, "{r:?}");
        let back = (0..KEYS)
            .filter_map(|i| get(&e, i).map(|(v, ..)| assert_eq!(v, value(i), "{i}")))
            .count();
        assert_eq!(back as u64, r.items, "every recovered item reads back");
    }
    std::fs::write(&snap, &good).unwrap();
    // Wiping is explicit.
    let e = Engine::with_devices(config(&snap, true), vec![dev]).unwrap();
    assert!(!snap.exists());
    assert_eq!(e.stats(NOW).shard.curr_items, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A graceful restart with a lower -m (the shard count unchanged, as the
/// server's is for any large -m) starts, from the devices as after a crash:
/// the snapshot's RAM may not fit the new budget (found by review: it was
/// refused, "more RAM than -m allows"). A higher -m reads the snapshot.
#[test]
fn a_lower_memory_limit_starts_from_the_devices() {
    let dir = tempdir("lower-m");
    let snap = dir.join("flash.snapshot");
    let cfg = |mem: usize| {
        let mut c = config(&snap, false);
        c.memory_limit = mem;
        c
    };
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    let n = 40_000;
    let persist = |mem: usize| {
        let e = Engine::with_devices(cfg(mem), vec![dev.clone()]).unwrap();
        for i in 0..n {
            set(&e, i);
        }
        e.persist().unwrap();
    };
    persist(16 << 20);
    {
        let e = Engine::with_devices(cfg(8 << 20), vec![dev.clone()]).expect("a lower -m starts");
        assert!(!snap.exists(), "the snapshot is removed");
        let r = e.last_recovery().expect("a scan of the devices");
        assert!(r.items > 1000, "{r:?}");
        let back = (0..n)
            .filter_map(|i| get(&e, i).map(|(v, ..)| assert_eq!(v, value(i), "{i}")))
            .count();
        assert_eq!(back as u64, r.items, "every recovered item reads back");
    }
    persist(8 << 20);
    let e = Engine::with_devices(cfg(16 << 20), vec![dev]).expect("a higher -m starts");
    assert!(e.last_recovery().is_none(), "read from the snapshot");
    assert!(!snap.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
