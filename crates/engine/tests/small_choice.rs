//! The default choice between the small-object store and the log tier
//! (issue 32, docs/SMALL.md "How an item's tier is chosen"): a small item
//! goes to the log tier while the log tier's index has room for it, and to
//! the store once the index is at its DRAM budget, whose DRAM then counts
//! in that budget; the store on never holds fewer keys than the log tier
//! alone. About 10 s in debug builds.

mod common;

use common::NOW;
use std::sync::Arc;
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};

/// A tiny `-m` (its index is at its budget after some 100 k keys), with
/// the store on (`small_max`) or not, at the default choice.
fn config(small_max: usize) -> EngineConfig {
    let mut c = common::flash_config(3 << 20, 64 << 10, 256 << 10);
    let f = c.flash.as_mut().unwrap();
    f.small_max = small_max;
    f.small_first = false;
    f.small_percent = 50;
    f.avg_item_size = 0;
    c
}

fn key(i: u64) -> Vec<u8> {
    format!("k:{i:08}").into_bytes()
}

fn val(i: u64) -> Vec<u8> {
    format!("{i:020}").into_bytes()
}

fn engine(small_max: usize) -> Engine {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(128 << 20));
    Engine::with_devices(config(small_max), vec![dev]).unwrap()
}

/// Keys `0..n` read back with their value; a wrong value fails the test.
fn held(e: &Engine, n: u64) -> u64 {
    let mut hits = 0;
    for i in 0..n {
        if let Some(v) = common::get(e, &key(i), false) {
            assert_eq!(v, val(i), "key {i}");
            hits += 1;
        }
    }
    hits
}

#[test]
fn small_items_go_to_the_log_tier_while_its_index_has_room_then_to_the_store() {
    let e = engine(300);
    // Far below the index's budget: every small item leaving RAM goes to
    // the log tier, and the store holds nothing, not even DRAM for its
    // filters (it costs the index nothing).
    let few = 60_000;
    for i in 0..few {
        common::set(&e, &key(i), &val(i));
    }
    let st = e.stats(NOW);
    let s = e.small_stats().unwrap();
    assert!(st.shard.flash_items > 0, "nothing left RAM");
    assert!(s.stats.index_room > 0, "{:?}", s.stats);
    assert_eq!(
        s.stats.objects_admitted, 0,
        "the store took items while the index had room"
    );
    assert_eq!(s.dram_filter_bytes, 0);
    assert_eq!(st.shard.index_evictions, 0);

    // Past the budget: the index is full and the store takes small items
    // instead of the index evicting entries of items still on flash.
    let n = 400_000;
    for i in few..n {
        common::set(&e, &key(i), &val(i));
    }
    common::wait_flushed(&e);
    let st = e.stats(NOW);
    let s = e.small_stats().unwrap();
    assert!(s.stats.objects_admitted > 0, "{:?}", s.stats);
    assert!(s.objects > 0);
    // The store's DRAM is in the index's budget: the pool's non-segment
    // charge stays within -m's index cap plus the slack (1 MiB) the store
    // defers at.
    assert!(
        st.index_bytes <= (st.memory_limit - st.memory_limit / 8) + (1 << 20),
        "index and store take {} of {}",
        st.index_bytes,
        st.memory_limit
    );
    let with_store = held(&e, n);
    drop(e);

    // The same load with no store: the store on holds at least as many.
    let e = engine(0);
    for i in 0..n {
        common::set(&e, &key(i), &val(i));
    }
    common::wait_flushed(&e);
    let alone = held(&e, n);
    assert!(
        with_store >= alone,
        "the store on held {with_store} keys, the log tier alone {alone}"
    );
}
