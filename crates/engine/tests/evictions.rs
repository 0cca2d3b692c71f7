//! `watch evictions`' engine side: a sink installed with
//! `Engine::watch_evictions` hears of every unexpired RAM item evicted,
//! with memcached's fields, and nothing while it does not want them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tiercache_engine::command::{Mode, Store, StoreResult};
use tiercache_engine::evictions::{Eviction, EvictionSink};
use tiercache_engine::flash::Fetched;
use tiercache_engine::{Engine, EngineConfig};

const NOW: u32 = 1_700_000_000;

#[derive(Default)]
struct Sink {
    on: AtomicBool,
    /// key -> (fetched, ttl, value length)
    seen: Mutex<HashMap<Vec<u8>, (bool, i64, u32)>>,
}

impl EvictionSink for Sink {
    fn wants(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }
    fn evicted(&self, e: &Eviction<'_>) {
        let old = self
            .seen
            .lock()
            .unwrap()
            .insert(e.key.to_vec(), (e.fetched, e.ttl, e.value_len));
        assert!(old.is_none(), "evicted twice: {:?}", e.key);
    }
}

fn set(e: &Engine, i: u64, exptime: u32) {
    let key = format!("key:{i}");
    let value = vec![b'v'; 1000 + (i % 7) as usize];
    let a = Store {
        mode: Mode::Set,
        key: key.as_bytes(),
        flags: 0,
        exptime,
        data: &value,
        compare_cas: 0,
        set_stale: false,
        binary_key: false,
    };
    let r = e.store(&a, NOW, &Fetched::default(), false).unwrap();
    assert!(matches!(r, StoreResult::Stored { .. }), "{r:?}");
}

#[test]
fn every_ram_eviction_is_reported_with_its_fields() {
    let e = Engine::new(EngineConfig {
        memory_limit: 8 << 20,
        segment_size: 1 << 20,
        shards: 1,
        ..Default::default()
    })
    .unwrap();
    let sink = Arc::new(Sink::default());
    assert!(e.watch_evictions(sink.clone()).is_ok());
    assert!(e.watch_evictions(sink.clone()).is_err(), "one sink");
    // Not wanted yet: evictions happen, nothing is made of them.
    for i in 0..20_000 {
        set(&e, i, 0);
    }
    let before = e.stats(NOW).shard.evictions;
    assert!(before > 1000, "{before}");
    assert!(sink.seen.lock().unwrap().is_empty());
    sink.on.store(true, Ordering::Relaxed);
    // Read some, give some a TTL, then push them all out.
    let base = 100_000;
    for i in base..base + 2000 {
        set(&e, i, if i % 2 == 0 { NOW + 500 } else { 0 });
        if i % 3 == 0 {
            assert!(e
                .get_blocking(format!("key:{i}").as_bytes(), NOW, true, |_, _| ())
                .is_some());
        }
    }
    for i in 200_000..230_000 {
        set(&e, i, 0);
    }
    let evicted = e.stats(NOW).shard.evictions - before;
    let seen = sink.seen.lock().unwrap();
    assert_eq!(seen.len() as u64, evicted, "every eviction, once");
    let mut checked = 0;
    for i in base..base + 2000 {
        let key = format!("key:{i}").into_bytes();
        let Some(&(fetched, ttl, len)) = seen.get(&key) else {
            continue;
        };
        assert!(
            e.get_blocking(&key, NOW, false, |_, _| ()).is_none(),
            "reported evicted but still there"
        );
        assert_eq!(fetched, i % 3 == 0, "key {i}");
        assert_eq!(ttl, if i % 2 == 0 { 500 } else { -1 }, "key {i}");
        assert_eq!(len, 1000 + (i % 7) as u32);
        checked += 1;
    }
    assert!(checked > 1000, "{checked} of the marked keys evicted");
}
