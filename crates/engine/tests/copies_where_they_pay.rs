//! Copies where they pay (issue 35): while the scheduler finds the fast
//! class queued and the capacity class with headroom, hits on the fast
//! class write the item to the capacity class too (charged to the write
//! budget), so that the split can send reads there even when everything
//! fits on the fast class; no copies while it does not; the capacity
//! class's reclaim drops them (the fast record becomes the entry again);
//! and changes of keys with such copies never serve or bring back an old
//! value, live, after a graceful restart or after a crash with copies in
//! flight (still in the capacity class's write buffer).

mod common;

use std::sync::Arc;
use tiercache_engine::device::fault::{FaultDevice, Faults, MemDevice};
use tiercache_engine::flash::tier::{DeviceClass, Promote};
use tiercache_engine::flash::{BlockDevice, FlashStats};
use tiercache_engine::{Engine, EngineConfig};

fn config(snapshot: Option<&std::path::Path>, write_budget: u64) -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    let f = c.flash.as_mut().unwrap();
    f.params.classes = vec![DeviceClass::Fast, DeviceClass::Capacity];
    // Flash hits stay on flash: the classes are what is tested.
    f.params.promote = Promote::Never;
    f.params.write_budget = write_budget;
    f.snapshot = snapshot.map(|p| p.to_path_buf());
    c
}

struct Devices {
    fast: Arc<FaultDevice>,
    cap: Arc<FaultDevice>,
}

impl Devices {
    /// Everything the tests write fits on the fast device (32 MiB); the
    /// capacity one is `cap_mb`.
    fn new(cap_mb: usize) -> Devices {
        let dev = |mb: usize| {
            Arc::new(FaultDevice::new(
                Arc::new(MemDevice::new(mb << 20)),
                Faults::default(),
            ))
        };
        Devices {
            fast: dev(32),
            cap: dev(cap_mb),
        }
    }

    fn engine(&self, snapshot: Option<&std::path::Path>, write_budget: u64) -> Engine {
        let devs: Vec<Arc<dyn BlockDevice>> = vec![self.fast.clone(), self.cap.clone()];
        Engine::with_devices(config(snapshot, write_budget), devs).expect("engine")
    }
}

fn value(i: u64, round: u32) -> Vec<u8> {
    let mut v = format!("v{round}-{i}-").into_bytes();
    v.resize(700, b'a' + (i % 26) as u8);
    v
}

fn set(e: &Engine, k: &str, v: &[u8]) {
    common::set(e, k.as_bytes(), v)
}

fn get(e: &Engine, k: &str) -> Option<Vec<u8>> {
    common::get(e, k.as_bytes(), true)
}

fn fstats(e: &Engine) -> FlashStats {
    e.flash().unwrap().stats_snapshot()
}

/// Sets `a0..a{n}`, then 12,000 other keys that push them out of RAM to
/// the fast class (everything fits there), and reads them once, so that
/// each has its hit bit: the next hit is a hot item's. Returns how many
/// are there (a demotion finding no free write buffer drops its item).
fn load_and_hit(e: &Engine, n: u64) -> u64 {
    for i in 0..n {
        set(e, &format!("a{i}"), &value(i, 0));
    }
    for i in 0..12_000 {
        set(e, &format!("b{i}"), &value(i, 9));
    }
    common::wait_flushed(e);
    read_all(e, n, 0)
}

/// Reads every `a` key while copies pay, in rounds (a copy is refused
/// while the capacity class has no free write buffer: it never waits),
/// until a round makes no more; returns the copies made.
fn copy_rounds(e: &Engine, n: u64, round: u32) -> u64 {
    let f = e.flash().unwrap().clone();
    f.pin_copies(true);
    let mut made = fstats(e).copies_made;
    for _ in 0..20 {
        read_all(e, n, round);
        common::wait_flushed(e);
        let now = fstats(e).copies_made;
        if now == made {
            break;
        }
        made = now;
    }
    f.pin_copies(false);
    made
}

/// Reads every `a` key, checking its value; returns how many are there.
fn read_all(e: &Engine, n: u64, round: u32) -> u64 {
    let mut present = 0;
    for i in 0..n {
        if let Some(v) = get(e, &format!("a{i}")) {
            assert_eq!(v, value(i, round), "a{i}");
            present += 1;
        }
    }
    present
}

#[test]
fn fast_hits_are_copied_to_the_capacity_class_only_while_copies_pay() {
    let d = Devices::new(48);
    let e = d.engine(None, 0);
    let f = e.flash().unwrap().clone();
    let n = 6_000;
    // The scheduler pinned: classic split, no copies.
    f.pin_nhc(Some((false, 1.0)));
    f.pin_copies(false);
    assert_eq!(load_and_hit(&e, n), n);
    assert_eq!(read_all(&e, n, 0), n);
    let s = fstats(&e);
    assert_eq!(s.copies_made, 0, "no copies while they do not pay");
    assert_eq!(s.classes[1].bytes_written, 0, "{:?}", s.classes);
    assert_eq!(s.classes[1].reads, 0);
    // Copies pay: every hit item gets one on the capacity class, once.
    f.pin_copies(true);
    assert!(fstats(&e).nhc.copies_pay);
    let made = copy_rounds(&e, n, 0);
    let s = fstats(&e);
    assert!(made > n * 9 / 10 && made <= n, "copies made {made}");
    assert!(
        s.classes[1].bytes_written >= s.copies_made * 700,
        "{:?}",
        s.classes
    );
    assert_eq!(s.copies_dropped, 0);
    // load_admit 0: hits on items with both records are read from the
    // capacity class; 1: from the fast record.
    f.pin_nhc(Some((false, 0.0)));
    let before = fstats(&e);
    assert_eq!(read_all(&e, n, 0), n);
    let s = fstats(&e);
    assert!(
        s.classes[1].reads >= before.classes[1].reads + s.copies_made,
        "{:?}",
        s.classes
    );
    assert!(s.dual_capacity_reads >= before.dual_capacity_reads + s.copies_made);
    f.pin_nhc(Some((false, 1.0)));
    let before = fstats(&e);
    assert_eq!(read_all(&e, n, 0), n);
    let s = fstats(&e);
    assert_eq!(s.classes[1].reads, before.classes[1].reads);
    assert!(s.classes[0].reads >= before.classes[0].reads + n * 9 / 10);
    // A capacity copy of a fast item is not promoted into the fast class
    // (the fast record is there): data_admit on writes nothing more.
    f.pin_nhc(Some((true, 0.0)));
    f.pin_copies(false);
    let written = fstats(&e).classes[0].bytes_written;
    assert_eq!(read_all(&e, n, 0), n);
    common::wait_flushed(&e);
    let s = fstats(&e);
    assert_eq!(s.promotions, 0);
    assert_eq!(s.classes[0].bytes_written, written);
    assert_eq!(s.verify_failures, 0);
}

#[test]
fn copies_are_charged_to_the_write_budget() {
    let dir = common::temp_dir("copies-budget");
    let snap = dir.join("flash.snapshot");
    let d = Devices::new(48);
    let n = 6_000;
    {
        // Loaded without a budget, then a graceful restart with one.
        let e = d.engine(Some(&snap), 0);
        load_and_hit(&e, n);
        e.persist().unwrap();
    }
    // 64 KiB/s: about 90 records of 700 B in its one second of burst.
    let e = d.engine(Some(&snap), 64 << 10);
    let f = e.flash().unwrap().clone();
    f.pin_nhc(Some((false, 1.0)));
    f.pin_copies(false);
    assert_eq!(read_all(&e, n, 0), n);
    let refused = fstats(&e).admission_refused;
    let t = std::time::Instant::now();
    f.pin_copies(true);
    assert_eq!(read_all(&e, n, 0), n);
    let secs = t.elapsed().as_secs_f64();
    let s = fstats(&e);
    let most = ((1.0 + secs) * 65_536.0 / 700.0) as u64 + 1;
    assert!(
        s.copies_made > 0 && s.copies_made <= most,
        "{} copies in {secs:.1} s, at most {most}",
        s.copies_made
    );
    assert!(s.admission_refused > refused);
    drop(e);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_capacity_class_drops_copies_and_the_fast_record_serves_again() {
    // A capacity class of 8 MiB cannot hold copies of 12,000 items of
    // 700 B (8.4 MB) beside its free segments: reclaiming its oldest
    // segments drops the copies in them, and their fast records become
    // the entries (nothing written).
    let d = Devices::new(8);
    let e = d.engine(None, 0);
    let f = e.flash().unwrap().clone();
    let n = 12_000;
    f.pin_nhc(Some((false, 1.0)));
    f.pin_copies(false);
    let n_there = load_and_hit(&e, n);
    assert!(n_there > n * 9 / 10, "{n_there} of {n}");
    // One round of hits while copies pay (a copy is refused while no
    // write buffer is free: the flusher catches up between the rounds).
    f.pin_copies(true);
    for _ in 0..3 {
        read_all(&e, n, 0);
        common::wait_flushed(&e);
    }
    f.pin_copies(false);
    let s = fstats(&e);
    assert!(
        s.copies_made > n_there * 9 / 10,
        "copies made {}",
        s.copies_made
    );
    assert!(
        s.copies_dropped > n / 4,
        "copies dropped {}",
        s.copies_dropped
    );
    let fast_written = s.classes[0].bytes_written;
    // Every item still there, the dropped ones read from the fast class
    // even at load_admit 0.
    f.pin_nhc(Some((false, 0.0)));
    let before = fstats(&e);
    assert_eq!(read_all(&e, n, 0), n_there);
    let s = fstats(&e);
    let cap_reads = s.classes[1].reads - before.classes[1].reads;
    let fast_reads = s.classes[0].reads - before.classes[0].reads;
    // At most the capacity class's 8 MiB of copies are left.
    assert!(cap_reads < n_there * 7 / 10, "{cap_reads} capacity reads");
    assert!(
        fast_reads + cap_reads >= n_there && fast_reads > n_there * 3 / 10,
        "{fast_reads} fast reads, {cap_reads} capacity reads"
    );
    assert_eq!(s.classes[0].bytes_written, fast_written);
    assert_eq!(s.verify_failures, 0);
}

/// What each `a` key must be after the changes: overwritten (round 1),
/// deleted, or unchanged.
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
            (0, Some(v)) => assert_eq!(v, value(i, 1), "{when}: a{i} has an old value"),
            (_, Some(v)) => assert_eq!(v, value(i, 0), "{when}: a{i}"),
        }
    }
    present
}

fn change(e: &Engine, n: u64) {
    for i in 0..n {
        match i % 3 {
            0 => set(e, &format!("a{i}"), &value(i, 1)),
            1 => {
                common::delete(e, format!("a{i}").as_bytes());
            }
            _ => {}
        }
    }
}

#[test]
fn changes_of_items_with_copies_never_come_back_after_a_restart_or_a_crash() {
    let dir = common::temp_dir("copies-pay");
    let snap = dir.join("flash.snapshot");
    let d = Devices::new(48);
    let n = 6_000;
    {
        let e = d.engine(Some(&snap), 0);
        let f = e.flash().unwrap().clone();
        f.pin_nhc(Some((false, 0.0)));
        f.pin_copies(false);
        load_and_hit(&e, n);
        assert!(copy_rounds(&e, n, 0) > n * 9 / 10);
        // Changes while reads go to the copies: a copy that outlived its
        // key's change would show.
        change(&e, n);
        for i in 0..12_000 {
            set(&e, &format!("e{i}"), &value(i, 6));
        }
        common::wait_flushed(&e);
        assert!(check(&e, n, "before restart") > n / 3);
        e.persist().unwrap();
    }
    {
        let e = d.engine(Some(&snap), 0);
        e.flash().unwrap().pin_nhc(Some((false, 0.0)));
        assert!(check(&e, n, "after a graceful restart") > n / 3);
        // Dropped without a snapshot: a crash.
    }
    let e = d.engine(Some(&snap), 0);
    assert!(e.last_recovery().is_some(), "recovered after the crash");
    e.flash().unwrap().pin_nhc(Some((false, 0.0)));
    assert!(check(&e, n, "after a crash") > n / 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_crash_with_copies_in_flight_brings_back_no_old_value() {
    let dir = common::temp_dir("copies-flight");
    let snap = dir.join("flash.snapshot");
    let d = Devices::new(48);
    let n = 6_000;
    let copies = {
        let e = d.engine(Some(&snap), 0);
        let f = e.flash().unwrap().clone();
        f.pin_nhc(Some((false, 0.0)));
        f.pin_copies(false);
        load_and_hit(&e, n);
        // Copies made, then changes at once: most copies, and the changes'
        // records, are still in write buffers or being written when the
        // engine goes (no wait, no snapshot: a crash).
        f.pin_copies(true);
        read_all(&e, n, 0);
        change(&e, n);
        fstats(&e).copies_made
    };
    // Refused while no write buffer was free; most still in flight.
    assert!(copies > 1_000, "copies made {copies}");
    let e = d.engine(Some(&snap), 0);
    assert!(e.last_recovery().is_some(), "recovered after the crash");
    e.flash().unwrap().pin_nhc(Some((false, 0.0)));
    check(&e, n, "after a crash with copies in flight");
    // Copies made after the restart, then a second crash right after
    // overwriting the unchanged keys.
    let f = e.flash().unwrap().clone();
    f.pin_copies(true);
    for i in 0..n {
        get(&e, &format!("a{i}"));
    }
    let keep: Vec<u64> = (0..n).filter(|i| i % 3 == 2).collect();
    for &i in &keep {
        set(&e, &format!("a{i}"), &value(i, 2));
    }
    drop(e);
    let e = d.engine(Some(&snap), 0);
    for i in 0..n {
        let got = get(&e, &format!("a{i}"));
        match (i % 3, got) {
            (_, None) => {}
            (1, Some(_)) => panic!("a{i} was deleted and came back"),
            (0, Some(v)) => assert_eq!(v, value(i, 1), "a{i}"),
            (_, Some(v)) => assert_eq!(v, value(i, 2), "a{i} has an old value"),
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A capacity copy that became an item's only remembered record (a
/// graceful restart forgets which records are copies of which) and that the
/// capacity class's reclaim drops leaves the older fast record on the
/// device, above the fast floor: the drop must ask for a tombstone (the
/// copy carries the copy bit), or a later change of the key, finding no
/// entry, asks for none, and after a crash the old value comes back.
#[test]
fn a_dropped_capacity_copy_leaves_no_fast_record_to_come_back() {
    let dir = common::temp_dir("copies-twins");
    let snap = dir.join("flash.snapshot");
    let d = Devices::new(8);
    let engine = |snap: &std::path::Path| {
        let mut c = config(Some(snap), 0);
        // Reclaimed hit records are dropped, not written again.
        c.flash.as_mut().unwrap().params.reinsert_hits = false;
        let devs: Vec<Arc<dyn BlockDevice>> = vec![d.fast.clone(), d.cap.clone()];
        Engine::with_devices(c, devs).expect("engine")
    };
    let n = 4_000;
    {
        let e = engine(&snap);
        e.flash().unwrap().pin_nhc(Some((false, 1.0)));
        assert_eq!(load_and_hit(&e, n), n);
        assert!(copy_rounds(&e, n, 0) > n * 9 / 10);
        e.persist().unwrap();
    }
    let e = engine(&snap);
    let f = e.flash().unwrap().clone();
    f.pin_nhc(Some((false, 1.0)));
    // Copies of other keys fill the capacity class, which reclaims the
    // `a` keys' copies (their entries) and drops them.
    for i in 0..6_000 {
        set(&e, &format!("c{i}"), &value(i, 5));
    }
    for i in 0..8_000 {
        set(&e, &format!("d{i}"), &value(i, 4));
    }
    common::wait_flushed(&e);
    let tombstones = fstats(&e).journal_tombstones;
    f.pin_copies(true);
    for _ in 0..3 {
        for i in 0..6_000 {
            get(&e, &format!("c{i}"));
        }
        common::wait_flushed(&e);
    }
    f.pin_copies(false);
    let gone = (0..n)
        .filter(|i| peek(&e, &format!("a{i}")).is_none())
        .count() as u64;
    assert!(gone > n / 4, "{gone} of {n} copies dropped");
    let asked = fstats(&e).journal_tombstones - tombstones;
    assert!(
        asked >= gone * 9 / 10,
        "{asked} tombstones for {gone} dropped copies"
    );
    change(&e, n);
    drop(e);
    let e = engine(&snap);
    assert!(e.last_recovery().is_some(), "recovered after the crash");
    check(&e, n, "after a crash");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Peeks at `k` (no hit recorded).
fn peek(e: &Engine, k: &str) -> Option<Vec<u8>> {
    e.get_blocking(k.as_bytes(), common::NOW, false, |_, item| {
        item.value().to_vec()
    })
}

/// Reads `a{from}..a{to}` (values of round 0) with the split at
/// `load_admit` 0; returns (present, capacity reads, fast reads).
fn read_split(e: &Engine, from: u64, to: u64) -> (u64, u64, u64) {
    e.flash().unwrap().pin_nhc(Some((false, 0.0)));
    let before = fstats(e);
    let mut present = 0;
    for i in from..to {
        if let Some(v) = get(e, &format!("a{i}")) {
            assert_eq!(v, value(i, 0), "a{i}");
            present += 1;
        }
    }
    let s = fstats(e);
    e.flash().unwrap().pin_nhc(Some((false, 1.0)));
    let d = |c: usize| s.classes[c].reads - before.classes[c].reads;
    (present, d(1), d(0))
}

#[test]
fn a_full_copy_table_refuses_more_and_stale_copies_make_room() {
    // One shard, so that its table (1/8 of the 8 MiB limit: 13,107
    // copies) fills with 1.22 times as many hot items, all on the fast
    // class.
    let d = Devices::new(48);
    let mut c = config(None, 0);
    c.shards = 1;
    let table = tiercache_engine::max_copies(c.memory_limit, 1) as u64;
    assert_eq!(table, 13_107, "the table's bound at 8 MiB");
    const TABLE_MIN: u64 = 8192;
    assert_eq!(
        tiercache_engine::max_copies(c.memory_limit, 4) as u64,
        TABLE_MIN,
        "never below 8,192 a shard"
    );
    let devs: Vec<Arc<dyn BlockDevice>> = vec![d.fast.clone(), d.cap.clone()];
    let e = Engine::with_devices(c, devs).expect("engine");
    let f = e.flash().unwrap().clone();
    let n = table * 10_000 / 8_192;
    f.pin_nhc(Some((false, 1.0)));
    f.pin_copies(false);
    let there = load_and_hit(&e, n);
    assert!(there > table + 1_000, "{there} of {n}");
    // Copies pay for every item: the table takes its 13,107 and refuses the
    // rest (counted), however many rounds of hits come.
    let made = copy_rounds(&e, n, 0);
    let s = fstats(&e);
    assert_eq!(made, table, "copies made");
    assert!(
        s.copies_refused >= there - table,
        "refused {}",
        s.copies_refused
    );
    assert_eq!(s.copies_dropped, 0);
    // Nothing wrong read: at load_admit 0 the copied items are read from
    // the capacity class, the refused ones from their fast record.
    let (present, cap, fast) = read_split(&e, 0, n);
    assert_eq!(present, there);
    assert_eq!(cap, table, "capacity reads");
    assert_eq!(fast, there - table, "fast reads");
    // The first fifth of the keys deleted: their copies are stale, and the
    // next refusals prune them, so the items refused before get copies now
    // (0.8 n keys left, fewer than the table holds).
    for i in 0..n / 5 {
        common::delete(&e, format!("a{i}").as_bytes());
    }
    let refused = fstats(&e).copies_refused;
    let made2 = copy_rounds(&e, n, 0);
    let (left, cap, fast) = read_split(&e, n / 5, n);
    assert!(left > table * 7 / 8, "{left} keys left");
    assert_eq!(
        cap, left,
        "every item left has a copy now ({fast} fast reads)"
    );
    assert!(made2 > made, "copies made {made} then {made2}");
    assert!(fstats(&e).copies_refused > refused);
    let s = fstats(&e);
    assert_eq!(s.verify_failures, 0);
    assert_eq!(s.copies_dropped, 0);
}
