//! The crash journal's tests: tombstones, floors, wrapping, damage, and
//! the small-object store's tombstones kept until retired.

use super::class::{DeviceClass, CLASSES};
use super::format::{JournalBlock, JOURNAL_ENTRIES};
use super::journal::*;
use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::device::block::BlockDevice;
use crate::device::fault::MemDevice;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use DeviceClass::{Capacity, Fast};

const START: u64 = 4096;

fn journal(dev: &Arc<dyn BlockDevice>, bytes: u64) -> Arc<Journal> {
    let j = Arc::new(Journal::open(dev.clone(), START, bytes).unwrap());
    j.set_geometry(2, 20);
    j
}

fn run(j: &Arc<Journal>) -> std::thread::JoinHandle<()> {
    let j = j.clone();
    std::thread::spawn(move || j.run(&|| {}))
}

#[test]
fn tombstones_and_floor_survive_reopen() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    let j = journal(&dev, 64 << 10);
    let t = run(&j);
    let mut last = 0;
    for h in 0..1000u64 {
        last = j.add(h * 7919, 10 + h % 5);
    }
    assert!(j.wait_durable(last, Duration::from_secs(10)));
    let f = j.raise_floor(11);
    assert!(j.wait_durable(f, Duration::from_secs(10)));
    assert_eq!(j.floors(), [11, 11]);
    j.stop();
    t.join().unwrap();
    let j2 = journal(&dev, 64 << 10);
    let rec = j2.take_recovered().unwrap();
    assert_eq!(rec.floors, [11, 11]);
    for h in 0..1000u64 {
        let horizon = 10 + h % 5;
        assert!(rec.is_dead(h * 7919, 11, Capacity), "below the floor");
        assert!(rec.is_dead(h * 7919, horizon, Fast));
        assert!(
            !rec.is_dead(h * 7919, 15, Fast) || {
                // Only through a fingerprint shared with another key.
                (0..1000u64).any(|o| {
                    o != h && fingerprint(o * 7919, (2, 20)) == fingerprint(h * 7919, (2, 20))
                })
            }
        );
    }
}

#[test]
fn wrapping_raises_the_floor_over_live_tombstones() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    // 2 pairs: the third pair's worth of entries wraps.
    let j = journal(&dev, 16 << 10);
    let t = run(&j);
    let mut last = 0;
    for i in 0..(3 * JOURNAL_ENTRIES as u64) {
        last = j.add(i, 100 + i);
        if i % 100 == 0 {
            assert!(j.wait_durable(last, Duration::from_secs(10)));
        }
    }
    assert!(j.wait_durable(last, Duration::from_secs(10)));
    assert!(j.stats.wrap_floor_raises.load(Ordering::Relaxed) > 0);
    let floor = j.floor(Fast);
    assert_eq!(j.floor(Capacity), floor, "a tombstone covers both classes");
    assert!(floor >= 100 + JOURNAL_ENTRIES as u64 - 1, "floor {floor}");
    j.stop();
    t.join().unwrap();
    let rec = journal(&dev, 16 << 10).take_recovered().unwrap();
    assert_eq!(rec.floors, [floor; 2]);
    // Every tombstone is still in force: by the floor or by itself.
    for i in 0..(3 * JOURNAL_ENTRIES as u64) {
        for class in CLASSES {
            assert!(rec.is_dead(i, 100 + i, class), "tombstone {i} lost");
        }
    }
}

#[test]
fn damage_outside_the_pair_being_written_distrusts_everything() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    let j = journal(&dev, 64 << 10);
    let t = run(&j);
    let mut last = 0;
    for i in 0..(2 * JOURNAL_ENTRIES as u64) {
        last = j.add(i, 50);
    }
    assert!(j.wait_durable(last, Duration::from_secs(10)));
    j.stop();
    t.join().unwrap();
    assert!(journal(&dev, 64 << 10)
        .take_recovered()
        .unwrap()
        .damaged
        .is_none());
    // Pair 0 is full and behind the newest pair: a bad block there is
    // not a torn write.
    let mut blk = AlignedBuf::new(BLOCK);
    dev.read_at(blk.as_mut_slice(), START).unwrap();
    blk.as_mut_slice()[100] ^= 1;
    dev.write_at(blk.as_slice(), START).unwrap();
    let rec = journal(&dev, 64 << 10).take_recovered().unwrap();
    assert!(rec.damaged.is_some());
    assert!(rec.is_dead(12345, u64::MAX, Capacity), "nothing is trusted");
}

#[test]
fn a_torn_write_keeps_the_previous_copy() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    let j = journal(&dev, 64 << 10);
    let t = run(&j);
    let a = j.add(1, 5);
    assert!(j.wait_durable(a, Duration::from_secs(10)));
    let b = j.add(2, 6);
    assert!(j.wait_durable(b, Duration::from_secs(10)));
    j.stop();
    t.join().unwrap();
    // Tear the newest copy of pair 0: the older copy holds tombstone 1.
    let mut blk = AlignedBuf::new(BLOCK);
    let newest = (0..2u64)
        .max_by_key(|c| {
            dev.read_at(blk.as_mut_slice(), START + c * BLOCK as u64)
                .unwrap();
            JournalBlock::read(blk.as_slice()).map_or(0, |b| b.counter)
        })
        .unwrap();
    dev.read_at(blk.as_mut_slice(), START + newest * BLOCK as u64)
        .unwrap();
    blk.as_mut_slice()[2048..].fill(0);
    dev.write_at(blk.as_slice(), START + newest * BLOCK as u64)
        .unwrap();
    let rec = journal(&dev, 64 << 10).take_recovered().unwrap();
    assert!(rec.is_dead(1, 5, Fast));
}

#[test]
fn each_class_has_its_own_floor() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    let j = journal(&dev, 64 << 10);
    let t = run(&j);
    let a = j.add(7, 10);
    let f = j.raise_class_floor(Fast, 20);
    let c = j.raise_class_floor(Capacity, 5);
    assert!(j.wait_durable(a.max(f).max(c), Duration::from_secs(10)));
    assert_eq!(j.floors(), [20, 5]);
    assert_eq!(
        j.raise_class_floor(Capacity, 4),
        0,
        "below: nothing to write"
    );
    j.stop();
    t.join().unwrap();
    let rec = journal(&dev, 64 << 10).take_recovered().unwrap();
    assert_eq!(rec.floors, [20, 5]);
    // The fast floor covers fast segments only.
    assert!(rec.is_dead(99, 12, Fast));
    assert!(!rec.is_dead(99, 12, Capacity));
    assert!(rec.is_dead(99, 5, Capacity));
    // The tombstone is above the capacity floor: kept, for both classes.
    assert!(rec.is_dead(7, 10, Capacity));
    assert!(!rec.is_dead(7, 11, Capacity));
}

#[test]
fn small_store_tombstones_are_carried_over_wraps_until_retired() {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::new(1 << 20));
    // 3 pairs: the log tier's tombstones below wrap the ring many times.
    let bytes = 3 * 2 * BLOCK as u64;
    let j = journal(&dev, bytes);
    let t = run(&j);
    let kept: Vec<(u32, u64)> = (0..50u32).map(|i| (i * 101, 1000 + u64::from(i))).collect();
    let mut last = 0;
    for &(fp, gen) in &kept {
        last = j.add_small(1, fp, gen);
    }
    assert!(j.wait_durable(last, Duration::from_secs(10)));
    // One of them is retired at once: its set was rewritten.
    j.retire_small(1, kept[0].0, kept[0].1);
    for i in 0..(8 * JOURNAL_ENTRIES as u64) {
        last = j.add(i, 100 + i);
        if i % 200 == 0 {
            assert!(j.wait_durable(last, Duration::from_secs(10)));
        }
    }
    assert!(j.wait_durable(last, Duration::from_secs(10)));
    assert!(j.stats.small_carried.load(Ordering::Relaxed) >= 49);
    j.stop();
    t.join().unwrap();
    let again = journal(&dev, bytes);
    let got = again.small_tombstones(1);
    assert_eq!(
        got,
        kept[1..].to_vec(),
        "live ones carried, the retired one gone"
    );
    assert!(again.small_tombstones(0).is_empty());
    let rec = again.take_recovered().unwrap();
    // A store tombstone is no log tier tombstone: sequence numbers go on
    // from the log's horizons, not from its bit 63.
    assert!(rec.max_horizon < 1 << 40, "{}", rec.max_horizon);
    // Their parts' regions are gone: the journal drops them.
    again.retire_small_parts_from(1);
    assert!(again.small_tombstones(1).is_empty());
}

#[test]
fn a_version_5_journal_block_is_read() {
    let jb = JournalBlock {
        counter: 3,
        floors: [7, 8],
        logical: 0,
        geometry: (1, 20),
        entries: vec![(5, 9)],
    };
    let mut b = AlignedBuf::new(BLOCK);
    jb.write(b.as_mut_slice());
    assert_eq!(&b.as_slice()[8..12], &6u32.to_le_bytes());
    // Rewritten as version 5 (the layout is the same; only store
    // tombstones are new), with its checksum.
    b.as_mut_slice()[8..12].copy_from_slice(&5u32.to_le_bytes());
    let crc = crc32c::crc32c(&b.as_slice()[16..BLOCK]);
    b.as_mut_slice()[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(JournalBlock::read(b.as_slice()), Some(jb));
    b.as_mut_slice()[8..12].copy_from_slice(&4u32.to_le_bytes());
    let crc = crc32c::crc32c(&b.as_slice()[16..BLOCK]);
    b.as_mut_slice()[12..16].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(
        JournalBlock::read(b.as_slice()),
        None,
        "version 4 is refused"
    );
}
