//! Issue 15: what a resize of the index costs the requests of its shard.
//! A resize rehashes one of the shard's tables (at most 512 KiB of index,
//! the engine's `index::TABLE_PREC`) under the shard's lock, so a get that
//! arrives meanwhile waits for it; before the index had tables it rehashed
//! the whole index (hundreds of ms at 4M items). One shard (RAM only)
//! takes 4M small items while another thread gets one key of it in a
//! loop; prints how many sets took long and the gets' latencies. A
//! measurement, ignored by default; run it with
//! `cargo test --release -p tiercache-engine --test resize_hold -- --ignored --nocapture`
//! (about 10 s; bench/RESULTS.md has the figures).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tiercache_engine::command::{Mode, Store, StoreResult};
use tiercache_engine::flash::Fetched;
use tiercache_engine::{Engine, EngineConfig};

const NOW: u32 = 1_700_000_000;

fn set(e: &Engine, key: &[u8]) {
    let a = Store {
        mode: Mode::Set,
        key,
        flags: 0,
        exptime: 0,
        data: b"v",
        compare_cas: 0,
        set_stale: false,
        binary_key: false,
    };
    let r = e.store(&a, NOW, &Fetched::default(), false);
    assert!(matches!(r, Ok(StoreResult::Stored { .. })), "{r:?}");
}

#[test]
#[ignore = "a measurement; run in release"]
fn gets_wait_for_a_resize() {
    // 512 MiB in one shard: the index starts at 65,536 buckets (590,000
    // slots) and grows by 7% steps from 560,000 items on.
    let e = Engine::new(EngineConfig {
        memory_limit: 512 << 20,
        segment_size: 1 << 20,
        shards: 1,
        ..Default::default()
    })
    .unwrap();
    set(&e, b"hot");
    let stop = AtomicBool::new(false);
    let n = 4_000_000u64;
    let (gets, mut sets) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut lat = Vec::with_capacity(1 << 24);
            while !stop.load(Ordering::Relaxed) {
                let t = Instant::now();
                assert!(e.get_blocking(b"hot", NOW, true, |_, _| ()).is_some());
                lat.push(t.elapsed());
            }
            lat
        });
        let mut sets = Vec::with_capacity(n as usize);
        for i in 0..n {
            let key = format!("k{i:08}");
            let t = Instant::now();
            set(&e, key.as_bytes());
            sets.push(t.elapsed());
        }
        stop.store(true, Ordering::Relaxed);
        (reader.join().unwrap(), sets)
    });
    let st = e.stats(NOW);
    assert_eq!(st.shard.evictions, 0, "{st:?}");
    // Sets over 2 ms are mostly waits for a CPU (2 shared cores: a 4 ms
    // scheduler tick); a resize of the whole index used to be the longest.
    sets.sort();
    let over =
        |v: &[Duration], ms: u64| v.iter().filter(|d| **d > Duration::from_millis(ms)).count();
    println!(
        "{} sets, index {} buckets: over 2 ms {}, over 20 ms {}, longest {:.2} ms",
        sets.len(),
        st.index_buckets,
        over(&sets, 2),
        over(&sets, 20),
        sets[sets.len() - 1].as_secs_f64() * 1e3
    );
    let mut gets = gets;
    gets.sort();
    let q = |p: f64| gets[((gets.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6;
    println!(
        "{} gets: p50 {:.2} us, p99 {:.2} us, p99.99 {:.1} us, max {:.2} ms; over 1 ms: {}, over 10 ms: {}",
        gets.len(),
        q(0.5),
        q(0.99),
        q(0.9999),
        gets[gets.len() - 1].as_secs_f64() * 1e3,
        over(&gets, 1),
        over(&gets, 10)
    );
}
