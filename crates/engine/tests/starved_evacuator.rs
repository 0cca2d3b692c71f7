//! An evacuator thread starved of CPU (issue 31): with the memory over its
//! budget by a segment per shard (segments lent to sets while evacuations
//! lag: here taken by the test), an insert runs one slice of the
//! evacuation and waits (`Wait::Busy`, retried by the caller) instead of
//! finishing a whole segment's evacuation in its lock hold, which every
//! request for the shard would wait behind. Segments of 8 MiB make a whole
//! evacuation (about 60,000 items) tens of milliseconds on the CPU here,
//! far above any slice.
//!
//! Cost: about 15 s in the test profile (three tests).

mod common;

use common::{get, set};
use tiercache_engine::{Engine, EngineConfig, HoldCause};

/// An engine whose evacuator thread is marked running but never runs.
fn starved(memory_limit: usize, segment_size: usize, shards: usize) -> Engine {
    let e = Engine::new(EngineConfig {
        memory_limit,
        segment_size,
        shards,
        ..Default::default()
    })
    .unwrap();
    e.starve_evacuator_for_tests();
    e
}

#[test]
fn inserts_wait_for_a_starved_evacuator_in_slices_and_lose_nothing() {
    let e = starved(256 << 20, 8 << 20, 1);
    let v = vec![b'v'; 100];
    // Full first (2 M items of 100 bytes hold more than 256 MiB).
    let full = 2_000_000u64;
    for i in 0..full {
        set(&e, format!("k:{i}").as_bytes(), &v);
    }
    let before = e.stats(0);
    let lent = e.lend_segments_for_tests(1);
    let n = full + 150_000;
    // A request always waiting for the shard's lock: each evacuation slice
    // ends early for it (as on a busy server), so the sets' own slices fall
    // behind.
    e.contend_locks_for_tests();
    for i in full..n {
        // Retried while the engine says Busy; panics unless stored.
        set(&e, format!("k:{i}").as_bytes(), &v);
    }
    e.return_segments_for_tests(lent);
    let st = e.stats(0);
    assert!(
        st.shard.evacuations > before.shard.evacuations,
        "segments were evacuated while the memory was over its budget"
    );
    let waits = st.shard.evacuation_waits;
    eprintln!(
        "evacuations {} waited {} late {} slices by sets {} max {} us",
        st.shard.evacuations,
        st.shard.evacuations_waited,
        st.shard.evacuations_late,
        st.shard.evacuation_slices_sets,
        st.shard.evacuate_max_us
    );
    // The newest keys are all there (older ones were evicted for room).
    for i in n - 1000..n {
        assert!(
            get(&e, format!("k:{i}").as_bytes(), false).is_some(),
            "k:{i}"
        );
    }
    let ev = HoldCause::Evacuation as usize;
    let cpu_us = st.holds.cpu_max_ns[ev] / 1000;
    eprintln!(
        "{waits} waits; evacuation holds: {}, on the CPU max {cpu_us} us, {} over 256 us",
        st.holds.count(HoldCause::Evacuation),
        st.holds.cpu_over_bound[ev]
    );
    assert!(waits > 0, "no insert waited for the evacuation");
    // A slice is tens of microseconds (the machine adds up to a couple of
    // milliseconds in rare holds); a whole segment's evacuation in one
    // hold is tens of milliseconds.
    assert!(
        cpu_us < 10_000,
        "an evacuation hold of {cpu_us} us on the CPU"
    );
}

/// Hot keys survive a stream of new keys while the evacuator is starved and
/// segments are lent over the budget: an evacuation that keeps an item (the
/// policy reinserts it) and finds its queue's head full takes its spare
/// segment even when the reserve is spent or the pool is over its budget,
/// rather than evicting the item (which lost 3% of the hot keys of
/// bench/run.py tail_under_writes at 4 KiB x 50,000 sets/s on an
/// overloaded machine, `segment_evacuation_reinserts_refused` 68).
#[test]
fn hot_keys_survive_a_starved_evacuator_with_segments_lent() {
    let shards = 4;
    let e = starved(64 << 20, 1 << 20, shards);
    let v = vec![b'v'; 4000];
    let hot: Vec<Vec<u8>> = (0..1000).map(|i| format!("hot:{i}").into_bytes()).collect();
    // Full of cold keys first, then the hot keys set and read (each read
    // marks a key for the policy to keep).
    let mut next = 0u64;
    let mut cold = |n: u64| {
        for _ in 0..n {
            set(&e, format!("new:{next}").as_bytes(), &v);
            next += 1;
        }
    };
    cold(20_000);
    for k in &hot {
        set(&e, k, &v);
    }
    let read_all = || hot.iter().filter(|k| get(&e, k, true).is_some()).count();
    assert_eq!(read_all(), hot.len());
    // Over the budget by a segment per shard: sets run evacuation slices
    // and wait, and no spare is left within the budget.
    let lent = e.lend_segments_for_tests(shards);
    let before = e.stats(0).shard;
    for _ in 0..40 {
        // 2,000 x 4 KB between reads: an eighth of the memory.
        cold(2_000);
        let st = e.stats(0).shard;
        assert_eq!(
            read_all(),
            hot.len(),
            "hot keys lost after {next} sets: {} reinserts refused, {} spares over budget, {} evictions, {} reinserted",
            st.reinserts_refused,
            st.spares_over_budget,
            st.evictions,
            st.reinserted
        );
    }
    e.return_segments_for_tests(lent);
    let st = e.stats(0).shard;
    assert!(
        st.evacuations > before.evacuations + 50,
        "segments were evacuated: {} -> {}",
        before.evacuations,
        st.evacuations
    );
    assert_eq!(
        st.reinserts_refused, 0,
        "kept items evicted for want of room"
    );
    assert!(
        st.spares_over_budget > 0,
        "no evacuation needed a spare over the budget: the test does not test it"
    );
    eprintln!(
        "{} spares over the budget, {} reinserted, {} evictions",
        st.spares_over_budget, st.reinserted, st.evictions
    );
}

/// An insert that finishes an evacuation with little left (in its own
/// hold) and finds no segment after it (the victim's buffer went to the
/// pool in place of the spare the evacuation took for the items it kept)
/// begins the next evacuation and waits for its slices: it does not go on
/// to evacuate a whole segment in its hold (20-200 ms of a set's hold,
/// over a millisecond of it on the CPU, at 50,000 new keys/s with a flash file on an
/// overloaded machine; traced with a per-hold trail, 2026-12-07). Every
/// key is read once, so evacuations keep (move to main) most items and
/// take spares.
#[test]
fn a_set_never_evacuates_a_whole_segment_after_finishing_one() {
    let e = starved(128 << 20, 8 << 20, 1);
    let v = vec![b'v'; 100];
    let n = 1_500_000u64;
    for i in 0..n {
        set(&e, format!("k:{i}").as_bytes(), &v);
        // Read at once: kept by the policy when its segment goes.
        get(&e, format!("k:{i}").as_bytes(), true);
    }
    let st = e.stats(0);
    let ev = HoldCause::Evacuation as usize;
    let cpu_us = st.holds.cpu_max_ns[ev] / 1000;
    eprintln!(
        "evacuations {} waited {} waits {} spares over budget {} reinserted {}; evacuation holds on the CPU: max {cpu_us} us",
        st.shard.evacuations,
        st.shard.evacuations_waited,
        st.shard.evacuation_waits,
        st.shard.spares_over_budget,
        st.shard.reinserted,
    );
    assert!(st.shard.reinserted > 100_000, "items were kept");
    // A slice, or the last 16 KiB of an evacuation, is well under a
    // millisecond; a whole 8 MiB segment (60,000 items) tens of them.
    assert!(
        cpu_us < 10_000,
        "an evacuation hold of {cpu_us} us on the CPU"
    );
}
