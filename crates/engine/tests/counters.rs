//! Counters changed in place (`Engine::arith`): Redis's INCR family
//! (`Arith::Signed`) and memcached's incr/decr (`Arith::Unsigned`) share
//! one engine call, which overwrites the digits where they are when their
//! length allows and writes a new item otherwise; on an item on flash, in
//! RAM copies promoted from flash, under concurrent callers and across a
//! crash.

mod common;

use common::{get, push_to_flash, read_records as read, NOW};
use std::sync::Arc;
use tiercache_engine::command::{Arith, ArithResult, Store, Wait};
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::tier::Promote;
use tiercache_engine::flash::{BlockDevice, Fetched};
use tiercache_engine::{Engine, EngineConfig};

fn ram_engine() -> Engine {
    let mut c = common::flash_config(8 << 20, 256 << 10, 256 << 10);
    c.flash = None;
    Engine::new(c).expect("engine")
}

fn by(by: i64) -> Arith {
    Arith::Signed { by }
}

/// `arith` run to its end on this thread.
fn arith(e: &Engine, k: &[u8], op: Arith) -> ArithResult {
    common::run(e, k, |f, may_read| e.arith(k, NOW, op, f, may_read))
}

fn ok(r: ArithResult) -> i64 {
    match r {
        ArithResult::Ok { value, .. } => value as i64,
        r => panic!("not Ok: {r:?}"),
    }
}

/// Items written so far (a counter changed in place writes none).
fn written(e: &Engine) -> u64 {
    e.stats(NOW).shard.total_items
}

#[test]
fn signed_counters_overwrite_digits_of_the_same_length_and_rewrite_others() {
    let e = ram_engine();
    // A missing key counts from 0: a new item.
    let w = written(&e);
    assert_eq!(ok(arith(&e, b"c", by(-3))), -3);
    assert_eq!(get(&e, b"c", false).as_deref(), Some(b"-3".as_slice()));
    assert_eq!(written(&e), w + 1);
    // Same length (-3 -> -2 -> -1): in place, no new item, a new CAS.
    let cas = |e: &Engine| e.get_blocking(b"c", NOW, false, |_, v| v.cas()).unwrap();
    let c0 = cas(&e);
    assert_eq!(ok(arith(&e, b"c", by(1))), -2);
    assert_eq!(ok(arith(&e, b"c", by(1))), -1);
    assert_eq!(written(&e), w + 1, "in place");
    assert!(cas(&e) > c0, "a change in place takes a new CAS");
    // Shorter (-1 -> 0) and longer (0 -> 10): new items, exact digits, no
    // padding (Redis reads the value back as a string).
    assert_eq!(ok(arith(&e, b"c", by(1))), 0);
    assert_eq!(get(&e, b"c", false).as_deref(), Some(b"0".as_slice()));
    assert_eq!(ok(arith(&e, b"c", by(10))), 10);
    assert_eq!(get(&e, b"c", false).as_deref(), Some(b"10".as_slice()));
    assert_eq!(written(&e), w + 3);
    assert_eq!(ok(arith(&e, b"c", by(-1))), 9);
    assert_eq!(get(&e, b"c", false).as_deref(), Some(b"9".as_slice()));
    // Overflow changes nothing; Redis's exact form only.
    common::set(&e, b"max", i64::MAX.to_string().as_bytes());
    assert_eq!(arith(&e, b"max", by(1)), ArithResult::Overflow);
    assert_eq!(
        get(&e, b"max", false).as_deref(),
        Some(i64::MAX.to_string().as_bytes())
    );
    assert_eq!(ok(arith(&e, b"max", by(i64::MIN))), -1);
    for bad in [&b"007"[..], b" 1", b"1 ", b"+1", b"x", b""] {
        common::set(&e, b"bad", bad);
        assert_eq!(arith(&e, b"bad", by(1)), ArithResult::NonNumeric);
        assert_eq!(get(&e, b"bad", false).as_deref(), Some(bad));
    }
}

#[test]
fn counters_keep_flags_and_expiry_and_memcached_still_pads() {
    let e = ram_engine();
    let st = Store {
        flags: 7,
        exptime: NOW + 100,
        ..common::plain_set(b"k", b"41")
    };
    common::set_at(&e, &st, NOW);
    assert_eq!(ok(arith(&e, b"k", by(1))), 42);
    let seen = |e: &Engine| {
        e.get_blocking(b"k", NOW, false, |_, v| {
            (v.value().to_vec(), v.flags(), v.exptime())
        })
    };
    assert_eq!(seen(&e), Some((b"42".to_vec(), 7, NOW + 100)));
    assert_eq!(ok(arith(&e, b"k", by(100))), 142);
    assert_eq!(seen(&e), Some((b"142".to_vec(), 7, NOW + 100)));
    // memcached's decr writes a shorter result in place, padded (as
    // memcached does); Redis then reads no integer there, as Redis would.
    let decr = Arith::Unsigned {
        incr: false,
        delta: 50,
    };
    assert_eq!(ok(arith(&e, b"k", decr)), 92);
    assert_eq!(seen(&e), Some((b"92 ".to_vec(), 7, NOW + 100)));
    assert_eq!(arith(&e, b"k", by(1)), ArithResult::NonNumeric);
    // memcached's incr of a missing key is still a miss, Redis's creates.
    let incr = Arith::Unsigned {
        incr: true,
        delta: 1,
    };
    assert_eq!(arith(&e, b"none", incr), ArithResult::NotFound);
    assert_eq!(get(&e, b"none", false), None);
}

#[test]
fn concurrent_increments_from_both_protocols_lose_nothing() {
    let e = Arc::new(ram_engine());
    let threads = 4;
    let each = 5_000;
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let e = e.clone();
            std::thread::spawn(move || {
                for i in 0..each {
                    // Redis's and memcached's increments of one counter,
                    // across the 999 -> 1000 ... length changes.
                    let op = match (t + i) % 2 {
                        0 => by(1),
                        _ => Arith::Unsigned {
                            incr: true,
                            delta: 1,
                        },
                    };
                    loop {
                        match arith(&e, b"n", op) {
                            ArithResult::Ok { .. } => break,
                            // memcached's incr before any Redis one created it.
                            ArithResult::NotFound => std::thread::yield_now(),
                            r => panic!("{r:?}"),
                        }
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let total = (threads * each).to_string();
    assert_eq!(get(&e, b"n", false).as_deref(), Some(total.as_bytes()));
}

fn flash_config() -> EngineConfig {
    let mut c = common::flash_config(4 << 20, 64 << 10, 256 << 10);
    // FIFO in RAM so that filler pushes a promoted item back to flash; a
    // flash hit is promoted at once.
    c.policy = "fifo".into();
    c.flash.as_mut().unwrap().params.promote = Promote::Always;
    c
}

/// An increment given the record, retried while the flash tier is busy.
fn arith_given(e: &Engine, k: &[u8], op: Arith, f: &Fetched) -> ArithResult {
    for _ in 0..100_000 {
        match e.arith(k, NOW, op, f, false) {
            Err(Wait::Busy) => std::thread::sleep(std::time::Duration::from_micros(200)),
            Ok(r) => return r,
            Err(w) => panic!("{w:?}"),
        }
    }
    panic!("always busy");
}

#[test]
fn a_counter_on_flash_is_promoted_changed_in_place_and_never_comes_back_old() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(32 << 20));
    let mut n = 0;
    {
        let e = Engine::with_devices(flash_config(), vec![dev.clone()]).expect("engine");
        // A counter changed in place in RAM and then demoted again: its
        // new digits are what flash holds.
        common::set(&e, b"again", b"70");
        push_to_flash(&e, b"again", &mut n);
        let f = read(&e, b"again");
        assert_eq!(ok(arith_given(&e, b"again", by(1), &f)), 71);
        assert_eq!(ok(arith(&e, b"again", by(1))), 72);
        push_to_flash(&e, b"again", &mut n);
        assert_eq!(get(&e, b"again", false).as_deref(), Some(b"72".as_slice()));
        // The length changes on flash too: a new item.
        common::set(&e, b"grow", b"99");
        push_to_flash(&e, b"grow", &mut n);
        let f = read(&e, b"grow");
        assert_eq!(ok(arith_given(&e, b"grow", by(1), &f)), 100);
        assert_eq!(get(&e, b"grow", false).as_deref(), Some(b"100".as_slice()));
        // Last: on flash, read, promoted into RAM as a copy (its record
        // stays on the device), changed in place (same length), and still
        // in RAM at the crash.
        common::set(&e, b"ctr", b"41");
        push_to_flash(&e, b"ctr", &mut n);
        let f = read(&e, b"ctr");
        assert_eq!(ok(arith_given(&e, b"ctr", by(1), &f)), 42);
        assert!(common::in_ram(&e, b"ctr"));
        assert_eq!(get(&e, b"ctr", false).as_deref(), Some(b"42".as_slice()));
        common::wait_flushed(&e);
        // Dropped without a snapshot: a crash.
    }
    let e = Engine::with_devices(flash_config(), vec![dev]).expect("engine");
    assert!(e.last_recovery().is_some(), "recovered after the crash");
    // `ctr` was changed in RAM only: gone, never the old 41 of its first
    // record (the change's tombstone covers it).
    assert_eq!(get(&e, b"ctr", false), None, "the old record came back");
    assert_eq!(get(&e, b"again", false).as_deref(), Some(b"72".as_slice()));
    let grow = get(&e, b"grow", false);
    assert!(
        grow.is_none() || grow.as_deref() == Some(b"100".as_slice()),
        "{grow:?}"
    );
}
