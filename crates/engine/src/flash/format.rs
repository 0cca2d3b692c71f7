//! The on-flash format (version 6; segments 5): a superblock at the start of each
//! device, a journal region, then fixed-size segments, each a header block
//! followed by records. All integers little-endian; every structure carries
//! a CRC-32C. docs/FORMAT.md walks through it with the golden files in
//! crates/engine/tests/golden/.
//!
//! ```text
//! device:  [superblock 4 KiB][zero to 1 MiB][journal J bytes][segment 0][segment 1]...
//!          (J = 1/32 of the device, 1 to 256 MiB)
//!
//! superblock (4 KiB block, rest zero)
//!   0  8  magic "TIERCACH"
//!   8  4  format version (6; 5 is read: SUPER_VERSION)
//!  12  4  crc32c of bytes 16..64
//!  16  8  device size in bytes
//!  24  4  segment size in bytes
//!  28  4  device number in the configuration
//!  32  4  journal bytes J (a multiple of 8 KiB; only device 0 uses its journal)
//!  36  4  flags: bit 0 = the crash journal is off (ext_crash_safe=0) or was
//!         off since the floor last covered everything on the device
//!
//! journal block (4 KiB; the journal is pairs of blocks, see journal.rs)
//!   0  8  magic "TCJOURNL"
//!   8  4  journal block version (6; 5 is read: JOURNAL_VERSION)
//!  12  4  crc32c of bytes 16..4096
//!  16  8  write counter (grows with every journal write)
//!  24  8  fast floor: fast segments with a sequence number <= it are not trusted
//!         (the floors, one per device class, are at FLOOR_AT: two of
//!         them, so a third class needs a new format version)
//!  32  4  logical block number (the pair this block belongs to)
//!  36  4  entries n (at most 336)
//!  40  1  log2 of the shard count       } the index geometry the
//!  41  3  zero                           } fingerprints were made for
//!  44  4  index position bits P         }
//!  48  8  capacity floor: the same for capacity segments
//!  56 12n entries: key fingerprint u32, horizon u64 (a tombstone: records
//!         of keys with this fingerprint in segments with a sequence number
//!         <= horizon are dead; with bit 63 of the horizon set, a small
//!         store tombstone: `small_horizon`)
//!
//! segment header (first 4 KiB block of a segment, rest zero)
//!   0  8  magic "TCSEGMNT"
//!   8  4  format version (5)
//!  12  4  crc32c of bytes 16..64
//!  16  8  sequence number (increases with every segment written)
//!  24  4  slot number
//!  28  4  bytes of records after the header block
//!  32  4  number of records
//!  36  4  latest exptime of any record (0 = some never expire)
//!  40  8  the journal's write counter when the segment was sealed (a
//!         journal that reads back older than this was lost)
//!  48  1  device class it was written for (its index in CLASSES: 0
//!         fast, 1 capacity): the floor recovery judges it by
//!
//! record (8-byte aligned; a record of at most 4 KiB never crosses a 4 KiB
//! boundary, a larger one starts on one)
//!   0  4  crc32c of bytes 4..(32 + key + value)
//!   4  4  low 32 bits of the segment's sequence number
//!   8 24  item header (see item.rs: cas, exptime, flags, value length,
//!         key length, bits, atime), bits holding only "binary key",
//!         "stale" and "copy" (written from a copy of another record of the
//!         key: an older record with the same value may be on the device)
//!  32  k  key
//!  ..  v  value, then zero padding to 8 bytes
//! ```

use super::class::{DeviceClass, PerClass, CLASSES};
use crate::device::aligned::BLOCK;
use crate::item::{self, Header, HEADER};

/// The format version of segments (and of the superblock and journal
/// blocks before issue 32's store tombstones).
pub const VERSION: u32 = 5;
/// The superblock's version: 6 since the journal may hold the small-object
/// store's tombstones ([`JOURNAL_VERSION`]), so that a build that reads
/// only version 5 refuses the device instead of missing them. A version 5
/// superblock is read, and stamped 6 at start.
pub const SUPER_VERSION: u32 = 6;
pub const SUPER_MAGIC: &[u8; 8] = b"TIERCACH";
pub const SEGMENT_MAGIC: &[u8; 8] = b"TCSEGMNT";
/// Where the journal starts on a device; segments follow it.
pub const JOURNAL_START: u64 = 1 << 20;
pub const JOURNAL_MAGIC: &[u8; 8] = b"TCJOURNL";
/// The journal blocks' own format version: 6 since the small-object
/// store's tombstones (entries whose horizon has [`SMALL_ENTRY`] set). A
/// block of version [`VERSION`] (5) is read too: it holds the log tier's
/// tombstones only.
pub const JOURNAL_VERSION: u32 = 6;
/// The bit of an entry's horizon that makes it a small-object store
/// tombstone: (part, generation) in the bits below ([`small_horizon`]).
pub const SMALL_ENTRY: u64 = 1 << 63;
/// Bits of a small-store tombstone's generation (the part is above them).
pub const SMALL_GEN_BITS: u32 = 48;

/// The horizon field of a small-object store tombstone: objects of the
/// fingerprint in blocks of region `part` written at generation `gen` or
/// before are dead.
pub fn small_horizon(part: u32, gen: u64) -> u64 {
    debug_assert!(gen < 1 << SMALL_GEN_BITS && part < 1 << 15);
    SMALL_ENTRY | u64::from(part) << SMALL_GEN_BITS | (gen & ((1 << SMALL_GEN_BITS) - 1))
}

/// A small-object store tombstone's (part, generation), None for a log
/// tier tombstone.
pub fn small_of(horizon: u64) -> Option<(u32, u64)> {
    (horizon & SMALL_ENTRY != 0).then_some((
        ((horizon & !SMALL_ENTRY) >> SMALL_GEN_BITS) as u32,
        horizon & ((1 << SMALL_GEN_BITS) - 1),
    ))
}
/// Bytes of a journal block before its entries.
pub const JOURNAL_HEADER: usize = 56;
/// Bytes of one journal entry.
pub const JOURNAL_ENTRY: usize = 12;
/// Entries in one journal block.
pub const JOURNAL_ENTRIES: usize = (BLOCK - JOURNAL_HEADER) / JOURNAL_ENTRY;

// A journal block of this version has room for two floors. Another device
// class needs a new journal format version (a place for its floor, and
// VERSION raised so that older binaries refuse the devices) before it
// builds: docs/FORMAT.md.
const _: () = assert!(
    DeviceClass::COUNT == 2,
    "a third device class needs a new journal format version: a journal block of version 5 holds two floors"
);
/// Where each device class's floor is in a journal block.
const FLOOR_AT: PerClass<usize> = [24, 48];

/// The journal size for a device of `size` bytes: 1/32 of it, between
/// 1 MiB and 256 MiB, in whole MiB. A tombstone is 12 bytes, so under
/// overwrites alone the journal holds a full device pass of tombstones for
/// items of about 400 bytes and up; past that, wrapping raises the floor
/// and the oldest segments are not recovered after a crash.
pub fn journal_bytes_for(size: u64) -> u64 {
    (size / 32).clamp(1 << 20, 256 << 20) >> 20 << 20
}

/// Where the first segment starts on a device with a journal of `journal` bytes.
pub fn segments_start(journal: u64) -> u64 {
    JOURNAL_START + journal
}
/// Bytes of record prefix before the item header.
pub const RECORD_PREFIX: usize = 8;
/// Item bits that survive on flash. `FLASH_COPY` marks a record written
/// from a copy of another record of its key (a promotion into RAM or into
/// the fast class): an older record with the same value may still be on the
/// device, in either class (see `Shard::reclaim_flash`).
const KEPT_BITS: u8 = item::KEY_BINARY | item::STALE | item::FLASH_COPY;

/// Bytes a record of this item takes, padding included.
#[inline]
pub fn record_size(klen: usize, vlen: usize) -> usize {
    RECORD_PREFIX + item::stored_size(klen, vlen)
}

/// Where a record of `size` bytes goes in a segment whose next free byte is
/// `write`: the same place, or the next block start so that a small record
/// does not cross a block and a large one starts on a block.
#[inline]
pub fn place_record(write: usize, size: usize) -> usize {
    let in_block = write % BLOCK;
    if size > BLOCK {
        if in_block == 0 {
            write
        } else {
            write - in_block + BLOCK
        }
    } else if in_block + size > BLOCK {
        write - in_block + BLOCK
    } else {
        write
    }
}

/// Writes a record for `item` (an item in the RAM layout: header, key,
/// value) into `dst`, which must hold `record_size` bytes. `copy` sets or
/// clears the record's copy bit (`item::FLASH_COPY`).
pub fn write_record(dst: &mut [u8], item_bytes: &[u8], seq: u64, copy: bool) {
    let mut h = Header::read(item_bytes);
    let len = HEADER + h.klen as usize + h.vlen as usize;
    h.bits &= KEPT_BITS & !item::FLASH_COPY;
    if copy {
        h.bits |= item::FLASH_COPY;
    }
    h.atime = 0;
    dst[4..8].copy_from_slice(&(seq as u32).to_le_bytes());
    h.write(&mut dst[RECORD_PREFIX..RECORD_PREFIX + HEADER]);
    dst[RECORD_PREFIX + HEADER..RECORD_PREFIX + len].copy_from_slice(&item_bytes[HEADER..len]);
    let total = record_size(h.klen as usize, h.vlen as usize);
    dst[RECORD_PREFIX + len..total].fill(0);
    let crc = crc32c::crc32c(&dst[4..RECORD_PREFIX + len]);
    dst[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Why a record was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than the record needs (a short read): read more.
    Truncated { need: usize },
    /// The record belongs to another use of the segment.
    WrongSequence,
    /// Checksum mismatch or impossible lengths.
    Corrupt,
}

/// Checks a record at the start of `b` and returns the item bytes (RAM
/// layout) inside it.
pub fn check_record(b: &[u8], seq: u64, max_len: usize) -> Result<&[u8], RecordError> {
    if b.len() < RECORD_PREFIX + HEADER {
        return Err(RecordError::Truncated {
            need: RECORD_PREFIX + HEADER,
        });
    }
    let h = Header::read(&b[RECORD_PREFIX..]);
    let len = RECORD_PREFIX + HEADER + h.klen as usize + h.vlen as usize;
    if len > max_len || h.klen == 0 {
        return Err(RecordError::Corrupt);
    }
    if u32::from_le_bytes(b[4..8].try_into().unwrap()) != seq as u32 {
        return Err(RecordError::WrongSequence);
    }
    if b.len() < len {
        return Err(RecordError::Truncated { need: len });
    }
    let crc = u32::from_le_bytes(b[0..4].try_into().unwrap());
    if crc32c::crc32c(&b[4..len]) != crc {
        return Err(RecordError::Corrupt);
    }
    Ok(&b[RECORD_PREFIX..len])
}

/// A segment's header block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentHeader {
    pub seq: u64,
    pub slot: u32,
    pub data_len: u32,
    pub records: u32,
    pub max_exptime: u32,
    pub journal_counter: u64,
    /// The device class the segment was written for (on the device, its
    /// index): recovery judges it against that class's floor.
    pub class: DeviceClass,
}

impl SegmentHeader {
    pub fn write(&self, b: &mut [u8]) {
        b[..BLOCK].fill(0);
        b[0..8].copy_from_slice(SEGMENT_MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24..28].copy_from_slice(&self.slot.to_le_bytes());
        b[28..32].copy_from_slice(&self.data_len.to_le_bytes());
        b[32..36].copy_from_slice(&self.records.to_le_bytes());
        b[36..40].copy_from_slice(&self.max_exptime.to_le_bytes());
        b[40..48].copy_from_slice(&self.journal_counter.to_le_bytes());
        b[48] = self.class.index() as u8;
        let crc = crc32c::crc32c(&b[16..64]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
    }

    /// None unless the block is a valid segment header of this version.
    pub fn read(b: &[u8]) -> Option<SegmentHeader> {
        if &b[0..8] != SEGMENT_MAGIC
            || u32::from_le_bytes(b[8..12].try_into().unwrap()) != VERSION
            || u32::from_le_bytes(b[12..16].try_into().unwrap()) != crc32c::crc32c(&b[16..64])
        {
            return None;
        }
        let class = DeviceClass::from_index(usize::from(b[48]))?;
        Some(SegmentHeader {
            seq: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            slot: u32::from_le_bytes(b[24..28].try_into().unwrap()),
            data_len: u32::from_le_bytes(b[28..32].try_into().unwrap()),
            records: u32::from_le_bytes(b[32..36].try_into().unwrap()),
            max_exptime: u32::from_le_bytes(b[36..40].try_into().unwrap()),
            journal_counter: u64::from_le_bytes(b[40..48].try_into().unwrap()),
            class,
        })
    }
}

/// A device's superblock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Superblock {
    pub device_size: u64,
    pub segment_size: u32,
    pub device_no: u32,
    pub journal_bytes: u32,
    /// The crash journal does not cover the device's contents.
    pub journal_off: bool,
    /// The version read ([`VERSION`] or [`SUPER_VERSION`]); written as
    /// given (a new superblock is [`SUPER_VERSION`]).
    pub version: u32,
}

/// What the first block of a device holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceContents {
    /// All zero: a new file or a wiped device.
    Empty,
    Ours(Superblock),
    /// Our magic, another format version.
    OtherVersion(u32),
    /// Something else: not ours to overwrite.
    Foreign,
}

impl Superblock {
    /// Same size, segment size, device number and journal size.
    pub fn same_layout(&self, o: &Superblock) -> bool {
        (
            self.device_size,
            self.segment_size,
            self.device_no,
            self.journal_bytes,
        ) == (o.device_size, o.segment_size, o.device_no, o.journal_bytes)
    }

    pub fn write(&self, b: &mut [u8]) {
        b[..BLOCK].fill(0);
        b[0..8].copy_from_slice(SUPER_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[16..24].copy_from_slice(&self.device_size.to_le_bytes());
        b[24..28].copy_from_slice(&self.segment_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.device_no.to_le_bytes());
        b[32..36].copy_from_slice(&self.journal_bytes.to_le_bytes());
        b[36..40].copy_from_slice(&u32::from(self.journal_off).to_le_bytes());
        let crc = crc32c::crc32c(&b[16..64]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
    }

    pub fn inspect(b: &[u8]) -> DeviceContents {
        if b[..BLOCK].iter().all(|&x| x == 0) {
            return DeviceContents::Empty;
        }
        if &b[0..8] != SUPER_MAGIC {
            return DeviceContents::Foreign;
        }
        let v = u32::from_le_bytes(b[8..12].try_into().unwrap());
        if v != VERSION && v != SUPER_VERSION {
            return DeviceContents::OtherVersion(v);
        }
        if u32::from_le_bytes(b[12..16].try_into().unwrap()) != crc32c::crc32c(&b[16..64]) {
            return DeviceContents::Foreign;
        }
        DeviceContents::Ours(Superblock {
            device_size: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            segment_size: u32::from_le_bytes(b[24..28].try_into().unwrap()),
            device_no: u32::from_le_bytes(b[28..32].try_into().unwrap()),
            journal_bytes: u32::from_le_bytes(b[32..36].try_into().unwrap()),
            journal_off: b[36] & 1 != 0,
            version: v,
        })
    }
}

/// One journal block: the floors and the tombstones it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalBlock {
    pub counter: u64,
    /// Per device class: segments written for that class with a sequence
    /// number up to it are not trusted.
    pub floors: PerClass<u64>,
    pub logical: u32,
    /// (log2 shards, primary index buckets per shard) of the fingerprints.
    pub geometry: (u8, u32),
    pub entries: Vec<(u32, u64)>,
}

impl JournalBlock {
    pub fn write(&self, b: &mut [u8]) {
        assert!(self.entries.len() <= JOURNAL_ENTRIES);
        b[..BLOCK].fill(0);
        b[0..8].copy_from_slice(JOURNAL_MAGIC);
        b[8..12].copy_from_slice(&JOURNAL_VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.counter.to_le_bytes());
        for c in CLASSES {
            let at = FLOOR_AT[c];
            b[at..at + 8].copy_from_slice(&self.floors[c].to_le_bytes());
        }
        b[32..36].copy_from_slice(&self.logical.to_le_bytes());
        b[36..40].copy_from_slice(&(self.entries.len() as u32).to_le_bytes());
        b[40] = self.geometry.0;
        b[44..48].copy_from_slice(&self.geometry.1.to_le_bytes());
        for (i, &(fp, h)) in self.entries.iter().enumerate() {
            let at = JOURNAL_HEADER + i * JOURNAL_ENTRY;
            b[at..at + 4].copy_from_slice(&fp.to_le_bytes());
            b[at + 4..at + 12].copy_from_slice(&h.to_le_bytes());
        }
        let crc = crc32c::crc32c(&b[16..BLOCK]);
        b[12..16].copy_from_slice(&crc.to_le_bytes());
    }

    /// None unless the block is a valid journal block of this version
    /// ([`JOURNAL_VERSION`]) or of version 5.
    pub fn read(b: &[u8]) -> Option<JournalBlock> {
        let v = u32::from_le_bytes(b[8..12].try_into().unwrap());
        if &b[0..8] != JOURNAL_MAGIC
            || (v != JOURNAL_VERSION && v != VERSION)
            || u32::from_le_bytes(b[12..16].try_into().unwrap()) != crc32c::crc32c(&b[16..BLOCK])
        {
            return None;
        }
        let n = u32::from_le_bytes(b[36..40].try_into().unwrap()) as usize;
        if n > JOURNAL_ENTRIES {
            return None;
        }
        let entries = (0..n)
            .map(|i| {
                let at = JOURNAL_HEADER + i * JOURNAL_ENTRY;
                (
                    u32::from_le_bytes(b[at..at + 4].try_into().unwrap()),
                    u64::from_le_bytes(b[at + 4..at + 12].try_into().unwrap()),
                )
            })
            .collect();
        Some(JournalBlock {
            counter: u64::from_le_bytes(b[16..24].try_into().unwrap()),
            floors: CLASSES
                .map(|c| u64::from_le_bytes(b[FLOOR_AT[c]..FLOOR_AT[c] + 8].try_into().unwrap())),
            logical: u32::from_le_bytes(b[32..36].try_into().unwrap()),
            geometry: (b[40], u32::from_le_bytes(b[44..48].try_into().unwrap())),
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(key: &[u8], value: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; item::stored_size(key.len(), value.len())];
        Header {
            cas: 42,
            exptime: 7,
            flags: 9,
            vlen: value.len() as u32,
            klen: key.len() as u8,
            bits: item::FETCHED | item::KEY_BINARY | item::FLASH_COPY | 3,
            atime: 55,
        }
        .write(&mut b);
        b[HEADER..HEADER + key.len()].copy_from_slice(key);
        b[HEADER + key.len()..HEADER + key.len() + value.len()].copy_from_slice(value);
        b
    }

    #[test]
    fn record_round_trip_and_corruption() {
        let it = item(b"key", b"value");
        let size = record_size(3, 5);
        let mut rec = vec![0u8; size];
        write_record(&mut rec, &it, 0x1_0000_0005, true);
        let got = check_record(&rec, 0x1_0000_0005, 1 << 20).unwrap();
        let h = Header::read(got);
        assert_eq!(
            (h.cas, h.exptime, h.flags, h.vlen, h.klen),
            (42, 7, 9, 5, 3)
        );
        assert_eq!(
            h.bits,
            item::KEY_BINARY | item::FLASH_COPY,
            "volatile bits are not stored"
        );
        assert_eq!(&got[HEADER..], b"keyvalue");
        assert_eq!(
            check_record(&rec, 6, 1 << 20),
            Err(RecordError::WrongSequence)
        );
        assert_eq!(
            check_record(&rec[..20], 5, 1 << 20),
            Err(RecordError::Truncated { need: 32 })
        );
        assert_eq!(
            check_record(&rec[..34], 5, 1 << 20),
            Err(RecordError::Truncated { need: 40 })
        );
        for i in [0, 9, 20, 33] {
            let mut bad = rec.clone();
            bad[i] ^= 1;
            assert!(check_record(&bad, 5, 1 << 20).is_err(), "flip at {i}");
        }
    }

    #[test]
    fn placement_keeps_small_records_in_one_block() {
        assert_eq!(place_record(0, 100), 0);
        assert_eq!(place_record(4000, 96), 4000);
        assert_eq!(place_record(4000, 104), 4096);
        assert_eq!(place_record(4096, 4096), 4096);
        assert_eq!(place_record(8, 5000), 4096);
        assert_eq!(place_record(8192, 5000), 8192);
    }

    #[test]
    fn headers_round_trip_and_refuse_others() {
        let mut b = vec![0u8; BLOCK];
        assert_eq!(Superblock::inspect(&b), DeviceContents::Empty);
        let sb = Superblock {
            device_size: 1 << 30,
            segment_size: 4 << 20,
            device_no: 1,
            journal_bytes: 8 << 20,
            journal_off: true,
            version: SUPER_VERSION,
        };
        sb.write(&mut b);
        assert_eq!(Superblock::inspect(&b), DeviceContents::Ours(sb));
        // Version 5 (before the small store's tombstones) is read as ours.
        let v5 = Superblock {
            version: VERSION,
            ..sb
        };
        v5.write(&mut b);
        assert_eq!(Superblock::inspect(&b), DeviceContents::Ours(v5));
        b[8] = 9;
        assert_eq!(Superblock::inspect(&b), DeviceContents::OtherVersion(9));
        b[0] = b'X';
        assert_eq!(Superblock::inspect(&b), DeviceContents::Foreign);
        let sh = SegmentHeader {
            seq: 77,
            slot: 3,
            data_len: 12345,
            records: 10,
            max_exptime: 0,
            journal_counter: 99,
            class: DeviceClass::Capacity,
        };
        sh.write(&mut b);
        assert_eq!(SegmentHeader::read(&b), Some(sh));
        b[20] ^= 1;
        assert_eq!(SegmentHeader::read(&b), None);
        let jb = JournalBlock {
            counter: 9,
            floors: [4, 3],
            logical: 2,
            geometry: (3, 4097),
            entries: vec![(0xDEAD_BEEF, 17); JOURNAL_ENTRIES],
        };
        jb.write(&mut b);
        assert_eq!(JournalBlock::read(&b), Some(jb));
        b[4000] ^= 1;
        assert_eq!(JournalBlock::read(&b), None, "a torn journal block");
        assert_eq!(JOURNAL_ENTRIES, 336);
        assert_eq!(journal_bytes_for(16 << 20), 1 << 20);
        assert_eq!(journal_bytes_for(64 << 20), 2 << 20);
        assert_eq!(journal_bytes_for(1 << 30), 32 << 20);
        assert_eq!(journal_bytes_for(1 << 40), 256 << 20);
    }
}
