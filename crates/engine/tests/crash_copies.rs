//! Deletes never come back through a copy's twin (found by review,
//! 2026-11-24). A record written from a copy of another record of its key (an item
//! promoted to RAM, then demoted again) can land in an open segment whose
//! sequence number is LOWER than the record it was copied from (the
//! short-TTL stream keeps its segment open while the long-TTL stream rolls
//! over). `below_floors(entry seq)` then does not imply that the key's other
//! records are below their floors: a delete skipped its tombstone and the
//! older record came back after a crash, with one device class and with
//! two. The fix: a segment that may hold a copy asks for a tombstone below
//! the floors too (`FlashTier::tombstone_horizon`), and a reclaim that drops
//! a copy asks for one with either class count. Each test takes a few
//! seconds.

mod common;

use common::{set_at, NOW};
use std::sync::Arc;
use tiercache_engine::command::Store;
use tiercache_engine::device::fault::{FaultDevice, Faults, MemDevice};
use tiercache_engine::flash::tier::{DeviceClass, Promote};
use tiercache_engine::flash::BlockDevice;
use tiercache_engine::{Engine, EngineConfig};

const LATER: u32 = NOW + 1_000;

fn config(classes: Vec<DeviceClass>) -> EngineConfig {
    let mut c = common::flash_config(8 << 20, 256 << 10, 1 << 20);
    let f = c.flash.as_mut().unwrap();
    f.params.classes = classes;
    f.params.promote = Promote::Always;
    // FIFO in RAM, so that the promoted item leaves RAM after a known
    // amount of traffic (S3-FIFO keeps it in its main queue while the
    // filler only churns the probation queue; the bug does not depend on it).
    c.policy = "fifo".into();
    c
}

fn value(tag: &str, i: u64) -> Vec<u8> {
    let mut v = format!("{tag}-{i}-").into_bytes();
    v.resize(700, b'a' + (i % 26) as u8);
    v
}

fn set(e: &Engine, k: &str, v: &[u8], exptime: u32, now: u32) {
    let st = Store {
        exptime,
        ..common::plain_set(k.as_bytes(), v)
    };
    set_at(e, &st, now);
}

fn found_at(e: &Engine, k: &str, now: u32) -> Option<tiercache_engine::command::Found> {
    e.get_blocking(k.as_bytes(), now, false, |found, _| found)
}

fn peek_at(e: &Engine, k: &str, now: u32) -> Option<Vec<u8>> {
    e.get_blocking(k.as_bytes(), now, false, |_, item| item.value().to_vec())
}

/// Sets new keys (long TTL) to push others out of RAM and roll segments.
#[derive(Default)]
struct Filler(u64);

impl Filler {
    fn one(&mut self, e: &Engine, now: u32) {
        set(e, &format!("f{}", self.0), &value("f", self.0), 0, now);
        self.0 += 1;
        assert!(self.0 < 400_000, "stuck");
    }
}

/// Step 1: a short-TTL item opens the short-TTL stream's segment A;
/// returns A's number (at most).
fn open_short_ttl_segment(e: &Engine, fill: &mut Filler) -> u64 {
    set(e, "z", &value("z", 0), NOW + 100, NOW);
    while found_at(e, "z", NOW) != Some(tiercache_engine::command::Found::Flash) {
        fill.one(e, NOW);
    }
    e.flash().unwrap().max_seq()
}

/// At LATER K's remaining TTL is under ext_low_ttl: a hit promotes it to
/// RAM; leaving RAM it is written (copy bit) to the short-TTL stream,
/// still the open segment A.
fn promote_and_demote_k(e: &Engine, fill: &mut Filler) {
    assert!(
        e.get_blocking(b"K", LATER, true, |_, _| ()).is_some(),
        "K hit"
    );
    assert!(e.peek_ram(b"K", LATER, |_| ()).is_some(), "K promoted");
    while e.peek_ram(b"K", LATER, |_| ()).is_some() {
        fill.one(e, LATER);
    }
    assert_eq!(
        found_at(e, "K", LATER),
        Some(tiercache_engine::command::Found::Flash)
    );
}

/// Fills until both floors (the capacity one only with two classes) are at
/// least `a0`.
fn raise_floors_past(e: &Engine, fill: &mut Filler, a0: u64, two: bool) {
    loop {
        let s = e.flash().unwrap().stats_snapshot();
        if s.journal_floor >= a0 && (!two || s.journal_floor_capacity >= a0) {
            return;
        }
        fill.one(e, LATER);
    }
}

fn run(devs: Vec<Arc<dyn BlockDevice>>, classes: Vec<DeviceClass>) {
    use tiercache_engine::command::Found;
    let mut fill = Filler::default();
    {
        let e = Engine::with_devices(config(classes.clone()), devs.clone()).expect("engine");
        let f = e.flash().unwrap().clone();
        f.pin_nhc(Some((false, 1.0)));
        // 1. A short-TTL item opens the short-TTL stream's segment A.
        let a0 = open_short_ttl_segment(&e, &mut fill);
        eprintln!("z on flash, a0 {a0}");
        // 2. The long-TTL stream rolls over a few times, then K is set
        //    (long TTL at NOW) and demoted into a segment B numbered > A.
        while f.max_seq() < a0 + 4 {
            fill.one(&e, NOW);
        }
        set(&e, "K", b"old value of K", NOW + 4_000, NOW);
        while found_at(&e, "K", NOW) != Some(Found::Flash) {
            fill.one(&e, NOW);
        }
        eprintln!("K on flash, max_seq {}", f.max_seq());
        // 3. Promoted to RAM and written again, as a copy, into A.
        promote_and_demote_k(&e, &mut fill);
        eprintln!("K demoted again, max_seq {}", f.max_seq());
        // 4. Reclaims raise the floor(s) over A's number, not over B's.
        raise_floors_past(&e, &mut fill, a0, classes.len() > 1);
        eprintln!(
            "a0 {a0}, fast floor {}, max_seq {}, K on flash: {:?}",
            f.stats_snapshot().journal_floor,
            f.max_seq(),
            found_at(&e, "K", LATER)
        );
        // 5. Delete K (answered), then crash.
        delete_k(&e);
        // Dropped without a snapshot: a crash.
    }
    after_the_crash(classes, devs);
}

/// Deletes K (answered, gone).
fn delete_k(e: &Engine) {
    assert!(common::run_at(e, b"K", LATER, |fetched, may_read| {
        e.delete(b"K", LATER, fetched, may_read)
    }));
    assert!(peek_at(e, "K", LATER).is_none());
}

/// Starts again on the devices as left by a crash: K must not be back.
fn after_the_crash(classes: Vec<DeviceClass>, devs: Vec<Arc<dyn BlockDevice>>) {
    let e = Engine::with_devices(config(classes), devs).expect("engine");
    let r = e.last_recovery().expect("recovered after the crash");
    eprintln!("recovery: {r:?}");
    let got = peek_at(&e, "K", LATER);
    assert!(
        got.is_none(),
        "K was deleted before the crash and came back: {:?}",
        got.map(|v| String::from_utf8_lossy(&v).into_owned())
    );
}

fn dev(mb: usize) -> Arc<dyn BlockDevice> {
    Arc::new(FaultDevice::new(
        Arc::new(MemDevice::new(mb << 20)),
        Faults::default(),
    ))
}

#[test]
fn one_class_deleted_key_does_not_come_back() {
    run(vec![dev(32)], vec![DeviceClass::Fast]);
}

/// Two classes: K's old record is moved to the capacity class (segment C,
/// numbered above A), promoted to RAM, and written back as a copy into the
/// fast short-TTL segment A. Once both floors are >= A's number (but the
/// capacity floor < C's), a delete of K skips its tombstone (below_floors)
/// and the capacity record comes back after a crash.
#[test]
fn two_classes_deleted_key_does_not_come_back() {
    use tiercache_engine::command::Found;
    let classes = vec![DeviceClass::Fast, DeviceClass::Capacity];
    let devs = vec![dev(16), dev(24)];
    let mut fill = Filler::default();
    let stats = |e: &Engine| e.flash().unwrap().stats_snapshot();
    {
        let e = Engine::with_devices(config(classes.clone()), devs.clone()).expect("engine");
        let f = e.flash().unwrap().clone();
        f.pin_nhc(Some((false, 1.0)));
        let a0 = open_short_ttl_segment(&e, &mut fill);
        // Some capacity segments first, so that K's is not the oldest.
        while stats(&e).classes[1].bytes_written < 3 << 20 {
            fill.one(&e, NOW);
        }
        set(&e, "K", b"old value of K", NOW + 4_000, NOW);
        let moves = stats(&e).moves;
        // K leaves RAM for fast, then the fast class moves it (unhit) to capacity.
        loop {
            for _ in 0..200 {
                fill.one(&e, NOW);
            }
            let reads = stats(&e).classes[1].reads;
            let at = found_at(&e, "K", NOW);
            assert!(at.is_some(), "K lost");
            if at == Some(Found::Flash) && stats(&e).classes[1].reads > reads {
                break; // read from the capacity class
            }
        }
        let s = stats(&e);
        eprintln!(
            "a0 {a0}; moves {} -> {}; floors {} {}; max_seq {}",
            moves,
            s.moves,
            s.journal_floor,
            s.journal_floor_capacity,
            f.max_seq()
        );
        promote_and_demote_k(&e, &mut fill);
        raise_floors_past(&e, &mut fill, a0, true);
        let s = stats(&e);
        eprintln!(
            "floors {} {}; max_seq {}; K {:?}",
            s.journal_floor,
            s.journal_floor_capacity,
            f.max_seq(),
            found_at(&e, "K", LATER)
        );
        delete_k(&e);
    }
    after_the_crash(classes, devs);
}
