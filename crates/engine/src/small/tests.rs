//! The store against a model: placement, moves, set eviction, filters,
//! verification, restart and crash recovery (no stale value, ever).

use super::format::{self, Kind, Obj};
use super::store::place;
use super::*;
use crate::device::aligned::BLOCK;
use crate::device::fault::{CrashDevice, CrashPlan, MemDevice};
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::sync::Arc;

fn cfg(sets: usize) -> SmallConfig {
    SmallConfig {
        sets,
        log_segments: 3,
        seg_pages: 2,
        filter_bits: 128,
        move_threshold: 2,
    }
}

fn obj(key: &str, value: &[u8]) -> Obj {
    Obj {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        flags: 5,
        ..Obj::default()
    }
}

/// A value that names its key and version.
fn val(k: usize, v: u32) -> Vec<u8> {
    let mut b = format!("{k}:{v}:").into_bytes();
    b.resize(60 + (k * 7 + v as usize) % 150, b'.');
    b
}

fn mem(c: SmallConfig) -> (Arc<MemDevice>, SmallStore) {
    let dev = Arc::new(MemDevice::new(c.region_bytes() as usize + BLOCK));
    let st = SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap();
    (dev, st)
}

#[test]
fn objects_move_from_the_log_to_their_sets_and_stay_readable() {
    let (_dev, mut st) = mem(cfg(16));
    let mut latest = HashMap::new();
    for i in 0..3000u32 {
        let k = (i * 7919) as usize % 300;
        st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap();
        latest.insert(k, i);
    }
    let s = st.stats;
    assert!(
        s.moved > 0 && s.sets_written > 0 && s.log_segments_written > 0,
        "{s:?}"
    );
    let mut hits = 0;
    for (k, v) in &latest {
        if let Some(f) = st.get(format!("k{k}").as_bytes(), 1) {
            assert_eq!(f.obj().value, val(*k, *v), "key {k}: never an older value");
            assert_eq!(f.obj().flags, 5);
            hits += 1;
        }
    }
    assert!(st.stats.hits_set > 0 && st.stats.hits_log + st.stats.hits_buffer > 0);
    // 16 sets of 4 KiB hold about 300 objects of this size.
    assert!(hits > 150, "hits {hits}");
}

#[test]
fn a_full_set_evicts_by_rrip_and_keeps_hit_objects() {
    let (_dev, mut st) = mem(cfg(1));
    // 60 objects of ~150 bytes for one set of ~26: the early ones fill the set first.
    let keys: Vec<String> = (0..60).map(|i| format!("key-{i}")).collect();
    for k in &keys[..20] {
        st.insert(obj(k, &[1; 130])).unwrap();
    }
    // Push them through the log into the set.
    let mut i = 0;
    while !matches!(st.get(keys[0].as_bytes(), 1), Some(Found::Set(_))) {
        st.insert(obj(&format!("filler-{i}"), &[2; 130])).unwrap();
        i += 1;
        assert!(i < 1000, "never moved to its set");
    }
    for k in &keys[..5] {
        assert!(
            matches!(st.get(k.as_bytes(), 1), Some(Found::Set(_))),
            "{k} in its set"
        );
    }
    for j in 0..300 {
        st.insert(obj(&format!("filler-{i}-{j}"), &[2; 130]))
            .unwrap();
        if j % 10 == 0 {
            for k in &keys[..5] {
                st.get(k.as_bytes(), 1);
            }
        }
    }
    assert!(st.stats.evicted > 100);
    for k in &keys[..5] {
        assert!(st.get(k.as_bytes(), 1).is_some(), "hit object {k} kept");
    }
    let cold = keys[5..20]
        .iter()
        .filter(|k| st.get(k.as_bytes(), 1).is_some())
        .count();
    assert!(cold < 5, "cold objects kept: {cold}");
}

#[test]
fn deletes_and_overwrites_never_come_back_after_a_restart() {
    let c = cfg(8);
    let (dev, mut st) = mem(c);
    let mut model: HashMap<usize, Option<u32>> = HashMap::new();
    for i in 0..2500u32 {
        let k = (i as usize * 31) % 120;
        if i % 5 == 0 {
            st.invalidate(format!("k{k}").as_bytes()).unwrap();
            model.insert(k, None);
        } else {
            st.invalidate(format!("k{k}").as_bytes()).unwrap();
            st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap();
            model.insert(k, Some(i));
        }
    }
    assert!(st.stats.invalidations > 0);
    let check = |st: &mut SmallStore| {
        let mut found = 0;
        for (k, v) in &model {
            let got = st.get(format!("k{k}").as_bytes(), 1);
            match (got, v) {
                (None, _) => {}
                (Some(f), Some(v)) => {
                    assert_eq!(f.obj().value, val(*k, *v), "key {k}");
                    found += 1;
                }
                (Some(f), None) => panic!("deleted key {k} came back: {:?}", f.obj().value),
            }
        }
        found
    };
    let before = check(&mut st);
    // A restart: a new store from what the device holds (the buffered
    // segment is lost, as a write buffer is).
    let image = Arc::new(MemDevice::from_image(dev.image()));
    let (mut again, rep) = SmallStore::open(image, BLOCK as u64, c, 1).unwrap();
    assert_eq!((rep.corrupt_sets, rep.corrupt_pages), (0, 0));
    assert!(rep.log_dead > 0, "{rep:?}");
    let after = check(&mut again);
    assert!(after > 0 && after <= before, "{after} of {before}");
}

#[test]
fn a_corrupt_set_is_a_miss_and_is_rewritten_empty_at_start() {
    let c = cfg(4);
    let (dev, mut st) = mem(c);
    for i in 0..400 {
        st.insert(obj(&format!("k{i}"), &[3; 100])).unwrap();
    }
    let in_set: Vec<String> = (0..400)
        .map(|i| format!("k{i}"))
        .filter(|k| matches!(st.get(k.as_bytes(), 1), Some(Found::Set(_))))
        .collect();
    assert!(!in_set.is_empty());
    let set = place(in_set[0].as_bytes(), c.sets).1;
    let off = st.set_offset(set);
    let mut b = vec![0u8; BLOCK];
    dev.read_at(&mut b, off).unwrap();
    b[100] ^= 0x40;
    dev.write_at(&b, off).unwrap();
    let fails = st.stats.verify_failures;
    assert!(
        st.get(in_set[0].as_bytes(), 1).is_none(),
        "a corrupt set serves nothing"
    );
    assert_eq!(st.stats.verify_failures, fails + 1);
    let (mut again, rep) = SmallStore::open(dev.clone(), BLOCK as u64, c, 1).unwrap();
    assert_eq!(rep.corrupt_sets, 1);
    assert!(again.get(in_set[0].as_bytes(), 1).is_none());
    dev.read_at(&mut b, off).unwrap();
    let h = format::check(&b, Kind::Set, set, again.head().nonce).expect("rewritten");
    assert_eq!(h.count, 0);
}

#[test]
fn filters_keep_false_positive_reads_rare() {
    let (_dev, mut st) = mem(SmallConfig {
        log_segments: 4,
        ..cfg(64)
    });
    for i in 0..5000 {
        st.insert(obj(&format!("present-{i}"), &[4; 100])).unwrap();
    }
    let reads = st.stats.reads;
    for i in 0..5000 {
        assert!(st.get(format!("absent-{i}").as_bytes(), 1).is_none());
    }
    let fp = st.stats.reads - reads;
    // A set holds ~33 objects of 120 bytes in 128 filter bits: about 20%
    // false positives on a full set, plus log tag collisions.
    assert!(
        fp < 5000 * 35 / 100,
        "false-positive reads {fp} of 5000 misses"
    );
    assert!(st.stats.false_positive_reads <= st.stats.reads);
}

/// A store whose segment flushes run on a thread of their own, as in the
/// server: the store behind a lock, the thread told of each sealed job.
struct Background {
    st: Arc<parking_lot::Mutex<SmallStore>>,
    tx: crossbeam_channel::Sender<u32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    fn start(mut st: SmallStore) -> Background {
        let (tx, rx) = crossbeam_channel::unbounded::<u32>();
        st.set_background(tx.clone());
        let st = Arc::new(parking_lot::Mutex::new(st));
        let s2 = st.clone();
        let thread = std::thread::spawn(move || {
            while let Ok(part) = rx.recv() {
                if part == u32::MAX {
                    break;
                }
                super::flush::run_sealed_job(&|f| f(&mut s2.lock()));
            }
        });
        Background {
            st,
            tx,
            thread: Some(thread),
        }
    }

    fn stop(mut self) {
        self.tx.send(u32::MAX).unwrap();
        self.thread.take().unwrap().join().unwrap();
    }
}

/// One crash point: every key afterwards is absent, its last answered
/// value, or the value of the operation under way. With `background`,
/// segment flushes run on their own thread meanwhile (the crash may cut
/// one of its writes); returns the flushes that changes had to finish.
fn crash_at(c: SmallConfig, plan: CrashPlan, ops: usize, mode: Mode) -> (bool, usize, u64) {
    let background = mode != Mode::Inline;
    let dev = Arc::new(CrashDevice::new(
        c.region_bytes() as usize + BLOCK,
        CrashPlan::Cut {
            at: u64::MAX,
            torn: 0,
        },
    ));
    let mut st = SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap();
    if mode == Mode::CutGate {
        st.set_dram_budget(1);
    }
    dev.sync().unwrap();
    dev.arm(plan);
    let (bg, mut inline) = match background {
        true => (Some(Background::start(st)), None),
        false => (None, Some(st)),
    };
    let mut with = |f: &mut dyn FnMut(&mut SmallStore)| match (&bg, &mut inline) {
        (Some(b), _) => f(&mut b.st.lock()),
        (None, Some(st)) => f(st),
        (None, None) => unreachable!(),
    };
    let mut acked: HashMap<usize, Option<u32>> = HashMap::new();
    let mut in_flight: Option<(usize, Option<u32>)> = None;
    for i in 0..ops as u32 {
        let k = (i as usize * 37 + i as usize / 7) % 90;
        // Checked: a quarter of the changes set keys never set before
        // (filter false positives are what the check clears).
        let fresh = mode == Mode::Checked && i % 4 == 3;
        let key = if fresh {
            format!("n{i}")
        } else {
            format!("k{k}")
        };
        let v = (i % 6 != 0).then_some(i);
        // With background flushes, gets too: hit objects are readmitted
        // when their set drops them, and every get is checked as it runs.
        let probe = (i as usize * 53 + 11) % 90;
        let want = acked.get(&probe).copied().flatten();
        // As the server does in Gate mode: the change waits for the
        // invalidation job (the flusher's), asking again until the gate
        // clears, and is made in the lock hold of the last ask.
        let mut cleared = false;
        let mut waits_seen = 0usize;
        // Checked: blocks read for the change's check, as the server's
        // reader reads them, between two lock holds.
        let mut have: HashMap<u64, crate::device::aligned::AlignedBuf> = HashMap::new();
        while !cleared {
            with(&mut |st| {
                cleared = match mode {
                    Mode::Gate | Mode::CutGate => st.gate(key.as_bytes()).unwrap() != Gate::Wait,
                    Mode::Checked => {
                        match st
                            .check_with(key.as_bytes(), &|off| have.get(&off).map(|b| b.as_slice()))
                        {
                            Check::Read(offsets) => {
                                for off in offsets {
                                    have.insert(off, st.read_block(off, BLOCK).unwrap());
                                }
                                false
                            }
                            Check::Ready => st.gate(key.as_bytes()).unwrap() != Gate::Wait,
                        }
                    }
                    _ => st.invalidate(key.as_bytes()).map(|_| true).unwrap(),
                };
                if !cleared {
                    // Other clients' items keep leaving RAM while the change
                    // waits: admissions, seals and flushes race the job.
                    let f = format!("f{}", (i as usize * 31 + waits_seen) % 500);
                    waits_seen += 1;
                    st.insert(obj(&f, &val(900, i))).unwrap();
                    return;
                }
                if v.is_some() {
                    st.insert(obj(&key, &val(k, i))).unwrap();
                }
                if background {
                    if let Some(f) = st.get(format!("k{probe}").as_bytes(), 1) {
                        let ok = want.is_some_and(|w| f.obj().value == val(probe, w))
                            || !fresh
                                && probe == k
                                && v.is_some_and(|w| f.obj().value == val(k, w));
                        assert!(ok, "k{probe} served a value it no longer has");
                    }
                }
            });
            if !cleared {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
        if dev.crash_image().is_some() {
            in_flight = (!fresh).then_some((k, v));
            break;
        }
        if !fresh {
            acked.insert(k, v);
        }
    }
    let mut waits = 0;
    with(&mut |st| {
        if mode == Mode::CutGate {
            // The ring is cut where the first pass had no flush queued
            // (the budget is always reached): the slots past it unwritten.
            let end = st.log_end;
            let cut = end < c.log_segments || st.stats.log_segments_written < 3;
            let unwritten = st.seg_gen[end..].iter().all(|&g| g == 0);
            assert!(cut && unwritten, "ring {end}: {:?}", st.seg_gen);
        }
        waits = match mode {
            Mode::Gate | Mode::CutGate => st.stats.invalidate_jobs,
            Mode::Checked => st.stats.change_checks,
            _ => st.stats.flush_waits,
        }
    });
    if let Some(b) = bg {
        b.stop();
    }
    let Some(image) = dev.crash_image() else {
        return (false, 0, waits);
    };
    let (mut again, _) =
        SmallStore::open(Arc::new(MemDevice::from_image(image)), BLOCK as u64, c, 1).unwrap();
    let mut found = 0;
    for k in 0..90 {
        let Some(f) = again.get(format!("k{k}").as_bytes(), 1) else {
            continue;
        };
        found += 1;
        let ok = acked
            .get(&k)
            .copied()
            .flatten()
            .is_some_and(|v| f.obj().value == val(k, v))
            || in_flight
                .is_some_and(|(ik, iv)| ik == k && iv.is_some_and(|v| f.obj().value == val(k, v)));
        assert!(
            ok,
            "{plan:?}: key {k} came back as {:?}, last answered {:?}",
            String::from_utf8_lossy(&f.obj().value[..12]),
            acked.get(&k)
        );
    }
    (true, found, waits)
}

/// How a crash-point run changes keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Flushes and changes' set rewrites on the changing thread.
    Inline,
    /// Flushes on a thread of their own; changes rewrite their set durably.
    Background,
    /// Flushes on a thread of their own; changes wait for its
    /// invalidation jobs ([`SmallStore::gate`]), as in the server.
    Gate,
    /// As Gate, with the blocks [`SmallStore::check_with`] asks for read
    /// first, as the server does: a change the blocks show no copy of goes
    /// ahead without a job.
    Checked,
    /// As Gate, with the store's DRAM budget at its smallest: the log's
    /// first pass stops at two segments ([`SmallStore::set_dram_budget`]).
    CutGate,
}

/// Asks the gate for `key` until it clears (the flusher runs the key's
/// invalidation meanwhile); returns what it said of the key. The caller's
/// change must follow in the same lock hold as the last ask: here the
/// change is made in the next one, which holds too because nothing but the
/// caller admits objects in these tests.
fn gate_cleared(bg: &Background, key: &[u8]) -> bool {
    for _ in 0..100_000 {
        match bg.st.lock().gate(key).unwrap() {
            Gate::Clear(found) => return found,
            Gate::Wait => std::thread::sleep(std::time::Duration::from_micros(50)),
        }
    }
    panic!("the gate never cleared");
}

fn crash_points(mode: Mode) -> u64 {
    // In the background, more sets: some are dropped from the log (one
    // object each) and their hit objects readmitted.
    let background = mode != Mode::Inline;
    let mut c = cfg(if background { 24 } else { 6 });
    if mode == Mode::CutGate {
        // Six log segments, of which the cut ring uses two.
        c.log_segments = 6;
    }
    let ops = 900;
    let mut points = 0;
    let mut recovered = 0;
    let mut waits = 0;
    // Gate mode waits for a job per change: fewer points keep it to
    // seconds in release, about a minute in debug.
    let step = if matches!(mode, Mode::Gate | Mode::Checked | Mode::CutGate) {
        9
    } else {
        3
    };
    for at in (1..400).step_by(step) {
        for plan in [
            CrashPlan::Cut { at, torn: 0 },
            CrashPlan::Cut { at, torn: 2048 },
            CrashPlan::Cut { at, torn: 5000 },
            CrashPlan::DropUnsynced { at },
        ] {
            let (hit, found, w) = crash_at(c, plan, ops, mode);
            points += hit as usize;
            recovered += found;
            waits += w;
        }
    }
    assert!(points > 900 / step, "crash points reached: {points}");
    assert!(
        recovered > points * 5,
        "objects recovered: {recovered} over {points} crashes"
    );
    waits
}

#[test]
fn a_crash_at_any_write_never_brings_back_a_stale_value() {
    crash_points(Mode::Inline);
}

#[test]
fn a_crash_during_background_flushes_never_brings_back_a_stale_value() {
    // Changes raced the flusher thread: some had to finish its job first.
    let waits = crash_points(Mode::Background);
    assert!(waits > 0, "no change met a flush under way");
}

#[test]
fn a_crash_while_changes_wait_for_invalidation_jobs_never_brings_back_a_stale_value() {
    let jobs = crash_points(Mode::Gate);
    assert!(jobs > 0, "no change waited for an invalidation job");
}

#[test]
fn a_crash_with_the_logs_ring_cut_short_never_brings_back_a_stale_value() {
    let jobs = crash_points(Mode::CutGate);
    assert!(jobs > 0, "no change waited for an invalidation job");
}

#[test]
fn a_crash_while_changes_check_their_blocks_never_brings_back_a_stale_value() {
    let cleared = crash_points(Mode::Checked);
    assert!(cleared > 0, "no change was cleared by reading its blocks");
}

/// Changes of keys held in sets wait for one invalidation job that takes
/// them all; once it is committed they go ahead, the store answers as if
/// each had been rewritten on its own (found or not), and nothing comes
/// back after a restart.
#[test]
fn changes_wait_for_a_batched_invalidation_and_stay_dead() {
    let c = cfg(16);
    let (dev, st) = mem(c);
    let bg = Background::start(st);
    let idle = |bg: &Background| {
        while !bg.st.lock().jobs.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    for i in 0..400u32 {
        let k = i as usize % 120;
        let key = format!("k{k}");
        let found = gate_cleared(&bg, key.as_bytes());
        let mut st = bg.st.lock();
        assert!(st.gate(key.as_bytes()).unwrap() == Gate::Clear(false) || !found);
        st.insert(obj(&key, &val(k, i))).unwrap();
    }
    idle(&bg);
    // The keys the store holds on flash now (a key only in the open
    // buffer needs no invalidation: the gate drops it at once).
    let mut held = Vec::new();
    {
        let mut st = bg.st.lock();
        for k in 0..120 {
            if let Some(Found::Log(_) | Found::Set(_)) = st.get(format!("k{k}").as_bytes(), 1) {
                held.push(k);
            }
        }
    }
    assert!(held.len() > 40, "held {}", held.len());
    // A batch: every change asks once before any job has run.
    let (jobs, keys) = {
        let st = bg.st.lock();
        (st.stats.invalidate_jobs, st.stats.invalidate_keys)
    };
    let victims: Vec<usize> = held.iter().copied().step_by(2).collect();
    {
        let mut st = bg.st.lock();
        for k in &victims {
            assert_eq!(st.gate(format!("k{k}").as_bytes()).unwrap(), Gate::Wait);
        }
        // A key it never held, in a set without a copy: no wait.
        assert_eq!(st.gate(b"never").unwrap(), Gate::Clear(false));
        // Asking changed nothing yet: gets still find the old values (a
        // gate that dropped the key at once would make a get miss now and
        // serve the old value again if the job then failed to run).
        for k in &victims {
            assert!(st.get(format!("k{k}").as_bytes(), 1).is_some());
        }
    }
    for k in &victims {
        assert!(
            gate_cleared(&bg, format!("k{k}").as_bytes()),
            "k{k} was held"
        );
    }
    {
        let mut st = bg.st.lock();
        assert!(
            st.stats.invalidate_jobs - jobs <= 2,
            "one job for the batch (and maybe one the flusher had started)"
        );
        assert_eq!(st.stats.invalidate_keys - keys, victims.len() as u64);
        for k in &victims {
            // Asked again after the change: the store no longer holds it.
            assert_eq!(
                st.gate(format!("k{k}").as_bytes()).unwrap(),
                Gate::Clear(false)
            );
            assert!(
                st.get(format!("k{k}").as_bytes(), 1).is_none(),
                "k{k} served after its change"
            );
        }
        for k in held.iter().filter(|k| !victims.contains(k)) {
            assert!(st.get(format!("k{k}").as_bytes(), 1).is_some(), "k{k} lost");
        }
    }
    bg.stop();
    let (mut again, _) = SmallStore::open(dev, BLOCK as u64, c, 1).unwrap();
    for k in &victims {
        assert!(
            again.get(format!("k{k}").as_bytes(), 1).is_none(),
            "k{k} back after a restart"
        );
    }
}

/// A key in the open buffer when its change asks, whose buffer is sealed
/// before the invalidation is answered, is invalidated again after that
/// segment is written: its copy there never outlives the change.
#[test]
fn a_key_sealed_while_its_change_waits_is_invalidated_after_the_segment() {
    let c = cfg(16);
    let (dev, st) = mem(c);
    let bg = Background::start(st);
    // An old copy in a set (the log wraps), then a newer one in the buffer.
    for i in 0..300u32 {
        let k = i as usize % 100;
        let key = format!("k{k}");
        gate_cleared(&bg, key.as_bytes());
        bg.st.lock().insert(obj(&key, &val(k, i))).unwrap();
    }
    // A key with a copy on flash.
    let k = (0..100)
        .find(|k| {
            let mut st = bg.st.lock();
            let on_flash = matches!(
                st.get(format!("k{k}").as_bytes(), 1),
                Some(Found::Set(_) | Found::Log(_))
            );
            on_flash && !st.maybe_unwritten(place(format!("k{k}").as_bytes(), c.sets).0)
        })
        .expect("a key on flash");
    let key = format!("k{k}").into_bytes();
    let h = place(&key, c.sets).0;
    let mut st = bg.st.lock();
    // Its change asks with a newer copy in the open buffer.
    st.insert(obj(&format!("k{k}"), &val(k, 1000))).unwrap();
    assert!(st.buffered.has(h));
    assert_eq!(st.gate(&key).unwrap(), Gate::Wait);
    // The buffer is sealed (with the key) before the invalidation is
    // answered: the segment is written after the invalidation job.
    let mut i = 0;
    while st.buffered.has(h) {
        st.insert(obj(&format!("f{i}"), &val(500 + i, 1))).unwrap();
        i += 1;
    }
    drop(st);
    assert!(gate_cleared(&bg, &key));
    let mut st = bg.st.lock();
    assert!(st.get(&key, 1).is_none(), "k{k} served after its change");
    drop(st);
    bg.stop();
    let (mut again, _) = SmallStore::open(dev, BLOCK as u64, c, 1).unwrap();
    assert!(again.get(&key, 1).is_none(), "k{k} back after a restart");
}

#[test]
fn a_flush_that_must_wait_refuses_admissions_until_its_turn() {
    let (_dev, mut st) = mem(cfg(16));
    st.set_flush_duty(1_000_000);
    let mut refused = 0;
    for i in 0..3000u32 {
        let k = i as usize;
        if !st.insert(obj(&format!("k{k}"), &val(k, i))).unwrap() {
            refused += 1;
        }
    }
    // The log wrapped once: one segment flush ran, the next must wait.
    assert_eq!(st.stats.deferred, refused);
    assert!(refused > 2000, "{refused} refused");
    assert!(st.flush_deferred(200));
    st.set_flush_duty(0);
    assert!(st.insert(obj("again", &[1; 100])).unwrap());
}

#[test]
fn a_fresh_store_holds_the_dram_its_config_states() {
    // What the memory minimum (engine/sizing.rs) counts for the store.
    for (bytes, log) in [(16u64 << 20, 10), (8 << 20, 5), (1 << 20, 30)] {
        let c = SmallConfig::for_region(bytes, log);
        let (_dev, s) = mem(c);
        assert_eq!(s.dram_bytes() as usize, c.start_dram_bytes(), "{c:?}");
    }
}

/// A device that holds up writes larger than a block (a log segment)
/// while `hold` is set: a flush stays between its set writes and its
/// segment write for as long as a test needs.
struct HeldSegments {
    inner: Arc<MemDevice>,
    hold: parking_lot::Mutex<bool>,
    cond: parking_lot::Condvar,
    waiting: std::sync::atomic::AtomicBool,
}

impl HeldSegments {
    fn release(&self) {
        *self.hold.lock() = false;
        self.cond.notify_all();
    }
}

impl BlockDevice for HeldSegments {
    fn name(&self) -> &str {
        "held"
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn read_at(&self, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
        self.inner.read_at(buf, off)
    }
    fn write_at(&self, buf: &[u8], off: u64) -> std::io::Result<()> {
        if buf.len() > BLOCK {
            let mut h = self.hold.lock();
            while *h {
                self.waiting
                    .store(true, std::sync::atomic::Ordering::SeqCst);
                self.cond.wait(&mut h);
            }
        }
        self.inner.write_at(buf, off)
    }
}

#[test]
fn gets_and_changes_during_a_background_flush_see_the_newest_value() {
    use std::sync::atomic::Ordering;
    let c = cfg(16);
    let mem = Arc::new(MemDevice::new(c.region_bytes() as usize + BLOCK));
    let dev = Arc::new(HeldSegments {
        inner: mem.clone(),
        hold: parking_lot::Mutex::new(false),
        cond: parking_lot::Condvar::new(),
        waiting: false.into(),
    });
    let bg = Background::start(SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap());
    let idle = |bg: &Background| {
        while !bg.st.lock().jobs.is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    };
    // The log wraps several times: flushes move objects into their sets.
    let mut latest: HashMap<String, Option<Vec<u8>>> = HashMap::new();
    for i in 0..3000u32 {
        let k = (i * 7919) as usize % 300;
        let (key, v) = (format!("k{k}"), val(k, i));
        let mut st = bg.st.lock();
        st.invalidate(key.as_bytes()).unwrap();
        let stored = st.insert(obj(&key, &v)).unwrap();
        latest.insert(key, stored.then_some(v));
        drop(st);
        if i % 50 == 0 {
            idle(&bg);
        }
    }
    // Then new keys, unchanged after: the log's segments hold live
    // objects, which the next flush moves into their sets.
    for i in 0..150 {
        let (key, v) = (format!("m{i}"), val(i, 2));
        let stored = bg.st.lock().insert(obj(&key, &v)).unwrap();
        latest.insert(key, stored.then_some(v));
        idle(&bg);
    }
    let sets_before = bg.st.lock().stats.sets_written;
    let found_before: Vec<String> = {
        let mut st = bg.st.lock();
        let mut found = Vec::new();
        for (key, v) in &latest {
            if let Some(f) = st.get(key.as_bytes(), 1) {
                assert_eq!(Some(&f.obj().value), v.as_ref(), "{key}");
                found.push(key.clone());
            }
        }
        found
    };
    assert!(found_before.len() > 100, "{} found", found_before.len());
    // A new segment fills and is sealed; its flush stops before its
    // segment write, after its set writes.
    *dev.hold.lock() = true;
    let mut sealed_keys = Vec::new();
    for i in 0.. {
        let key = format!("n{i}");
        let mut st = bg.st.lock();
        st.insert(obj(&key, &val(i, 1))).unwrap();
        if !st.jobs.is_empty() {
            break;
        }
        sealed_keys.push(key);
    }
    while !dev.waiting.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let mut st = bg.st.lock();
    assert_eq!(
        st.jobs.front().map(|j| j.phase()),
        Some(super::flush::Phase::Planned)
    );
    // (The set writes are counted at the commit.)
    assert_eq!(st.stats.sets_written, sets_before);
    // Every object found before is found now, with its value: the sets the
    // flush rewrote are read as DRAM still describes them.
    for key in &found_before {
        let got = st.get(key.as_bytes(), 1).map(|f| f.obj().value.clone());
        assert_eq!(got.as_ref(), latest[key].as_ref(), "{key} during the flush");
    }
    for (i, key) in sealed_keys.iter().enumerate() {
        let got = st.get(key.as_bytes(), 1).map(|f| f.obj().value.clone());
        assert_eq!(got, Some(val(i, 1)), "{key} in the sealed segment");
    }
    // A delete of a key the flush is writing waits for it (released a
    // little later from another thread), then takes effect.
    let gone = sealed_keys[0].clone();
    let releaser = {
        let dev = dev.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            dev.release();
        })
    };
    let waits = st.stats.flush_waits;
    assert!(st.invalidate(gone.as_bytes()).unwrap());
    assert_eq!(st.stats.flush_waits, waits + 1);
    assert!(st.jobs.is_empty());
    assert!(
        st.stats.sets_written > sets_before + 1,
        "the flush moved objects into sets"
    );
    assert!(st.get(gone.as_bytes(), 1).is_none());
    releaser.join().unwrap();
    for key in &found_before {
        let got = st.get(key.as_bytes(), 1).map(|f| f.obj().value.clone());
        assert!(
            got.is_none() || got.as_ref() == latest[key].as_ref(),
            "{key} after the flush"
        );
    }
    st.flush_buffer().unwrap();
    drop(st);
    bg.stop();
    // After a restart: the deleted key stays deleted, the others are
    // their newest value or absent.
    let image = Arc::new(MemDevice::from_image(mem.image()));
    let (mut again, _) = SmallStore::open(image, BLOCK as u64, c, 1).unwrap();
    assert!(again.get(gone.as_bytes(), 1).is_none());
    let mut kept = 0;
    for (key, v) in &latest {
        if let Some(f) = again.get(key.as_bytes(), 1) {
            assert_eq!(Some(&f.obj().value), v.as_ref(), "{key} after a restart");
            kept += 1;
        }
    }
    assert!(kept > 100, "{kept} kept");
}

#[test]
fn background_flushes_move_objects_as_inline_ones_do() {
    // The same stream of new objects through both: as many set writes per
    // object admitted (the background path must not change the policy).
    let c = SmallConfig::for_region(4 << 20, 10);
    let run = |background: bool| {
        let (_dev, st) = mem(c);
        let (bg, mut inline) = match background {
            true => (Some(Background::start(st)), None),
            false => (None, Some(st)),
        };
        for i in 0..60_000u32 {
            let o = obj(&format!("key{i}"), &val(i as usize, 0));
            loop {
                let stored = match (&bg, &mut inline) {
                    (Some(b), _) => b.st.lock().insert(o.clone()).unwrap(),
                    (None, Some(st)) => st.insert(o.clone()).unwrap(),
                    _ => unreachable!(),
                };
                if stored {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        }
        let s = match (&bg, &inline) {
            (Some(b), _) => b.st.lock().stats,
            (None, Some(st)) => st.stats,
            _ => unreachable!(),
        };
        if let Some(b) = bg {
            b.stop();
        }
        s
    };
    let (a, b) = (run(false), run(true));
    let per = |s: &SmallStats| s.sets_written as f64 / s.objects_admitted as f64;
    eprintln!("inline {a:?}\nbackground {b:?}");
    assert_eq!(a.objects_admitted, b.objects_admitted);
    assert!(
        (per(&a) - per(&b)).abs() < 0.02,
        "set writes per object: inline {:.3}, background {:.3}",
        per(&a),
        per(&b)
    );
}

/// A flush_all that finishes a queued job whose commit readmits hit
/// objects into a nearly full buffer: nothing flushed is served after it,
/// or after a restart (the readmissions once sealed a job clear() left).
#[test]
fn a_flush_all_that_finishes_a_job_leaves_nothing_behind() {
    let c = cfg(256);
    let (dev, mut st) = mem(c);
    let mut keys = Vec::new();
    let mut i = 0usize;
    while !st.seg_gen.iter().all(|g| *g != 0) {
        let key = format!("a{i}");
        assert!(st.insert(obj(&key, &val(i, 1))).unwrap());
        keys.push(key);
        i += 1;
    }
    // Hit everything: the oldest segment's objects are readmitted when dropped.
    for k in &keys {
        st.get(k.as_bytes(), 1);
    }
    let (tx, _rx) = crossbeam_channel::unbounded::<u32>();
    st.set_background(tx);
    // Seal a job (no flusher runs it), then fill the buffer nearly full.
    while st.jobs.is_empty() {
        let key = format!("a{i}");
        assert!(st.insert(obj(&key, &val(i, 1))).unwrap());
        keys.push(key);
        i += 1;
    }
    while !(st.buffer.len() == c.seg_pages && st.buffer_used + 300 > format::BLOCK_PAYLOAD) {
        let key = format!("a{i}");
        assert!(st.insert(obj(&key, &val(i, 1))).unwrap());
        keys.push(key);
        i += 1;
    }
    st.clear().unwrap();
    let served: Vec<&String> = keys
        .iter()
        .filter(|k| st.get(k.as_bytes(), 1).is_some())
        .collect();
    let left = st.jobs.len();
    // What a flusher thread would do with the job left behind, then a restart.
    let cell = parking_lot::Mutex::new(st);
    super::flush::run_sealed_job(&|f| f(&mut cell.lock()));
    drop(cell);
    let (mut again, _) = SmallStore::open(
        Arc::new(MemDevice::from_image(dev.image())),
        BLOCK as u64,
        c,
        1,
    )
    .unwrap();
    let back: Vec<&String> = keys
        .iter()
        .filter(|k| again.get(k.as_bytes(), 1).is_some())
        .collect();
    assert!(
        served.is_empty() && back.is_empty(),
        "after flush_all: {} jobs left, {} keys served, {} back after a restart (e.g. {:?})",
        left,
        served.len(),
        back.len(),
        served.first()
    );
}

/// A store whose log has wrapped, every object hit (a dropped one is
/// readmitted), with a job sealed for a background flusher (not run) and
/// the buffer nearly full; returns the keys inserted.
fn sealed_with_full_buffer(c: SmallConfig) -> (Arc<MemDevice>, SmallStore, Vec<String>) {
    let (dev, mut st) = mem(c);
    let mut keys = Vec::new();
    let mut i = 0usize;
    let mut add = |st: &mut SmallStore, keys: &mut Vec<String>| {
        let key = format!("a{i}");
        assert!(st.insert(obj(&key, &val(i, 1))).unwrap());
        keys.push(key);
        i += 1;
    };
    while !st.seg_gen.iter().all(|g| *g != 0) {
        add(&mut st, &mut keys);
    }
    for k in &keys {
        st.get(k.as_bytes(), 1);
    }
    let (tx, rx) = crossbeam_channel::unbounded::<u32>();
    std::mem::forget(rx);
    st.set_background(tx);
    while st.jobs.is_empty() {
        add(&mut st, &mut keys);
    }
    while !(st.buffer.len() == c.seg_pages && st.buffer_used + 300 > format::BLOCK_PAYLOAD) {
        add(&mut st, &mut keys);
    }
    (dev, st, keys)
}

/// A delete that finishes a written job whose commit readmits the deleted
/// key: the key is gone for good (the readmission once sealed it into a
/// new job that the delete did not look at).
#[test]
fn a_delete_that_finishes_a_job_is_not_undone_by_its_readmissions() {
    let c = cfg(256);
    let (_, _, keys) = sealed_with_full_buffer(c);
    let mut bad = Vec::new();
    for k in keys.iter().take(80) {
        let (dev, mut st, _) = sealed_with_full_buffer(c);
        // The flusher's phases, up to the write (Done, not committed).
        let job = st.jobs.front().cloned().unwrap();
        let old = job.read_old();
        assert!(st.plan_job(&job, old));
        job.write();
        let was = st.get(k.as_bytes(), 1).is_some();
        let answered = st.invalidate(k.as_bytes()).unwrap();
        let served = st.get(k.as_bytes(), 1).is_some();
        if served {
            let cell = parking_lot::Mutex::new(st);
            while !cell.lock().jobs.is_empty() {
                super::flush::run_sealed_job(&|f| f(&mut cell.lock()));
            }
            let (mut again, _) = SmallStore::open(
                Arc::new(MemDevice::from_image(dev.image())),
                BLOCK as u64,
                c,
                1,
            )
            .unwrap();
            let back = again.get(k.as_bytes(), 1).is_some();
            bad.push(format!("{k}: held {was}, invalidate -> {answered}, served after; back after restart {back}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}

/// A graceful stop (flush_buffer) that finishes a job whose commit
/// readmits objects: every segment is written, nothing present is lost.
#[test]
fn a_graceful_stop_that_finishes_a_job_writes_everything() {
    let c = cfg(256);
    let (dev, mut st, keys) = sealed_with_full_buffer(c);
    let present: Vec<String> = keys
        .iter()
        .filter(|k| st.get(k.as_bytes(), 1).is_some())
        .cloned()
        .collect();
    let r = st.flush_buffer();
    let left = st.jobs.len();
    drop(st);
    let (mut again, _) = SmallStore::open(
        Arc::new(MemDevice::from_image(dev.image())),
        BLOCK as u64,
        c,
        1,
    )
    .unwrap();
    let lost = present
        .iter()
        .filter(|k| again.get(k.as_bytes(), 1).is_none())
        .count();
    assert!(
        left == 0 && r.is_ok(),
        "flush_buffer {r:?}, {left} jobs left, {lost} of {} lost",
        present.len()
    );
}

/// In the log's first pass a segment flush is one sequential write that
/// moves nothing: a burst of admissions queues up to 16 sealed segments
/// for the flusher instead of being refused (sent to the log tier) after
/// two; once the log has wrapped, flushes move objects into sets and two
/// wait at most again.
#[test]
fn a_burst_in_the_logs_first_pass_is_queued_not_refused() {
    let c = SmallConfig {
        sets: 64,
        log_segments: 40,
        seg_pages: 2,
        filter_bits: 128,
        move_threshold: 2,
    };
    let (_dev, mut st) = mem(c);
    // A flusher that is told of jobs and runs them only when the test says.
    let (tx, _rx) = crossbeam_channel::unbounded::<u32>();
    st.set_background(tx);
    st.set_flush_duty(3);
    let mut i = 0usize;
    let mut fill = |st: &mut SmallStore| {
        let before = st.stats.deferred;
        while st.stats.deferred == before {
            st.insert(obj(&format!("k{i}"), &val(i, 1))).unwrap();
            i += 1;
        }
        st.flush_jobs()
    };
    assert_eq!(
        fill(&mut st),
        16,
        "sealed segments queued in the first pass"
    );
    let st = parking_lot::Mutex::new(st);
    let drain = || {
        while !st.lock().jobs.is_empty() {
            super::flush::run_sealed_job(&|f| f(&mut st.lock()));
        }
    };
    drain();
    while st.lock().seg_gen.contains(&0) {
        fill(&mut st.lock());
        drain();
    }
    for _ in 0..5 {
        let queued = fill(&mut st.lock());
        assert!(queued <= 2, "{queued} queued after the log wrapped");
        drain();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let s = st.lock().stats;
    assert!(s.moved > 0, "{s:?}");
}
