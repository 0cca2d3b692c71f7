//! One client connection: a non-blocking socket with send and receive
//! buffers, the queue of outstanding requests, and the reply matcher, which
//! parses replies with `tiercache_proto::client::parse_reply` (so the client
//! and the server agree on the wire format by construction) and matches them,
//! in order, to the requests that were sent.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::SocketAddr;

use anyhow::{bail, Context, Result};
use mio::{Interest, Registry, Token};
use tiercache_proto::client::{parse_reply, Reply};

use crate::workload::{Op, OpKind, Protocol};

/// A request on the wire, waiting for its reply.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub op: Op,
    /// When the schedule wanted it sent (ns since the run's start).
    pub intended_ns: u64,
    /// When it was handed to the socket.
    pub sent_ns: u64,
}

/// A request whose reply is complete.
#[derive(Debug, Clone, Copy)]
pub struct Done {
    pub op: Op,
    pub intended_ns: u64,
    pub sent_ns: u64,
    pub done_ns: u64,
    pub hits: u32,
    pub misses: u32,
    pub errors: u32,
    /// Value bytes received for this request.
    pub value_bytes: u64,
}

/// Matches reply units to the outstanding requests, oldest first.
#[derive(Debug)]
pub struct Matcher {
    protocol: Protocol,
    pub pending: VecDeque<Pending>,
    hits: u32,
    seen: u32,
    errors: u32,
    value_bytes: u64,
    /// The first unexpected reply line, kept for the report.
    pub first_error: Option<String>,
}

impl Matcher {
    pub fn new(protocol: Protocol) -> Self {
        Matcher {
            protocol,
            pending: VecDeque::new(),
            hits: 0,
            seen: 0,
            errors: 0,
            value_bytes: 0,
            first_error: None,
        }
    }

    fn note_error(&mut self, reply: &Reply<'_>) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(match reply {
                Reply::Line(l) => String::from_utf8_lossy(l).into_owned(),
                other => format!("{other:?}"),
            });
        }
    }

    /// Feeds one reply unit; returns the request it completed, if any.
    pub fn on_reply(&mut self, reply: Reply<'_>, now_ns: u64) -> Result<Option<Done>> {
        let Some(front) = self.pending.front().copied() else {
            bail!("server sent a reply with no request outstanding: {reply:?}");
        };
        let complete = match (front.op.kind, self.protocol) {
            (OpKind::Get, Protocol::Classic) => match reply {
                Reply::Value { data, .. } => {
                    self.hits += 1;
                    self.value_bytes += data.len() as u64;
                    if self.hits > front.op.nkeys {
                        bail!("server returned more values than keys asked for");
                    }
                    false
                }
                Reply::Line(b"END") => true,
                other => {
                    self.note_error(&other);
                    true
                }
            },
            (OpKind::Get, Protocol::Meta) => {
                match reply {
                    Reply::Meta {
                        code: [b'V', b'A'],
                        data,
                        ..
                    } => {
                        self.hits += 1;
                        self.value_bytes += data.map_or(0, |d| d.len() as u64);
                    }
                    Reply::Meta {
                        code: [b'E', b'N'], ..
                    } => {}
                    other => self.note_error(&other),
                }
                self.seen += 1;
                self.seen == front.op.nkeys
            }
            (OpKind::Set, Protocol::Classic) => {
                if !matches!(reply, Reply::Line(b"STORED")) {
                    self.note_error(&reply);
                }
                true
            }
            (OpKind::Set, Protocol::Meta) => {
                if !matches!(
                    reply,
                    Reply::Meta {
                        code: [b'H', b'D'],
                        ..
                    }
                ) {
                    self.note_error(&reply);
                }
                true
            }
        };
        if !complete {
            return Ok(None);
        }
        self.pending.pop_front();
        let (hits, errors) = (self.hits, self.errors);
        let done = Done {
            op: front.op,
            intended_ns: front.intended_ns,
            sent_ns: front.sent_ns,
            done_ns: now_ns,
            hits: if front.op.kind == OpKind::Get {
                hits
            } else {
                0
            },
            // in a classic get, an error line ends the reply: the keys not
            // returned are errors, not misses
            misses: if front.op.kind == OpKind::Get && errors == 0 {
                front.op.nkeys - hits
            } else {
                0
            },
            errors: if errors == 0 {
                0
            } else if front.op.kind == OpKind::Get && self.protocol == Protocol::Classic {
                front.op.nkeys - hits
            } else {
                errors
            },
            value_bytes: self.value_bytes,
        };
        self.hits = 0;
        self.seen = 0;
        self.errors = 0;
        self.value_bytes = 0;
        Ok(Some(done))
    }
}

/// One connection to the server.
pub struct Conn {
    pub stream: mio::net::TcpStream,
    pub token: Token,
    rbuf: Vec<u8>,
    rstart: usize,
    rend: usize,
    wbuf: Vec<u8>,
    wpos: usize,
    want_write: bool,
    pub matcher: Matcher,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

impl Conn {
    /// Connects (blocking) with `TCP_NODELAY`.
    pub fn connect_std(addr: SocketAddr) -> Result<std::net::TcpStream> {
        let s = std::net::TcpStream::connect(addr).with_context(|| format!("connect {addr}"))?;
        s.set_nodelay(true)?;
        Ok(s)
    }

    /// Takes over a connected socket and registers it for reading.
    pub fn from_std(
        s: std::net::TcpStream,
        token: Token,
        registry: &Registry,
        protocol: Protocol,
    ) -> Result<Self> {
        s.set_nonblocking(true)?;
        let mut stream = mio::net::TcpStream::from_std(s);
        registry.register(&mut stream, token, Interest::READABLE)?;
        Ok(Conn {
            stream,
            token,
            rbuf: vec![0; 256 * 1024],
            rstart: 0,
            rend: 0,
            wbuf: Vec::with_capacity(64 * 1024),
            wpos: 0,
            want_write: false,
            matcher: Matcher::new(protocol),
            bytes_sent: 0,
            bytes_received: 0,
        })
    }

    /// The send buffer, to encode requests into (then call [`Conn::flush`]).
    #[inline]
    pub fn wbuf(&mut self) -> &mut Vec<u8> {
        &mut self.wbuf
    }

    #[inline]
    pub fn outstanding(&self) -> usize {
        self.matcher.pending.len()
    }

    /// Bytes encoded but not yet accepted by the socket.
    #[inline]
    pub fn unsent(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Writes as much as the socket takes; asks for a writable event if the
    /// socket is full.
    pub fn flush(&mut self, registry: &Registry) -> Result<()> {
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => bail!("server closed the connection while we were writing"),
                Ok(n) => {
                    self.wpos += n;
                    self.bytes_sent += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if !self.want_write {
                        registry.reregister(
                            &mut self.stream,
                            self.token,
                            Interest::READABLE | Interest::WRITABLE,
                        )?;
                        self.want_write = true;
                    }
                    return Ok(());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("write to server"),
            }
        }
        self.wbuf.clear();
        self.wpos = 0;
        if self.want_write {
            registry.reregister(&mut self.stream, self.token, Interest::READABLE)?;
            self.want_write = false;
        }
        Ok(())
    }

    /// Reads everything the socket has and hands each completed request to
    /// `on_done`. Uses edge-triggered readiness: a short read means the
    /// socket is drained, so no extra `read` just to see `EAGAIN`.
    pub fn read(&mut self, now_ns: u64, mut on_done: impl FnMut(&Done)) -> Result<usize> {
        let mut completed = 0;
        loop {
            if self.rend == self.rbuf.len() {
                if self.rstart > 0 {
                    self.rbuf.copy_within(self.rstart..self.rend, 0);
                    self.rend -= self.rstart;
                    self.rstart = 0;
                } else {
                    // one reply larger than the buffer (a big multiget value)
                    let n = self.rbuf.len() * 2;
                    self.rbuf.resize(n, 0);
                }
            }
            let want = self.rbuf.len() - self.rend;
            match self.stream.read(&mut self.rbuf[self.rend..]) {
                Ok(0) => {
                    if self.matcher.pending.is_empty() {
                        bail!("server closed the connection");
                    }
                    bail!(
                        "server closed the connection with {} requests outstanding",
                        self.matcher.pending.len()
                    );
                }
                Ok(n) => {
                    self.rend += n;
                    self.bytes_received += n as u64;
                    completed += self.parse(now_ns, &mut on_done)?;
                    if n < want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).context("read from server"),
            }
        }
        Ok(completed)
    }

    fn parse(&mut self, now_ns: u64, on_done: &mut impl FnMut(&Done)) -> Result<usize> {
        let mut completed = 0;
        while self.rstart < self.rend {
            match parse_reply(&self.rbuf[self.rstart..self.rend]) {
                Ok(None) => break,
                Ok(Some((reply, used))) => {
                    let done = self.matcher.on_reply(reply, now_ns)?;
                    self.rstart += used;
                    if let Some(d) = done {
                        completed += 1;
                        on_done(&d);
                    }
                }
                Err(e) => bail!("unparsable reply from server: {e:?}"),
            }
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        Ok(completed)
    }

    pub fn deregister(&mut self, registry: &Registry) {
        let _ = registry.deregister(&mut self.stream);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(m: &mut Matcher, bytes: &[u8]) -> Vec<Done> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some((r, used)) = parse_reply(&bytes[pos..]).unwrap() {
            pos += used;
            if let Some(d) = m.on_reply(r, 99).unwrap() {
                out.push(d);
            }
        }
        assert_eq!(pos, bytes.len());
        out
    }

    fn push(m: &mut Matcher, kind: OpKind, nkeys: u32) {
        m.pending.push_back(Pending {
            op: Op { kind, nkeys },
            intended_ns: 1,
            sent_ns: 2,
        });
    }

    #[test]
    fn classic_multiget_hits_and_misses() {
        let mut m = Matcher::new(Protocol::Classic);
        push(&mut m, OpKind::Get, 3);
        push(&mut m, OpKind::Set, 1);
        push(&mut m, OpKind::Get, 1);
        let d = feed(
            &mut m,
            b"VALUE a 0 2\r\nhi\r\nVALUE c 0 3\r\nabc\r\nEND\r\nSTORED\r\nEND\r\n",
        );
        assert_eq!(d.len(), 3);
        assert_eq!((d[0].hits, d[0].misses, d[0].errors), (2, 1, 0));
        assert_eq!(d[0].value_bytes, 5);
        assert_eq!((d[1].hits, d[1].errors), (0, 0));
        assert_eq!((d[2].hits, d[2].misses), (0, 1));
        assert_eq!(d[2].done_ns, 99);
        assert!(m.pending.is_empty());
    }

    #[test]
    fn meta_gets_and_errors() {
        let mut m = Matcher::new(Protocol::Meta);
        push(&mut m, OpKind::Get, 2);
        push(&mut m, OpKind::Set, 1);
        push(&mut m, OpKind::Set, 1);
        let d = feed(
            &mut m,
            b"VA 2\r\nhi\r\nEN\r\nHD\r\nSERVER_ERROR out of memory storing object\r\n",
        );
        assert_eq!(d.len(), 3);
        assert_eq!((d[0].hits, d[0].misses), (1, 1));
        assert_eq!(d[1].errors, 0);
        assert_eq!(d[2].errors, 1);
        assert_eq!(
            m.first_error.as_deref(),
            Some("SERVER_ERROR out of memory storing object")
        );
    }

    #[test]
    fn stray_reply_is_an_error() {
        let mut m = Matcher::new(Protocol::Classic);
        let (r, _) = parse_reply(b"END\r\n").unwrap().unwrap();
        assert!(m.on_reply(r, 0).is_err());
    }
}
