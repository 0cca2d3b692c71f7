//! Golden files of the on-flash format (docs/FORMAT.md): a small device
//! image left by a crash (items on flash, some deleted or overwritten with
//! their tombstones in the journal), and what recovery must find in it.
//! Corrupted copies of it are refused, or lose exactly what the damage
//! touched, never returning a wrong value.
//!
//! The image is regenerated only when the format changes on purpose (bump
//! format::VERSION): `TC_REGENERATE_GOLDEN=1 cargo test -p tiercache-engine
//! --test golden`.

mod common;

use common::{delete, get, set};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiercache_engine::device::fault::MemDevice;
use tiercache_engine::flash::format::{self, SegmentHeader};
use tiercache_engine::flash::{BlockDevice, DeviceError};
use tiercache_engine::{ConfigError, Engine, EngineConfig};

const DEVICE: usize = 4 << 20;
const KEYS: u64 = 5000;
const SEG: usize = 256 << 10;

fn config(wipe: bool) -> EngineConfig {
    let mut c = common::flash_config(2 << 20, 64 << 10, SEG);
    c.shards = 1;
    let f = c.flash.as_mut().unwrap();
    f.params.wipe = wipe;
    f.avg_item_size = 512;
    c
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn key(i: u64) -> Vec<u8> {
    format!("golden-{i}").into_bytes()
}

fn value(i: u64, v: u64) -> Vec<u8> {
    format!("{i}/{v}|").repeat(60).into_bytes()
}

/// The expectation file: one line per key recovery must bring back,
/// `key version`, and `key -` for keys that must not come back.
fn read_expect() -> Vec<(u64, Option<u64>)> {
    std::fs::read_to_string(dir().join(current("expect")))
        .expect("golden expectation")
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k.parse().unwrap(), v.parse().ok())
        })
        .collect()
}

/// The golden file of the current format version with this extension.
fn current(ext: &str) -> String {
    format!("device-v{}.{ext}", format::VERSION)
}

fn image() -> Vec<u8> {
    std::fs::read(dir().join(current("img"))).expect("golden image")
}

fn open(img: Vec<u8>, wipe: bool) -> Result<Engine, ConfigError> {
    let dev: Arc<dyn BlockDevice> = Arc::new(MemDevice::from_image(img));
    Engine::with_devices(config(wipe), vec![dev])
}

/// Keys whose value came back, checking each is the expected one.
fn recovered(e: &Engine, expect: &[(u64, Option<u64>)]) -> Vec<u64> {
    let mut back = Vec::new();
    for &(i, v) in expect {
        if let Some(got) = get(e, &key(i), false) {
            assert_eq!(Some(got), v.map(|v| value(i, v)), "golden-{i}");
            back.push(i);
        }
    }
    back
}

fn regenerate() {
    let mem = Arc::new(MemDevice::new(DEVICE));
    let e = Engine::with_devices(config(false), vec![mem.clone() as Arc<dyn BlockDevice>]).unwrap();
    for i in 0..KEYS {
        set(&e, &key(i), &value(i, 0));
    }
    let on_flash: Vec<u64> = (0..KEYS)
        .filter(|&i| common::on_flash(&e, &key(i)))
        .collect();
    assert!(on_flash.len() > 100);
    for &i in on_flash.iter().take(20) {
        delete(&e, &key(i));
    }
    for &i in on_flash.iter().skip(20).take(20) {
        set(&e, &key(i), &value(i, 1));
    }
    let f = e.flash().unwrap().clone();
    f.seal_open();
    let deadline = Instant::now() + Duration::from_secs(20);
    while f.usage().queued > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(e);
    let img = mem.image();
    // What a recovery finds is the expectation; deleted keys must be gone.
    let e = open(img.clone(), false).unwrap();
    let mut lines = String::new();
    for i in 0..KEYS {
        let deleted = on_flash.iter().take(20).any(|&d| d == i);
        let got = get(&e, &key(i), false);
        let v = (0..2).find(|&v| got.as_deref() == Some(&value(i, v)[..]));
        assert!(!(deleted && got.is_some()), "golden-{i} was deleted");
        assert_eq!(got.is_some(), v.is_some());
        match v {
            Some(v) => lines += &format!("{i} {v}\n"),
            None if deleted => lines += &format!("{i} -\n"),
            None => {}
        }
    }
    std::fs::create_dir_all(dir()).unwrap();
    std::fs::write(dir().join(current("img")), img).unwrap();
    std::fs::write(dir().join(current("expect")), lines).unwrap();
}

#[test]
fn the_golden_image_recovers_exactly_its_items() {
    if std::env::var_os("TC_REGENERATE_GOLDEN").is_some() {
        regenerate();
    }
    let expect = read_expect();
    let present = expect.iter().filter(|e| e.1.is_some()).count();
    assert!(present > 100 && expect.iter().any(|e| e.1.is_none()));
    let e = open(image(), false).unwrap();
    let back = recovered(&e, &expect);
    assert_eq!(back.len(), present, "every item of the golden image");
    assert_eq!(e.last_recovery().unwrap().items as usize, present);
}

fn superblock_refused(mutate: impl Fn(&mut [u8]), want: &str) {
    let mut img = image();
    mutate(&mut img);
    let err = open(img.clone(), false).err().expect("refused");
    assert!(
        matches!(
            err,
            ConfigError::Device(DeviceError::OtherVersion { .. } | DeviceError::Foreign { .. })
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains(want) && msg.contains("ext_wipe"), "{err}");
    // Wiping is explicit, and then nothing old is served.
    let e = open(img, true).unwrap();
    assert!(recovered(&e, &read_expect()).is_empty());
}

#[test]
fn devices_of_format_versions_2_to_4_are_refused() {
    // The golden images of version 2 (its journal blocks named the index
    // geometry by log2 of the bucket count), version 3 (by the bucket
    // count; its fingerprints were made of a key's bucket pair, which a
    // resizable index no longer keeps) and version 4 (one floor for both
    // device classes; its segments do not say which class they were
    // written for).
    for v in [2, 3, 4] {
        let img = std::fs::read(dir().join(format!("device-v{v}.img"))).expect("old image");
        let err = open(img.clone(), false).err().expect("refused");
        assert!(
            matches!(err, ConfigError::Device(DeviceError::OtherVersion { found, .. }) if found == v),
            "{err}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("format version {v}")) && msg.contains("ext_wipe"),
            "{err}"
        );
        assert!(open(img, true).is_ok(), "wiping is explicit");
    }
}

#[test]
fn another_version_or_a_foreign_file_is_refused() {
    // (6 is the superblock's own version since the small store's
    // tombstones; 5 is read too.)
    superblock_refused(|b| b[8] = 7, "format version 7");
    superblock_refused(|b| b[0..8].copy_from_slice(b"NOTOURS!"), "not a tiercache");
}

/// Where each (key, version) record starts in the image (its key bytes).
fn record_positions(img: &[u8]) -> std::collections::HashMap<(u64, u64), usize> {
    let mut at = std::collections::HashMap::new();
    let mut p = 0;
    while let Some(off) = img[p..].windows(7).position(|w| w == b"golden-") {
        let k = p + off + 7;
        // The key length is in the item header just before the key.
        let digits = (img[p + off - 4] as usize).saturating_sub(7);
        let Some(i) = std::str::from_utf8(&img[k..k + digits])
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
        else {
            p = k;
            continue;
        };
        let val = &img[k + digits..];
        let v = val.iter().position(|&b| b == b'|').and_then(|end| {
            let (ki, vi) = std::str::from_utf8(&val[..end]).ok()?.split_once('/')?;
            (ki.parse::<u64>().ok()? == i).then(|| vi.parse::<u64>().ok())?
        });
        if let Some(v) = v {
            at.entry((i, v)).or_insert(p + off);
        }
        p = k + digits;
    }
    at
}

/// Offsets of the segments in the image that hold records, by slot.
fn segments(img: &[u8]) -> Vec<(usize, SegmentHeader)> {
    let start = format::segments_start(format::journal_bytes_for(DEVICE as u64)) as usize;
    (start..img.len())
        .step_by(SEG)
        .filter_map(|off| SegmentHeader::read(&img[off..off + 4096]).map(|h| (off, h)))
        .filter(|(_, h)| h.records > 0)
        .collect()
}

#[test]
fn a_damaged_record_or_segment_header_loses_only_what_it_holds() {
    let expect = read_expect();
    let present = expect.iter().filter(|e| e.1.is_some()).count();
    let segs = segments(&image());
    assert!(segs.len() >= 2, "{} segments", segs.len());
    // A flipped byte in the value of a record recovery would serve: that
    // item is a miss.
    let mut img = image();
    let places = record_positions(&img);
    let (i, v) = expect
        .iter()
        .rev()
        .find_map(|&(i, v)| Some((i, v?)))
        .unwrap();
    let at = places[&(i, v)];
    img[at + key(i).len() + value(i, v).len() - 10] ^= 0x20;
    let e = open(img, false).unwrap();
    let back = recovered(&e, &expect);
    assert_eq!(back.len(), present - 1);
    assert!(!back.contains(&i));
    // A flipped byte in a segment header: its records are gone, no others.
    let img = image();
    let (seg, _) = segs[segs.len() - 1];
    let inside: Vec<u64> = expect
        .iter()
        .filter_map(|&(i, v)| v.map(|v| (i, places[&(i, v)])))
        .filter(|&(_, at)| (seg..seg + SEG).contains(&at))
        .map(|(i, _)| i)
        .collect();
    assert!(!inside.is_empty());
    let mut img = img.clone();
    img[seg + 20] ^= 1;
    let e = open(img, false).unwrap();
    let back = recovered(&e, &expect);
    assert_eq!(back.len(), present - inside.len());
    assert!(inside.iter().all(|i| !back.contains(i)));
}

#[test]
fn a_damaged_or_lost_journal_distrusts_all_of_flash() {
    let expect = read_expect();
    let journal = format::JOURNAL_START as usize;
    // Garbage in a journal block no crash was writing.
    let mut img = image();
    img[journal + 40 * 4096 + 64] = 0x77;
    let e = open(img, false).unwrap();
    assert!(recovered(&e, &expect).is_empty());
    assert!(e.last_recovery().unwrap().untrusted_segments > 0);
    // The whole journal zeroed (its tombstones lost): segments say they
    // were sealed after journal writes that are not there.
    let mut img = image();
    let jbytes = format::journal_bytes_for(DEVICE as u64) as usize;
    img[journal..journal + jbytes].fill(0);
    let e = open(img, false).unwrap();
    assert!(recovered(&e, &expect).is_empty());
}
