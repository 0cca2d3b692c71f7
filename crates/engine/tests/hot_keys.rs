//! Hot keys survive a stream of one-time keys (issue 31), with every policy
//! that claims scan resistance, at the default segment size and sharding.
//!
//! The cache is first filled with more keys than it holds, so that the
//! index grows (and takes memory from the segments) while hot keys are in
//! RAM: a shard must not give its segments, and its hot items with them,
//! to the budget below its share. Each hot key is then read once per
//! 2,000 one-time sets (10 reads a second beside 20,000 sets a second) and
//! must hit every time.
//!
//! Each policy runs with sets doing the evacuation slices (no evacuator
//! thread, as in the simulator) and s3fifo and 2q also with the evacuator
//! thread running them, as in the server.
//!
//! Cost: about 3 s per run in the test profile.

mod common;

use common::{get, set, with_evacuator};
use tiercache_engine::{Engine, EngineConfig, HoldCause, HOLD_CAUSES};

fn key(p: &str, i: u64) -> Vec<u8> {
    format!("{p}:{i}").into_bytes()
}

/// Hot-key misses while `stream` one-time keys are set, for `policy`.
fn hot_misses(policy: &str, stream: u64, evacuator: bool) -> Vec<(u64, u64)> {
    let e = Engine::new(EngineConfig {
        memory_limit: 64 << 20,
        policy: policy.into(),
        ..Default::default()
    })
    .unwrap();
    let lost = with_evacuator(&e, evacuator, || hot_misses_in(&e, policy, stream));
    let by_evacuator = e.stats(0).shard.evacuation_slices_evacuator;
    assert_eq!(
        by_evacuator > 0,
        evacuator,
        "{by_evacuator} slices run by the evacuator thread"
    );
    lost
}

fn hot_misses_in(e: &Engine, policy: &str, stream: u64) -> Vec<(u64, u64)> {
    let v = vec![b'v'; 100];
    let cold = 2_000_000;
    for i in 0..cold {
        set(e, &key("cold", i), &v);
    }
    // Some cold keys are read once, as a warm-up would.
    for i in 0..100_000u64 {
        get(e, &key("cold", (i * 7919) % cold), true);
    }
    let hot = 2000;
    for i in 0..hot {
        set(e, &key("hot", i), &v);
    }
    for i in 0..hot {
        assert!(get(e, &key("hot", i), true).is_some(), "{policy}: hot:{i}");
    }
    let mut lost = Vec::new();
    for n in 0..stream {
        set(e, &key("new", n), &v);
        let i = n % hot;
        if get(e, &key("hot", i), true).is_none() {
            lost.push((n, i));
        }
    }
    lost
}

fn check(policy: &str, evacuator: bool) {
    let lost = hot_misses(policy, 300_000, evacuator);
    assert!(
        lost.is_empty(),
        "{policy} (evacuator thread: {evacuator}): {} hot-key misses (set number, hot key), first {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
}

#[test]
fn hot_keys_survive_with_s3fifo() {
    check("s3fifo", false);
}

#[test]
fn hot_keys_survive_with_s3fifo_and_the_evacuator() {
    check("s3fifo", true);
}

#[test]
fn hot_keys_survive_with_2q_and_the_evacuator() {
    check("2q", true);
}

#[test]
fn hot_keys_survive_with_2q() {
    check("2q", false);
}

#[test]
fn hot_keys_survive_with_midlru() {
    check("midlru", false);
}

/// A 100-byte value that says which key it belongs to.
fn value_of(i: u64) -> Vec<u8> {
    let mut v = format!("value-of-{i}-").into_bytes();
    v.resize(100, b'.');
    v
}

/// Segments leave RAM ahead of need, a slice of their items per insert, not
/// in one lock hold of a request: a steady stream of sets waits for (almost)
/// no whole evacuation, and keys in a segment being evacuated are found
/// with their own value (or are gone), never another's.
#[test]
fn evacuations_run_ahead_in_slices_and_keys_stay_readable() {
    evacuations_ahead(false);
}

/// The same with the evacuator thread running the slices while the sets
/// and gets go on: requests find keys where the evacuator leaves them.
#[test]
fn the_evacuator_runs_the_slices_and_keys_stay_readable() {
    evacuations_ahead(true);
}

fn evacuations_ahead(evacuator: bool) {
    let e = Engine::new(EngineConfig {
        memory_limit: 16 << 20,
        ..Default::default()
    })
    .unwrap();
    with_evacuator(&e, evacuator, || evacuations_ahead_in(&e, evacuator));
}

fn evacuations_ahead_in(e: &Engine, evacuator: bool) {
    let now = 1_700_000_000;
    for i in 0..200_000 {
        set(e, &key("k", i), &value_of(i));
    }
    let before = e.stats(now).shard;
    // The lock holds of the steady stream alone, not of the fill.
    e.reset_stats();
    let (mut found, mut gone) = (0u64, 0u64);
    for n in 200_000..600_000u64 {
        set(e, &key("k", n), &value_of(n));
        // Keys near the oldest segments, the ones being evacuated.
        for back in [40_000, 60_000, 80_000, 100_000] {
            let k = n - back;
            match get(e, &key("k", k), false) {
                Some(v) => {
                    assert_eq!(v, value_of(k), "k:{k} read back another value");
                    found += 1;
                }
                None => gone += 1,
            }
        }
    }
    let after = e.stats(now).shard;
    let evacuations = after.evacuations - before.evacuations;
    let by_sets = after.evacuation_slices_sets - before.evacuation_slices_sets;
    let by_evacuator = after.evacuation_slices_evacuator - before.evacuation_slices_evacuator;
    eprintln!("slices: {by_sets} by sets, {by_evacuator} by the evacuator thread");
    if evacuator {
        assert!(
            by_evacuator > by_sets,
            "the evacuator ran {by_evacuator} slices, sets {by_sets}"
        );
    } else {
        assert_eq!(by_evacuator, 0);
        assert!(by_sets > 0);
    }
    let waited = after.evacuations_waited - before.evacuations_waited;
    eprintln!("{evacuations} evacuations, {waited} waited for; {found} found, {gone} gone");
    assert!(evacuations > 40, "{evacuations} evacuations");
    assert!(
        found > 0 && gone > 0,
        "the probes reach the evacuated segments"
    );
    // With the evacuator thread, how many it finishes before a set needs
    // the segment depends on how much CPU it gets: a helper's run at load
    // 5-7 on 2 cores saw 5 of 51 waited for (the sets then finish them, as
    // designed). Without it, sets run every slice themselves.
    let share = if evacuator { 4 } else { 20 };
    assert!(
        waited * share <= evacuations,
        "{waited} of {evacuations} evacuations waited for by a request"
    );
    // Every lock hold is counted under its cause, and the slices keep them
    // short; bench/RESULTS.md has the measured figures (bench/lock_holds.sh).
    let holds = e.stats(now).holds;
    let max_us = |c: HoldCause| holds.max_ns[c as usize] / 1000;
    eprintln!(
        "lock holds: {} command (max {} us), {} evacuation (max {} us), {} resize (max {} us)",
        holds.count(HoldCause::Command),
        max_us(HoldCause::Command),
        holds.count(HoldCause::Evacuation),
        max_us(HoldCause::Evacuation),
        holds.count(HoldCause::Resize),
        max_us(HoldCause::Resize),
    );
    eprintln!(
        "evacuation holds by bucket: {:?}",
        holds.buckets[HoldCause::Evacuation as usize]
    );
    // A set that ran an evacuation slice is counted as an evacuation, one
    // whose insert rebuilt an index table as a resize.
    let requests = [HoldCause::Command, HoldCause::Evacuation, HoldCause::Resize];
    assert!(
        requests.map(|c| holds.count(c)).iter().sum::<u64>() >= 2_000_000,
        "every get and set is a hold"
    );
    assert!(
        holds.count(HoldCause::Evacuation) > 40 * 1000 / 64,
        "evacuations ran in many short holds, not one per segment: {}",
        holds.count(HoldCause::Evacuation)
    );
    // On the CPU (which a descheduled holder does not add to), an
    // evacuation hold is a slice: 64 items, tens of microseconds (at most
    // a few hundred measured in bench/RESULTS.md); a whole segment's
    // evacuation was 1-3 ms. The bounds leave room for a loaded CI machine.
    let ev = HoldCause::Evacuation as usize;
    let cpu_us = holds.cpu_max_ns[ev] / 1000;
    eprintln!(
        "evacuation holds on the CPU: max {cpu_us} us, {} over 256 us",
        holds.cpu_over_bound[ev]
    );
    assert!(
        holds.cpu_over_bound[ev] * 50 <= holds.count(HoldCause::Evacuation),
        "{} of {} evacuation holds over 256 us on the CPU",
        holds.cpu_over_bound[ev],
        holds.count(HoldCause::Evacuation)
    );
    assert!(
        cpu_us < 5_000,
        "an evacuation hold of {cpu_us} us on the CPU"
    );
    // Wall-clock holds include the time a holder is descheduled: 52 ms was
    // seen with the whole workspace's tests running at once on 2 CPUs, so
    // the bound here only catches a hold gone pathological (a walk of the
    // whole cache); the slices themselves are checked by the counts above.
    for c in HOLD_CAUSES {
        assert!(
            max_us(c) < 1_000_000,
            "a {} hold of {} us",
            c.name(),
            max_us(c)
        );
    }
}
