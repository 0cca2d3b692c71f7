//! One client connection: a bounded read buffer, an output buffer, and the
//! loop that parses pipelined requests and answers them in order, writing all
//! replies of a batch with one system call. A request that waits for flash
//! reads stays at the head of the input; the gets pipelined behind it have
//! their records read meanwhile (`flights`), so one connection keeps many
//! device reads in flight.
//!
//! Memory bound per connection (issue 19: clients that do not read made the
//! server hold 7 MiB of replies each). Let P be `max_pending_output`
//! (default 64 KiB), I the item size limit (`-I`, default 1 MiB), L the
//! longest multiget line (`max_get_line`, default 1 MiB) and R = 64 KiB:
//!
//! - output: replies are copied into the output buffer. No request is
//!   started, and a multiget answers no further key, while P bytes or more
//!   wait to be written (`Attempt::out_limit`), so at most P + one value (I)
//!   wait. Once over P the connection is stalled (`stats`
//!   `conn_output_stalls` counts each time) until the client has taken it
//!   down to P/2: neither its input is read nor its requests parsed
//!   meanwhile. The buffer is compacted as it is written, so it stays under
//!   about twice P + I. With a flash tier a multiget's keys are read
//!   [`GET_CHUNK_FLASH`] at a time (their reads go to the device together),
//!   and those records are held too (at most that many values; reads ahead
//!   for the requests behind a waiting one are bounded in `flights`).
//! - input: 16 to 64 KiB (R), or the request at the head when it is longer
//!   (a data block up to I plus its line, or a multiget line up to L + 1),
//!   and at most twice that while it is moved to the front.
//!
//! So a connection holds at most about 2 (P + I) + 2 max(I, L) bytes of
//! buffers (6.3 MiB at the defaults, most of it only while it sends a large
//! item or multiget line or is sent large values); a client that pipelines
//! gets of 100 KB values and does not read holds about P + 100 KB + R
//! (measured: 20 such clients, 6.1 MiB of RSS in all).
//! memcached answers from the item itself (no copy), so such a client
//! costs it almost nothing; tiercache's cost is that copy, bounded.
//!
//! A peer that closes, resets or half-closes mid-request is seen even when
//! its FIN or RST came with the last bytes in one edge-triggered event: the
//! socket is then read to the end instead of stopping at a short read.

use crate::config::Protocol;
use crate::conn::flights::Flights;
use crate::conn::prefetch::{prepare, Prep};
use crate::ctx::{Attempt, Ctx, Outcome};
use crate::protocol::binary;
use crate::protocol::execute;
use crate::stats::add;
use crate::transport::auth;
use crate::transport::Stream;
use tiercache_engine::command::Wait;
use tiercache_engine::flash::{Fetched, ReadReq};
use tiercache_proto::{parse, Limits, Parsed, Request};

pub mod client;
pub mod flights;
mod io;
mod multiget;
pub mod prefetch;
mod reads;
pub mod resp;
use multiget::{get_chunk, is_get_line};
use reads::read_op;
pub use reads::{split_token, token_base};

/// Reads a command may ask for again when a key's record moved on flash
/// meanwhile (after them, a get misses, and a change drops the key's
/// unread records: a miss for every later command). A multiget needs a
/// second read when a key appears twice and its first hit moved it (a
/// capacity hit promoted into the fast class: flash_fuzz.py, seed 12).
const MAX_REREADS: u8 = 3;

const READ_CHUNK: usize = 64 * 1024;
/// Keys of a multiget run at once with a flash tier: their flash reads go to
/// the device together. Without a flash tier a multiget runs at once and
/// stops only at the output bound.
pub const GET_CHUNK_FLASH: usize = 32;
/// Sent before closing a connection whose multiget line is longer than
/// `max_get_line` (memcached 1.6.18 has no limit and keeps reading).
const LINE_TOO_LONG: &[u8] = b"CLIENT_ERROR line too long\r\n";

pub struct Conn {
    /// TCP, unix socket or TLS (`transport.rs`).
    pub stream: Stream,
    /// Authenticated, or no auth file (`-Y`, `auth.rs`).
    authed: bool,
    /// Binary SASL (`-S`, `sasl.rs`).
    sasl: crate::protocol::sasl::Session,
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
    /// `wbuf[..due]` is due: replies memcached would have written out
    /// already (`Request::makes_replies_due`), which a request that drops
    /// pending replies (`Request::drops_pending`) must keep.
    due: usize,
    /// Bytes of a refused data block still to discard.
    swallow: usize,
    /// The text form of the binary request at the head (`binary.rs`).
    bin_text: Vec<u8>,
    /// Times the head request for the latency histograms.
    timer: crate::admin::metrics::HeadTimer,
    /// Buffer length the current partial request needs.
    need: usize,
    /// Bytes asked of one read: 16 KiB (memcached's read size), doubled up
    /// to READ_CHUNK each time a read fills it, so that a connection that
    /// sends little keeps a small buffer (500 churning connections held
    /// 64 KiB of zeroed buffer each).
    read_size: usize,
    /// Peer closed its side.
    eof: bool,
    /// The last event said the peer closed or reset: read to the end, a
    /// short read does not mean that nothing more will come.
    hup: bool,
    /// Output went over the bound and has not drained to half of it yet.
    stalled: bool,
    /// Offset in the head multiget's keys of the first key not answered.
    get_at: usize,
    /// Close once output is flushed.
    pub closing: bool,
    /// Why it closed, as `watch connevents` says it: `normal` (the client
    /// closed or quit, or a request made the server hang up) unless the
    /// socket failed (`error`).
    pub close_reason: &'static str,
    /// The last parse found no complete request in the input (it is empty,
    /// or holds the start of one): at EOF nothing more will run.
    input_done: bool,
    /// Input stream offset of `rbuf[rpos]`: the request at the head.
    pos: u64,
    /// Flash records of the head request and of gets read ahead of it.
    flights: Flights,
    /// The head request waits for the flash tier to write (back-pressure).
    pub busy: bool,
    /// Input offset of the request whose pipelined followers already asked
    /// the crash journal for their tombstones (once per waiting request).
    journal_ahead_at: Option<usize>,
    /// High bits of this connection's read tokens (worker slot and a serial).
    token_base: u64,
    reads: Vec<ReadReq>,
    /// Set by `watch`: the connection is a log stream now (`watch.rs`).
    watcher: Option<std::sync::Arc<crate::admin::watch::Watcher>>,
}

/// What the worker should do with the connection after an event.
#[derive(Debug, PartialEq, Eq)]
pub enum State {
    Open,
    Closed,
    Shutdown,
    /// `watch` started: hand the socket to the watch thread
    /// ([`Conn::into_watcher`]).
    Watch,
}

impl Conn {
    pub fn new(stream: Stream, token_base: u64, authed: bool) -> Conn {
        Conn {
            stream,
            authed,
            sasl: Default::default(),
            rbuf: Vec::new(),
            rpos: 0,
            rend: 0,
            drained: false,
            wbuf: Vec::with_capacity(4096),
            wpos: 0,
            due: 0,
            swallow: 0,
            bin_text: Vec::new(),
            timer: Default::default(),
            need: 0,
            read_size: 16 * 1024,
            eof: false,
            hup: false,
            stalled: false,
            get_at: 0,
            closing: false,
            close_reason: "normal",
            input_done: true,
            pos: 0,
            flights: Flights::default(),
            busy: false,
            journal_ahead_at: None,
            token_base,
            reads: Vec::new(),
            watcher: None,
        }
    }

    fn pending_output(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Whether more output may be made: under the bound, or, once over it,
    /// back under half of it (so that a slow reader is not served, and its
    /// request parsed again, a few bytes at a time).
    fn may_produce(&self, max_pending: usize) -> bool {
        let p = self.pending_output();
        if self.stalled {
            p <= max_pending / 2
        } else {
            p < max_pending
        }
    }

    /// Handles readiness: read, execute, write, until nothing more can be
    /// done. `readable`: a socket event came, so there may be new data;
    /// otherwise (flash reads completed, back-pressure lifted) the socket is
    /// read only if it was not drained, sparing a recv that finds nothing.
    /// `hup`: the event said the peer closed its side or reset.
    pub fn drive(
        &mut self,
        ctx: &Ctx<'_>,
        limits: &Limits,
        max_pending: usize,
        readable: bool,
        hup: bool,
    ) -> State {
        if readable {
            self.drained = false;
        }
        self.hup |= hup;
        loop {
            let mut progress = false;
            if !self.eof && !self.closing && !self.drained && self.may_produce(max_pending) {
                match self.fill(ctx) {
                    Ok(n) => progress |= n > 0,
                    Err(_) => {
                        self.close_reason = "error";
                        return State::Closed;
                    }
                }
            }
            match self.process(ctx, limits, max_pending) {
                Some(Outcome::Shutdown) => {
                    let _ = self.flush();
                    return State::Shutdown;
                }
                Some(Outcome::Watch(_)) if self.watcher.is_some() => return State::Watch,
                Some(_) => progress = true,
                None => {}
            }
            match self.flush() {
                Ok(n) => {
                    add(&ctx.stats.bytes_written, n as u64);
                    progress |= n > 0;
                }
                Err(_) => {
                    self.close_reason = "error";
                    return State::Closed;
                }
            }
            let p = self.pending_output();
            if p >= max_pending && !self.stalled {
                self.stalled = true;
                add(&ctx.stats.conn_output_stalls, 1);
            } else if self.stalled && p <= max_pending / 2 {
                self.stalled = false;
                progress = true;
            }
            // A peer that closed its side still gets the replies to every
            // complete request it sent: not while the head request waits for
            // flash reads or the flash tier (its completion or the waker
            // drives us again), nor while requests wait for the output to
            // drain.
            let waiting = self.busy || self.flights.head_waiting(self.pos) > 0;
            let eof_done = self.eof && !waiting && self.input_done;
            if (self.closing || eof_done) && self.pending_output() == 0 && !self.stream.pending() {
                return State::Closed;
            }
            if !progress {
                return State::Open;
            }
        }
    }

    /// The head request (or `n` discarded bytes) is done with.
    fn consume(&mut self, n: usize) {
        self.rpos += n;
        self.pos += n as u64;
        self.get_at = 0;
    }

    /// Parses and executes buffered requests. Returns the last outcome, or
    /// None when nothing was executed.
    fn process(&mut self, ctx: &Ctx<'_>, limits: &Limits, max_pending: usize) -> Option<Outcome> {
        // Requests borrow the input while the connection changes: the
        // buffer is held apart meanwhile (moving a Vec allocates nothing).
        let rbuf = std::mem::take(&mut self.rbuf);
        let mut text = std::mem::take(&mut self.bin_text);
        let last = self.process_in(&rbuf, &mut text, ctx, limits, max_pending);
        self.rbuf = rbuf;
        self.bin_text = text;
        last
    }

    fn process_in(
        &mut self,
        rbuf: &[u8],
        bin_text: &mut Vec<u8>,
        ctx: &Ctx<'_>,
        limits: &Limits,
        max_pending: usize,
    ) -> Option<Outcome> {
        let mut last = None;
        // Where the last reply before authentication starts (`auth.rs`).
        let mut auth_reply = None;
        // memcached writes out its replies whenever its input runs out.
        self.due = self.wbuf.len();
        self.input_done = false;
        'requests: while !self.closing && self.may_produce(max_pending) && !self.busy {
            if self.flights.head_waiting(self.pos) > 0 {
                // New input may have come in behind the waiting head.
                self.read_ahead(rbuf, ctx, limits, self.rpos);
                break;
            }
            if self.swallow > 0 {
                self.discard_swallowed();
                if self.swallow > 0 {
                    self.input_done = true;
                    break;
                }
            }
            let buf = &rbuf[self.rpos..self.rend];
            if buf.is_empty() {
                self.input_done = true;
                break;
            }
            let sasl = ctx.shared.config.server.sasl;
            if let (false, Some(a), false) = (self.authed, &ctx.shared.auth, sasl) {
                let mark = self.wbuf.len();
                match auth::step(buf, &mut self.wbuf, a) {
                    auth::Step::Need(n) => self.need = n,
                    auth::Step::Answered { consumed, authed } => {
                        self.wbuf.drain(*auth_reply.get_or_insert(mark)..mark);
                        self.consume(consumed);
                        self.authed = authed;
                        last = Some(Outcome::Continue);
                        continue;
                    }
                    auth::Step::Close => (self.closing, last) = (true, Some(Outcome::Close)),
                }
                self.input_done = true;
                break;
            }
            // A binary request runs as the text request that does the same
            // (`binary.rs`); its reply is encoded back below. With `-Y`,
            // as in memcached, there is no binary protocol; with `-S`
            // there is nothing else, and SASL comes first (`sasl.rs`).
            // `-B ascii` too reads a 0x80 byte as text; `-B binary` closes
            // a connection whose request lacks the magic, unanswered, as
            // memcached ("Invalid magic").
            let mut frame = None;
            let proto = ctx.shared.config.binding_protocol();
            let binary_on = buf[0] == binary::REQ_MAGIC && proto != Protocol::Ascii;
            if proto == Protocol::Binary && !binary_on && !sasl {
                // memcached reads a whole header before it looks at the magic.
                if buf.len() < binary::HEADER_LEN {
                    self.need = binary::HEADER_LEN;
                    self.input_done = true;
                    break;
                }
                (self.closing, last) = (true, Some(Outcome::Close));
                self.consume(self.rend - self.rpos);
                break;
            }
            let parsed = if binary_on || sasl {
                let gate = match &ctx.shared.auth {
                    Some(a) if sasl => {
                        crate::protocol::sasl::gate(buf, &mut self.wbuf, a, &mut self.sasl)
                    }
                    _ => None,
                };
                let step = match gate {
                    Some(step) => step,
                    None => binary::translate(buf, limits, bin_text, &mut self.wbuf, ctx),
                };
                match step {
                    binary::Step::Parsed(f, p) => {
                        frame = Some(f);
                        p
                    }
                    binary::Step::Need(n) => {
                        self.need = n;
                        self.input_done = true;
                        break;
                    }
                    binary::Step::Answered {
                        consumed,
                        close,
                        skip,
                    } => {
                        self.consume(consumed);
                        self.swallow = skip;
                        last = Some(Outcome::Continue);
                        if close {
                            self.closing = true;
                            last = Some(Outcome::Close);
                            break;
                        }
                        continue;
                    }
                }
            } else {
                parse(buf, limits)
            };
            match parsed {
                Parsed::Incomplete { need } => {
                    self.need = match need {
                        Some(n) => n,
                        // A line without its newline fills the buffer: only
                        // a multiget line may be longer (up to max_get_line;
                        // one byte more and the parser refuses it).
                        None if buf.len() >= READ_CHUNK => limits.max_get_line + 1,
                        None => 0,
                    };
                    self.input_done = true;
                    break;
                }
                Parsed::Close => {
                    if buf.len() > limits.max_get_line && is_get_line(buf) {
                        self.wbuf.extend_from_slice(LINE_TOO_LONG);
                    }
                    self.closing = true;
                    self.consume(self.rend - self.rpos);
                    last = Some(Outcome::Close);
                    break;
                }
                Parsed::Request { request, consumed } => {
                    if request.drops_pending() {
                        self.wbuf.truncate(self.wpos.max(self.due));
                    }
                    let makes_due = request.makes_replies_due();
                    let made = self.wbuf.len();
                    let command = crate::admin::metrics::command(&request);
                    self.timer.run(self.pos);
                    let Some(outcome) =
                        self.run_head(rbuf, request, consumed, ctx, limits, max_pending)
                    else {
                        // Waits, or a multiget paused at the output bound.
                        if self.wbuf.len() != made {
                            last = Some(Outcome::Continue);
                        }
                        break 'requests;
                    };
                    self.timer.done(
                        ctx.stats,
                        ctx.shared.metrics.as_ref(),
                        command,
                        &self.wbuf[made..],
                    );
                    if let Some(f) = &frame {
                        let text = self.wbuf.split_off(made);
                        binary::encode(&mut self.wbuf, f, &text);
                    }
                    self.flights.done(self.pos);
                    self.consume(consumed);
                    self.need = 0;
                    if makes_due {
                        self.due = self.wbuf.len();
                    }
                    last = Some(outcome);
                    match outcome {
                        Outcome::Continue | Outcome::Wait(_) | Outcome::Stopped { .. } => {}
                        Outcome::Close => self.closing = true,
                        Outcome::Shutdown => return last,
                        Outcome::Watch(flags) => {
                            // Nothing after it runs, as in memcached.
                            if self.start_watch(flags, made, ctx) {
                                return last;
                            }
                        }
                    }
                }
                Parsed::Swallow {
                    request,
                    consumed,
                    skip,
                } => {
                    // A refused store removes the key's old item first,
                    // which may wait for the crash journal: then it stays
                    // at the head, data block and all, and runs again.
                    let mark = self.wbuf.len();
                    if let Outcome::Wait(_) =
                        execute(request, &mut self.wbuf, ctx, &Attempt::plain())
                    {
                        self.wbuf.truncate(mark);
                        self.wait_busy(rbuf, ctx, limits, consumed);
                        break;
                    }
                    self.consume(consumed);
                    self.swallow = skip;
                    self.need = 0;
                    last = Some(Outcome::Continue);
                }
            }
        }
        last
    }

    /// `watch`: refused while replies are pending, as memcached refuses it
    /// when other commands were pipelined before it, or when 20 watchers
    /// run; else the connection is a watcher from now on (true).
    fn start_watch(&mut self, flags: u8, made: usize, ctx: &Ctx<'_>) -> bool {
        let refusal: &[u8] = if made > self.wpos {
            b"ERROR cannot pipeline other commands before watch\r\n"
        } else {
            match ctx.shared.watch.add(flags) {
                Ok(w) => {
                    self.watcher = Some(w);
                    return true;
                }
                Err(_) => b"WATCHER_TOO_MANY log watcher limit reached\r\n",
            }
        };
        self.wbuf.extend_from_slice(refusal);
        false
    }

    /// A watching connection's watcher and socket, for the watch thread.
    pub fn into_watcher(self) -> Option<(std::sync::Arc<crate::admin::watch::Watcher>, Stream)> {
        Some((self.watcher?, self.stream))
    }

    /// Runs the request at the head of the input until it is done (its
    /// outcome), or until it waits for flash reads or for the flash tier to
    /// catch up (None: it stays at the head and runs again, or resumes, when
    /// the wait is over). A multiget runs `chunk` keys at a time from the
    /// first key not answered (`get_at`), and resumes there after a wait.
    fn run_head(
        &mut self,
        rbuf: &[u8],
        request: Request<'_>,
        consumed: usize,
        ctx: &Ctx<'_>,
        limits: &Limits,
        max_pending: usize,
    ) -> Option<Outcome> {
        // Keys of a multiget run at once: with a flash tier, those whose
        // reads go out together; without, all (it stops at the bound).
        let chunk = if ctx.reader.is_some() {
            GET_CHUNK_FLASH
        } else {
            usize::MAX
        };
        let whole = match &request {
            Request::Get(g) => Some(g.clone()),
            _ => None,
        };
        let max_runs = MAX_REREADS;
        let head = self.pos;
        let mut request = Some(request);
        loop {
            let (req, sub_at, more) = match &whole {
                Some(g) => {
                    let (sub, at, more) = get_chunk(g, self.get_at, chunk);
                    (Request::Get(sub), at, more)
                }
                None => {
                    let req = request.take().expect("request");
                    // A key dump stopped at the output bound runs again
                    // from its cursor (`get_at`).
                    if matches!(req, Request::LruCrawler(_)) {
                        request = Some(req.clone());
                    }
                    (req, 0, None)
                }
            };
            let empty = Fetched::default();
            let (fetched, may_read) = match ctx.reader {
                Some(reader) => {
                    let flight = self.flights.head(head);
                    let reruns = flight.reruns;
                    match prepare(&req, ctx, &mut flight.fetched, &mut self.reads, reruns > 0) {
                        Prep::Ready => {}
                        Prep::Wait => {
                            self.timer.flash_read();
                            let mut r = reader.borrow_mut();
                            let base = self.token_base | u64::from(flight.id) << 16;
                            for rr in self.reads.drain(..) {
                                flight.waiting += 1;
                                r.submit(read_op(base, rr));
                            }
                            drop(r);
                            self.read_ahead(rbuf, ctx, limits, self.rpos + consumed);
                            return None;
                        }
                    }
                    let asks = crate::conn::prefetch::asks_for_reads(&req);
                    (&self.flights.head(head).fetched, asks && reruns < max_runs)
                }
                None => (&empty, false),
            };
            // A request that may ask for reads may run again: keep a copy
            // (a multiget is rebuilt from its keys).
            let again = (may_read && whole.is_none()).then(|| req.clone());
            let attempt = Attempt {
                fetched,
                may_read,
                out_limit: self.wpos + max_pending,
                resume: if whole.is_none() { self.get_at } else { 0 },
            };
            let mark = self.wbuf.len();
            let outcome = execute(req, &mut self.wbuf, ctx, &attempt);
            match outcome {
                Outcome::Wait(Wait::Busy) => {
                    // Changed nothing: drop the reply, run it again later.
                    self.wbuf.truncate(mark);
                    self.wait_busy(rbuf, ctx, limits, consumed);
                    return None;
                }
                Outcome::Wait(Wait::Reads) => {
                    self.wbuf.truncate(mark);
                    self.count_rerun(head);
                    request = Some(again.expect("asks for reads only when it may"));
                }
                Outcome::Stopped { at, wait } => {
                    // The keys before `at` are answered: resume there.
                    self.get_at = sub_at + at;
                    match wait {
                        Some(Wait::Busy) => {
                            self.wait_busy(rbuf, ctx, limits, consumed);
                            return None;
                        }
                        Some(Wait::Reads) => self.count_rerun(head),
                        None => {
                            self.flights.done(head);
                            if !self.may_produce(max_pending) {
                                return None;
                            }
                        }
                    }
                }
                done => match more {
                    // The chunk is answered and keys remain: its END goes.
                    Some(next) => {
                        if self.wbuf.ends_with(b"END\r\n") {
                            self.wbuf.truncate(self.wbuf.len() - 5);
                        }
                        self.flights.done(head);
                        self.get_at = next;
                        if !self.may_produce(max_pending) {
                            return None;
                        }
                    }
                    None => return Some(done),
                },
            }
        }
    }
}
