//! Overwrites of keys the store holds through the crash journal's
//! tombstones ([`super::tomb`]): no set write each, never a stale value
//! (for reads, after a restart), and retired by the set rewrites that come
//! anyway.

use super::tests::{cfg, mem, obj, val, Background};
use super::*;
use crate::device::aligned::BLOCK;
use crate::device::fault::MemDevice;
use crate::flash::journal::Journal;
use crate::flash::BlockDevice;
use std::sync::Arc;
use std::time::Duration;

const JOURNAL_BYTES: u64 = 64 << 10;

/// A journal on a device of its own, with its writer thread.
fn journal(dev: &Arc<MemDevice>) -> (Arc<Journal>, std::thread::JoinHandle<()>) {
    let j = Arc::new(Journal::open(dev.clone(), 0, JOURNAL_BYTES).unwrap());
    j.set_geometry(0, 20);
    let j2 = j.clone();
    (j, std::thread::spawn(move || j2.run(&|| {})))
}

/// Asks the gate of a plain overwrite until it clears (the journal commits
/// meanwhile).
fn overwrite_cleared(bg: &Background, key: &[u8]) {
    for _ in 0..100_000 {
        if bg.st.lock().gate_replace(key).unwrap() != Gate::Wait {
            return;
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    panic!("the gate never cleared");
}

fn idle(bg: &Background) {
    while !bg.st.lock().jobs.is_empty() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A store with a journal and a background flusher, 150 keys written 4 times.
struct Loaded {
    dev: Arc<MemDevice>,
    jdev: Arc<MemDevice>,
    j: Arc<Journal>,
    writer: std::thread::JoinHandle<()>,
    bg: Background,
}

fn loaded(c: SmallConfig) -> Loaded {
    let (dev, mut st) = mem(c);
    let jdev = Arc::new(MemDevice::new(JOURNAL_BYTES as usize));
    let (j, writer) = journal(&jdev);
    st.set_journal(j.clone());
    let bg = Background::start(st);
    for i in 0..600u32 {
        let k = i as usize % 150;
        bg.st
            .lock()
            .insert(obj(&format!("k{k}"), &val(k, i)))
            .unwrap();
    }
    idle(&bg);
    Loaded {
        dev,
        jdev,
        j,
        writer,
        bg,
    }
}

#[test]
fn overwrites_of_held_keys_cost_a_tombstone_each_not_a_set_write() {
    let c = cfg(16);
    let Loaded {
        dev,
        jdev,
        j,
        writer,
        bg,
    } = loaded(c);
    let held: Vec<usize> = (0..150)
        .filter(|k| {
            matches!(
                bg.st.lock().get(format!("k{k}").as_bytes(), 1),
                Some(Found::Log(_) | Found::Set(_))
            )
        })
        .collect();
    assert!(held.len() > 60, "held {}", held.len());
    let before = bg.st.lock().stats;
    // Overwrites whose new values stay in RAM: the store only drops its copies.
    let changed: Vec<usize> = held.iter().copied().filter(|k| k % 2 == 0).collect();
    for k in &changed {
        overwrite_cleared(&bg, format!("k{k}").as_bytes());
    }
    let s = bg.st.lock().stats;
    assert_eq!(s.sets_written, before.sets_written, "no set write");
    assert_eq!(
        s.invalidate_jobs, before.invalidate_jobs,
        "no invalidation job"
    );
    assert_eq!(s.tombstones - before.tombstones, changed.len() as u64);
    assert_eq!(bg.st.lock().tombstones_live(), changed.len() as u64);
    // The changed keys are gone for reads at once; the others are not.
    for k in &held {
        let got = bg.st.lock().get(format!("k{k}").as_bytes(), 1);
        assert_eq!(got.is_none(), changed.contains(k), "k{k}");
    }
    // A second overwrite of a changed key (no copy admitted since) needs
    // nothing more.
    overwrite_cleared(&bg, format!("k{}", changed[0]).as_bytes());
    assert_eq!(
        bg.st.lock().stats.tombstones - before.tombstones,
        changed.len() as u64
    );
    // A restart (the sets not rewritten): the journal's tombstones keep
    // the old values dead.
    bg.stop();
    j.stop();
    writer.join().unwrap();
    let j2 = Journal::open(jdev.clone(), 0, JOURNAL_BYTES).unwrap();
    let tombs = j2.small_tombstones(0);
    assert_eq!(tombs.len(), changed.len());
    let mem = Arc::new(MemDevice::from_image(dev.image()));
    let image: Arc<dyn BlockDevice> = mem.clone();
    let (mut again, _) = SmallStore::open_with(image.clone(), BLOCK as u64, c, 1, &tombs).unwrap();
    for k in &held {
        let got = again.get(format!("k{k}").as_bytes(), 1);
        assert_eq!(got.is_none(), changed.contains(k), "k{k} after a restart");
    }
    // Without them the old values would be back: the test tells.
    let (mut blind, _) = SmallStore::open(image, BLOCK as u64, c, 1).unwrap();
    assert!(changed
        .iter()
        .any(|k| blind.get(format!("k{k}").as_bytes(), 1).is_some()));
    // A start without a journal to keep them rewrites their sets: the old
    // values stay dead with no tombstone left.
    again.settle_tombs().unwrap();
    assert_eq!(again.tombstones_live(), 0);
    let image: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_image(mem.image()));
    let (mut settled, _) = SmallStore::open(image, BLOCK as u64, c, 1).unwrap();
    for k in &held {
        let got = settled.get(format!("k{k}").as_bytes(), 1);
        assert_eq!(got.is_none(), changed.contains(k), "k{k} after settling");
    }
}

#[test]
fn set_rewrites_that_come_anyway_retire_the_tombstones() {
    let c = cfg(16);
    let Loaded {
        dev,
        jdev,
        j,
        writer,
        bg,
    } = loaded(c);
    // Every key overwritten, its new value admitted again later (it left
    // RAM), as under an overwrite load.
    let mut latest = std::collections::HashMap::new();
    for i in 600..1800u32 {
        let k = i as usize % 150;
        let key = format!("k{k}");
        overwrite_cleared(&bg, key.as_bytes());
        bg.st.lock().insert(obj(&key, &val(k, i))).unwrap();
        latest.insert(k, i);
    }
    idle(&bg);
    let (s, live) = {
        let st = bg.st.lock();
        (st.stats, st.tombstones_live())
    };
    assert!(s.tombstones > 300, "{s:?}");
    assert!(s.tombstones_retired > s.tombstones / 2, "{s:?}");
    // (A key changed again after a copy came back gets a newer tombstone
    // in place of its older one.)
    assert!(
        live <= s.tombstones - s.tombstones_retired,
        "{live} live, {s:?}"
    );
    // The flushes' moves wrote the sets; a change rewrote one only when a
    // flush under way held its key or set (then it waits for a job).
    assert!(s.invalidate_jobs * 10 < s.tombstones, "{s:?}");
    assert_eq!(
        j.small_load().0 as u64,
        live,
        "the journal retired them too"
    );
    // Every key reads as its last value, or not at all; after a restart too.
    let check = |st: &mut SmallStore, when: &str| {
        let mut found = 0;
        for (k, v) in &latest {
            if let Some(f) = st.get(format!("k{k}").as_bytes(), 1) {
                assert_eq!(f.obj().value, val(*k, *v), "k{k} {when}");
                found += 1;
            }
        }
        assert!(found > 60, "{found} found {when}");
    };
    check(&mut bg.st.lock(), "before the restart");
    bg.st.lock().flush_buffer().unwrap();
    bg.stop();
    j.stop();
    writer.join().unwrap();
    let tombs = Journal::open(jdev.clone(), 0, JOURNAL_BYTES)
        .unwrap()
        .small_tombstones(0);
    let image = Arc::new(MemDevice::from_image(dev.image()));
    let (mut again, _) = SmallStore::open_with(image, BLOCK as u64, c, 1, &tombs).unwrap();
    check(&mut again, "after a restart");
}

/// A tombstone read back from the journal does not say whether its key was
/// admitted again after it: a change of the key after a restart asks for a
/// tombstone of its own, or the copy admitted after the old one would come
/// back after the next crash (crash_random's small-store run found it).
#[test]
fn after_a_restart_a_change_of_a_key_asks_for_a_tombstone_of_its_own() {
    let c = cfg(16);
    let Loaded {
        dev,
        jdev,
        j,
        writer,
        bg,
    } = loaded(c);
    let k = (0..150)
        .find(|k| {
            matches!(
                bg.st.lock().get(format!("k{k}").as_bytes(), 1),
                Some(Found::Log(_) | Found::Set(_))
            )
        })
        .unwrap();
    let key = format!("k{k}");
    overwrite_cleared(&bg, key.as_bytes());
    // The new value leaves RAM into the store, above the tombstone.
    bg.st.lock().insert(obj(&key, &val(k, 7))).unwrap();
    bg.st.lock().flush_buffer().unwrap();
    bg.stop();
    j.stop();
    writer.join().unwrap();
    let reopen = |dev: &MemDevice, jdev: &Arc<MemDevice>| {
        let j = Arc::new(Journal::open(jdev.clone(), 0, JOURNAL_BYTES).unwrap());
        let tombs = j.small_tombstones(0);
        let image = Arc::new(MemDevice::from_image(dev.image()));
        let (st, _) = SmallStore::open_with(image.clone(), BLOCK as u64, c, 1, &tombs).unwrap();
        (image, j, st)
    };
    let (image, j2, mut st) = reopen(&dev, &jdev);
    assert_eq!(st.get(key.as_bytes(), 1).unwrap().obj().value, val(k, 7));
    st.set_journal(j2.clone());
    let j3 = j2.clone();
    let writer = std::thread::spawn(move || j3.run(&|| {}));
    let bg = Background::start(st);
    // Overwritten again (its new value stays in RAM), then a crash.
    overwrite_cleared(&bg, key.as_bytes());
    assert_eq!(bg.st.lock().stats.tombstones, 1, "a tombstone of its own");
    bg.stop();
    j2.stop();
    writer.join().unwrap();
    let (_, _, mut after) = reopen(&image, &jdev);
    assert!(after.get(key.as_bytes(), 1).is_none(), "{key} came back");
}
