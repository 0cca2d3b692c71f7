//! A worker thread: its own mio event loop (epoll), the connections it
//! accepted, and the listening socket it shares with the other workers
//! (whichever worker wakes first accepts).
//!
//! ```text
//!            listening socket (shared, non-blocking)
//!           /            |             \
//!   worker 0         worker 1   ...   worker N-1      each: Poll + Slab<Conn>
//!   conns...         conns...         conns...        requests run on the worker,
//!       \               |              /              engine shards locked briefly
//!                  Engine (sharded)
//! ```

use crate::conn::{Conn, State};
use crate::execute::Ctx;
use crate::shared::Shared;
use crate::stats::{bump, WorkerStats};
use mio::net::TcpListener;
use mio::{Events, Interest, Poll, Token};
use slab::Slab;
use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tiercache_engine::clock::unix_now;
use tiercache_proto::Limits;

const LISTENER: Token = Token(usize::MAX);

pub fn run(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let mut listener = TcpListener::from_std(listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: Slab<Conn> = Slab::new();
    let mut events = Events::with_capacity(1024);
    let cfg = &shared.config;
    let limits = Limits {
        item_size_max: cfg.cache.max_item_size,
        max_get_line: cfg.server.max_get_line,
    };
    let max_pending = cfg.server.max_pending_output;
    while !shared.shutdown.load(Ordering::Relaxed) {
        if let Err(e) = poll.poll(&mut events, Some(Duration::from_millis(100))) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let ctx = Ctx {
            shared: &shared,
            stats: &stats,
            now: unix_now(),
        };
        for ev in events.iter() {
            if ev.token() == LISTENER {
                accept_all(&listener, &poll, &mut conns, &shared);
                continue;
            }
            let key = ev.token().0;
            let Some(conn) = conns.get_mut(key) else {
                continue;
            };
            match conn.drive(&ctx, &limits, max_pending) {
                State::Open => {}
                State::Closed => close(&poll, &mut conns, key, &shared),
                State::Shutdown => {
                    tracing::info!("shutdown command received");
                    shared.shutdown.store(true, Ordering::Relaxed);
                }
            }
        }
    }
    Ok(())
}

fn accept_all(listener: &TcpListener, poll: &Poll, conns: &mut Slab<Conn>, shared: &Shared) {
    loop {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                let cur = shared
                    .conns
                    .curr_connections
                    .fetch_add(1, Ordering::Relaxed);
                if cur as usize >= shared.config.server.max_connections {
                    shared
                        .conns
                        .curr_connections
                        .fetch_sub(1, Ordering::Relaxed);
                    bump(&shared.conns.rejected_connections);
                    let _ = stream.write_all(b"ERROR Too many open connections\r\n");
                    tracing::warn!(%peer, "connection refused: too many open connections");
                    continue;
                }
                bump(&shared.conns.total_connections);
                let _ = stream.set_nodelay(true);
                let entry = conns.vacant_entry();
                let token = Token(entry.key());
                if let Err(e) = poll.registry().register(
                    &mut stream,
                    token,
                    Interest::READABLE | Interest::WRITABLE,
                ) {
                    tracing::warn!(%peer, error = %e, "cannot register connection");
                    shared
                        .conns
                        .curr_connections
                        .fetch_sub(1, Ordering::Relaxed);
                    continue;
                }
                tracing::debug!(%peer, "connection accepted");
                entry.insert(Conn::new(stream));
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // EMFILE and friends: log and try again on the next event.
                tracing::warn!(error = %e, "accept failed");
                return;
            }
        }
    }
}

fn close(poll: &Poll, conns: &mut Slab<Conn>, key: usize, shared: &Shared) {
    let mut conn = conns.remove(key);
    let _ = poll.registry().deregister(&mut conn.stream);
    shared
        .conns
        .curr_connections
        .fetch_sub(1, Ordering::Relaxed);
}
