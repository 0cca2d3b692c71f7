//! Device classes (issue 17): new items land on the fast class, hit items
//! the fast class reclaims move to the capacity class, items expiring
//! within a minute stay on fast, capacity hits are promoted into the fast class keeping their
//! capacity record as a copy, and a hit on such an item may be read from
//! either class. Overwrites and deletes of items with both copies never
//! serve an old value, in RAM, after a graceful restart or after a crash.

mod common;

use common::{set_at, NOW};
use std::sync::Arc;
use tiercache_engine::command::Store;
use tiercache_engine::device::fault::{FaultDevice, Faults, MemDevice};
use tiercache_engine::flash::tier::{DeviceClass, Promote};
use tiercache_engine::flash::{BlockDevice, FlashStats};
use tiercache_engine::{Engine, EngineConfig};

fn config(snapshot: Option<&std::path::Path>) -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    let f = c.flash.as_mut().unwrap();
    f.params.classes = vec![DeviceClass::Fast, DeviceClass::Capacity];
    // Flash hits stay on flash: the classes are what is tested.
    f.params.promote = Promote::Never;
    f.snapshot = snapshot.map(|p| p.to_path_buf());
    c
}

struct Devices {
    fast: Arc<FaultDevice>,
    cap: Arc<FaultDevice>,
}

impl Devices {
    fn new() -> Devices {
        let dev = |mb: usize| {
            Arc::new(FaultDevice::new(
                Arc::new(MemDevice::new(mb << 20)),
                Faults::default(),
            ))
        };
        Devices {
            fast: dev(16),
            cap: dev(48),
        }
    }

    fn engine(&self, snapshot: Option<&std::path::Path>) -> Engine {
        let devs: Vec<Arc<dyn BlockDevice>> = vec![self.fast.clone(), self.cap.clone()];
        Engine::with_devices(config(snapshot), devs).expect("engine")
    }
}

fn set(e: &Engine, k: &str, v: &[u8]) {
    common::set(e, k.as_bytes(), v)
}

fn value(i: u64, round: u32) -> Vec<u8> {
    let mut v = format!("v{round}-{i}-").into_bytes();
    v.resize(700, b'a' + (i % 26) as u8);
    v
}

fn get(e: &Engine, k: &str) -> Option<Vec<u8>> {
    common::get(e, k.as_bytes(), true)
}

fn fstats(e: &Engine) -> FlashStats {
    e.flash().unwrap().stats_snapshot()
}

/// Loads `a0..a{n}`, reads them (the flash ones get their hit bit), then
/// pushes `n_more` other keys through, so that the fast class reclaims.
fn load_and_cycle(e: &Engine, n: u64, n_more: u64) {
    for i in 0..n {
        set(e, &format!("a{i}"), &value(i, 0));
    }
    common::wait_flushed(e);
    for i in 0..n {
        get(e, &format!("a{i}"));
    }
    for i in 0..n_more {
        set(e, &format!("b{i}"), &value(i, 9));
    }
    common::wait_flushed(e);
}

#[test]
fn new_items_land_on_fast_and_hit_items_move_to_capacity() {
    let d = Devices::new();
    let e = d.engine(None);
    e.flash().unwrap().pin_nhc(Some((true, 1.0)));
    let cap_writes = d.cap.writes();
    for i in 0..10_000 {
        set(&e, &format!("a{i}"), &value(i, 0));
    }
    common::wait_flushed(&e);
    let s = fstats(&e);
    assert!(s.classes[0].bytes_written > 4 << 20, "{:?}", s.classes);
    assert_eq!(s.classes[1].bytes_written, 0, "new items go to fast only");
    assert_eq!(d.cap.writes(), cap_writes);
    for i in 0..10_000 {
        get(&e, &format!("a{i}"));
    }
    for i in 0..30_000 {
        set(&e, &format!("b{i}"), &value(i, 9));
    }
    common::wait_flushed(&e);
    let s = fstats(&e);
    assert!(s.moves > 1_000, "moves {}", s.moves);
    assert!(s.classes[1].bytes_written > 1 << 20, "{:?}", s.classes);
    assert!(d.cap.writes() > cap_writes);
    assert_eq!((s.classes[0].devices, s.classes[1].devices), (1, 1));
    // The moved items read back from the capacity class, verified.
    let reads_before = s.classes[1].reads;
    let mut present = 0;
    for i in 0..10_000 {
        if let Some(v) = get(&e, &format!("a{i}")) {
            assert_eq!(v, value(i, 0), "a{i}");
            present += 1;
        }
    }
    let s = fstats(&e);
    assert!(present > 5_000, "{present}");
    assert!(s.classes[1].reads > reads_before + 1_000, "{:?}", s.classes);
    assert_eq!(s.verify_failures, 0);
}

#[test]
fn short_ttl_items_stay_on_the_fast_class() {
    let d = Devices::new();
    let e = d.engine(None);
    e.flash().unwrap().pin_nhc(Some((true, 1.0)));
    let short = |i: u64, v: &[u8]| {
        let k = format!("s{i}");
        let st = Store {
            exptime: NOW + 60,
            ..common::plain_set(k.as_bytes(), v)
        };
        set_at(&e, &st, NOW);
    };
    for i in 0..10_000 {
        short(i, &value(i, 0));
    }
    common::wait_flushed(&e);
    for i in 0..10_000 {
        get(&e, &format!("s{i}"));
    }
    for i in 0..30_000 {
        short(100_000 + i, &value(i, 9));
    }
    common::wait_flushed(&e);
    let s = fstats(&e);
    assert_eq!(s.moves, 0);
    assert_eq!(s.classes[1].bytes_written, 0, "{:?}", s.classes);
    assert!(
        s.objects_reinserted > 1_000,
        "reinserted on fast: {}",
        s.objects_reinserted
    );
}

#[test]
fn capacity_hits_are_promoted_keeping_a_copy_and_either_copy_serves() {
    let d = Devices::new();
    let e = d.engine(None);
    let f = e.flash().unwrap().clone();
    f.pin_nhc(Some((true, 1.0)));
    load_and_cycle(&e, 10_000, 30_000);
    // Capacity hits go to the fast class (data_admit).
    for i in 0..10_000 {
        get(&e, &format!("a{i}"));
    }
    let s = fstats(&e);
    assert!(s.promotions > 1_000, "promotions {}", s.promotions);
    // The copy tables' DRAM is charged to the memory limit with the index
    // and the write buffers (at least 24 bytes per remembered copy).
    let es = e.stats(common::NOW);
    let charged = es.index_bytes - es.index_table_bytes - f.buffer_bytes() as u64;
    assert!(charged >= 24 * 1_000, "copy tables charged {charged} bytes");
    // data_admit off, load_admit 0: every hit on a dual-copy item is read
    // from the capacity copy; 1: from the fast record.
    f.pin_nhc(Some((false, 0.0)));
    let before = fstats(&e);
    for i in 0..10_000 {
        if let Some(v) = get(&e, &format!("a{i}")) {
            assert_eq!(v, value(i, 0), "a{i}");
        }
    }
    let s = fstats(&e);
    assert!(s.dual_capacity_reads > 1_000, "{}", s.dual_capacity_reads);
    assert_eq!(s.dual_fast_reads, before.dual_fast_reads);
    assert_eq!(
        s.promotions, before.promotions,
        "no promotion without data_admit"
    );
    f.pin_nhc(Some((false, 1.0)));
    let fast_reads = s.classes[0].reads;
    for i in 0..10_000 {
        if let Some(v) = get(&e, &format!("a{i}")) {
            assert_eq!(v, value(i, 0), "a{i}");
        }
    }
    let s2 = fstats(&e);
    assert_eq!(s2.dual_capacity_reads, s.dual_capacity_reads);
    assert!(s2.classes[0].reads > fast_reads + 1_000);
    // When the fast class reclaims a promoted item, its copy becomes the
    // entry (no write).
    for i in 0..30_000 {
        set(&e, &format!("c{i}"), &value(i, 8));
    }
    common::wait_flushed(&e);
    let s3 = fstats(&e);
    assert!(s3.moves_to_copy > 100, "moves to copy {}", s3.moves_to_copy);
    for i in 0..10_000 {
        if let Some(v) = get(&e, &format!("a{i}")) {
            assert_eq!(v, value(i, 0), "a{i}");
        }
    }
    assert_eq!(fstats(&e).verify_failures, 0);
}

/// What each `a` key must be: overwritten (round 1), deleted, or unchanged.
fn expect(i: u64) -> Option<Vec<u8>> {
    match i % 3 {
        0 => Some(value(i, 1)),
        1 => None,
        _ => Some(value(i, 0)),
    }
}

/// Checks every `a` key: the current value or absent, never an old one.
fn check(e: &Engine, n: u64, when: &str) -> u64 {
    let mut present = 0;
    for i in 0..n {
        let got = get(e, &format!("a{i}"));
        if got.is_some() {
            present += 1;
        }
        match (i % 3, got) {
            (_, None) => {}
            (1, Some(_)) => panic!("{when}: a{i} was deleted and came back"),
            (_, Some(v)) => assert!(
                Some(&v) == expect(i).as_ref(),
                "{when}: a{i} has an old value"
            ),
        }
    }
    present
}

#[test]
fn overwrites_and_deletes_of_items_on_both_classes_never_serve_an_old_copy() {
    let dir = std::env::temp_dir().join(format!("nhc-classes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let snap = dir.join("flash.snapshot");
    let d = Devices::new();
    let n = 10_000;
    {
        let e = d.engine(Some(&snap));
        let f = e.flash().unwrap().clone();
        f.pin_nhc(Some((true, 1.0)));
        load_and_cycle(&e, n, 30_000);
        for i in 0..n {
            get(&e, &format!("a{i}"));
        }
        assert!(fstats(&e).promotions > 1_000);
        // Reads go to the copies from here on: a copy that outlived its
        // key's change would show.
        f.pin_nhc(Some((false, 0.0)));
        for i in 0..n {
            match i % 3 {
                0 => set(&e, &format!("a{i}"), &value(i, 1)),
                1 => {
                    common::delete(&e, format!("a{i}").as_bytes());
                }
                _ => {}
            }
        }
        // The new values leave RAM for the fast class too (new records
        // of keys whose old copies are still on the capacity class).
        for i in 0..12_000 {
            set(&e, &format!("e{i}"), &value(i, 6));
        }
        common::wait_flushed(&e);
        let present = check(&e, n, "before restart");
        assert!(present > n / 3, "{present}");
        assert!(fstats(&e).dual_capacity_reads > 500);
        e.persist().unwrap();
    }
    // Graceful restart.
    {
        let e = d.engine(Some(&snap));
        e.flash().unwrap().pin_nhc(Some((false, 0.0)));
        let present = check(&e, n, "after a graceful restart");
        assert!(present > n / 3, "{present}");
        // More changes, then a crash (no snapshot).
        for i in (0..n).step_by(3) {
            set(&e, &format!("a{i}"), &value(i, 1));
        }
        for i in 0..20_000 {
            set(&e, &format!("d{i}"), &value(i, 7));
        }
        common::wait_flushed(&e);
    }
    let e = d.engine(Some(&snap));
    assert!(e.last_recovery().is_some(), "recovered after the crash");
    e.flash().unwrap().pin_nhc(Some((false, 0.0)));
    check(&e, n, "after a crash");
    // And once more after a crash right after overwriting everything.
    for i in 0..n {
        if i % 3 == 0 {
            set(&e, &format!("a{i}"), &value(i, 1));
        }
    }
    drop(e);
    let e = d.engine(Some(&snap));
    check(&e, n, "after a second crash");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unhit_items_the_fast_class_lets_go_are_kept_on_capacity() {
    let d = Devices::new();
    let e = d.engine(None);
    for i in 0..10_000 {
        set(&e, &format!("a{i}"), &value(i, 0));
    }
    // Never read: without the capacity class these would be dropped when
    // the fast class reclaims them.
    for i in 0..25_000 {
        set(&e, &format!("b{i}"), &value(i, 9));
    }
    common::wait_flushed(&e);
    let s = fstats(&e);
    assert!(s.moves > 5_000, "moves {}", s.moves);
    let mut present = 0;
    for i in 0..10_000 {
        if let Some(v) = get(&e, &format!("a{i}")) {
            assert_eq!(v, value(i, 0));
            present += 1;
        }
    }
    assert!(present > 9_000, "{present} of 10000 kept");
}

/// Items with minutes left (inside `ext_low_ttl`, their own stream on the
/// fast class) are kept on capacity too when the fast class lets them go
/// unhit: until 2026-11-29 anything expiring within the hour was dropped,
/// and tests/interop/flash_fuzz.py lost keys with 500 s left while the
/// capacity class was nearly empty.
#[test]
fn unhit_items_with_minutes_left_move_to_capacity() {
    let d = Devices::new();
    let e = d.engine(None);
    for i in 0..10_000 {
        let k = format!("a{i}");
        let v = value(i, 0);
        let st = Store {
            exptime: NOW + 500,
            ..common::plain_set(k.as_bytes(), &v)
        };
        set_at(&e, &st, NOW);
    }
    for i in 0..25_000 {
        set(&e, &format!("b{i}"), &value(i, 9));
    }
    common::wait_flushed(&e);
    let s = fstats(&e);
    assert!(s.moves > 5_000, "moves {}", s.moves);
    let present = present_at(&e, 10_000, 0, NOW);
    assert!(present > 9_000, "{present} of 10000 kept");
    assert_eq!(e.stats(NOW).shard.evictions, 0);
}

/// With the fewest write buffers, a fast-class reclaim that moves a
/// segment's records fills the capacity stream's buffer and finds no spare
/// (the flusher, busy reclaiming, has not written the one it sealed): it
/// writes that one itself and goes on. Before, each such record was
/// dropped, uncounted.
#[test]
fn a_reclaim_short_of_write_buffers_waits_rather_than_drops() {
    let d = Devices::new();
    let mut c = config(None);
    let p = &mut c.flash.as_mut().unwrap().params;
    p.write_buffers = 2;
    p.low_ttl = 0;
    let devs: Vec<Arc<dyn BlockDevice>> = vec![d.fast.clone(), d.cap.clone()];
    let e = Engine::with_devices(c, devs).expect("engine");
    for i in 0..10_000 {
        set(&e, &format!("a{i}"), &value(i, 0));
    }
    for i in 0..25_000 {
        set(&e, &format!("b{i}"), &value(i, 9));
    }
    common::wait_flushed(&e);
    let s = fstats(&e);
    let present = present_at(&e, 10_000, 0, NOW);
    assert_eq!(e.stats(NOW).shard.evictions, 0, "{present} of 10000 kept");
    assert!(present > 9_000, "{present} of 10000 kept");
    // Whether a reclaim had to wait depends on the flusher's timing (0 to
    // a few here): not asserted. With the drop it replaced, 701 of these
    // keys were evicted in one run.
    eprintln!("reclaim waits: {}", s.reclaim_waits);
}

/// Peeks at `k` at time `now` (no hit recorded, nothing promoted).
fn peek_at(e: &Engine, k: &str, now: u32) -> Option<Vec<u8>> {
    e.get_blocking(k.as_bytes(), now, false, |_, item| item.value().to_vec())
}

/// The `a` keys whose value is `value(i, round)` (none other may be there).
fn present_at(e: &Engine, n: u64, round: u32, now: u32) -> u64 {
    let mut present = 0;
    for i in 0..n {
        if let Some(v) = peek_at(e, &format!("a{i}"), now) {
            assert_eq!(v, value(i, round), "a{i}");
            present += 1;
        }
    }
    present
}

#[test]
fn items_moved_to_the_capacity_class_come_back_after_a_crash() {
    let d = Devices::new();
    let n = 10_000;
    let before = {
        let e = d.engine(None);
        for i in 0..n {
            set(&e, &format!("a{i}"), &value(i, 0));
        }
        // Unread: the fast class lets them go to the capacity class, then
        // goes on reclaiming its own segments, numbered above theirs.
        for i in 0..40_000 {
            set(&e, &format!("b{i}"), &value(i, 9));
        }
        common::wait_flushed(&e);
        let s = fstats(&e);
        assert!(s.moves > 5_000, "moves {}", s.moves);
        assert!(
            s.journal_floor > s.journal_floor_capacity,
            "fast floor {} over capacity floor {}",
            s.journal_floor,
            s.journal_floor_capacity
        );
        present_at(&e, n, 0, NOW)
        // Dropped without a snapshot: a crash.
    };
    assert!(before > 9_000, "{before} of {n} on the capacity class");
    let e = d.engine(None);
    let r = e.last_recovery().expect("recovered after the crash");
    let after = present_at(&e, n, 0, NOW);
    eprintln!("capacity items: {before} before the crash, {after} after ({r:?})");
    // One floor for both classes lost nearly all of them.
    assert!(after >= before * 95 / 100, "{after} of {before} recovered");
}

/// A capacity record whose fast copy (a promotion) a reclaim dropped stays
/// on the device above the capacity floor: changes of its key after that
/// find no entry to tombstone, so the drop must have asked for one.
#[test]
fn a_dropped_fast_copy_leaves_no_capacity_record_to_come_back() {
    let dir = common::temp_dir("classes-twins");
    let snap = dir.join("flash.snapshot");
    let d = Devices::new();
    let n = 6_000;
    // Long-lived at NOW, expiring within a minute at LATER
    // (MOVE_HORIZON_SECS): the fast class then drops them unhit instead of
    // moving them.
    const LATER: u32 = NOW + 4_000;
    let exptime = LATER + 30;
    let config = |snap: &std::path::Path| {
        let mut c = config(Some(snap));
        c.flash.as_mut().unwrap().params.reinsert_hits = false;
        c
    };
    let engine = |snap: &std::path::Path| {
        let devs: Vec<Arc<dyn BlockDevice>> = vec![d.fast.clone(), d.cap.clone()];
        Engine::with_devices(config(snap), devs).expect("engine")
    };
    {
        let e = engine(&snap);
        e.flash().unwrap().pin_nhc(Some((true, 1.0)));
        for i in 0..n {
            let k = format!("a{i}");
            let v = value(i, 0);
            let st = Store {
                exptime,
                ..common::plain_set(k.as_bytes(), &v)
            };
            set_at(&e, &st, NOW);
        }
        for i in 0..30_000 {
            set(&e, &format!("b{i}"), &value(i, 9));
        }
        common::wait_flushed(&e);
        assert!(fstats(&e).moves > 3_000, "moves {}", fstats(&e).moves);
        // Capacity hits: copied into the fast class, the capacity record kept.
        for i in 0..n {
            get(&e, &format!("a{i}"));
        }
        common::wait_flushed(&e);
        assert!(fstats(&e).promotions > 3_000, "{}", fstats(&e).promotions);
        // A graceful restart forgets which records are copies of which.
        e.persist().unwrap();
    }
    let e = engine(&snap);
    let tombstones = fstats(&e).journal_tombstones;
    for i in 0..30_000 {
        let k = format!("c{i}");
        let v = value(i, 8);
        set_at(&e, &common::plain_set(k.as_bytes(), &v), LATER);
    }
    common::wait_flushed(&e);
    let dropped = fstats(&e).journal_tombstones - tombstones;
    assert!(dropped > 1_000, "{dropped} tombstones for dropped copies");
    for i in 0..n {
        let k = format!("a{i}");
        match i % 3 {
            0 => {
                let v = value(i, 1);
                set_at(&e, &common::plain_set(k.as_bytes(), &v), LATER);
            }
            1 => {
                common::run_at(&e, k.as_bytes(), LATER, |fetched, may_read| {
                    e.delete(k.as_bytes(), LATER, fetched, may_read)
                });
            }
            _ => {}
        }
    }
    drop(e);
    let e = engine(&snap);
    assert!(e.last_recovery().is_some(), "recovered after the crash");
    for i in 0..n {
        let got = peek_at(&e, &format!("a{i}"), LATER);
        match (i % 3, got) {
            (_, None) => {}
            (1, Some(_)) => panic!("a{i} was deleted and came back"),
            (0, Some(v)) => assert_eq!(v, value(i, 1), "a{i} has an old value"),
            (_, Some(v)) => assert_eq!(v, value(i, 0), "a{i}"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reads_from_write_buffers_are_counted_by_class_and_open_buffer() {
    let d = Devices::new();
    let e = d.engine(None);
    e.flash().unwrap().pin_nhc(Some((true, 1.0)));
    let mut filler = 0;
    set(&e, "k", &value(1, 0));
    common::push_to_flash(&e, b"k", &mut filler);
    // Still in the fast class's open buffer: served from RAM, no device read.
    let s0 = fstats(&e);
    assert_eq!(get(&e, "k"), Some(value(1, 0)));
    let s1 = fstats(&e);
    assert_eq!(s1.buffer_reads, s0.buffer_reads + 1);
    assert_eq!(s1.buffer_reads_open, s0.buffer_reads_open + 1);
    assert_eq!(
        s1.classes[0].buffer_reads,
        s0.classes[0].buffer_reads + 1,
        "{:?}",
        s1.classes
    );
    assert_eq!(s1.classes[1].buffer_reads, s0.classes[1].buffer_reads);
    assert_eq!(s1.classes[0].reads, s0.classes[0].reads);
    // Written out: a device read, no buffer read.
    common::wait_flushed(&e);
    assert_eq!(get(&e, "k"), Some(value(1, 0)));
    let s2 = fstats(&e);
    assert_eq!(s2.buffer_reads, s1.buffer_reads);
    assert_eq!(s2.buffer_reads_open, s1.buffer_reads_open);
    assert_eq!(s2.classes[0].buffer_reads, s1.classes[0].buffer_reads);
    assert_eq!(s2.classes[0].reads, s1.classes[0].reads + 1);
}

/// The state this needs (a capacity buffer newer than the fast class's
/// open one when the moved items are read) depends on when the background
/// writes seal buffers: on a loaded machine the fast class sometimes opened
/// a newer buffer first (0 refused, in one CI run). So the scenario is
/// tried on up to five fresh engines, and one of them must show it.
#[test]
fn a_promotion_waits_for_a_fast_buffer_newer_than_the_capacity_record() {
    let shown = (0..5).any(|_| promotion_waits_once());
    assert!(shown, "no attempt had a moved item refused promotion");
}

/// One attempt: false when the fast class moved on before or during the
/// reads, else the rule is checked whole.
fn promotion_waits_once() -> bool {
    let d = Devices::new();
    let e = d.engine(None);
    e.flash().unwrap().pin_nhc(Some((true, 1.0)));
    let n = 10_000;
    for i in 0..n {
        set(&e, &format!("a{i}"), &value(i, 0));
    }
    common::wait_flushed(&e);
    for i in 0..n {
        get(&e, &format!("a{i}"));
    }
    // New items until the fast class reclaims: its first moves open the
    // capacity class's first buffer, newer than the fast one now open.
    let mut b = 0;
    while fstats(&e).moves < 100 {
        set(&e, &format!("b{b}"), &value(b, 9));
        b += 1;
        assert!(b < 200_000, "no moves");
    }
    let s0 = fstats(&e);
    let read_all = || {
        for i in 0..n {
            if let Some(v) = get(&e, &format!("a{i}")) {
                assert_eq!(v, value(i, 0), "a{i}");
            }
        }
    };
    read_all();
    let s1 = fstats(&e);
    // Some refused and none promoted; an attempt where the fast class
    // opened a newer buffer during the reads (some promoted: 1,275 in one
    // loaded CI run) shows nothing either way.
    if s1.promotions_refused == s0.promotions_refused || s1.promotions != s0.promotions {
        return false;
    }
    // Once the fast class opens a newer buffer, they are promoted.
    common::wait_flushed(&e);
    let mut filler = 0;
    set(&e, "x", &value(0, 1));
    common::push_to_flash(&e, b"x", &mut filler);
    read_all();
    let s2 = fstats(&e);
    assert!(s2.promotions > s1.promotions, "{s2:?}");
    assert_eq!(s2.verify_failures, 0);
    true
}
