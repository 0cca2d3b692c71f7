//! The store's DRAM budget ([`SmallStore::set_dram_budget`]): the log's
//! first pass stops where the store's DRAM reaches it, the log keeps that
//! many segments (the slots past it are never written), and the store
//! answers nothing stale, before or after a restart, with deletes and
//! overwrites throughout.

use super::format::Obj;
use super::*;
use crate::device::aligned::BLOCK;
use crate::device::fault::MemDevice;
use std::collections::HashMap;
use std::sync::Arc;

fn cfg() -> SmallConfig {
    SmallConfig {
        sets: 32,
        log_segments: 12,
        seg_pages: 2,
        filter_bits: 128,
        move_threshold: 2,
    }
}

fn obj(key: &str, value: &[u8]) -> Obj {
    Obj {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        ..Obj::default()
    }
}

fn val(k: usize, v: u32) -> Vec<u8> {
    let mut b = format!("{k}:{v}:").into_bytes();
    b.resize(60 + (k * 7 + v as usize) % 150, b'.');
    b
}

/// Operation `i` of the workload: 200 keys inserted, overwritten and
/// deleted (a change rewrites the key's set first, as the engine's does).
fn op(st: &mut SmallStore, model: &mut HashMap<usize, Option<u32>>, i: u32) {
    let k = (i as usize * 37) % 200;
    st.invalidate(format!("k{k}").as_bytes()).unwrap();
    if i.is_multiple_of(7) {
        model.insert(k, None);
    } else {
        st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap();
        model.insert(k, Some(i));
    }
}

fn fresh() -> (Arc<MemDevice>, SmallStore) {
    let c = cfg();
    let dev = Arc::new(MemDevice::new(c.region_bytes() as usize + BLOCK));
    let st = SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap();
    (dev, st)
}

/// The workload's first `ops` operations with `budget` set; returns the
/// device, the store and the model (the key's last value, None: deleted).
fn run(
    budget: Option<usize>,
    ops: u32,
) -> (Arc<MemDevice>, SmallStore, HashMap<usize, Option<u32>>) {
    let (dev, mut st) = fresh();
    if let Some(b) = budget {
        st.set_dram_budget(b);
    }
    let mut model = HashMap::new();
    for i in 0..ops {
        op(&mut st, &mut model, i);
    }
    (dev, st, model)
}

/// Keys found with their last value; panics on an older or deleted one.
fn check(st: &mut SmallStore, model: &HashMap<usize, Option<u32>>) -> usize {
    let mut found = 0;
    for (k, v) in model {
        match (st.get(format!("k{k}").as_bytes(), 1), v) {
            (None, _) => {}
            (Some(f), Some(v)) => {
                assert_eq!(f.obj().value, val(*k, *v), "key {k}: an older value");
                found += 1;
            }
            (Some(f), None) => panic!("deleted key {k} came back: {:?}", f.obj().value),
        }
    }
    found
}

#[test]
fn without_a_budget_the_log_uses_every_segment() {
    let (_dev, st, _) = run(None, 3000);
    assert_eq!(st.log_end, cfg().log_segments);
    assert!(st.seg_gen.iter().all(|&g| g > 0), "{:?}", st.seg_gen);
}

#[test]
fn a_dram_budget_cuts_the_logs_first_pass_short_and_nothing_is_stale() {
    // The DRAM an unbounded store holds once its first pass has written five
    // segments: a budget there cuts the ring at the first slot the first
    // pass reaches with that much held.
    let c = cfg();
    let (_, mut twin) = fresh();
    let (mut i, mut m) = (0, HashMap::new());
    while twin.seg_gen[4] == 0 {
        op(&mut twin, &mut m, i);
        i += 1;
    }
    let budget = twin.dram_bytes() as usize;
    for budget in [budget, 1] {
        let (dev, mut st, model) = run(Some(budget), 3000);
        let end = st.log_end;
        assert!(
            (2..c.log_segments).contains(&end),
            "budget {budget}: ring of {end}"
        );
        if budget == 1 {
            assert_eq!(end, 2, "the smallest ring has two segments");
        }
        // Slots past the cut were never written; the others were, again
        // and again (the log wrapped and moved objects into sets).
        assert!(
            st.seg_gen[end..].iter().all(|&g| g == 0),
            "{:?}",
            st.seg_gen
        );
        assert!(st.seg_gen[..end].iter().all(|&g| g > 0), "{:?}", st.seg_gen);
        assert!(st.stats.log_segments_written > 3 * end as u64);
        assert!(
            st.stats.moved > 0 && st.stats.sets_written > 0,
            "{:?}",
            st.stats
        );
        let before = check(&mut st, &model);
        assert!(before > 20, "budget {budget}: {before} keys found");
        // A restart reads back what the device holds (the open buffer is
        // lost); the budget set again cuts the ring again, where the slots
        // stop having been written.
        let image = Arc::new(MemDevice::from_image(dev.image()));
        let (mut again, rep) = SmallStore::open(image, BLOCK as u64, c, 1).unwrap();
        assert_eq!((rep.corrupt_sets, rep.corrupt_pages), (0, 0));
        again.set_dram_budget(budget);
        let after = check(&mut again, &model);
        assert!(after > 0 && after <= before, "{after} of {before}");
        let mut model = model;
        for j in 0..1500u32 {
            let k = (j as usize * 13) % 200;
            again.invalidate(format!("k{k}").as_bytes()).unwrap();
            again
                .insert(obj(&format!("k{k}"), &val(k, 10_000 + j)))
                .unwrap();
            model.insert(k, Some(10_000 + j));
        }
        assert_eq!(again.log_end, end, "the ring is cut where it was");
        assert!(again.seg_gen[end..].iter().all(|&g| g == 0));
        assert!(check(&mut again, &model) > 20);
    }
}
