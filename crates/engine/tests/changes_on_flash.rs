//! Commands that work on an item in RAM (every change but a plain set, and
//! `mg`), run on a key whose item is on flash. They copy it back from the
//! record the caller read, in their own lock hold.
//!
//! Before 2026-11-24 the server copied it back while it probed the
//! request's keys, and the command found it in RAM afterwards. Other
//! connections could push the item back to flash in between. Then an `md`
//! answered `NF` and left the value to be served afterwards. The two-class
//! crash test found it live, without a crash: 1-7 deleted values per run.
//!
//! Here the caller reads the record and hands it to the command, with no
//! copy back in between. Each command must then act on the item, never
//! answer a miss while a get still serves it. A command given an old read
//! (the item moved since) asks for a new one while it may, and otherwise
//! leaves the key a miss for every command. Cost: under a second.

mod common;

use common::{get, read_records as read, run, NOW};
use std::sync::Arc;
use tiercache_engine::command::{
    Arith, ArithResult, MetaDeleted, MetaGet, Mode, Store, StoreResult, Wait,
};
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::tier::Promote;
use tiercache_engine::flash::Fetched;
use tiercache_engine::Engine;

/// memcached's `incr key 1`.
const INCR1: Arith = Arith::Unsigned {
    incr: true,
    delta: 1,
};

fn engine() -> Engine {
    let mut c = common::flash_config(4 << 20, 64 << 10, 256 << 10);
    // FIFO in RAM, so that filler pushes a promoted item back to flash
    // (S3-FIFO keeps it in its main queue while filler churns probation);
    // a flash hit is promoted at once.
    c.policy = "fifo".into();
    c.flash.as_mut().unwrap().params.promote = Promote::Always;
    Engine::with_devices(c, vec![Arc::new(MemDevice::new(32 << 20))]).expect("engine")
}

/// Sets `k` (value `v`), then other keys until `k` is on flash only.
fn on_flash(e: &Engine, k: &[u8], v: &[u8], filler: &mut u64) {
    common::set(e, k, v);
    common::push_to_flash(e, k, filler);
}

/// Retries while the journal or the flusher is behind (`Wait::Busy`).
fn busy_retry<R>(mut cmd: impl FnMut() -> Result<R, Wait>) -> Result<R, Wait> {
    for _ in 0..100_000 {
        match cmd() {
            Err(Wait::Busy) => std::thread::sleep(std::time::Duration::from_micros(200)),
            r => return r,
        }
    }
    panic!("always busy");
}

fn store<'a>(mode: Mode, k: &'a [u8], v: &'a [u8]) -> Store<'a> {
    Store {
        mode,
        ..common::plain_set(k, v)
    }
}

#[test]
fn a_change_given_the_record_acts_on_the_item() {
    let e = engine();
    let mut n = 0;
    let value = b"the value".as_slice();

    on_flash(&e, b"md", value, &mut n);
    let f = read(&e, b"md");
    let r = busy_retry(|| e.meta_delete(b"md", NOW, None, None, &f, false));
    assert_eq!(r, Ok(MetaDeleted::Deleted));
    assert_eq!(get(&e, b"md", false), None, "md: the value is gone");

    on_flash(&e, b"touch", value, &mut n);
    let f = read(&e, b"touch");
    assert_eq!(
        busy_retry(|| e.touch(b"touch", 0, NOW, &f, false)),
        Ok(true)
    );

    on_flash(&e, b"ctr", b"41", &mut n);
    let f = read(&e, b"ctr");
    match busy_retry(|| e.arith(b"ctr", NOW, INCR1, &f, false)) {
        Ok(ArithResult::Ok { value: 42, .. }) => {}
        r => panic!("incr: {r:?}"),
    }
    assert_eq!(get(&e, b"ctr", false).as_deref(), Some(b"42".as_slice()));

    for (k, mode, expect, after) in [
        (b"add".as_slice(), Mode::Add, StoreResult::NotStored, value),
        (
            b"replace",
            Mode::Replace,
            StoreResult::Stored { cas: 0 },
            b"new",
        ),
        (
            b"append",
            Mode::Append,
            StoreResult::Stored { cas: 0 },
            b"the valuenew",
        ),
    ] {
        on_flash(&e, k, value, &mut n);
        let f = read(&e, k);
        let r = busy_retry(|| e.store(&store(mode, k, b"new"), NOW, &f, false)).unwrap();
        let r = match r {
            StoreResult::Stored { .. } => StoreResult::Stored { cas: 0 },
            r => r,
        };
        assert_eq!(r, expect, "{}", String::from_utf8_lossy(k));
        assert_eq!(get(&e, k, false).as_deref(), Some(after));
    }

    on_flash(&e, b"mg", value, &mut n);
    let f = read(&e, b"mg");
    let opts = MetaGet::default();
    let got =
        busy_retry(|| e.meta_get(b"mg", NOW, &opts, &f, false, |m| m.view().value().to_vec()));
    assert_eq!(got, Ok(Some(value.to_vec())));
}

#[test]
fn a_change_given_an_old_read_asks_again_or_leaves_a_miss() {
    let e = engine();
    let mut n = 0;
    // Read, then move the item: a get copies it to RAM, and filler pushes
    // it back to flash.
    let moved = |k: &[u8], n: &mut u64| -> Fetched {
        on_flash(&e, k, b"old", n);
        let f = read(&e, k);
        get(&e, k, true);
        assert!(common::in_ram(&e, k), "promoted");
        while !common::on_flash(&e, k) {
            common::set(&e, format!("fill{n}").as_bytes(), &[b'f'; 900]);
            *n += 1;
            assert!(*n < 100_000, "never back on flash");
        }
        f
    };

    let f = moved(b"md", &mut n);
    assert_eq!(
        e.meta_delete(b"md", NOW, None, None, &f, true),
        Err(Wait::Reads),
        "the record moved: read it again"
    );
    // Out of reads: the key goes (a miss for every command), never NF with
    // the value left behind.
    let r = busy_retry(|| e.meta_delete(b"md", NOW, None, None, &f, false));
    assert_eq!(r, Ok(MetaDeleted::NotFound));
    assert_eq!(get(&e, b"md", false), None);

    let f = moved(b"replace", &mut n);
    let r = busy_retry(|| e.store(&store(Mode::Replace, b"replace", b"new"), NOW, &f, false));
    assert_eq!(r, Ok(StoreResult::NotStored));
    assert_eq!(
        get(&e, b"replace", false),
        None,
        "no value behind a NOT_STORED"
    );

    let f = moved(b"ctr", &mut n);
    let r = busy_retry(|| e.arith(b"ctr", NOW, INCR1, &f, false));
    assert_eq!(r, Ok(ArithResult::NotFound));
    assert_eq!(get(&e, b"ctr", false), None, "no value behind a NOT_FOUND");

    // With reads allowed, the command ends acting on the item.
    on_flash(&e, b"last", b"v", &mut n);
    let r = run(&e, b"last", |f, may_read| {
        e.meta_delete(b"last", NOW, None, None, f, may_read)
    });
    assert_eq!(r, MetaDeleted::Deleted);
    assert_eq!(get(&e, b"last", false), None);
}
