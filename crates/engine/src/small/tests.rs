//! The store against a model: placement, moves, set eviction, filters,
//! verification, restart and crash recovery (no stale value, ever).

use super::format::{self, Kind, Obj};
use super::store::place;
use super::*;
use crate::device::aligned::BLOCK;
use crate::device::fault::MemDevice;
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::sync::Arc;

pub(super) fn cfg(sets: usize) -> SmallConfig {
    SmallConfig {
        sets,
        log_segments: 3,
        seg_pages: 2,
        filter_bits: 128,
        move_threshold: 2,
    }
}

pub(super) fn obj(key: &str, value: &[u8]) -> Obj {
    Obj {
        key: key.as_bytes().to_vec(),
        value: value.to_vec(),
        flags: 5,
        ..Obj::default()
    }
}

/// A value that names its key and version.
pub(super) fn val(k: usize, v: u32) -> Vec<u8> {
    let mut b = format!("{k}:{v}:").into_bytes();
    b.resize(60 + (k * 7 + v as usize) % 150, b'.');
    b
}

pub(super) fn mem(c: SmallConfig) -> (Arc<MemDevice>, SmallStore) {
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
pub(super) struct Background {
    pub(super) st: Arc<parking_lot::Mutex<SmallStore>>,
    tx: crossbeam_channel::Sender<u32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    pub(super) fn start(mut st: SmallStore) -> Background {
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

    pub(super) fn stop(mut self) {
        self.tx.send(u32::MAX).unwrap();
        self.thread.take().unwrap().join().unwrap();
    }
}

/// Asks the gate for `key` until it clears (the flusher runs the key's
/// invalidation meanwhile); returns what it said of the key. The caller's
/// change must follow in the same lock hold as the last ask: here the
/// change is made in the next one, which holds too because nothing but the
/// caller admits objects in these tests.
pub(super) fn gate_cleared(bg: &Background, key: &[u8]) -> bool {
    for _ in 0..100_000 {
        match bg.st.lock().gate(key).unwrap() {
            Gate::Clear(found) => return found,
            Gate::Wait => std::thread::sleep(std::time::Duration::from_micros(50)),
        }
    }
    panic!("the gate never cleared");
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
fn a_store_holds_its_filters_and_log_index_only_once_used() {
    // Issue 32: a fresh store holds its segments' generations only (the
    // default choice may never use it); its filters and the log index's
    // buckets, which the memory minimum (engine/sizing.rs) counts, come
    // with its first objects.
    for (bytes, log) in [(16u64 << 20, 10), (8 << 20, 5), (1 << 20, 30)] {
        let c = SmallConfig::for_region(bytes, log);
        let (_dev, mut s) = mem(c);
        assert_eq!(s.dram_bytes() as usize, c.log_segments * 8, "{c:?}");
        let mut i = 0;
        while s.stats.sets_written == 0 {
            s.insert(obj(&format!("k{i}"), &val(i, 0))).unwrap();
            i += 1;
        }
        let (filters, log_bytes, _) = s.dram_parts();
        assert_eq!(
            filters as usize,
            crate::small::filter::SetFilters::bytes_for(c.sets, c.filter_bits),
            "{c:?}"
        );
        assert!(
            log_bytes as usize >= crate::small::log::LogIndex::start_bytes(c.log_buckets(), c.sets),
            "{c:?}"
        );
        assert!(s.dram_bytes() as usize >= c.start_dram_bytes(), "{c:?}");
    }
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
