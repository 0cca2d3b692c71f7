//! Segment flushes on a thread of their own while reads and changes go
//! on: each sees the newest value, and the moves are those of an inline
//! flush (split from `tests.rs`, which holds the helpers).

use super::tests::{cfg, mem, obj, val, Background};
use super::*;
use crate::device::aligned::BLOCK;
use crate::device::fault::MemDevice;
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::sync::Arc;

/// A device that holds up writes larger than a block (a log segment)
/// while `hold` is set: a flush stays between its set writes and its
/// segment write for as long as a test needs. It counts the reads at or
/// past `from` (a region's sets).
struct HeldSegments {
    inner: Arc<MemDevice>,
    hold: parking_lot::Mutex<bool>,
    cond: parking_lot::Condvar,
    waiting: std::sync::atomic::AtomicBool,
    from: u64,
    reads: std::sync::atomic::AtomicU64,
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
        if off >= self.from {
            self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
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
        from: u64::MAX,
        reads: 0.into(),
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

/// A move into a set whose filter is empty (it holds no object) does not
/// read the set; once sets hold objects, their moves read them, and every
/// key moved stays readable.
#[test]
fn moves_into_empty_sets_do_not_read_them() {
    use std::sync::atomic::Ordering;
    let c = cfg(64);
    let base = BLOCK as u64;
    let dev = Arc::new(HeldSegments {
        inner: Arc::new(MemDevice::new(c.region_bytes() as usize + BLOCK)),
        hold: parking_lot::Mutex::new(false),
        cond: parking_lot::Condvar::new(),
        waiting: false.into(),
        from: base + (1 + c.log_pages() as u64) * BLOCK as u64,
        reads: 0.into(),
    });
    let mut st = SmallStore::format(dev.clone(), base, c).unwrap();
    let mut i = 0u32;
    let put = |st: &mut SmallStore, i: &mut u32| {
        let key = format!("k{i}");
        assert!(st.insert(obj(&key, &val(*i as usize, 1))).unwrap());
        *i += 1;
    };
    while st.stats.sets_written == 0 {
        put(&mut st, &mut i);
    }
    assert_eq!(dev.reads.load(Ordering::SeqCst), 0, "no set was read");
    assert!(st.stats.flush_reads > 0, "its log pages were");
    while st.stats.sets_written < 200 {
        put(&mut st, &mut i);
    }
    assert!(
        dev.reads.load(Ordering::SeqCst) > 0,
        "sets that hold objects are read"
    );
    // The sets written without reading them serve their keys.
    for k in 0..i {
        let _ = st.get(format!("k{k}").as_bytes(), 0);
    }
    assert!(st.stats.hits_set > 0);
}
