//! The store's crash points: a crash at any device write, with segment
//! flushes inline, on a thread of their own, behind invalidation jobs,
//! or with blocks checked first, never
//! brings back a stale value (split from `tests.rs`, which holds the
//! helpers).

use super::tests::{cfg, obj, val, Background};
use super::*;
use crate::device::aligned::BLOCK;
use crate::device::fault::{CrashDevice, CrashPlan, MemDevice};
use crate::flash::journal::Journal;
use crate::flash::BlockDevice;
use std::collections::HashMap;
use std::sync::Arc;

/// One crash point: every key afterwards is absent, its last answered
/// value, or the value of the operation under way. With `background`,
/// segment flushes run on their own thread meanwhile (the crash may cut
/// one of its writes); returns the flushes that changes had to finish.
fn crash_at(c: SmallConfig, plan: CrashPlan, ops: usize, mode: Mode) -> (bool, usize, u64) {
    let background = mode != Mode::Inline;
    // Tomb: the crash journal after the region, on the same device (a
    // crash cuts its writes and the store's alike).
    let jat = c.region_bytes() + BLOCK as u64;
    let dev = Arc::new(CrashDevice::new(
        (jat + JOURNAL_BYTES) as usize,
        CrashPlan::Cut {
            at: u64::MAX,
            torn: 0,
        },
    ));
    let mut st = SmallStore::format(dev.clone(), BLOCK as u64, c).unwrap();
    let journal = (mode == Mode::Tomb).then(|| {
        let j = Arc::new(Journal::open(dev.clone(), jat, JOURNAL_BYTES).unwrap());
        st.set_journal(j.clone());
        let j2 = j.clone();
        (j, std::thread::spawn(move || j2.run(&|| {})))
    });
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
                    Mode::Gate => st.gate(key.as_bytes()).unwrap() != Gate::Wait,
                    // Overwrites through tombstones; deletes as in Gate.
                    Mode::Tomb if v.is_some() => {
                        st.gate_replace(key.as_bytes()).unwrap() != Gate::Wait
                    }
                    Mode::Tomb => st.gate(key.as_bytes()).unwrap() != Gate::Wait,
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
        waits = match mode {
            Mode::Gate => st.stats.invalidate_jobs,
            Mode::Tomb => st.stats.tombstones,
            Mode::Checked => st.stats.change_checks,
            _ => st.stats.flush_waits,
        }
    });
    if let Some(b) = bg {
        b.stop();
    }
    if let Some((j, t)) = journal {
        j.stop();
        t.join().unwrap();
    }
    let Some(image) = dev.crash_image() else {
        return (false, 0, waits);
    };
    let image: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_image(image));
    let tombs = match mode {
        Mode::Tomb => Journal::open(image.clone(), jat, JOURNAL_BYTES)
            .unwrap()
            .small_tombstones(0),
        _ => Vec::new(),
    };
    let (mut again, _) = SmallStore::open_with(image, BLOCK as u64, c, 1, &tombs).unwrap();
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
    /// As Gate, with a crash journal: overwrites go ahead on a durable
    /// tombstone ([`SmallStore::gate_replace`]), their sets rewritten
    /// later by the flushes; deletes wait for jobs.
    Tomb,
}

/// The crash journal's bytes in [`Mode::Tomb`].
const JOURNAL_BYTES: u64 = 64 << 10;

fn crash_points(mode: Mode) -> u64 {
    // In the background, more sets: some are dropped from the log (one
    // object each) and their hit objects readmitted.
    let background = mode != Mode::Inline;
    let c = cfg(if background { 24 } else { 6 });
    let ops = 900;
    let mut points = 0;
    let mut recovered = 0;
    let mut waits = 0;
    // Gate mode waits for a job per change: fewer points keep it to
    // seconds in release, about a minute in debug.
    let step = if matches!(mode, Mode::Gate | Mode::Checked | Mode::Tomb) {
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
fn a_crash_between_a_tombstone_and_its_set_rewrite_never_brings_back_a_stale_value() {
    let tombstones = crash_points(Mode::Tomb);
    assert!(tombstones > 0, "no overwrite went ahead on a tombstone");
}

#[test]
fn a_crash_while_changes_check_their_blocks_never_brings_back_a_stale_value() {
    let cleared = crash_points(Mode::Checked);
    assert!(cleared > 0, "no change was cleared by reading its blocks");
}
