//! The small-object store's 4 KiB blocks, byte by byte (docs/SMALL.md).
//! Sets and log pages share one layout and differ in their magic; every
//! block carries a CRC-32C of all its bytes after the checksum, its own
//! block number (a misdirected write does not verify) and the store-wide
//! generation it was written at.
//!
//! ```text
//! block (4096 bytes, little-endian)
//!   0  4  crc32c of bytes 4..4096
//!   4  4  magic: "TCS2" (a set) or "TCL2" (a log page); the 2 is the version
//!   8  4  block number: the set number, or the log page number
//!  12  2  objects n
//!  14  2  bytes used, header included (the rest of the block is zero)
//!  16  8  generation: the store's write counter when the block was written
//!  24  8  nonce: the region's, drawn when it was formatted (a block of an
//!         earlier region on the same bytes reads as empty)
//!  32 ..  n objects, packed:
//!          0  1  key length k (1..=250)
//!          1  1  bits: 0-2 RRIP value (sets), 3 stale, 5 binary key
//!          2  2  value length v
//!          4  4  exptime, absolute unix seconds (0 = never)
//!          8  4  client flags
//!         12  8  CAS
//!         20  k  key
//!       20+k  v  value
//! ```

use crate::device::aligned::BLOCK;

pub const SET_MAGIC: &[u8; 4] = b"TCS2";
pub const LOG_MAGIC: &[u8; 4] = b"TCL2";
/// Bytes of block header before the objects.
pub const BLOCK_HEADER: usize = 32;
/// Bytes of object header before the key.
pub const OBJ_HEADER: usize = 20;
/// Bytes of objects one block holds.
pub const BLOCK_PAYLOAD: usize = BLOCK - BLOCK_HEADER;
/// Mask of the RRIP value in an object's bits.
pub const RRIP_MASK: u8 = 0b111;
/// Object bits kept on flash besides RRIP (stale, binary key).
pub const KEPT_BITS: u8 = (1 << 3) | (1 << 5);

/// One object: what a get returns and what a block holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Obj {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub flags: u32,
    pub exptime: u32,
    pub cas: u64,
    /// Item bits kept on flash ([`KEPT_BITS`]); RRIP in the low 3 bits.
    pub bits: u8,
}

impl Obj {
    /// Bytes this object takes in a block.
    pub fn size(&self) -> usize {
        encoded_size(self.key.len(), self.value.len())
    }

    pub fn rrip(&self) -> u8 {
        self.bits & RRIP_MASK
    }

    pub fn set_rrip(&mut self, r: u8) {
        self.bits = (self.bits & !RRIP_MASK) | (r & RRIP_MASK);
    }

    pub fn expired(&self, now: u32) -> bool {
        self.exptime != 0 && self.exptime <= now
    }
}

/// Bytes an object of this key and value takes in a block.
pub fn encoded_size(klen: usize, vlen: usize) -> usize {
    OBJ_HEADER + klen + vlen
}

/// Whether an object of this key and value fits a block at all.
pub fn fits(klen: usize, vlen: usize) -> bool {
    (1..=250).contains(&klen) && encoded_size(klen, vlen) <= BLOCK_PAYLOAD
}

/// What kind of block, for the magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Set,
    Log,
}

impl Kind {
    fn magic(self) -> &'static [u8; 4] {
        match self {
            Kind::Set => SET_MAGIC,
            Kind::Log => LOG_MAGIC,
        }
    }
}

/// Why a block does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// Never written (all zero), or written for an earlier region (another nonce).
    Empty,
    /// Wrong magic, checksum, block number or object bounds: torn, misdirected or not ours.
    Corrupt,
}

/// A verified block's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHead {
    pub number: u32,
    pub count: usize,
    pub used: usize,
    pub generation: u64,
}

/// Writes `objs` into `dst` (one 4 KiB block). The objects must fit
/// ([`BLOCK_PAYLOAD`] bytes in all).
pub fn encode(dst: &mut [u8], kind: Kind, number: u32, generation: u64, nonce: u64, objs: &[Obj]) {
    assert_eq!(dst.len(), BLOCK);
    dst.fill(0);
    let mut at = BLOCK_HEADER;
    for o in objs {
        let end = at + o.size();
        assert!(end <= BLOCK, "objects overflow the block");
        let b = &mut dst[at..end];
        b[0] = o.key.len() as u8;
        b[1] = o.bits;
        b[2..4].copy_from_slice(&(o.value.len() as u16).to_le_bytes());
        b[4..8].copy_from_slice(&o.exptime.to_le_bytes());
        b[8..12].copy_from_slice(&o.flags.to_le_bytes());
        b[12..20].copy_from_slice(&o.cas.to_le_bytes());
        b[20..20 + o.key.len()].copy_from_slice(&o.key);
        b[20 + o.key.len()..].copy_from_slice(&o.value);
        at = end;
    }
    dst[4..8].copy_from_slice(kind.magic());
    dst[8..12].copy_from_slice(&number.to_le_bytes());
    dst[12..14].copy_from_slice(&(objs.len() as u16).to_le_bytes());
    dst[14..16].copy_from_slice(&(at as u16).to_le_bytes());
    dst[16..24].copy_from_slice(&generation.to_le_bytes());
    dst[24..32].copy_from_slice(&nonce.to_le_bytes());
    let crc = crc32c::crc32c(&dst[4..]);
    dst[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// Verifies a block read from the device: checksum, magic, block number,
/// and the region's nonce (a block that carries another is
/// [`BlockError::Empty`]: the region was formatted again since; a torn
/// write of this region's never leaves a sector of an earlier one in front).
pub fn check(b: &[u8], kind: Kind, number: u32, nonce: u64) -> Result<BlockHead, BlockError> {
    if b.len() < BLOCK {
        return Err(BlockError::Corrupt);
    }
    let b = &b[..BLOCK];
    if b.iter().all(|&x| x == 0) || b[24..32] != nonce.to_le_bytes() {
        return Err(BlockError::Empty);
    }
    let crc = u32::from_le_bytes(b[0..4].try_into().unwrap());
    if crc != crc32c::crc32c(&b[4..]) || &b[4..8] != kind.magic() {
        return Err(BlockError::Corrupt);
    }
    let head = BlockHead {
        number: u32::from_le_bytes(b[8..12].try_into().unwrap()),
        count: u16::from_le_bytes(b[12..14].try_into().unwrap()) as usize,
        used: u16::from_le_bytes(b[14..16].try_into().unwrap()) as usize,
        generation: u64::from_le_bytes(b[16..24].try_into().unwrap()),
    };
    if head.number != number || !(BLOCK_HEADER..=BLOCK).contains(&head.used) {
        return Err(BlockError::Corrupt);
    }
    // The objects must tile exactly the bytes the header says are used.
    let mut at = BLOCK_HEADER;
    for _ in 0..head.count {
        at = next_obj(b, at).ok_or(BlockError::Corrupt)?;
    }
    if at != head.used {
        return Err(BlockError::Corrupt);
    }
    Ok(head)
}

fn next_obj(b: &[u8], at: usize) -> Option<usize> {
    let h = b.get(at..at + OBJ_HEADER)?;
    let k = h[0] as usize;
    let v = u16::from_le_bytes([h[2], h[3]]) as usize;
    let end = at + encoded_size(k, v);
    (k > 0 && end <= BLOCK).then_some(end)
}

/// The objects of a block that [`check`] verified, each with its place
/// (0-based) in the block.
pub fn objects<'a>(b: &'a [u8], head: &BlockHead) -> impl Iterator<Item = Obj> + 'a {
    spans(b, head).map(move |(at, end)| obj_at(b, at, end))
}

/// Where each object of a verified block lies: (start, end) byte offsets.
pub fn spans<'a>(b: &'a [u8], head: &BlockHead) -> impl Iterator<Item = (usize, usize)> + 'a {
    let mut at = BLOCK_HEADER;
    (0..head.count).map(move |_| {
        let end = next_obj(b, at).expect("verified block");
        let span = (at, end);
        at = end;
        span
    })
}

/// The key of the object at `at` (a start [`spans`] gave).
pub fn key_at(b: &[u8], at: usize) -> &[u8] {
    &b[at + OBJ_HEADER..at + OBJ_HEADER + b[at] as usize]
}

/// The object at `at..end` (a span [`spans`] gave), copied out.
pub fn obj_at(b: &[u8], at: usize, end: usize) -> Obj {
    let h = &b[at..at + OBJ_HEADER];
    let k = h[0] as usize;
    Obj {
        bits: h[1],
        exptime: u32::from_le_bytes(h[4..8].try_into().unwrap()),
        flags: u32::from_le_bytes(h[8..12].try_into().unwrap()),
        cas: u64::from_le_bytes(h[12..20].try_into().unwrap()),
        key: b[at + OBJ_HEADER..at + OBJ_HEADER + k].to_vec(),
        value: b[at + OBJ_HEADER + k..end].to_vec(),
    }
}

/// The object with this full key in a verified block, and its place.
pub fn find(b: &[u8], head: &BlockHead, key: &[u8]) -> Option<(usize, Obj)> {
    let mut at = BLOCK_HEADER;
    for i in 0..head.count {
        let end = next_obj(b, at)?;
        let k = b[at] as usize;
        if &b[at + OBJ_HEADER..at + OBJ_HEADER + k] == key {
            return objects(b, head).nth(i).map(|o| (i, o));
        }
        at = end;
    }
    None
}

/// Magic of a region's first block, which says what the blocks after it are.
pub const REGION_MAGIC: &[u8; 4] = b"TCSR";
/// The blocks' format version (the `2` of their magic).
pub const REGION_VERSION: u32 = 2;

/// A region's first block: its geometry, its nonce and its floor.
///
/// ```text
///   0  4  crc32c of bytes 4..64
///   4  4  magic "TCSR"
///   8  4  version (2)
///  12  4  part: which of the store's regions this is
///  16  4  parts
///  20  4  sets
///  24  4  log segments
///  28  4  pages per log segment
///  32  8  nonce, drawn when the region was formatted
///  40  8  floor: blocks of this generation or older hold nothing (flush_all)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegionHead {
    pub part: u32,
    pub parts: u32,
    pub sets: u32,
    pub log_segments: u32,
    pub seg_pages: u32,
    pub nonce: u64,
    pub floor: u64,
}

/// Writes a region's first block into `dst` (4 KiB).
pub fn encode_region(dst: &mut [u8], r: &RegionHead) {
    dst.fill(0);
    dst[4..8].copy_from_slice(REGION_MAGIC);
    dst[8..12].copy_from_slice(&REGION_VERSION.to_le_bytes());
    for (at, v) in [
        (12, r.part),
        (16, r.parts),
        (20, r.sets),
        (24, r.log_segments),
        (28, r.seg_pages),
    ] {
        dst[at..at + 4].copy_from_slice(&v.to_le_bytes());
    }
    dst[32..40].copy_from_slice(&r.nonce.to_le_bytes());
    dst[40..48].copy_from_slice(&r.floor.to_le_bytes());
    let crc = crc32c::crc32c(&dst[4..64]);
    dst[0..4].copy_from_slice(&crc.to_le_bytes());
}

/// A region's first block, if it is one of this version that verifies.
pub fn check_region(b: &[u8]) -> Option<RegionHead> {
    let crc = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
    if crc != crc32c::crc32c(b.get(4..64)?)
        || &b[4..8] != REGION_MAGIC
        || b[8..12] != REGION_VERSION.to_le_bytes()
    {
        return None;
    }
    let u = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let w = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    Some(RegionHead {
        part: u(12),
        parts: u(16),
        sets: u(20),
        log_segments: u(24),
        seg_pages: u(28),
        nonce: w(32),
        floor: w(40),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(k: &str, v: usize) -> Obj {
        Obj {
            key: k.as_bytes().to_vec(),
            value: vec![b'x'; v],
            flags: 7,
            exptime: 0,
            cas: 42,
            bits: 3,
        }
    }

    #[test]
    fn a_block_round_trips_and_finds_by_full_key() {
        let objs = vec![obj("a", 10), obj("bb", 100), obj("ccc", 0)];
        let mut b = vec![0u8; BLOCK];
        encode(&mut b, Kind::Set, 9, 77, 5, &objs);
        let h = check(&b, Kind::Set, 9, 5).unwrap();
        assert_eq!((h.count, h.generation), (3, 77));
        assert_eq!(objects(&b, &h).collect::<Vec<_>>(), objs);
        assert_eq!(find(&b, &h, b"bb").unwrap(), (1, objs[1].clone()));
        assert!(find(&b, &h, b"b").is_none());
        assert!(find(&b, &h, b"bbb").is_none());
    }

    #[test]
    fn torn_misdirected_or_foreign_blocks_do_not_verify() {
        let mut b = vec![0u8; BLOCK];
        assert_eq!(check(&b, Kind::Set, 0, 5), Err(BlockError::Empty));
        encode(&mut b, Kind::Set, 3, 1, 5, &[obj("k", 50)]);
        assert_eq!(check(&b, Kind::Set, 4, 5), Err(BlockError::Corrupt));
        assert_eq!(check(&b, Kind::Log, 3, 5), Err(BlockError::Corrupt));
        assert_eq!(check(&b, Kind::Set, 3, 6), Err(BlockError::Empty));
        let mut torn = b.clone();
        torn[2048..].fill(0);
        torn[40] ^= 1;
        assert_eq!(check(&torn, Kind::Set, 3, 5), Err(BlockError::Corrupt));
        let mut flipped = b.clone();
        flipped[4000] ^= 0x10;
        assert_eq!(check(&flipped, Kind::Set, 3, 5), Err(BlockError::Corrupt));
        assert!(check(&b, Kind::Set, 3, 5).is_ok());
    }

    #[test]
    fn a_region_head_round_trips_and_a_flipped_bit_is_refused() {
        let r = RegionHead {
            part: 3,
            parts: 8,
            sets: 1000,
            log_segments: 12,
            seg_pages: 16,
            nonce: 0xdead_beef_1234,
            floor: 77,
        };
        let mut b = vec![0u8; BLOCK];
        encode_region(&mut b, &r);
        assert_eq!(check_region(&b), Some(r));
        b[33] ^= 1;
        assert_eq!(check_region(&b), None);
        assert_eq!(check_region(&[0u8; BLOCK]), None);
    }

    #[test]
    fn the_largest_object_fits_and_a_larger_one_does_not() {
        let k = 10;
        let v = BLOCK_PAYLOAD - OBJ_HEADER - k;
        assert!(fits(k, v) && !fits(k, v + 1) && !fits(0, 1) && !fits(251, 1));
        let mut b = vec![0u8; BLOCK];
        let o = Obj {
            key: vec![b'k'; k],
            value: vec![1; v],
            ..Obj::default()
        };
        encode(&mut b, Kind::Log, 0, 5, 9, std::slice::from_ref(&o));
        let h = check(&b, Kind::Log, 0, 9).unwrap();
        assert_eq!(h.used, BLOCK);
        assert_eq!(objects(&b, &h).next().unwrap(), o);
    }
}
