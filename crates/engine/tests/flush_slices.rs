//! flush_all in slices (issue 31): with the evacuator thread running, as
//! in the server, a flush sets the shard's index and RAM segments aside in
//! one short hold and gives them back a slice per hold. Every key from
//! before the flush misses from the moment it is answered, keys set after
//! it are found while the leftovers are given back, the memory comes back,
//! and a snapshot taken meanwhile saves no set-aside segment.
//!
//! Cost: about 10 s in the test profile (a million sets per test).

mod common;

use common::{get, set, with_evacuator, NOW};
use std::time::{Duration, Instant};
use tiercache_engine::{Engine, EngineConfig, HoldCause};

const KEYS: u64 = 1_000_000;

fn engine() -> Engine {
    Engine::new(EngineConfig {
        memory_limit: 256 << 20,
        ..Default::default()
    })
    .unwrap()
}

fn key(p: &str, i: u64) -> Vec<u8> {
    format!("{p}:{i}").into_bytes()
}

/// Waits until the shards hold no more than `segments` segments (the
/// set-aside ones given back).
fn wait_given_back(e: &Engine, segments: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let held = e.stats(NOW).shard.segments;
        if held <= segments || Instant::now() > deadline {
            return held;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_flush_sets_items_aside_at_once_and_gives_them_back_in_slices() {
    let e = engine();
    let (old, v) = ([b'o'; 100], [b'v'; 16]);
    with_evacuator(&e, true, || {
        for i in 0..KEYS {
            set(&e, &key("old", i), &old);
        }
        let before = e.stats(NOW);
        assert_eq!(before.shard.curr_items, KEYS, "all in RAM");
        let flush_holds = before.holds.count(HoldCause::Flush);
        e.flush(0, NOW).unwrap();
        // Lookups of flushed keys count get_flushed, once each, whether
        // the slices have remembered them yet or not.
        for _ in 0..2 {
            for i in 0..1000 {
                assert_eq!(get(&e, &key("old", i), false), None, "old:{i}");
            }
        }
        let flushed_found = e.stats(NOW).shard.get_flushed - before.shard.get_flushed;
        assert!(
            (1..=1000).contains(&flushed_found),
            "{flushed_found} get_flushed for 1,000 keys looked up twice"
        );
        // From here on no old key is found, while the evacuator gives
        // the leftovers back beside these requests; new keys are.
        for i in 0..KEYS {
            if i % 5 == 0 {
                set(&e, &key("new", i), &v);
            }
            if i % 3 == 0 {
                assert_eq!(
                    get(&e, &key("old", i), false),
                    None,
                    "old:{i} after flush_all"
                );
            }
        }
        for i in (0..KEYS).step_by(5) {
            assert!(get(&e, &key("new", i), false).is_some(), "new:{i} lost");
        }
        let new_items = KEYS / 5;
        assert_eq!(e.stats(NOW).shard.curr_items, new_items);
        // A fifth of the items, a fifth of the size: at most a third of
        // the segments (each shard's two queue heads are open).
        let want = before.shard.segments / 3;
        let held = wait_given_back(&e, want);
        assert!(
            held <= want,
            "{held} segments still held after the flush, {} before it",
            before.shard.segments
        );
        let after = e.stats(NOW);
        let slices = after.holds.count(HoldCause::Flush) - flush_holds;
        assert!(
            slices > after.shards,
            "{slices} flush holds over {} shards: not given back in slices",
            after.shards
        );
        // Every old item is counted once: reclaimed, found by a get as
        // flushed (get_flushed), or still remembered for that (at most
        // 1/256 of the memory in 8-byte hashes).
        let remembered_at_most = (256u64 << 20) / 256 / 8 + 64 * after.shards;
        let counted = (after.shard.reclaimed - before.shard.reclaimed)
            + (after.shard.get_flushed - before.shard.get_flushed);
        assert!(
            counted <= KEYS && counted + remembered_at_most >= KEYS,
            "{counted} of {KEYS} counted"
        );
        // The index's memory came back with the segments.
        assert!(
            after.index_table_bytes < before.index_table_bytes / 2,
            "index {} bytes after, {} before",
            after.index_table_bytes,
            before.index_table_bytes
        );
    });
}

#[test]
fn a_flush_while_the_last_ones_leftovers_go_drops_both() {
    let e = engine();
    let v = [b'w'; 16];
    with_evacuator(&e, true, || {
        for i in 0..KEYS / 2 {
            set(&e, &key("a", i), &v);
        }
        e.flush(0, NOW).unwrap();
        for i in 0..KEYS / 4 {
            set(&e, &key("b", i), &v);
        }
        e.flush(0, NOW).unwrap();
        set(&e, b"c", &v);
        for i in (0..KEYS / 2).step_by(7) {
            assert_eq!(get(&e, &key("a", i), false), None, "a:{i}");
        }
        for i in (0..KEYS / 4).step_by(7) {
            assert_eq!(get(&e, &key("b", i), false), None, "b:{i}");
        }
        assert!(get(&e, b"c", false).is_some());
        let held = wait_given_back(&e, 8);
        assert!(held <= 8, "{held} segments still held");
        assert_eq!(e.stats(NOW).shard.curr_items, 1);
    });
}
