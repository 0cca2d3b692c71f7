//! Items larger than a RAM segment (`-I` above the segment size): each
//! gets a jumbo segment of its own, charged to `-m` as the segments it
//! spans, evicted or kept by the policy as one item, never written to flash,
//! kept by a graceful restart. Memory for one comes from the other shards
//! when its own has too little. Cost: about a second.

mod common;

use common::{get, NOW};
use std::sync::Arc;
use tiercache_engine::command::{Mode, Store, StoreResult};
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};

const SEG: usize = 256 << 10;

fn ram_config(memory: usize, policy: &str) -> EngineConfig {
    let mut c = common::flash_config(memory, SEG, 1 << 20);
    c.flash = None;
    c.policy = policy.into();
    c
}

/// A value that names its key and size, so a mix-up shows.
fn value(k: &str, len: usize) -> Vec<u8> {
    let seed = format!("<{k}:{len}>");
    seed.bytes().cycle().take(len).collect()
}

fn store(e: &Engine, mode: Mode, k: &str, v: &[u8]) -> StoreResult {
    let st = Store {
        mode,
        ..common::plain_set(k.as_bytes(), v)
    };
    common::run(e, k.as_bytes(), |fetched, may_read| {
        e.store(&st, NOW, fetched, may_read)
    })
}

fn set(e: &Engine, k: &str, len: usize) -> StoreResult {
    store(e, Mode::Set, k, &value(k, len))
}

/// The pool never hands out more than `-m` (jumbo buffers counted whole).
fn assert_within_budget(e: &Engine) {
    let st = e.stats(NOW);
    let used = st.segments_allocated * st.segment_size + st.index_bytes;
    assert!(
        used <= st.memory_limit,
        "{} segments of {} and {} index bytes over {}",
        st.segments_allocated,
        st.segment_size,
        st.index_bytes,
        st.memory_limit
    );
}

#[test]
fn jumbo_items_are_stored_served_and_evicted_within_the_budget() {
    let e = Engine::new(ram_config(16 << 20, "s3fifo")).unwrap();
    let sizes = [SEG - 100, SEG + 1, 700 << 10, 3 << 20, 5 << 20, 100, 4000];
    let mut last = std::collections::HashMap::new();
    let mut evicted_some = false;
    for round in 0..12 {
        for (i, &len) in sizes.iter().enumerate() {
            let k = format!("k{i}-{}", round % 4);
            let len = len + round;
            assert!(
                matches!(set(&e, &k, len), StoreResult::Stored { .. }),
                "{k} ({len} bytes) refused"
            );
            last.insert(k, len);
            assert_within_budget(&e);
        }
        for (k, &len) in &last {
            match get(&e, k.as_bytes(), true) {
                Some(v) => assert!(v == value(k, len), "{k}: wrong value"),
                None => evicted_some = true,
            }
        }
    }
    assert!(evicted_some, "16 MiB never filled");
    assert!(e.stats(NOW).shard.evictions > 0);
    // Larger than half of -m: refused as too large, as memcached bounds -I.
    assert_eq!(set(&e, "huge", (8 << 20) + 1), StoreResult::TooLarge);
}

#[test]
fn a_jumbo_item_takes_memory_from_the_other_shards() {
    let e = Engine::new(ram_config(16 << 20, "fifo")).unwrap();
    // Fill every shard with small items first: all memory handed out.
    for i in 0..40_000 {
        let k = format!("s{i}");
        set(&e, &k, 900);
    }
    assert_within_budget(&e);
    // Half of -m is more than either shard's own segments (with the index).
    let len = (8 << 20) - 4096;
    assert!(
        matches!(set(&e, "big", len), StoreResult::Stored { .. }),
        "the shards did not give memory back"
    );
    assert_eq!(get(&e, b"big", true).unwrap(), value("big", len));
    assert_within_budget(&e);
    // Small sets go on around it, on both shards.
    for i in 0..2_000 {
        let k = format!("t{i}");
        assert!(matches!(set(&e, &k, 900), StoreResult::Stored { .. }));
    }
    assert_within_budget(&e);
}

#[test]
fn a_hit_jumbo_item_is_kept_by_the_policies_that_keep_hit_items() {
    for (policy, hit) in [
        ("lru", true),
        ("clock", true),
        ("s3fifo", true),
        ("fifo", false),
    ] {
        let e = Engine::new(ram_config(8 << 20, policy)).unwrap();
        let len = 1 << 20;
        assert!(matches!(set(&e, "j", len), StoreResult::Stored { .. }));
        let mut kept = true;
        // Fillers: four times -m, through both shards.
        for i in 0..40_000 {
            let k = format!("f{i}");
            set(&e, &k, 800);
            if hit && i % 100 == 0 {
                kept &= get(&e, b"j", true).is_some_and(|v| v == value("j", len));
            }
        }
        kept &= get(&e, b"j", true).is_some();
        assert_eq!(kept, hit, "{policy}: a jumbo item hit as it ages");
    }
}

#[test]
fn append_into_a_jumbo_item_and_out() {
    let e = Engine::new(ram_config(16 << 20, "s3fifo")).unwrap();
    let a = value("a", 200 << 10);
    assert!(matches!(
        store(&e, Mode::Set, "k", &a),
        StoreResult::Stored { .. }
    ));
    let b = value("b", 200 << 10);
    assert!(matches!(
        store(&e, Mode::Append, "k", &b),
        StoreResult::Stored { .. }
    ));
    let mut want = a.clone();
    want.extend_from_slice(&b);
    assert_eq!(get(&e, b"k", true).unwrap(), want, "append made it jumbo");
    assert!(matches!(
        store(&e, Mode::Prepend, "k", b"xy"),
        StoreResult::Stored { .. }
    ));
    want.splice(0..0, *b"xy");
    assert_eq!(get(&e, b"k", true).unwrap(), want);
    assert!(common::delete(&e, b"k"));
    assert!(get(&e, b"k", true).is_none());
    // Its memory comes back: the shards can fill all of -m with small items.
    for i in 0..40_000 {
        let k = format!("s{i}");
        set(&e, &k, 900);
    }
    assert_within_budget(&e);
}

#[test]
fn jumbo_items_stay_in_ram_and_survive_a_graceful_restart() {
    let dir = common::temp_dir("jumbo");
    let snap = dir.join("flash.snapshot");
    let config = || {
        let mut c = common::flash_config(16 << 20, SEG, 1 << 20);
        c.flash.as_mut().unwrap().snapshot = Some(snap.clone());
        c
    };
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    let len = 2 << 20;
    {
        let e = Engine::with_devices(config(), vec![dev.clone()]).unwrap();
        assert!(matches!(set(&e, "j1", len), StoreResult::Stored { .. }));
        // Small items push j1 out of RAM: it is evicted, not demoted.
        let mut i = 0;
        while get(&e, b"j1", false).is_some() {
            set(&e, &format!("f{i}"), 900);
            i += 1;
            assert!(i < 200_000, "j1 never left RAM");
        }
        assert!(e.stats(NOW).shard.not_demoted > 0);
        // More, until small items reach flash: j1 never comes back.
        for j in i..i + 30_000 {
            set(&e, &format!("f{j}"), 900);
        }
        assert!(e.stats(NOW).shard.flash_items > 0);
        assert!(get(&e, b"j1", true).is_none());
        assert!(matches!(set(&e, "j2", len), StoreResult::Stored { .. }));
        assert!(matches!(
            set(&e, "j3", 3 << 20 | 8),
            StoreResult::Stored { .. }
        ));
        e.persist().unwrap();
    }
    let e = Engine::with_devices(config(), vec![dev]).unwrap();
    assert_eq!(get(&e, b"j2", true).unwrap(), value("j2", len));
    assert_eq!(get(&e, b"j3", true).unwrap(), value("j3", 3 << 20 | 8));
    assert!(get(&e, b"j1", true).is_none());
    assert_within_budget(&e);
    std::fs::remove_dir_all(&dir).unwrap();
}
