//! The engine's memcached semantics and its memory bound, driven directly.

use tiercache_engine::command::{Arith, ArithResult, Mode, Store, StoreResult};
use tiercache_engine::flash::Fetched;
use tiercache_engine::{Engine, EngineConfig};

const NOW: u32 = 1_700_000_000;

fn engine(mb: usize, policy: &str) -> Engine {
    Engine::new(EngineConfig {
        memory_limit: mb << 20,
        segment_size: 1 << 20,
        policy: policy.into(),
        ..Default::default()
    })
    .unwrap()
}

fn args<'a>(mode: Mode, key: &'a [u8], data: &'a [u8]) -> Store<'a> {
    Store {
        mode,
        key,
        flags: 7,
        exptime: 0,
        data,
        compare_cas: 0,
        set_stale: false,
        binary_key: false,
    }
}

/// Runs a storage command (RAM only: it never waits).
fn store(e: &Engine, a: &Store<'_>) -> StoreResult {
    e.store(a, NOW, &Fetched::default(), false)
        .expect("no flash tier to wait for")
}

fn set(e: &Engine, key: &[u8], data: &[u8]) -> StoreResult {
    store(e, &args(Mode::Set, key, data))
}

fn arith(e: &Engine, key: &[u8], incr: bool, delta: u64) -> ArithResult {
    e.arith(
        key,
        NOW,
        Arith::Unsigned { incr, delta },
        &Fetched::default(),
        false,
    )
    .expect("no flash tier to wait for")
}

fn get(e: &Engine, key: &[u8], now: u32) -> Option<Vec<u8>> {
    e.get_blocking(key, now, true, |_, item| item.value().to_vec())
}

#[test]
fn storage_modes() {
    let e = engine(16, "s3fifo");
    assert_eq!(set(&e, b"a", b"1"), StoreResult::Stored { cas: 1 });
    let add = args(Mode::Add, b"a", b"2");
    assert_eq!(store(&e, &add), StoreResult::NotStored);
    let rep = args(Mode::Replace, b"b", b"2");
    assert_eq!(store(&e, &rep), StoreResult::NotStored);
    let app = args(Mode::Append, b"a", b"xy");
    assert!(matches!(store(&e, &app), StoreResult::Stored { .. }));
    let pre = args(Mode::Prepend, b"a", b"<");
    assert!(matches!(store(&e, &pre), StoreResult::Stored { .. }));
    assert_eq!(get(&e, b"a", NOW).unwrap(), b"<1xy");
    let mut cas = args(Mode::Cas, b"a", b"new");
    cas.compare_cas = 999;
    assert_eq!(store(&e, &cas), StoreResult::Exists);
    cas.compare_cas = 3;
    assert_eq!(store(&e, &cas), StoreResult::Stored { cas: 4 });
    let missing = Store { key: b"zz", ..cas };
    assert_eq!(store(&e, &missing), StoreResult::NotFound);
}

#[test]
fn arith_wraps_floors_and_pads() {
    let e = engine(16, "s3fifo");
    set(&e, b"n", b"10");
    let r = arith(&e, b"n", false, 1);
    assert!(matches!(r, ArithResult::Ok { value: 9, .. }));
    assert_eq!(
        get(&e, b"n", NOW).unwrap(),
        b"9 ",
        "memcached pads in place"
    );
    let r = arith(&e, b"n", false, 100);
    assert!(matches!(r, ArithResult::Ok { value: 0, .. }));
    set(&e, b"n", b"18446744073709551615");
    let r = arith(&e, b"n", true, 2);
    assert!(matches!(r, ArithResult::Ok { value: 1, .. }));
    set(&e, b"n", b"99");
    let r = arith(&e, b"n", true, 1);
    assert!(matches!(r, ArithResult::Ok { value: 100, .. }));
    assert_eq!(get(&e, b"n", NOW).unwrap(), b"100");
    set(&e, b"s", b"abc");
    assert_eq!(arith(&e, b"s", true, 1), ArithResult::NonNumeric);
    assert_eq!(arith(&e, b"missing", true, 1), ArithResult::NotFound);
}

#[test]
fn expiry_and_flush() {
    let e = engine(16, "s3fifo");
    let mut a = args(Mode::Set, b"t", b"v");
    a.exptime = NOW + 10;
    store(&e, &a);
    assert!(get(&e, b"t", NOW + 9).is_some());
    assert!(get(&e, b"t", NOW + 10).is_none());
    set(&e, b"x", b"1");
    e.flush(5, NOW).unwrap();
    assert!(get(&e, b"x", NOW + 3).is_some());
    assert!(get(&e, b"x", NOW + 4).is_none());
    set(&e, b"y", b"1");
    e.flush(0, NOW).unwrap();
    assert!(get(&e, b"y", NOW).is_none());
    assert_eq!(e.stats(NOW).shard.curr_items, 0);
}

#[test]
fn sweeper_frees_expired_segments() {
    let e = engine(16, "s3fifo");
    let v = vec![b'x'; 1000];
    for i in 0..5000u32 {
        let key = format!("k{i}");
        let mut a = args(Mode::Set, key.as_bytes(), &v);
        a.exptime = NOW + 5;
        store(&e, &a);
    }
    let before = e.stats(NOW).shard;
    assert!(before.curr_items > 0);
    let reclaimed = e.maintain(NOW + 6);
    let after = e.stats(NOW + 6).shard;
    assert_eq!(after.curr_items, 0);
    assert_eq!(reclaimed, before.curr_items);
    assert!(after.segments < before.segments);
}

/// The sweep skips segments in which nothing can have expired, and still
/// reclaims an item whose exptime a touch brought forward in one of them.
#[test]
fn sweep_skips_segments_until_something_in_them_expires() {
    let e = engine(16, "s3fifo");
    let v = vec![b'x'; 1000];
    for i in 0..5000u32 {
        set(&e, format!("k{i}").as_bytes(), &v);
    }
    let mut a = args(Mode::Set, b"later", &v);
    a.exptime = NOW + 100;
    store(&e, &a);
    let items = e.stats(NOW).shard.curr_items;
    assert_eq!(e.maintain(NOW + 1), 0);
    let st = e.stats(NOW + 1).shard;
    assert_eq!(st.sweep_segments_walked, 0, "no item can have expired yet");
    assert!(st.sweep_segments_skipped >= st.segments, "{st:?}");
    // A key in a long-skipped segment gets a short life.
    let touched = format!("k{}", 17);
    assert!(e
        .touch(
            touched.as_bytes(),
            NOW + 3,
            NOW + 1,
            &Fetched::default(),
            false
        )
        .unwrap());
    assert_eq!(e.maintain(NOW + 2), 0);
    assert_eq!(e.stats(NOW + 2).shard.curr_items, items);
    assert_eq!(e.maintain(NOW + 4), 1, "the touched key is reclaimed");
    let walked = e.stats(NOW + 4).shard.sweep_segments_walked;
    assert!(walked >= 1);
    assert!(get(&e, touched.as_bytes(), NOW + 4).is_none());
    assert!(get(&e, b"k18", NOW + 4).is_some());
    // Walked, that segment is skipped again; the one holding "later" is
    // walked when "later" expires, not before.
    assert_eq!(e.maintain(NOW + 5), 0);
    assert_eq!(e.stats(NOW + 5).shard.sweep_segments_walked, walked);
    assert_eq!(e.maintain(NOW + 100), 1, "\"later\" is reclaimed on time");
    assert!(get(&e, b"later", NOW + 100).is_none());
    assert_eq!(e.stats(NOW + 100).shard.curr_items, items - 2);
}

/// Writes far more than the limit: memory stays within budget and recent items survive.
fn churn(policy: &str) {
    let e = engine(16, policy);
    let v = vec![b'v'; 500];
    for i in 0..200_000u32 {
        let key = format!("key:{i}");
        assert!(matches!(
            set(&e, key.as_bytes(), &v[..(i as usize % 500)]),
            StoreResult::Stored { .. }
        ));
    }
    let st = e.stats(NOW);
    assert!(
        st.segments_allocated * st.segment_size + st.index_bytes <= 16 << 20,
        "{st:?}"
    );
    assert!(st.shard.evictions > 0);
    assert!(
        get(&e, b"key:199999", NOW).is_some(),
        "{policy}: the newest item must be present"
    );
    // Every present item has the right value.
    for i in (0..200_000u32).step_by(97) {
        let key = format!("key:{i}");
        if let Some(val) = get(&e, key.as_bytes(), NOW) {
            assert_eq!(val.len(), i as usize % 500);
        }
    }
}

#[test]
fn churn_respects_memory_for_every_policy() {
    for p in ["s3fifo", "clock", "lru", "fifo"] {
        churn(p);
    }
}

#[test]
fn many_tiny_items_keep_index_inside_budget() {
    let e = engine(8, "s3fifo");
    for i in 0..400_000u32 {
        set(&e, &i.to_le_bytes(), b"");
    }
    let st = e.stats(NOW);
    assert!(
        st.segments_allocated * st.segment_size + st.index_bytes <= 8 << 20,
        "{st:?}"
    );
}

#[test]
fn s3fifo_keeps_hot_items_through_a_scan() {
    let e = engine(16, "s3fifo");
    let v = vec![b'h'; 1000];
    for _ in 0..3 {
        for i in 0..2000u32 {
            let key = format!("hot:{i}");
            if get(&e, key.as_bytes(), NOW).is_none() {
                set(&e, key.as_bytes(), &v);
            }
        }
    }
    for i in 0..60_000u32 {
        set(&e, format!("scan:{i}").as_bytes(), &v);
    }
    let hot = (0..2000u32)
        .filter(|i| get(&e, format!("hot:{i}").as_bytes(), NOW).is_some())
        .count();
    assert!(hot > 1800, "only {hot} of 2000 hot items survived a scan");
}

#[test]
fn too_large_and_bad_config() {
    let e = engine(16, "s3fifo");
    // Above a segment: a jumbo item, up to half the memory limit.
    let big = vec![0u8; 2 << 20];
    assert!(matches!(set(&e, b"big", &big), StoreResult::Stored { .. }));
    let huge = vec![0u8; 8 << 20];
    assert_eq!(set(&e, b"huge", &huge), StoreResult::TooLarge);
    // With memcached's -I (1 MiB, counted as memcached counts an item:
    // 56 + key + 1 + value + 2, and 4 for non-zero flags).
    e.set_item_size_max(1 << 20);
    assert_eq!(set(&e, b"big", &big), StoreResult::TooLarge);
    assert!(matches!(
        set(&e, b"max", &vec![0u8; (1 << 20) - 66]),
        StoreResult::Stored { .. }
    ));
    assert_eq!(
        set(&e, b"max", &vec![0u8; (1 << 20) - 65]),
        StoreResult::TooLarge
    );
    assert!(Engine::new(EngineConfig {
        memory_limit: 1 << 20,
        ..Default::default()
    })
    .is_err());
    assert!(Engine::new(EngineConfig {
        policy: "nope".into(),
        ..Default::default()
    })
    .is_err());
}

/// A lower memory limit is reached by the maintenance passes alone, with no
/// set to reclaim (a cache_memlimit on an idle server); the items that
/// stay are intact.
#[test]
fn a_lower_limit_is_reached_without_sets() {
    let e = engine(32, "s3fifo");
    let v = vec![7u8; 1000];
    for i in 0..40_000u32 {
        set(&e, &i.to_le_bytes(), &v);
    }
    let used = |e: &Engine| {
        let st = e.stats(NOW);
        st.segments_allocated * st.segment_size + st.index_bytes
    };
    assert!(used(&e) > 24 << 20, "{}", used(&e));
    e.reset_stats();
    e.set_memory_limit(12 << 20).unwrap();
    for _ in 0..4 {
        e.maintain(NOW);
    }
    assert!(used(&e) <= 12 << 20, "{} bytes in use", used(&e));
    // The segments went back evacuated 64 items per lock hold (about a
    // thousand 1 KB items each), not a whole segment per hold.
    let holds = e.stats(NOW).holds;
    let slices = holds.count(tiercache_engine::HoldCause::Evacuation);
    assert!(slices >= 10 * 1000 / 64, "{slices} evacuation holds");
    let kept = (0..40_000u32)
        .filter_map(|i| get(&e, &i.to_le_bytes(), NOW))
        .inspect(|got| assert_eq!(got, &v))
        .count();
    assert!(kept > 5_000 && kept < 13_000, "{kept} kept");
}
