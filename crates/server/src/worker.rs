//! A worker thread: its own mio event loop (epoll), the connections it
//! owns, and the listening socket it shares with the other workers.
//! Whichever worker wakes first accepts, and hands every new connection to
//! the worker with the fewest open connections (ties in turn), through that
//! worker's mailbox and waker, as memcached's dispatcher does. Without the
//! hand-off one worker would take a burst of connections, and with it all the
//! load, while the others idle.
//!
//! ```text
//!            listening socket (shared, non-blocking)
//!           /            |             \
//!   worker 0  <-mailbox-> worker 1 ... worker N-1     each: Poll + Slab<Conn>
//!   conns...         conns...         conns...        requests run on the worker,
//!       \               |              /              engine shards locked briefly
//!                  Engine (sharded)
//! ```

use crate::conn::{split_token, token_base, Conn, State};
use crate::execute::Ctx;
use crate::shared::Shared;
use crate::stats::{bump, WorkerStats};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use slab::Slab;
use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tiercache_engine::clock::unix_now;
use tiercache_engine::flash::io::Notify;
use tiercache_proto::Limits;

const LISTENER: Token = Token(usize::MAX);
const MAILBOX: Token = Token(usize::MAX - 1);
/// The io_uring reader's eventfd: readable when flash reads completed.
const FLASH_IO: Token = Token(usize::MAX - 2);

/// Where accepted connections go: one mailbox per worker.
pub struct Dispatch {
    boxes: Vec<Mailbox>,
    next: AtomicUsize,
}

struct Mailbox {
    inbox: Mutex<Vec<TcpStream>>,
    waker: Waker,
    /// Connections the worker owns, counting those still in its inbox.
    conns: AtomicUsize,
}

impl Dispatch {
    /// One mailbox per worker, woken through that worker's poll registry.
    pub fn new(registries: &[&Registry]) -> io::Result<Dispatch> {
        let boxes = registries
            .iter()
            .map(|r| {
                Ok(Mailbox {
                    inbox: Mutex::new(Vec::new()),
                    waker: Waker::new(r, MAILBOX)?,
                    conns: AtomicUsize::new(0),
                })
            })
            .collect::<io::Result<_>>()?;
        Ok(Dispatch {
            boxes,
            next: AtomicUsize::new(0),
        })
    }

    /// Picks the worker with the fewest connections (ties go round in turn)
    /// and counts the new connection against it. The count only moves from
    /// the value the choice was made on, so two workers accepting at once
    /// do not both pick the same one.
    fn pick(&self) -> usize {
        let n = self.boxes.len();
        loop {
            let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
            let (to, count) = (0..n)
                .map(|k| (start + k) % n)
                .map(|i| (i, self.boxes[i].conns.load(Ordering::Relaxed)))
                .min_by_key(|&(_, c)| c)
                .unwrap_or((0, 0));
            if self.boxes[to]
                .conns
                .compare_exchange(count, count + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                return to;
            }
        }
    }
}

/// Runs worker `me` on `poll` (whose registry made mailbox `me`).
pub fn run(
    me: usize,
    mut poll: Poll,
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    dispatch: Arc<Dispatch>,
) -> io::Result<()> {
    let mut listener = TcpListener::from_std(listener);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut conns: Slab<Conn> = Slab::new();
    let mut events = Events::with_capacity(1024);
    // Flash reads complete, and the flusher makes progress, through the
    // mailbox's waker (mio allows one waker per poll).
    let notify: Notify = {
        let d = dispatch.clone();
        Arc::new(move || {
            let _ = d.boxes[me].waker.wake();
        })
    };
    let reader = shared.engine.reader(notify.clone()).map(RefCell::new);
    // The io_uring reader signals completions on its eventfd, watched here
    // like a socket (no thread hop); the pool reader calls `notify`.
    if let Some(fd) = reader.as_ref().and_then(|r| r.borrow().event_fd()) {
        poll.registry()
            .register(&mut mio::unix::SourceFd(&fd), FLASH_IO, Interest::READABLE)?;
    }
    if let Some(f) = shared.engine.flash() {
        f.on_progress(Box::new(move || notify()));
    }
    let mut completions = Vec::new();
    let mut ready = Vec::new();
    let mut any_busy = false;
    // Accept failed for want of fds (EMFILE) or memory: the connections
    // left in the listen queue raise no new edge, and a full queue takes
    // no new ones that would, so try again every few ms (memcached
    // re-enables accept every 10 ms and when a connection closes).
    let mut accept_blocked = false;
    while !shared.shutdown.load(Ordering::Relaxed) {
        // A request parked for back-pressure may have missed the flusher's
        // wake-up (it came just before it parked): look again soon.
        let timeout = Duration::from_millis(if any_busy {
            1
        } else if accept_blocked {
            10
        } else {
            100
        });
        if let Err(e) = poll.poll(&mut events, Some(timeout)) {
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let ctx = Ctx {
            shared: &shared,
            stats: &stats,
            now: unix_now(),
            reader: reader.as_ref(),
        };
        let mut woken = events.is_empty() || any_busy;
        for ev in events.iter() {
            if ev.token() == LISTENER {
                accept_blocked = accept(
                    &listener,
                    &poll,
                    &mut conns,
                    &shared,
                    &dispatch,
                    me,
                    accept_blocked,
                );
                continue;
            }
            if ev.token() == FLASH_IO {
                // Reaping resets the eventfd.
                woken = true;
                continue;
            }
            if ev.token() == MAILBOX {
                woken = true;
                let handed = std::mem::take(
                    &mut *dispatch.boxes[me]
                        .inbox
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner),
                );
                for stream in handed {
                    adopt(stream, &poll, &mut conns, &shared, &dispatch.boxes[me]);
                }
                continue;
            }
            drive(
                ev.token().0,
                Some(ev),
                &mut conns,
                &ctx,
                &poll,
                &shared,
                &dispatch.boxes[me],
            );
        }
        if woken {
            if let Some(r) = &reader {
                r.borrow_mut().reap(&mut completions);
            }
            ready.clear();
            for c in completions.drain(..) {
                let (key, _, _, _) = split_token(c.token);
                if let Some(conn) = conns.get_mut(key) {
                    conn.complete_read(c.token, c.result, &ctx);
                    ready.push(key);
                }
            }
            // Requests parked for back-pressure try again.
            for (key, conn) in conns.iter_mut() {
                if conn.busy {
                    conn.busy = false;
                    ready.push(key);
                }
            }
            ready.sort_unstable();
            ready.dedup();
            for &key in &ready {
                drive(
                    key,
                    None,
                    &mut conns,
                    &ctx,
                    &poll,
                    &shared,
                    &dispatch.boxes[me],
                );
            }
        }
        // Reads submitted during this turn go to the device in one batch.
        if let Some(r) = &reader {
            r.borrow_mut().flush();
        }
        any_busy = reader.is_some() && conns.iter().any(|(_, c)| c.busy);
        if accept_blocked {
            accept_blocked = accept(
                &listener,
                &poll,
                &mut conns,
                &shared,
                &dispatch,
                me,
                accept_blocked,
            );
        }
    }
    Ok(())
}

/// Accepts what the listen queue holds and returns whether accepting is
/// blocked (`was`: it was blocked before), counting and logging the changes.
fn accept(
    listener: &TcpListener,
    poll: &Poll,
    conns: &mut Slab<Conn>,
    shared: &Shared,
    dispatch: &Dispatch,
    me: usize,
    was: bool,
) -> bool {
    let blocked = match accept_all(listener, poll, conns, shared, dispatch, me) {
        Ok(()) => false,
        Err(e) => {
            if !was {
                bump(&shared.conns.listen_disabled_num);
                shared.conns.accept_blocked.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    error = %e,
                    open = shared.conns.curr_connections.load(Ordering::Relaxed),
                    "accept failed; not accepting until it succeeds (retried every 10 ms)"
                );
            }
            true
        }
    };
    if was && !blocked {
        shared.conns.accept_blocked.fetch_sub(1, Ordering::Relaxed);
        tracing::info!("accepting connections again");
    }
    blocked
}

/// Drives connection `key` after its socket's event `ev`, or after flash
/// reads or the flusher woke it (None).
fn drive(
    key: usize,
    ev: Option<&mio::event::Event>,
    conns: &mut Slab<Conn>,
    ctx: &Ctx<'_>,
    poll: &Poll,
    shared: &Shared,
    mailbox: &Mailbox,
) {
    let cfg = &shared.config;
    let limits = Limits {
        item_size_max: cfg.cache.max_item_size,
        max_get_line: cfg.server.max_get_line,
    };
    let Some(conn) = conns.get_mut(key) else {
        return;
    };
    // The peer closed its side or reset: its FIN may have come with the
    // last data in this one edge.
    let hup = ev.is_some_and(|e| e.is_read_closed() || e.is_error());
    match conn.drive(
        ctx,
        &limits,
        cfg.server.max_pending_output,
        ev.is_some(),
        hup,
    ) {
        State::Open => {}
        State::Closed => close(poll, conns, key, shared, mailbox),
        State::Shutdown => {
            tracing::info!("shutdown command received");
            shared.shutdown.store(true, Ordering::Relaxed);
        }
    }
}

/// Accepts until the queue is empty (`Ok`) or accept fails for a reason
/// that retrying at once would not cure (`Err`: EMFILE, ENFILE, ...).
fn accept_all(
    listener: &TcpListener,
    poll: &Poll,
    conns: &mut Slab<Conn>,
    shared: &Shared,
    dispatch: &Dispatch,
    me: usize,
) -> io::Result<()> {
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
                tracing::debug!(%peer, "connection accepted");
                let to = dispatch.pick();
                let mailbox = &dispatch.boxes[to];
                if to == me {
                    adopt(stream, poll, conns, shared, mailbox);
                } else {
                    mailbox
                        .inbox
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(stream);
                    if let Err(e) = mailbox.waker.wake() {
                        tracing::warn!(error = %e, "cannot wake worker {to}");
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // A connection reset while in the queue: take the next one.
            Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Registers a connection with this worker (`mailbox` is this worker's).
fn adopt(
    mut stream: TcpStream,
    poll: &Poll,
    conns: &mut Slab<Conn>,
    shared: &Shared,
    mailbox: &Mailbox,
) {
    let entry = conns.vacant_entry();
    let token = Token(entry.key());
    if let Err(e) =
        poll.registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
    {
        tracing::warn!(error = %e, "cannot register connection");
        mailbox.conns.fetch_sub(1, Ordering::Relaxed);
        shared
            .conns
            .curr_connections
            .fetch_sub(1, Ordering::Relaxed);
        return;
    }
    static SERIAL: AtomicU64 = AtomicU64::new(1);
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    entry.insert(Conn::new(stream, token_base(token.0, serial)));
}

fn close(poll: &Poll, conns: &mut Slab<Conn>, key: usize, shared: &Shared, mailbox: &Mailbox) {
    let mut conn = conns.remove(key);
    let _ = poll.registry().deregister(&mut conn.stream);
    mailbox.conns.fetch_sub(1, Ordering::Relaxed);
    shared
        .conns
        .curr_connections
        .fetch_sub(1, Ordering::Relaxed);
}
