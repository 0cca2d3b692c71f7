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
//! Cost: about 3 s per policy in the test profile.

mod common;

use common::{get, set};
use tiercache_engine::{Engine, EngineConfig};

fn key(p: &str, i: u64) -> Vec<u8> {
    format!("{p}:{i}").into_bytes()
}

/// Hot-key misses while `stream` one-time keys are set, for `policy`.
fn hot_misses(policy: &str, stream: u64) -> Vec<(u64, u64)> {
    let e = Engine::new(EngineConfig {
        memory_limit: 64 << 20,
        policy: policy.into(),
        ..Default::default()
    })
    .unwrap();
    let v = vec![b'v'; 100];
    let cold = 2_000_000;
    for i in 0..cold {
        set(&e, &key("cold", i), &v);
    }
    // Some cold keys are read once, as a warm-up would.
    for i in 0..100_000u64 {
        get(&e, &key("cold", (i * 7919) % cold), true);
    }
    let hot = 2000;
    for i in 0..hot {
        set(&e, &key("hot", i), &v);
    }
    for i in 0..hot {
        assert!(get(&e, &key("hot", i), true).is_some(), "{policy}: hot:{i}");
    }
    let mut lost = Vec::new();
    for n in 0..stream {
        set(&e, &key("new", n), &v);
        let i = n % hot;
        if get(&e, &key("hot", i), true).is_none() {
            lost.push((n, i));
        }
    }
    lost
}

fn check(policy: &str) {
    let lost = hot_misses(policy, 300_000);
    assert!(
        lost.is_empty(),
        "{policy}: {} hot-key misses (set number, hot key), first {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
}

#[test]
fn hot_keys_survive_with_s3fifo() {
    check("s3fifo");
}

#[test]
fn hot_keys_survive_with_2q() {
    check("2q");
}

#[test]
fn hot_keys_survive_with_midlru() {
    check("midlru");
}
