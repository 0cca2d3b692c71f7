//! What a connection runs over: a TCP socket, a unix socket (`-s`) or TLS
//! over TCP (`-Z`), and the listening sockets that give them. The
//! connection code reads and writes a [`Stream`] the same way whatever it
//! is; the plain TCP path is one match away from the socket call.

pub mod auth;
pub mod tls;

use crate::transport::tls::{TlsSetup, TlsStream};
use mio::event::Source;
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

/// A connection's address as memcached spells it in `stats conns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(SocketAddr),
    /// A unix socket's path.
    Unix(String),
    /// A unix socket client (unnamed: memcached prints `?:<AF 0>`).
    UnixPeer,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(SocketAddr::V4(v)) => write!(f, "tcp:{v}"),
            Endpoint::Tcp(SocketAddr::V6(v)) => write!(f, "tcp6:[{}]:{}", v.ip(), v.port()),
            Endpoint::Unix(p) => write!(f, "unix:{p}"),
            Endpoint::UnixPeer => f.write_str("?:<AF 0>"),
        }
    }
}

/// An accepted socket, before the worker that owns it wraps it.
pub enum Accepted {
    Tcp { sock: TcpStream, tls: bool },
    Unix(UnixStream),
}

/// The protocol a listening socket serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// memcached's (text, meta, binary).
    Memcached,
    /// Redis's RESP (`-o redis_port`).
    Redis,
}

/// An accepted connection on its way to the worker that will own it.
pub struct Incoming {
    pub conn: Accepted,
    pub peer: Endpoint,
    pub local: Endpoint,
    /// Its listener's protocol.
    pub proto: Proto,
}

impl Incoming {
    /// Writes `msg` in clear, best effort, before the socket is closed (as
    /// memcached refuses a connection over `-c`, before any TLS).
    pub fn refuse(mut self, msg: &[u8]) {
        let _ = match &mut self.conn {
            Accepted::Tcp { sock, .. } => sock.write_all(msg),
            Accepted::Unix(s) => s.write_all(msg),
        };
    }
}

/// A connection's byte stream.
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// Wraps an accepted socket: TLS when its listener serves TLS (with
    /// `tls`, the server's configuration and output bound).
    pub fn new(a: Accepted, tls: Option<&TlsSetup>) -> io::Result<Self> {
        Ok(match (a, tls) {
            (Accepted::Tcp { sock, tls: true }, Some(t)) => {
                Stream::Tls(Box::new(TlsStream::new(sock, t)?))
            }
            (Accepted::Tcp { sock, tls: true }, None) => {
                drop(sock);
                return Err(io::Error::other("TLS listener without a TLS configuration"));
            }
            (Accepted::Tcp { sock, .. }, _) => Stream::Tcp(sock),
            (Accepted::Unix(s), _) => Stream::Unix(s),
        })
    }

    /// Whether a read that returned less than asked means the socket has
    /// nothing more (so that reading again would only find EAGAIN). Not
    /// so with TLS: one read returns at most one record's plaintext.
    #[inline]
    pub fn short_read_drains(&self) -> bool {
        !matches!(self, Stream::Tls(_))
    }

    /// Writes output the TLS layer holds (nothing for a plain socket).
    /// Returns bytes written to the socket.
    #[inline]
    pub fn push(&mut self) -> io::Result<usize> {
        match self {
            Stream::Tls(t) => t.push(),
            _ => Ok(0),
        }
    }

    /// Output held below the connection's own buffer (TLS records).
    #[inline]
    pub fn pending(&self) -> bool {
        match self {
            Stream::Tls(t) => t.pending(),
            _ => false,
        }
    }

    /// Before the socket is closed: TLS says close_notify.
    pub fn close(&mut self) {
        if let Stream::Tls(t) = self {
            t.close();
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(t) => t.sock.as_raw_fd(),
        }
    }

    fn source(&mut self) -> &mut dyn Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
            Stream::Tls(t) => &mut t.sock,
        }
    }
}

impl Read for Stream {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(t) => t.read(buf),
        }
    }
}

impl Write for Stream {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(t) => t.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push().map(|_| ())
    }
}

impl Source for Stream {
    fn register(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.source().register(r, t, i)
    }

    fn reregister(&mut self, r: &Registry, t: Token, i: Interest) -> io::Result<()> {
        self.source().reregister(r, t, i)
    }

    fn deregister(&mut self, r: &Registry) -> io::Result<()> {
        self.source().deregister(r)
    }
}

/// A bound listening socket, as the server made it (std, blocking mode
/// off); each worker gets its own copy of the fd.
pub enum Bound {
    /// A TCP listener and whether it serves TLS.
    Tcp(std::net::TcpListener, bool),
    /// A unix socket listener and its path.
    Unix(std::os::unix::net::UnixListener, String),
}

impl Bound {
    pub fn try_clone(&self) -> io::Result<Bound> {
        Ok(match self {
            Bound::Tcp(l, tls) => Bound::Tcp(l.try_clone()?, *tls),
            Bound::Unix(l, p) => Bound::Unix(l.try_clone()?, p.clone()),
        })
    }

    pub fn endpoint(&self) -> io::Result<Endpoint> {
        Ok(match self {
            Bound::Tcp(l, _) => Endpoint::Tcp(l.local_addr()?),
            Bound::Unix(_, p) => Endpoint::Unix(p.clone()),
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        match self {
            Bound::Tcp(l, _) => l.as_raw_fd(),
            Bound::Unix(l, _) => l.as_raw_fd(),
        }
    }

    pub fn set_nonblocking(&self) -> io::Result<()> {
        match self {
            Bound::Tcp(l, _) => l.set_nonblocking(true),
            Bound::Unix(l, _) => l.set_nonblocking(true),
        }
    }
}

/// A worker's listening socket.
pub enum Listener {
    Tcp(TcpListener, bool),
    Unix(UnixListener, Endpoint),
}

impl Listener {
    pub fn from_bound(b: Bound) -> Listener {
        match b {
            Bound::Tcp(l, tls) => Listener::Tcp(TcpListener::from_std(l), tls),
            Bound::Unix(l, p) => Listener::Unix(UnixListener::from_std(l), Endpoint::Unix(p)),
        }
    }

    /// Accepts one connection (TCP ones with TCP_NODELAY).
    pub fn accept(&self) -> io::Result<Incoming> {
        match self {
            Listener::Tcp(l, tls) => {
                let (sock, peer) = l.accept()?;
                let _ = sock.set_nodelay(true);
                // Reset already: dropped as one reset in the queue is.
                let local = sock
                    .local_addr()
                    .map_err(|_| io::Error::from(io::ErrorKind::ConnectionAborted))?;
                Ok(Incoming {
                    conn: Accepted::Tcp { sock, tls: *tls },
                    peer: Endpoint::Tcp(peer),
                    local: Endpoint::Tcp(local),
                    proto: Proto::Memcached,
                })
            }
            Listener::Unix(l, path) => {
                let (s, _) = l.accept()?;
                Ok(Incoming {
                    conn: Accepted::Unix(s),
                    peer: Endpoint::UnixPeer,
                    local: path.clone(),
                    proto: Proto::Memcached,
                })
            }
        }
    }

    pub fn source(&mut self) -> &mut dyn Source {
        match self {
            Listener::Tcp(l, _) => l,
            Listener::Unix(l, _) => l,
        }
    }
}

/// Binds the unix socket `path` (`-s`) with permissions `mask` (`-a`), as
/// memcached does: a socket file left at the path (by a server that did
/// not clean up) is removed first, anything else there is an error; the
/// socket is created under a umask that leaves only `mask`, so that it is
/// never more open than asked, not even briefly.
pub fn bind_unix(path: &str, mask: u32, backlog: i32) -> io::Result<Bound> {
    use std::os::unix::fs::FileTypeExt;
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if m.file_type().is_socket() {
            std::fs::remove_file(path)?;
        }
    }
    // SAFETY: umask only swaps the process's file creation mask; it is
    // set back right after the bind, at start-up before the workers run.
    #[allow(unsafe_code)]
    let old = unsafe { libc::umask(!(mask & 0o777) & 0o777) };
    let bound = std::os::unix::net::UnixListener::bind(path);
    // SAFETY: as above, restoring the mask saved.
    #[allow(unsafe_code)]
    unsafe {
        libc::umask(old)
    };
    let l = bound?;
    // std listens with a backlog of 128: listen again with -b.
    // SAFETY: listen on a socket fd we own, already listening.
    #[allow(unsafe_code)]
    if unsafe { libc::listen(l.as_raw_fd(), backlog) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Bound::Unix(l, path.to_string()))
}
