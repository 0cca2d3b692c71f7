//! One client connection: a bounded read buffer, an output buffer, and the
//! loop that parses pipelined requests and answers them in order, writing all
//! replies of a batch with one system call.
//!
//! Bounds: the read buffer holds at most one request (a command line, or a
//! line plus its data block up to the item size limit); the output buffer is
//! not added to while more than `max_pending_output` bytes wait for a client
//! that does not read, so such a client stalls itself, not the server.

use crate::execute::{count_read, execute, Ctx, Outcome};
use crate::prefetch::{prepare, Prep};
use crate::stats::add;
use mio::net::TcpStream;
use std::io::{self, Read, Write};
use tiercache_engine::flash::aligned::AlignedBuf;
use tiercache_engine::flash::io::ReadOp;
use tiercache_engine::flash::{Fetched, ReadReq};
use tiercache_proto::{parse, Limits, Parsed};

const READ_CHUNK: usize = 64 * 1024;

pub struct Conn {
    pub stream: TcpStream,
    /// Read buffer. Its length is the initialised part, which only grows
    /// (zeroing 64 KiB before every read cost a quarter of the server's CPU);
    /// the unconsumed data is `rbuf[rpos..rend]`.
    rbuf: Vec<u8>,
    /// Bytes of `rbuf` already consumed.
    rpos: usize,
    /// End of the data read into `rbuf`.
    rend: usize,
    /// The last read came back short (or would block), so the socket is
    /// drained: edge-triggered readiness reports any data that arrives after
    /// it, and reading again now would only cost an EAGAIN system call.
    drained: bool,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Bytes of a refused data block still to discard.
    swallow: usize,
    /// Buffer length the current partial request needs.
    need: usize,
    /// Peer closed its side.
    eof: bool,
    /// Close once output is flushed.
    pub closing: bool,
    /// Flash records the request at the head of the input waits for.
    fetched: Fetched,
    /// Reads of `fetched` still in flight.
    waiting: usize,
    /// The head request waits for the flash tier to write (back-pressure).
    pub busy: bool,
    /// Input offset of the request whose pipelined followers already asked
    /// the crash journal for their tombstones (once per waiting request).
    journal_ahead_at: Option<usize>,
    /// High bits of this connection's read tokens (worker slot and a serial).
    token_base: u64,
    reads: Vec<ReadReq>,
}

/// Read tokens: connection slot (24 bits), serial (24 bits), fetch slot (16 bits).
pub fn token_base(slot: usize, serial: u64) -> u64 {
    ((slot as u64) << 40) | ((serial & 0xFF_FFFF) << 16)
}

/// The connection slot and fetch slot of a read token.
pub fn split_token(token: u64) -> (usize, u64, usize) {
    (
        (token >> 40) as usize,
        token & !0xFFFF,
        (token & 0xFFFF) as usize,
    )
}

/// What the worker should do with the connection after an event.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    Open,
    Closed,
    Shutdown,
}

impl Conn {
    pub fn new(stream: TcpStream, token_base: u64) -> Conn {
        Conn {
            stream,
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            drained: false,
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            swallow: 0,
            need: 0,
            eof: false,
            closing: false,
            fetched: Fetched::default(),
            waiting: 0,
            busy: false,
            journal_ahead_at: None,
            token_base,
            reads: Vec::new(),
        }
    }

    fn pending_output(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Handles readiness: read, execute, write, until nothing more can be done.
    pub fn drive(&mut self, ctx: &Ctx<'_>, limits: &Limits, max_pending: usize) -> State {
        // Called on a readiness event: the socket may have new data.
        self.drained = false;
        loop {
            let mut progress = false;
            if !self.eof && !self.closing && !self.drained && self.pending_output() < max_pending {
                match self.fill(ctx, limits) {
                    Ok(n) => progress |= n > 0,
                    Err(_) => return State::Closed,
                }
            }
            match self.process(ctx, limits, max_pending) {
                Some(Outcome::Shutdown) => {
                    let _ = self.flush();
                    return State::Shutdown;
                }
                Some(_) => progress = true,
                None => {}
            }
            match self.flush() {
                Ok(n) => {
                    add(&ctx.stats.bytes_written, n as u64);
                    progress |= n > 0;
                }
                Err(_) => return State::Closed,
            }
            if (self.closing || self.eof) && self.pending_output() == 0 {
                return State::Closed;
            }
            if !progress {
                return State::Open;
            }
        }
    }

    /// Reads what the socket has, up to the buffer bound, and stops after a
    /// short read (as memcached does) rather than reading again until
    /// EAGAIN. Returns bytes read.
    fn fill(&mut self, ctx: &Ctx<'_>, limits: &Limits) -> io::Result<usize> {
        let cap = self
            .need
            .max(READ_CHUNK)
            .max(limits.max_get_line.min(READ_CHUNK * 16));
        let mut total = 0;
        loop {
            if self.rpos > 0 && (self.rpos == self.rend || self.rpos > READ_CHUNK) {
                self.rbuf.copy_within(self.rpos..self.rend, 0);
                self.rend -= self.rpos;
                self.rpos = 0;
            }
            let held = self.rend - self.rpos;
            let room = cap.saturating_sub(held).min(READ_CHUNK);
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
                    if n < room {
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

    fn discard_swallowed(&mut self) {
        let n = self.swallow.min(self.rend - self.rpos);
        self.rpos += n;
        self.swallow -= n;
    }

    /// Parses and executes buffered requests. Returns the last outcome, or
    /// None when nothing was executed.
    fn process(&mut self, ctx: &Ctx<'_>, limits: &Limits, max_pending: usize) -> Option<Outcome> {
        let mut last = None;
        'requests: while !self.closing
            && self.pending_output() < max_pending
            && self.waiting == 0
            && !self.busy
        {
            if self.swallow > 0 {
                self.discard_swallowed();
                if self.swallow > 0 {
                    break;
                }
            }
            let buf = &self.rbuf[self.rpos..self.rend];
            if buf.is_empty() {
                break;
            }
            match parse(buf, limits) {
                Parsed::Incomplete { need } => {
                    self.need = need.unwrap_or(0);
                    break;
                }
                Parsed::Close => {
                    self.closing = true;
                    self.rpos = self.rend;
                    last = Some(Outcome::Close);
                    break;
                }
                Parsed::Request { request, consumed } => {
                    if request == tiercache_proto::Request::GetKeyTooLong {
                        self.wbuf.truncate(self.wpos);
                    }
                    let mut after_miss = false;
                    let mut request = Some(request);
                    let outcome = loop {
                        let req = request.take().expect("request");
                        if let Some(reader) = ctx.reader {
                            match prepare(&req, ctx, &mut self.fetched, &mut self.reads, after_miss)
                            {
                                Prep::Ready => {}
                                Prep::Wait => {
                                    let mut r = reader.borrow_mut();
                                    for rr in self.reads.drain(..) {
                                        self.waiting += 1;
                                        r.submit(read_op(self.token_base, rr));
                                    }
                                    break 'requests;
                                }
                                Prep::Busy => {
                                    self.busy = true;
                                    break 'requests;
                                }
                            }
                        }
                        // A get may miss in RAM for keys on flash: keep a copy
                        // to run it again once their records are here.
                        let again = (ctx.reader.is_some()
                            && !after_miss
                            && matches!(req, tiercache_proto::Request::Get(_)))
                        .then(|| req.clone());
                        let mark = self.wbuf.len();
                        let outcome = execute(req, &mut self.wbuf, ctx, &self.fetched);
                        if ctx.retry.take() {
                            // Changed nothing: drop the reply, run it again later.
                            self.wbuf.truncate(mark);
                            self.busy = true;
                            if ctx.reader.is_some() && self.journal_ahead_at != Some(self.rpos) {
                                self.journal_ahead_at = Some(self.rpos);
                                let rest = &self.rbuf[self.rpos + consumed..self.rend];
                                crate::prefetch::journal_ahead(rest, limits, ctx);
                            }
                            break 'requests;
                        }
                        if ctx.need_flash.take() {
                            if let Some(req) = again {
                                self.wbuf.truncate(mark);
                                after_miss = true;
                                request = Some(req);
                                continue;
                            }
                        }
                        break outcome;
                    };
                    self.fetched.clear();
                    self.rpos += consumed;
                    self.need = 0;
                    last = Some(outcome);
                    match outcome {
                        Outcome::Continue => {}
                        Outcome::Close => self.closing = true,
                        Outcome::Shutdown => return last,
                    }
                }
                Parsed::Swallow {
                    request,
                    consumed,
                    skip,
                } => {
                    execute(request, &mut self.wbuf, ctx, &self.fetched);
                    self.rpos += consumed;
                    self.swallow = skip;
                    self.need = 0;
                    last = Some(Outcome::Continue);
                }
            }
        }
        last
    }

    /// A flash read of this connection finished.
    pub fn complete_read(
        &mut self,
        token: u64,
        result: io::Result<(AlignedBuf, usize)>,
        ctx: &Ctx<'_>,
    ) {
        let (_, base, slot) = split_token(token);
        if base != self.token_base || self.waiting == 0 {
            return;
        }
        let Some(flash) = ctx.shared.engine.flash() else {
            return;
        };
        let data = match &result {
            Ok((b, n)) => Ok(&b.as_slice()[..*n]),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        };
        match self
            .fetched
            .complete(slot, data, flash.segment_size(), &flash.stats)
        {
            Some(more) => {
                if let Some(r) = ctx.reader {
                    r.borrow_mut().submit(read_op(self.token_base, more));
                }
            }
            None => self.waiting -= 1,
        }
    }

    /// Writes pending output. Returns bytes written.
    fn flush(&mut self) -> io::Result<usize> {
        let mut total = 0;
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.wpos += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
            if self.wbuf.capacity() > 1 << 20 {
                self.wbuf.shrink_to(64 * 1024);
            }
        }
        if self.rbuf.capacity() > 4 << 20 && self.rend - self.rpos < READ_CHUNK {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend -= self.rpos;
            self.rpos = 0;
            self.rbuf.truncate(READ_CHUNK);
            self.rbuf.shrink_to(READ_CHUNK);
        }
        Ok(total)
    }
}

fn read_op(base: u64, r: ReadReq) -> ReadOp {
    ReadOp {
        token: base | r.slot as u64,
        dev: r.dev,
        offset: r.offset,
        len: r.len,
    }
}
