//! An index rebuild still under way at a graceful shutdown is finished by
//! `Engine::persist` before the flash tier is drained and saved: the flash
//! entries that rebuild evicts are released (and tombstoned) in the tier
//! that is saved. (Finished after the save, the restarted tier counted
//! 14,616 items against the index's 3,832.) Under a second in a debug
//! build.

mod common;

use std::sync::Arc;
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};

use common::NOW;

fn config(snapshot: &std::path::Path) -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    c.flash.as_mut().unwrap().snapshot = Some(snapshot.to_path_buf());
    c
}

fn set(e: &Engine, i: u64) {
    let key = format!("k{i}");
    let value = format!("{i:08}").repeat(90).into_bytes();
    common::set_at(e, &common::plain_set(key.as_bytes(), &value), NOW);
}

#[test]
fn evictions_of_a_rebuild_finished_at_shutdown_reach_the_saved_tier() {
    let dir = common::temp_dir("rebuild-shutdown");
    let snap = dir.join("flash.snapshot");
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(64 << 20));
    {
        let e = Engine::with_devices(config(&snap), vec![dev.clone()]).unwrap();
        for i in 0..20_000u64 {
            set(&e, i);
        }
        assert!(e.stats(NOW).shard.flash_items > 5_000);
        // Every table shrinks to its fewest buckets: finishing that
        // rebuild evicts entries, flash ones among them.
        e.start_index_shrinks_for_tests();
        e.persist().unwrap();
    }
    let e = Engine::with_devices(config(&snap), vec![dev]).unwrap();
    let st = e.stats(NOW).shard;
    let tier = e.flash().unwrap().usage();
    eprintln!(
        "after restart: flash_items {} tier items {}",
        st.flash_items, tier.items
    );
    assert_eq!(
        tier.items, st.flash_items,
        "the restarted tier counts the flash items the index has"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
