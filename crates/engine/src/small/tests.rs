//! The store against a model: placement, moves, set eviction, filters,
//! verification, restart and crash recovery (no stale value, ever).

use super::format::{self, Kind, Obj};
use super::store::place;
use super::*;
use crate::flash::aligned::BLOCK;
use crate::flash::fault::{CrashDevice, CrashPlan, MemDevice};
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::sync::Arc;

fn cfg(sets: usize) -> SmallConfig {
    SmallConfig {
        sets,
        log_segments: 3,
        seg_pages: 2,
        filter_bits: 128,
        move_threshold: 2,
    }
}

fn obj(key: &str, value: &[u8]) -> Obj {
    Obj {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        flags: 5,
        ..Obj::default()
    }
}

/// A value that names its key and version.
fn val(k: usize, v: u32) -> Vec<u8> {
    let mut b = format!("{k}:{v}:").into_bytes();
    b.resize(60 + (k * 7 + v as usize) % 150, b'.');
    b
}

fn mem(c: SmallConfig) -> (Arc<MemDevice>, SmallStore) {
    let dev = Arc::new(MemDevice::new(c.region_bytes() as usize + BLOCK));
    let st = SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap();
    (dev, st)
}

#[test]
fn objects_move_from_the_log_to_their_sets_and_stay_readable() {
    let (_dev, mut st) = mem(cfg(16));
    let mut latest = HashMap::new();
    for i in 0..3000u32 {
        let k = (i * 7919) as usize % 300;
        st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap();
        latest.insert(k, i);
    }
    let s = st.stats;
    assert!(
        s.moved > 0 && s.sets_written > 0 && s.log_segments_written > 0,
        "{s:?}"
    );
    let mut hits = 0;
    for (k, v) in &latest {
        if let Some(f) = st.get(format!("k{k}").as_bytes(), 1) {
            assert_eq!(f.obj().value, val(*k, *v), "key {k}: never an older value");
            assert_eq!(f.obj().flags, 5);
            hits += 1;
        }
    }
    assert!(st.stats.hits_set > 0 && st.stats.hits_log + st.stats.hits_buffer > 0);
    // 16 sets of 4 KiB hold about 300 objects of this size.
    assert!(hits > 150, "hits {hits}");
}

#[test]
fn a_full_set_evicts_by_rrip_and_keeps_hit_objects() {
    let (_dev, mut st) = mem(cfg(1));
    // 60 objects of ~150 bytes for one set of ~26: the early ones fill the set first.
    let keys: Vec<String> = (0..60).map(|i| format!("key-{i}")).collect();
    for k in &keys[..20] {
        st.insert(obj(k, &[1; 130])).unwrap();
    }
    // Push them through the log into the set.
    let mut i = 0;
    while !matches!(st.get(keys[0].as_bytes(), 1), Some(Found::Set(_))) {
        st.insert(obj(&format!("filler-{i}"), &[2; 130])).unwrap();
        i += 1;
        assert!(i < 1000, "never moved to its set");
    }
    for k in &keys[..5] {
        assert!(
            matches!(st.get(k.as_bytes(), 1), Some(Found::Set(_))),
            "{k} in its set"
        );
    }
    for j in 0..300 {
        st.insert(obj(&format!("filler-{i}-{j}"), &[2; 130]))
            .unwrap();
        if j % 10 == 0 {
            for k in &keys[..5] {
                st.get(k.as_bytes(), 1);
            }
        }
    }
    assert!(st.stats.evicted > 100);
    for k in &keys[..5] {
        assert!(st.get(k.as_bytes(), 1).is_some(), "hit object {k} kept");
    }
    let cold = keys[5..20]
        .iter()
        .filter(|k| st.get(k.as_bytes(), 1).is_some())
        .count();
    assert!(cold < 5, "cold objects kept: {cold}");
}

#[test]
fn deletes_and_overwrites_never_come_back_after_a_restart() {
    let c = cfg(8);
    let (dev, mut st) = mem(c);
    let mut model: HashMap<usize, Option<u32>> = HashMap::new();
    for i in 0..2500u32 {
        let k = (i as usize * 31) % 120;
        if i % 5 == 0 {
            st.invalidate(format!("k{k}").as_bytes()).unwrap();
            model.insert(k, None);
        } else {
            st.invalidate(format!("k{k}").as_bytes()).unwrap();
            st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap();
            model.insert(k, Some(i));
        }
    }
    assert!(st.stats.invalidations > 0);
    let check = |st: &mut SmallStore| {
        let mut found = 0;
        for (k, v) in &model {
            let got = st.get(format!("k{k}").as_bytes(), 1);
            match (got, v) {
                (None, _) => {}
                (Some(f), Some(v)) => {
                    assert_eq!(f.obj().value, val(*k, *v), "key {k}");
                    found += 1;
                }
                (Some(f), None) => panic!("deleted key {k} came back: {:?}", f.obj().value),
            }
        }
        found
    };
    let before = check(&mut st);
    // A restart: a new store from what the device holds (the buffered
    // segment is lost, as a write buffer is).
    let image = Arc::new(MemDevice::from_image(dev.image()));
    let (mut again, rep) = SmallStore::open(image, BLOCK as u64, c, 1).unwrap();
    assert_eq!((rep.corrupt_sets, rep.corrupt_pages), (0, 0));
    assert!(rep.log_dead > 0, "{rep:?}");
    let after = check(&mut again);
    assert!(after > 0 && after <= before, "{after} of {before}");
}

#[test]
fn a_corrupt_set_is_a_miss_and_is_rewritten_empty_at_start() {
    let c = cfg(4);
    let (dev, mut st) = mem(c);
    for i in 0..400 {
        st.insert(obj(&format!("k{i}"), &[3; 100])).unwrap();
    }
    let in_set: Vec<String> = (0..400)
        .map(|i| format!("k{i}"))
        .filter(|k| matches!(st.get(k.as_bytes(), 1), Some(Found::Set(_))))
        .collect();
    assert!(!in_set.is_empty());
    let set = place(in_set[0].as_bytes(), c.sets).1;
    let off = st.set_offset(set);
    let mut b = vec![0u8; BLOCK];
    dev.read_at(&mut b, off).unwrap();
    b[100] ^= 0x40;
    dev.write_at(&b, off).unwrap();
    let fails = st.stats.verify_failures;
    assert!(
        st.get(in_set[0].as_bytes(), 1).is_none(),
        "a corrupt set serves nothing"
    );
    assert_eq!(st.stats.verify_failures, fails + 1);
    let (mut again, rep) = SmallStore::open(dev.clone(), BLOCK as u64, c, 1).unwrap();
    assert_eq!(rep.corrupt_sets, 1);
    assert!(again.get(in_set[0].as_bytes(), 1).is_none());
    dev.read_at(&mut b, off).unwrap();
    let h = format::check(&b, Kind::Set, set, again.head().nonce).expect("rewritten");
    assert_eq!(h.count, 0);
}

#[test]
fn filters_keep_false_positive_reads_rare() {
    let (_dev, mut st) = mem(SmallConfig {
        log_segments: 4,
        ..cfg(64)
    });
    for i in 0..5000 {
        st.insert(obj(&format!("present-{i}"), &[4; 100])).unwrap();
    }
    let reads = st.stats.reads;
    for i in 0..5000 {
        assert!(st.get(format!("absent-{i}").as_bytes(), 1).is_none());
    }
    let fp = st.stats.reads - reads;
    // A set holds ~33 objects of 120 bytes in 128 filter bits: about 20%
    // false positives on a full set, plus log tag collisions.
    assert!(
        fp < 5000 * 35 / 100,
        "false-positive reads {fp} of 5000 misses"
    );
    assert!(st.stats.false_positive_reads <= st.stats.reads);
}

/// One crash point: every key afterwards is absent, its last answered
/// value, or the value of the operation under way.
fn crash_at(c: SmallConfig, plan: CrashPlan, ops: usize) -> (bool, usize) {
    let dev = Arc::new(CrashDevice::new(
        c.region_bytes() as usize + BLOCK,
        CrashPlan::Cut {
            at: u64::MAX,
            torn: 0,
        },
    ));
    let mut st = SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap();
    dev.sync().unwrap();
    dev.arm(plan);
    let mut acked: HashMap<usize, Option<u32>> = HashMap::new();
    let mut in_flight: Option<(usize, Option<u32>)> = None;
    for i in 0..ops as u32 {
        let k = (i as usize * 37 + i as usize / 7) % 90;
        let key = format!("k{k}");
        let v = (i % 6 != 0).then_some(i);
        st.invalidate(key.as_bytes()).unwrap();
        if v.is_some() {
            st.insert(obj(&key, &val(k, i))).unwrap();
        }
        if dev.crash_image().is_some() {
            in_flight = Some((k, v));
            break;
        }
        acked.insert(k, v);
    }
    let Some(image) = dev.crash_image() else {
        return (false, 0);
    };
    let (mut again, _) =
        SmallStore::open(Arc::new(MemDevice::from_image(image)), BLOCK as u64, c, 1).unwrap();
    let mut found = 0;
    for k in 0..90 {
        let Some(f) = again.get(format!("k{k}").as_bytes(), 1) else {
            continue;
        };
        found += 1;
        let ok = acked
            .get(&k)
            .copied()
            .flatten()
            .is_some_and(|v| f.obj().value == val(k, v))
            || in_flight
                .is_some_and(|(ik, iv)| ik == k && iv.is_some_and(|v| f.obj().value == val(k, v)));
        assert!(
            ok,
            "{plan:?}: key {k} came back as {:?}, last answered {:?}",
            String::from_utf8_lossy(&f.obj().value[..12]),
            acked.get(&k)
        );
    }
    (true, found)
}

#[test]
fn a_crash_at_any_write_never_brings_back_a_stale_value() {
    let c = cfg(6);
    let ops = 900;
    let mut points = 0;
    let mut recovered = 0;
    for at in (1..400).step_by(3) {
        for plan in [
            CrashPlan::Cut { at, torn: 0 },
            CrashPlan::Cut { at, torn: 2048 },
            CrashPlan::Cut { at, torn: 5000 },
            CrashPlan::DropUnsynced { at },
        ] {
            let (hit, found) = crash_at(c, plan, ops);
            points += hit as usize;
            recovered += found;
        }
    }
    assert!(points > 300, "crash points reached: {points}");
    assert!(
        recovered > points * 5,
        "objects recovered: {recovered} over {points} crashes"
    );
}

#[test]
fn a_flush_that_must_wait_refuses_admissions_until_its_turn() {
    let (_dev, mut st) = mem(cfg(16));
    st.set_flush_duty(1_000_000);
    let mut refused = 0;
    for i in 0..3000u32 {
        let k = i as usize;
        if !st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap() {
            refused += 1;
        }
    }
    // The log wrapped once: one segment flush ran, the next must wait.
    assert_eq!(st.stats.deferred, refused);
    assert!(refused > 2000, "{refused} refused");
    assert!(st.flush_deferred(200));
    st.set_flush_duty(0);
    assert!(st.insert(obj("again", &[1; 100])).unwrap());
}

#[test]
fn a_fresh_store_holds_the_dram_its_config_states() {
    // What the memory minimum (engine/sizing.rs) counts for the store.
    for (bytes, log) in [(16u64 << 20, 10), (8 << 20, 5), (1 << 20, 30)] {
        let c = SmallConfig::for_region(bytes, log);
        let (_dev, s) = mem(c);
        assert_eq!(s.dram_bytes() as usize, c.start_dram_bytes(), "{c:?}");
    }
}
