//! The layout of one item inside a segment. Items start 8-byte aligned:
//!
//! ```text
//! offset  size  field
//!  0      8     cas
//!  8      4     exptime, absolute unix seconds (0 = never)
//! 12      4     client flags
//! 16      4     value length
//! 20      1     key length
//! 21      1     bits: 0-1 frequency, 2 fetched, 3 stale, 4 token sent,
//!                     5 binary key, 6 dead (unlinked), 7 flash copy
//!                     (promoted from flash: a record of it may be there)
//! 22      2     last access, unix seconds mod 65536
//! 24      k     key
//! 24+k    v     value
//! ```
//!
//! 24 bytes of header per item; memcached spends 48-56.

pub const HEADER: usize = 24;
pub const ALIGN: usize = 8;

pub const FREQ_MASK: u8 = 0b11;
pub const FETCHED: u8 = 1 << 2;
pub const STALE: u8 = 1 << 3;
pub const TOKEN_SENT: u8 = 1 << 4;
pub const KEY_BINARY: u8 = 1 << 5;
pub const DEAD: u8 = 1 << 6;
/// A RAM item copied back from flash: a record of it may still be on the
/// device, so changing or dropping it needs a tombstone (see flash::journal).
pub const FLASH_COPY: u8 = 1 << 7;

/// Bytes an item occupies in a segment, padding included.
#[inline]
pub fn stored_size(klen: usize, vlen: usize) -> usize {
    (HEADER + klen + vlen).div_ceil(ALIGN) * ALIGN
}

/// The fixed fields of an item.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Header {
    pub cas: u64,
    pub exptime: u32,
    pub flags: u32,
    pub vlen: u32,
    pub klen: u8,
    pub bits: u8,
    pub atime: u16,
}

impl Header {
    #[inline]
    pub fn read(b: &[u8]) -> Header {
        Header {
            cas: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            exptime: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            flags: u32::from_le_bytes(b[12..16].try_into().unwrap()),
            vlen: u32::from_le_bytes(b[16..20].try_into().unwrap()),
            klen: b[20],
            bits: b[21],
            atime: u16::from_le_bytes(b[22..24].try_into().unwrap()),
        }
    }

    #[inline]
    pub fn write(&self, b: &mut [u8]) {
        b[0..8].copy_from_slice(&self.cas.to_le_bytes());
        b[8..12].copy_from_slice(&self.exptime.to_le_bytes());
        b[12..16].copy_from_slice(&self.flags.to_le_bytes());
        b[16..20].copy_from_slice(&self.vlen.to_le_bytes());
        b[20] = self.klen;
        b[21] = self.bits;
        b[22..24].copy_from_slice(&self.atime.to_le_bytes());
    }

    pub fn size(&self) -> usize {
        stored_size(self.klen as usize, self.vlen as usize)
    }

    #[inline]
    pub fn expired(&self, now: u32) -> bool {
        self.exptime != 0 && self.exptime <= now
    }
}

/// The key of an item in the RAM layout (header, key, value), in RAM or
/// fetched from flash.
#[inline]
pub fn key_of(item: &[u8]) -> &[u8] {
    &item[HEADER..HEADER + item[20] as usize]
}

// Field offsets for in-place updates.
pub const OFF_CAS: usize = 0;
pub const OFF_EXPTIME: usize = 8;
pub const OFF_BITS: usize = 21;
pub const OFF_ATIME: usize = 22;

/// An item's last access as absolute unix seconds, from the 16 bits its
/// header keeps (exact within 18 hours of `now`).
pub(crate) fn last_access(now: u32, atime: u16) -> u32 {
    let idle = (now as u16).wrapping_sub(atime);
    now.saturating_sub(u32::from(idle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_size() {
        let h = Header {
            cas: 7,
            exptime: 99,
            flags: u32::MAX,
            vlen: 5,
            klen: 3,
            bits: FETCHED | 2,
            atime: 1234,
        };
        let mut b = [0u8; HEADER];
        h.write(&mut b);
        assert_eq!(Header::read(&b), h);
        assert_eq!(stored_size(3, 5), 32);
        assert_eq!(stored_size(0, 0), 24);
    }
}
