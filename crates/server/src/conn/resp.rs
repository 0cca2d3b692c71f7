//! The Redis port's connections, served by the workers' event loops like
//! the memcached connections: the RESP listeners are further listening
//! sockets of every worker (tagged [`Proto::Redis`]), an accepted
//! connection is handed to the worker with the fewest, and its requests
//! are parsed and run on that worker. Pipelining: every complete request
//! read is answered, the replies written with one system call.
//!
//! Flash reads never block the worker: a command that needs records not
//! read yet stops ([`crate::protocol::resp::db`]), its keys are probed and
//! their reads submitted to the worker's asynchronous reader (the same as
//! memcached gets, [`flash`]), and it runs again once they completed; a
//! command that waits for a busy flash tier runs again at the worker's
//! next wake-up. Requests after it wait their turn (replies stay in
//! order).
//!
//! Bounds: a bulk string at most the item size limit (`-I`, at least
//! 1 MiB); an unfinished request at most [`MAX_REQUEST`] (then the
//! connection is closed, as Redis closes a client over its query buffer
//! limit); while `max_pending_output` bytes of replies wait for a client
//! that does not read, nothing more is read from it nor run. Connections
//! count against `-c` (maxclients) with the memcached ones.

mod ahead;
mod flash;

use crate::conn::State;
use crate::ctx::Ctx;
use crate::protocol::resp::codec::{parse_into, Parsed};
use crate::protocol::resp::reply::Out;
use crate::protocol::resp::{Env, Session};
use crate::stats::{add, WorkerStats};
use crate::transport::Stream;
use std::io::{self, Read};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tiercache_engine::flash::{Fetched, ReadReq};

/// Longest unfinished request held.
pub const MAX_REQUEST: usize = 64 << 20;
/// Bytes asked of one read.
const READ_CHUNK: usize = 64 << 10;

/// Binds the RESP listeners of the configuration (none without a port).
pub fn bind(cfg: &crate::config::Config) -> anyhow::Result<Vec<TcpListener>> {
    use anyhow::Context;
    let port = cfg.redis.port;
    if port == 0 {
        return Ok(Vec::new());
    }
    let hosts: Vec<String> = match cfg.redis.listen.as_str() {
        "" => cfg.listen_addrs()?.into_iter().map(|(h, _, _)| h).collect(),
        l => l.split(',').map(|h| h.trim().to_string()).collect(),
    };
    let hosts = if hosts.is_empty() {
        vec!["127.0.0.1".to_string()]
    } else {
        hosts
    };
    let mut out = Vec::new();
    for h in hosts {
        let h = h.trim_start_matches('[').trim_end_matches(']').to_string();
        let l = TcpListener::bind((h.as_str(), port)).with_context(|| {
            format!("-o redis_port: cannot listen on {h}:{port} (is a Redis server using it?)")
        })?;
        l.set_nonblocking(true)?;
        out.push(l);
    }
    Ok(out)
}

/// One RESP client connection on a worker.
pub struct RespConn {
    pub stream: Stream,
    env: Arc<Env>,
    sess: Session,
    /// Set by CLIENT KILL (of another connection): close now.
    kill: Arc<AtomicBool>,
    /// Input; the unconsumed part is `rbuf[rpos..rend]`.
    rbuf: Vec<u8>,
    rpos: usize,
    rend: usize,
    /// Input stream offset of `rbuf[rpos]` (bytes consumed so far).
    pos: u64,
    /// The gets behind a head that waits for flash, read ahead.
    ahead: ahead::Ahead,
    /// Replies; `out.buf[wpos..]` is not written yet.
    out: Out,
    wpos: usize,
    /// The last read came back short: wait for the next readiness event.
    drained: bool,
    eof: bool,
    hup: bool,
    /// Close once the replies are written (QUIT, a protocol error).
    closing: bool,
    /// Input holds no complete request (at EOF nothing more will run).
    input_done: bool,
    pub close_reason: &'static str,
    /// The head request waits for the flash tier to catch up.
    pub busy: bool,
    /// The head request's flash records, and the reads it waits for.
    fetched: Fetched,
    waiting: usize,
    /// Times the head request ran and stopped for reads.
    reruns: u8,
    /// Carried in read tokens: a completion of an earlier head's read
    /// is ignored.
    flight: u8,
    token_base: u64,
    reads: Vec<ReadReq>,
    /// When the head request first ran (its latency includes its waits).
    started: Option<tiercache_engine::clock::Instant>,
    /// When the request before it in this pass ended (its clock read
    /// serves as the next one's start: one read per pipelined request).
    prev_end: Option<tiercache_engine::clock::Instant>,
    /// What the client list shows: (name, RESP3).
    shown: (Vec<u8>, bool),
}

impl RespConn {
    /// A new connection: registered in the client list. `handle` is a
    /// copy of its socket, which CLIENT KILL shuts to wake its worker;
    /// `stats`: its worker's counters and latency recorder.
    pub fn new(
        stream: Stream,
        env: Arc<Env>,
        stats: Arc<WorkerStats>,
        handle: Option<std::net::TcpStream>,
        peer: String,
        local: String,
        token_base: u64,
    ) -> RespConn {
        let (sess, kill) = env.open(handle, peer, local, stats);
        RespConn {
            stream,
            env,
            sess,
            kill,
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            pos: 0,
            ahead: ahead::Ahead::default(),
            out: Out::default(),
            wpos: 0,
            drained: false,
            eof: false,
            hup: false,
            closing: false,
            input_done: true,
            close_reason: "normal",
            busy: false,
            fetched: Fetched::default(),
            waiting: 0,
            reruns: 0,
            flight: 0,
            token_base,
            reads: Vec::new(),
            started: None,
            prev_end: None,
            shown: (Vec::new(), false),
        }
    }

    fn pending(&self) -> usize {
        self.out.buf.len() - self.wpos
    }

    /// Handles readiness (`readable`: a socket event came; `hup`: it said
    /// the peer closed or reset) or a wake-up (flash reads completed, the
    /// flash tier caught up): read, run, write until nothing moves.
    pub fn drive(&mut self, ctx: &Ctx<'_>, readable: bool, hup: bool) -> State {
        if readable {
            self.drained = false;
        }
        self.hup |= hup;
        let max_pending = ctx.shared.config.server.max_pending_output.max(1);
        loop {
            if self.kill.load(Ordering::Relaxed) {
                return State::Closed;
            }
            let mut progress = false;
            if !self.eof && !self.closing && !self.drained && self.pending() < max_pending {
                match self.fill() {
                    Ok(n) => progress |= n > 0,
                    Err(_) => {
                        self.close_reason = "error";
                        return State::Closed;
                    }
                }
            }
            progress |= self.process(ctx, max_pending);
            match self.flush() {
                Ok(n) => progress |= n > 0,
                Err(_) => {
                    self.close_reason = "error";
                    return State::Closed;
                }
            }
            if self.shown.0 != self.sess.name || self.shown.1 != self.out.resp3 {
                self.env.update(&self.sess, self.out.resp3);
                self.shown = (self.sess.name.clone(), self.out.resp3);
            }
            let waiting = self.busy || self.waiting > 0;
            let eof_done = self.eof && !waiting && self.input_done;
            if (self.closing || eof_done) && self.pending() == 0 && !self.stream.pending() {
                return State::Closed;
            }
            if !progress {
                return State::Open;
            }
        }
    }

    /// Runs the complete requests in the input, in order, until one waits
    /// for flash, the output is over its bound, or the input runs out.
    /// True if any ran.
    fn process(&mut self, ctx: &Ctx<'_>, max_pending: usize) -> bool {
        let rbuf = std::mem::take(&mut self.rbuf);
        let cfg = &ctx.shared.config;
        let max_bulk = cfg.cache.max_item_size.max(1 << 20);
        let mut ran = false;
        self.input_done = false;
        // One list of arguments for the whole batch, borrowed from the input.
        let mut args: Vec<&[u8]> = Vec::new();
        self.prev_end = None;
        while !self.closing && !self.busy && self.waiting == 0 && self.pending() < max_pending {
            let buf = &rbuf[self.rpos..self.rend];
            if buf.is_empty() {
                self.input_done = true;
                break;
            }
            let (consumed, words) = match parse_into(buf, max_bulk, !self.sess.authed, &mut args) {
                Parsed::Incomplete => {
                    self.input_done = true;
                    if buf.len() > MAX_REQUEST {
                        tracing::warn!(client = %self.sess.addr, "RESP request over {MAX_REQUEST} bytes: closing the connection");
                        self.closing = true;
                        self.pos += (self.rend - self.rpos) as u64;
                        self.rpos = self.rend;
                    }
                    break;
                }
                Parsed::Error(e) => {
                    self.out.err(&format!("ERR {e}"));
                    self.closing = true;
                    self.pos += (self.rend - self.rpos) as u64;
                    self.rpos = self.rend;
                    ran = true;
                    continue;
                }
                Parsed::Command { consumed } => (consumed, None),
                Parsed::Inline { words, consumed } => (consumed, Some(words)),
            };
            // Records read ahead for it: wait for those still in flight.
            if self.adopt_ahead() && self.waiting > 0 {
                break;
            }
            let done = match &words {
                None if args.is_empty() => true,
                None => self.run_head(&args, ctx),
                Some(w) if w.is_empty() => true,
                Some(w) => {
                    let a: Vec<&[u8]> = w.iter().map(Vec::as_slice).collect();
                    self.run_head(&a, ctx)
                }
            };
            if !done {
                if self.waiting > 0 {
                    self.read_ahead(&rbuf, self.rpos + consumed, ctx, max_bulk);
                }
                break;
            }
            self.rpos += consumed;
            self.pos += consumed as u64;
            self.closing |= self.sess.close;
            ran |= !args.is_empty() || words.is_some_and(|w| !w.is_empty());
        }
        self.rbuf = rbuf;
        ran
    }

    /// Reads once what the socket has. Returns bytes read.
    fn fill(&mut self) -> io::Result<usize> {
        let held = self.rend - self.rpos;
        if self.rpos > 0 && self.rpos >= held {
            self.rbuf.copy_within(self.rpos..self.rend, 0);
            self.rend = held;
            self.rpos = 0;
        }
        if self.rbuf.len() < self.rend + READ_CHUNK {
            self.rbuf.resize(self.rend + READ_CHUNK, 0);
        }
        loop {
            match self
                .stream
                .read(&mut self.rbuf[self.rend..self.rend + READ_CHUNK])
            {
                Ok(0) => {
                    self.eof = true;
                    return Ok(0);
                }
                Ok(n) => {
                    self.rend += n;
                    add(&self.sess.stats.bytes_read, n as u64);
                    if n < READ_CHUNK && !self.hup && self.stream.short_read_drains() {
                        self.drained = true;
                    }
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.drained = true;
                    return Ok(0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Writes pending replies. Returns bytes written.
    fn flush(&mut self) -> io::Result<usize> {
        let total = crate::conn::io::write_out(&mut self.stream, &self.out.buf, &mut self.wpos)?;
        add(&self.sess.stats.bytes_written, total as u64);
        if self.wpos == self.out.buf.len() {
            self.out.buf.clear();
            self.wpos = 0;
            if self.out.buf.capacity() > 1 << 20 {
                self.out.buf.shrink_to(64 << 10);
            }
        } else if self.wpos > 0 && self.wpos >= self.out.buf.len() - self.wpos {
            self.out.buf.drain(..self.wpos);
            self.wpos = 0;
        }
        // A large request is done with: give its buffer back.
        if self.rbuf.len() > 4 * READ_CHUNK && self.rend == self.rpos {
            self.rpos = 0;
            self.rend = 0;
            self.rbuf.truncate(READ_CHUNK);
            self.rbuf.shrink_to(READ_CHUNK);
        }
        Ok(total)
    }
}

impl Drop for RespConn {
    fn drop(&mut self) {
        self.env.close(self.sess.id);
    }
}

/// A copy of an accepted TCP socket, for CLIENT KILL to shut.
pub fn kill_handle(s: &mio::net::TcpStream) -> Option<std::net::TcpStream> {
    use std::os::fd::AsFd;
    s.as_fd()
        .try_clone_to_owned()
        .ok()
        .map(std::net::TcpStream::from)
}
