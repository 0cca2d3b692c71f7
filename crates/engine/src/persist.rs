//! Graceful restart: at shutdown the engine writes its state to a snapshot
//! file next to the first flash device, and the next start with the same
//! configuration reads it back, so the cache comes back warm: every RAM
//! segment byte for byte, the index as it was (so flash items keep their
//! places), the flash segment table and the CAS counter. The snapshot is
//! deleted as soon as it has been read, before anything is served, so a
//! later crash can never bring back this older state.
//!
//! File format (version 4; version 3 had no memory limit, version 2 the
//! index as one table, version 1 chained buckets),
//! little-endian, CRC-32C over everything before
//! the trailer:
//!
//! ```text
//! "TCSNAP01"  magic
//! u32         version (4)
//! u64 x 4     fingerprint: RAM segment size, shards, flash segment size, flash slots
//! u64         memory limit (-m) it was written with: a start with a lower one
//!             recovers from the devices instead
//! u64         CAS counter
//! flash:      u64 next sequence; per slot: u8 state (0 free, 1 sealed), u64 seq,
//!             u32 data length, u32 items, u32 latest exptime; u32 n + n x u32
//!             sealed FIFO order
//! per shard:  stats (9 x u64); u32 segment ids; per id: u8 present, then
//!             u8 queue, u32 write, u32 live items, write bytes of data;
//!             u32 n + free ids; 2 x (u32 n + ids) queues; index (see index.rs)
//! u32         crc32c trailer
//! ```
//!
//! After a crash (kill -9, power loss) there is no snapshot: the flash tier
//! is rebuilt from the devices instead (flash::journal, FlashTier::recover,
//! docs/CRASH.md), and RAM items are lost.

use std::io::{self, Read, Write};

pub const MAGIC: &[u8; 8] = b"TCSNAP01";
pub const VERSION: u32 = 4;

/// Writes little-endian values and keeps a running CRC-32C.
pub struct SnapWriter<W: Write> {
    w: W,
    crc: u32,
    pub bytes: u64,
}

impl<W: Write> SnapWriter<W> {
    pub fn new(w: W) -> SnapWriter<W> {
        SnapWriter {
            w,
            crc: 0,
            bytes: 0,
        }
    }

    pub fn bytes_of(&mut self, b: &[u8]) -> io::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, b);
        self.bytes += b.len() as u64;
        self.w.write_all(b)
    }

    pub fn u8(&mut self, v: u8) -> io::Result<()> {
        self.bytes_of(&[v])
    }

    pub fn u16(&mut self, v: u16) -> io::Result<()> {
        self.bytes_of(&v.to_le_bytes())
    }

    pub fn u32(&mut self, v: u32) -> io::Result<()> {
        self.bytes_of(&v.to_le_bytes())
    }

    pub fn u64(&mut self, v: u64) -> io::Result<()> {
        self.bytes_of(&v.to_le_bytes())
    }

    pub fn list(&mut self, v: impl ExactSizeIterator<Item = u32>) -> io::Result<()> {
        self.u32(v.len() as u32)?;
        for x in v {
            self.u32(x)?;
        }
        Ok(())
    }

    /// Writes the trailer and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        let crc = self.crc;
        self.w.write_all(&crc.to_le_bytes())?;
        Ok(self.w)
    }
}

/// Reads what [`SnapWriter`] wrote, checking the CRC at the end.
pub struct SnapReader<R: Read> {
    r: R,
    crc: u32,
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

impl<R: Read> SnapReader<R> {
    pub fn new(r: R) -> SnapReader<R> {
        SnapReader { r, crc: 0 }
    }

    pub fn bytes_into(&mut self, b: &mut [u8]) -> io::Result<()> {
        self.r.read_exact(b)?;
        self.crc = crc32c::crc32c_append(self.crc, b);
        Ok(())
    }

    pub fn u8(&mut self) -> io::Result<u8> {
        let mut b = [0u8; 1];
        self.bytes_into(&mut b)?;
        Ok(b[0])
    }

    pub fn u16(&mut self) -> io::Result<u16> {
        let mut b = [0u8; 2];
        self.bytes_into(&mut b)?;
        Ok(u16::from_le_bytes(b))
    }

    pub fn u32(&mut self) -> io::Result<u32> {
        let mut b = [0u8; 4];
        self.bytes_into(&mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    pub fn u64(&mut self) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.bytes_into(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// A length-prefixed list, at most `max` long.
    pub fn list(&mut self, max: usize) -> io::Result<Vec<u32>> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(bad("snapshot list longer than possible"));
        }
        (0..n).map(|_| self.u32()).collect()
    }

    /// Checks the trailer.
    pub fn finish(mut self) -> io::Result<()> {
        let want = self.crc;
        let mut b = [0u8; 4];
        self.r.read_exact(&mut b)?;
        if u32::from_le_bytes(b) != want {
            return Err(bad("snapshot checksum mismatch"));
        }
        Ok(())
    }
}

/// An error for impossible values in a snapshot.
pub fn invalid(what: &str) -> io::Error {
    bad(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_checksum() {
        let mut w = SnapWriter::new(Vec::new());
        w.u8(1).unwrap();
        w.u32(7).unwrap();
        w.u64(u64::MAX).unwrap();
        w.list([1u32, 2, 3].into_iter()).unwrap();
        let buf = w.finish().unwrap();
        let mut r = SnapReader::new(&buf[..]);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u32().unwrap(), 7);
        assert_eq!(r.u64().unwrap(), u64::MAX);
        assert_eq!(r.list(10).unwrap(), vec![1, 2, 3]);
        r.finish().unwrap();
        let mut bad = buf.clone();
        bad[3] ^= 1;
        let mut r = SnapReader::new(&bad[..]);
        r.u8().unwrap();
        r.u32().unwrap();
        r.u64().unwrap();
        r.list(10).unwrap();
        assert!(r.finish().is_err());
    }
}
