//! An evacuator thread starved of CPU (issue 31): with the memory over its
//! budget by a segment per shard (segments lent to sets while evacuations
//! lag: here taken by the test), an insert runs one slice of the
//! evacuation and waits (`Wait::Busy`, retried by the caller) instead of
//! finishing a whole segment's evacuation in its lock hold, which every
//! request for the shard would wait behind. Segments of 8 MiB make a whole
//! evacuation (about 60,000 items) tens of milliseconds on the CPU here,
//! far above any slice.
//!
//! Cost: about 5 s in the test profile.

mod common;

use common::{get, set};
use tiercache_engine::{Engine, EngineConfig, HoldCause};

#[test]
fn inserts_wait_for_a_starved_evacuator_in_slices_and_lose_nothing() {
    let e = Engine::new(EngineConfig {
        memory_limit: 256 << 20,
        segment_size: 8 << 20,
        shards: 1,
        ..Default::default()
    })
    .unwrap();
    e.starve_evacuator_for_tests();
    let v = vec![b'v'; 100];
    // Full first (2 M items of 100 bytes hold more than 256 MiB).
    let full = 2_000_000u64;
    for i in 0..full {
        set(&e, format!("k:{i}").as_bytes(), &v);
    }
    let before = e.stats(0);
    let lent = e.lend_segments_for_tests(1);
    let n = full + 500_000;
    // Gets beside the sets keep asking for the shard's lock: a slice ends
    // early for a request that waits (as on a busy server), so the sets'
    // own slices fall behind.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                get(&e, format!("k:{}", i % n).as_bytes(), false);
                i += 7919;
            }
        });
        for i in full..n {
            // Retried while the engine says Busy; panics unless stored.
            set(&e, format!("k:{i}").as_bytes(), &v);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
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
