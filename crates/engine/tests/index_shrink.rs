//! Issue 15: an index that shrinks, and its recovery. The index grows with
//! many small items (most of them on flash), then most of them are deleted
//! or expire and the maintenance sweep (`Engine::maintain`) shrinks it: the
//! keys that are left read back with their values, the others stay gone;
//! and so they do after a crash and after a graceful restart of the shrunk
//! index. About 5 s in a debug build (240,000 sets, 192,000 deletes on 8
//! threads, five reads of every key; 2 shared cores).

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use tiercache_engine::command::Store;
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig, EngineStats};

use common::NOW;

/// When the tests read: after the expiring keys expired.
const LATER: u32 = NOW + 1000;
/// Keys set: the index grows to about 7 times its smallest size.
const N: u64 = 240_000;

/// 16 MiB of RAM over 2 shards, 1 MiB flash segments, no size hint (the
/// index starts at, and shrinks back to, its smallest: 2 x 1024 buckets).
fn config(snapshot: Option<&std::path::Path>) -> EngineConfig {
    let mut c = common::flash_config(16 << 20, 256 << 10, 1 << 20);
    let f = c.flash.as_mut().unwrap();
    f.avg_item_size = 0;
    f.snapshot = snapshot.map(|p| p.to_path_buf());
    c
}

fn key(i: u64) -> Vec<u8> {
    format!("shrink:{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("{i}:").into_bytes();
    v.resize(80 + (i % 41) as usize, b'a' + (i % 26) as u8);
    v
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    /// Left alone: must read back with its value.
    Kept,
    /// Set with a TTL that has passed by [`LATER`].
    Expired,
    Deleted,
}

/// One key in ten is kept, one expires, the other eight are deleted.
fn fate(i: u64) -> Fate {
    match i % 10 {
        0 => Fate::Kept,
        1 => Fate::Expired,
        _ => Fate::Deleted,
    }
}

fn get_at(e: &Engine, i: u64, now: u32) -> Option<Vec<u8>> {
    e.get_blocking(&key(i), now, false, |_, item| item.value().to_vec())
}

fn index(e: &Engine, now: u32) -> (u64, u64) {
    let st: EngineStats = e.stats(now);
    (st.index_buckets, st.index_entries)
}

/// What `e` serves at [`LATER`] against what the shrunk index served
/// (`kept`: the kept keys it had, with their values). With `exact`, every
/// one of them must be there; else each is there with its value or not at
/// all. No other key is ever served. Returns how many kept keys are back.
fn check(e: &Engine, kept: &HashMap<u64, Vec<u8>>, exact: bool, when: &str) -> usize {
    let mut back = 0;
    for i in 0..N {
        let got = get_at(e, i, LATER);
        match (fate(i), kept.get(&i), got) {
            (Fate::Kept, Some(want), Some(got)) => {
                assert!(got == *want, "{when}: key {i} has a wrong value");
                back += 1;
            }
            (Fate::Kept, Some(_), None) => assert!(!exact, "{when}: kept key {i} is lost"),
            (_, _, None) => {}
            (f, _, Some(_)) => panic!("{when}: key {i} ({f:?}) came back"),
        }
    }
    back
}

#[test]
fn a_shrunk_index_keeps_its_keys_and_recovers_from_a_crash_and_a_restart() {
    let dir = common::temp_dir("index-shrink");
    let snap = dir.join("flash.snapshot");
    let mem = Arc::new(MemDevice::new(128 << 20));
    let dev: Arc<dyn BlockDevice> = mem.clone();
    let e = Engine::with_devices(config(Some(&snap)), vec![dev.clone()]).unwrap();
    let (start, _) = index(&e, NOW);

    // Grow.
    for i in 0..N {
        let (k, v) = (key(i), value(i));
        let st = Store {
            exptime: if fate(i) == Fate::Expired {
                NOW + 100
            } else {
                0
            },
            ..common::plain_set(&k, &v)
        };
        common::set_at(&e, &st, NOW);
    }
    let grown = e.stats(NOW);
    assert!(
        grown.shard.flash_items > N / 2,
        "most items should be on flash: {grown:?}"
    );
    assert!(
        grown.index_buckets >= 6 * start && grown.index_entries == grown.shard.curr_items,
        "the index did not grow: {start} buckets -> {grown:?}"
    );
    assert_eq!(grown.shard.index_evictions, 0, "{grown:?}");
    // Each table's rebuild ran in steps, a few buckets a lock hold (its new
    // pages mapped 8 a step, then 64 old buckets a step), never whole in
    // one hold (issue 31): 1,247 rebuilds of tables of 64 to 1,000 buckets
    // took 7,632 steps.
    let (resizes, steps) = (grown.shard.index_resizes, grown.shard.index_resize_steps);
    assert!(
        resizes >= 10 && steps >= 4 * resizes,
        "{resizes} rebuilds in {steps} steps"
    );
    let holds = e.stats(NOW).holds;
    let resize = tiercache_engine::HoldCause::Resize as usize;
    assert!(
        holds.cpu_over_bound[resize] * 50 <= holds.count(tiercache_engine::HoldCause::Resize),
        "{} of {} resize holds over 256 us on the CPU",
        holds.cpu_over_bound[resize],
        holds.count(tiercache_engine::HoldCause::Resize)
    );
    // The kept keys as the grown index serves them (a plain set drops the
    // flash entries that share its tag, so a few may be missing already).
    let kept: HashMap<u64, Vec<u8>> = (0..N)
        .filter(|&i| fate(i) == Fate::Kept)
        .filter_map(|i| Some((i, get_at(&e, i, NOW)?)))
        .collect();
    assert!(kept.len() as u64 > N / 10 - N / 4000, "{} kept", kept.len());

    // Shrink: delete and expire nine keys in ten, then sweep. (Each delete
    // of a key on flash waits for its tombstone's commit: 8 threads share
    // the commits.)
    let deleted: u64 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let e = &e;
                s.spawn(move || {
                    (0..N)
                        .filter(|&i| fate(i) == Fate::Deleted && i / 10 % 8 == t)
                        .map(|i| u64::from(common::delete(e, &key(i))))
                        .sum::<u64>()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).sum()
    });
    assert!(deleted > N * 8 / 10 - N / 400, "{deleted} deleted");
    e.maintain(LATER);
    e.maintain(LATER);
    let (buckets, entries) = index(&e, LATER);
    assert!(
        buckets * 4 < grown.index_buckets && entries * 4 < grown.index_entries,
        "the index did not shrink: {} buckets {} entries -> {buckets} {entries}",
        grown.index_buckets,
        grown.index_entries
    );
    assert_eq!(
        check(&e, &kept, true, "shrunk"),
        kept.len(),
        "every kept key is there"
    );
    // What is left is the kept keys and the expired items on flash (their
    // entries stay until their segment is reused: a sweep reads no
    // flash), in at most a third of the buckets it had.
    e.maintain(LATER);
    let shrunk = e.stats(LATER);
    assert!(
        shrunk.index_entries == shrunk.shard.curr_items
            && shrunk.index_entries >= kept.len() as u64
            && shrunk.index_entries <= kept.len() as u64 + N / 10,
        "{} kept: {shrunk:?}",
        kept.len()
    );
    assert_eq!(shrunk.shard.index_evictions, 0, "{shrunk:?}");
    assert!(
        shrunk.index_buckets * 3 < grown.index_buckets,
        "{} -> {}",
        grown.index_buckets,
        shrunk.index_buckets
    );

    // (a) A crash of the shrunk index: what the device holds now.
    let crashed = mem.image();

    // (b) A graceful restart of the same index: everything comes back, in
    // an index of the same size. Compared with the engine as it stopped:
    // the stop seals the open buffers, and the flusher may reclaim a segment
    // of expired items before it ends (it looks every second), which drops
    // their entries (CI saw 34,499 items persisted against 37,994 counted
    // before the stop).
    let (items, _) = e.persist().unwrap();
    let stopped = e.stats(LATER);
    assert_eq!(items, stopped.shard.curr_items);
    assert!(stopped.shard.curr_items >= kept.len() as u64);
    drop(e);
    let e = Engine::with_devices(config(Some(&snap)), vec![dev]).unwrap();
    assert!(e.last_recovery().is_none(), "restarted from the snapshot");
    assert_eq!(
        index(&e, LATER),
        (stopped.index_buckets, stopped.index_entries)
    );
    assert_eq!(check(&e, &kept, true, "restart"), kept.len());
    drop(e);

    let e =
        Engine::with_devices(config(None), vec![Arc::new(MemDevice::from_image(crashed))]).unwrap();
    assert!(e.last_recovery().is_some(), "recovered from the device");
    let back = check(&e, &kept, false, "crash");
    // The RAM items are lost; the flash ones (most of them) come back.
    assert!(back > kept.len() / 2, "{back} of {} back", kept.len());
    e.maintain(LATER);
    // The recovered index is sized for what came back, not for the grown
    // index: as small against the grown one as the shrunk index was, and as
    // full per bucket. (Not against the shrunk index's own size: when the
    // flusher's once-a-second expiry scan freed a wholly expired segment
    // before the crash image, the shrunk index had dropped its entries,
    // about 6,900, while the recovery, which does not know the clock, reads
    // that segment's records back; they are expired and never served. CI
    // saw 3,995 buckets recovered against 3,869 shrunk that way.)
    let (buckets, entries) = index(&e, LATER);
    assert!(
        entries >= back as u64
            && buckets * 3 < grown.index_buckets
            && entries * 2 * shrunk.index_buckets >= buckets * shrunk.index_entries,
        "{buckets} buckets, {entries} entries after the crash ({back} kept keys back); \
         shrunk {} / {}, grown {} buckets",
        shrunk.index_buckets,
        shrunk.index_entries,
        grown.index_buckets
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
