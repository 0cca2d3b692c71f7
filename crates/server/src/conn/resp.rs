//! The Redis port's connections: an accept thread per server over the
//! RESP listeners, and a thread per connection with blocking socket I/O.
//! Each connection reads what the client sent, answers every complete
//! request in it (pipelining: one write per batch, or every 64 KiB), and
//! checks the server's stop and CLIENT KILL between reads. Its flash reads
//! run on its own thread ([`crate::protocol::resp::db`]), so a slow device
//! never holds up a memcached worker.
//!
//! Bounds: a bulk string at most the item size limit (`-I`, at least
//! 1 MiB), an unfinished request at most [`MAX_REQUEST`] (then the
//! connection is closed, as Redis closes a client over its query buffer
//! limit), replies written out every [`FLUSH_AT`] bytes (a client that
//! never reads blocks its own thread, holding at most that much).
//! Connections count against `-c` (maxclients).

use crate::protocol::resp::cmd::dispatch;
use crate::protocol::resp::codec::{parse, Frame};
use crate::protocol::resp::reply::Out;
use crate::protocol::resp::Env;
use crate::shared::Shared;
use crate::stats::{add, WorkerStats};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest unfinished request held.
pub const MAX_REQUEST: usize = 64 << 20;
/// Replies written out once this many bytes wait.
const FLUSH_AT: usize = 64 << 10;
/// How often a connection waiting for input checks for a stop.
const POLL: Duration = Duration::from_millis(100);

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

/// Starts the accept thread; it returns once the server stops and every
/// connection it started has ended.
pub fn start(
    shared: Arc<Shared>,
    listeners: Vec<TcpListener>,
    stats: Arc<WorkerStats>,
) -> std::io::Result<JoinHandle<()>> {
    let env = Arc::new(Env::new(shared, stats));
    std::thread::Builder::new()
        .name("resp-accept".into())
        .spawn(move || accept_loop(env, listeners))
}

fn accept_loop(env: Arc<Env>, listeners: Vec<TcpListener>) {
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    while !env.shared.shutdown.load(Ordering::Relaxed) {
        let mut any = false;
        for l in &listeners {
            while let Ok((s, peer)) = l.accept() {
                any = true;
                conns.retain(|c| !c.is_finished());
                let max = env.shared.config.server.max_connections;
                if env.clients().len() >= max {
                    let mut s = s;
                    let _ = s.write_all(b"-ERR max number of clients reached\r\n");
                    continue;
                }
                let e = env.clone();
                match std::thread::Builder::new()
                    .name("resp-conn".into())
                    .spawn(move || serve(&e, s, peer))
                {
                    Ok(h) => conns.push(h),
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot start a RESP connection thread")
                    }
                }
            }
        }
        if !any {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for c in conns {
        let _ = c.join();
    }
}

/// A connection's byte stream: the socket, or TLS over it.
trait Io: Read + Write {}
impl<T: Read + Write> Io for T {}

fn serve(env: &Env, tcp: TcpStream, peer: SocketAddr) {
    let _ = tcp.set_nonblocking(false);
    let _ = tcp.set_nodelay(true);
    let _ = tcp.set_read_timeout(Some(POLL));
    let _ = tcp.set_write_timeout(Some(POLL));
    let laddr = tcp.local_addr().map(|a| a.to_string()).unwrap_or_default();
    let handle = tcp.try_clone().ok();
    // With -Z the RESP port speaks TLS too (rustls, blocking over the socket).
    let mut s: Box<dyn Io> = match &env.shared.tls {
        Some(t) => match rustls::ServerConnection::new(t.current()) {
            Ok(c) => Box::new(rustls::StreamOwned::new(c, tcp)),
            Err(e) => {
                tracing::warn!(error = %e, "RESP: cannot start TLS");
                return;
            }
        },
        None => Box::new(tcp),
    };
    let (mut sess, kill) = env.open(handle, peer.to_string(), laddr);
    let stop = || env.shared.shutdown.load(Ordering::Relaxed) || kill.load(Ordering::Relaxed);
    let max_bulk = env.shared.config.cache.max_item_size.max(1 << 20);
    let mut rbuf: Vec<u8> = Vec::new();
    let mut out = Out::default();
    let mut chunk = vec![0u8; 64 << 10];
    // What the client list shows was last updated with (name, RESP3): it
    // is updated when they change, not on every request (one lock for all
    // connections).
    let mut shown = (Vec::new(), false);
    'conn: loop {
        if stop() {
            break;
        }
        let n = match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if timed_out(&e) => continue,
            Err(_) => break,
        };
        rbuf.extend_from_slice(&chunk[..n]);
        add(&env.stats.bytes_read, n as u64);
        let mut pos = 0;
        let mut close = false;
        while pos < rbuf.len() && !close {
            match parse(&rbuf[pos..], max_bulk, !sess.authed) {
                Frame::Incomplete => break,
                Frame::Error(e) => {
                    out.err(&format!("ERR {e}"));
                    close = true;
                }
                Frame::Command { args, consumed } => {
                    pos += consumed;
                    if args.is_empty() {
                        continue;
                    }
                    let args: Vec<&[u8]> = args.iter().map(|a| &**a).collect();
                    dispatch(&args, &mut out, &mut sess, env);
                    close = sess.close;
                    if out.buf.len() >= FLUSH_AT {
                        add(&env.stats.bytes_written, out.buf.len() as u64);
                        if send(&mut s, &out.buf, &stop).is_err() {
                            break 'conn;
                        }
                        out.buf.clear();
                    }
                }
            }
        }
        rbuf.drain(..pos);
        if !out.buf.is_empty() {
            add(&env.stats.bytes_written, out.buf.len() as u64);
            if send(&mut s, &out.buf, &stop).is_err() {
                break;
            }
            out.buf.clear();
        }
        if shown.0 != sess.name || shown.1 != out.resp3 {
            env.update(&sess, out.resp3);
            shown = (sess.name.clone(), out.resp3);
        }
        if close {
            break;
        }
        if rbuf.len() > MAX_REQUEST {
            tracing::warn!(client = %peer, "RESP request over {MAX_REQUEST} bytes: closing the connection");
            break;
        }
    }
    env.close(sess.id);
}

/// Whether an I/O error is the socket's timeout (try again).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
    )
}

/// Writes replies out (through TLS's buffer, when there is one). A client
/// that does not read blocks it, but the socket's timeout lets it see the
/// server's stop and CLIENT KILL (`stop`), so a stop never waits on it.
fn send(s: &mut Box<dyn Io>, b: &[u8], stop: &dyn Fn() -> bool) -> std::io::Result<()> {
    let mut at = 0;
    while at < b.len() {
        match s.write(&b[at..]) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => at += n,
            Err(e) if timed_out(&e) && !stop() => {}
            Err(e) => return Err(e),
        }
    }
    loop {
        match s.flush() {
            Err(e) if timed_out(&e) && !stop() => {}
            r => return r,
        }
    }
}
