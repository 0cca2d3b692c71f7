//! The connection's socket side: reading into the bounded input buffer
//! (short reads, the peer's close seen in the same edge, data blocks being
//! discarded) and writing the output buffer out, compacting it and giving
//! back what a large request made it grow to. See `conn.rs` for the bound.

use super::{Conn, READ_CHUNK};
use crate::commands::count_read;
use crate::ctx::Ctx;
use std::io::{self, Read, Write};

impl Conn {
    /// Reads what the socket has, up to the buffer bound (READ_CHUNK, or
    /// what the head request needs), and stops after a short read (as
    /// memcached does) rather than reading again until EAGAIN, unless the
    /// peer closed or reset (`hup`): its FIN may have come with the data in
    /// the same edge, and no further event would report it. Returns bytes
    /// read.
    pub(super) fn fill(&mut self, ctx: &Ctx<'_>) -> io::Result<usize> {
        let cap = self.need.max(READ_CHUNK);
        let mut total = 0;
        loop {
            let held = self.rend - self.rpos;
            // Moving the unconsumed part to the front costs less than the
            // space before it.
            if self.rpos > 0 && self.rpos >= held {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            }
            let room = cap.saturating_sub(held).min(self.read_size);
            // While swallowing, reading is always allowed: the bytes are dropped.
            if room == 0 && self.swallow == 0 {
                return Ok(total);
            }
            let room = room.max(if self.swallow > 0 { READ_CHUNK } else { 0 });
            let start = self.rend;
            if self.rbuf.len() < start + room {
                self.rbuf.resize(start + room, 0);
            }
            match self.stream.read(&mut self.rbuf[start..start + room]) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(total);
                }
                Ok(n) => {
                    self.rend += n;
                    total += n;
                    count_read(ctx.stats, n);
                    if self.swallow > 0 {
                        self.discard_swallowed();
                    }
                    if n == room && self.read_size < READ_CHUNK {
                        self.read_size *= 2;
                    }
                    if n < room && !self.hup && self.stream.short_read_drains() {
                        self.drained = true;
                        return Ok(total);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    return Ok(total);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    pub(super) fn discard_swallowed(&mut self) {
        let n = self.swallow.min(self.rend - self.rpos);
        self.consume(n);
        self.swallow -= n;
    }

    /// Writes pending output. Returns bytes written.
    pub(super) fn flush(&mut self) -> io::Result<usize> {
        let total = write_out(&mut self.stream, &self.wbuf, &mut self.wpos)?;
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            self.due = 0;
            if self.wbuf.capacity() > 1 << 20 {
                self.wbuf.shrink_to(64 * 1024);
            }
        } else if self.wpos > 0 && self.wpos >= self.wbuf.len() - self.wpos {
            // The socket is full: move what is left to the front (or a
            // client that keeps taking part of it would grow the buffer
            // while what is pending stays small), and give back what the
            // buffer grew to beyond twice that (a client that does not read
            // would keep it). Only once what was sent is at least what is
            // left, so that a large value is moved a bounded number of
            // times, not once per write the socket takes.
            self.wbuf.drain(..self.wpos);
            self.due = self.due.saturating_sub(self.wpos);
            self.wpos = 0;
            let keep = (2 * self.wbuf.len()).max(64 * 1024);
            if self.wbuf.capacity() > keep {
                self.wbuf.shrink_to(keep);
            }
        }
        // A large request (item, multiget line) is done with and nothing
        // waits: give its buffer back.
        if self.rbuf.len() > 4 * READ_CHUNK && self.rend == self.rpos && self.need == 0 {
            self.rpos = 0;
            self.rend = 0;
            self.rbuf.truncate(READ_CHUNK);
            self.rbuf.shrink_to(READ_CHUNK);
        }
        Ok(total)
    }
}

/// Writes `buf[*wpos..]` until the socket takes no more (TLS records the
/// socket did not take last time go first). Returns bytes written.
pub(super) fn write_out(
    stream: &mut crate::transport::Stream,
    buf: &[u8],
    wpos: &mut usize,
) -> io::Result<usize> {
    let mut total = 0;
    stream.push()?;
    while *wpos < buf.len() {
        match stream.write(&buf[*wpos..]) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                *wpos += n;
                total += n;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(total)
}
