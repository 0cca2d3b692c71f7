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

use crate::admin::registry::ConnInfo;
use crate::conn::client::Client;
use crate::conn::resp::RespConn;
use crate::conn::{split_token, token_base, Conn, State};
use crate::ctx::Ctx;
use crate::protocol::resp::Env;
use crate::shared::Shared;
use crate::stats::{bump, WorkerStats};
use crate::transport::{Accepted, Bound, Endpoint, Incoming, Listener, Proto, Stream};
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use slab::Slab;
use std::cell::RefCell;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tiercache_engine::clock::unix_now;
use tiercache_engine::device::io::Notify;
use tiercache_proto::Limits;

/// Listening socket `i` has token `LISTENERS - i`.
const LISTENERS: usize = usize::MAX - 16;
const MAILBOX: Token = Token(usize::MAX - 1);
/// The io_uring reader's eventfd: readable when flash reads completed.
const FLASH_IO: Token = Token(usize::MAX - 2);

/// Where accepted connections go: one mailbox per worker.
pub struct Dispatch {
    boxes: Vec<Mailbox>,
    next: AtomicUsize,
}

struct Mailbox {
    inbox: Mutex<Vec<Incoming>>,
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

/// The listener a token names, if it names one.
fn listener_of(t: Token, n: usize) -> Option<usize> {
    let i = LISTENERS.checked_sub(t.0)?;
    (t.0 <= LISTENERS && i < n).then_some(i)
}

/// A worker's connections: the slab and, by the same key, what `stats
/// conns` and the idle timeout know of each.
pub struct Conns {
    slab: Slab<Client>,
    info: Vec<Option<Arc<ConnInfo>>>,
    me: usize,
    /// What the RESP connections share (with a Redis port), and this
    /// worker's counters, which its RESP connections count in too.
    resp: Option<(Arc<Env>, Arc<WorkerStats>)>,
}

/// Runs worker `me` on `poll` (whose registry made mailbox `me`), over
/// its listening sockets, each tagged with its protocol; `resp`: what
/// RESP connections share, when there is a Redis port.
pub fn run(
    me: usize,
    mut poll: Poll,
    listeners: Vec<(Bound, Proto)>,
    shared: Arc<Shared>,
    stats: Arc<WorkerStats>,
    dispatch: Arc<Dispatch>,
    resp: Option<Arc<Env>>,
) -> io::Result<()> {
    let mut listeners: Vec<(Listener, Proto)> = listeners
        .into_iter()
        .map(|(b, p)| (Listener::from_bound(b), p))
        .collect();
    for (i, (l, _)) in listeners.iter_mut().enumerate() {
        poll.registry()
            .register(l.source(), Token(LISTENERS - i), Interest::READABLE)?;
    }
    let mut conns = Conns {
        slab: Slab::new(),
        info: Vec::new(),
        me,
        resp: resp.map(|e| (e, stats.clone())),
    };
    let idle_timeout = shared.config.server.idle_timeout;
    let mut last_idle_check = unix_now();
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
    let parked = std::cell::Cell::new(false);
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
            parked: &parked,
        };
        let mut woken = events.is_empty() || any_busy;
        for ev in events.iter() {
            if let Some(i) = listener_of(ev.token(), listeners.len()) {
                accept_blocked = accept(
                    &listeners[i..=i],
                    &poll,
                    &mut conns,
                    &shared,
                    &dispatch,
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
                for incoming in handed {
                    adopt(
                        incoming,
                        &poll,
                        &mut conns,
                        &shared,
                        &dispatch.boxes[me],
                        ctx.now,
                    );
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
                if let Some(conn) = conns.slab.get_mut(key) {
                    conn.complete_read(c.token, c.result, c.queued_us, &ctx);
                    ready.push(key);
                }
            }
            // Requests parked for back-pressure try again.
            for (key, conn) in conns.slab.iter_mut() {
                if conn.take_busy() {
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
        // A parked request runs again at each turn (`woken`), parking
        // again while it must wait: the flag says whether to look.
        any_busy =
            (reader.is_some() || parked.replace(false)) && conns.slab.iter().any(|(_, c)| c.busy());
        if accept_blocked {
            accept_blocked = accept(
                &listeners,
                &poll,
                &mut conns,
                &shared,
                &dispatch,
                accept_blocked,
            );
        }
        if idle_timeout > 0 && ctx.now != last_idle_check {
            last_idle_check = ctx.now;
            kick_idle(&poll, &mut conns, &shared, &dispatch.boxes[me], ctx.now);
        }
    }
    // A stop: the connections still open close with memcached's reason
    // (`watch connevents`), the one that sent `shutdown` among them.
    let open: Vec<usize> = conns.slab.iter().map(|(key, _)| key).collect();
    for key in open {
        close(
            &poll,
            &mut conns,
            key,
            &shared,
            &dispatch.boxes[me],
            "shutdown",
        );
    }
    Ok(())
}

/// Closes the connections that sent nothing for more than `-o
/// idle_timeout` seconds (memcached's test, `idle_kicks`). A connection
/// whose request waits for the flash tier or the journal is not idle.
fn kick_idle(poll: &Poll, conns: &mut Conns, shared: &Shared, mailbox: &Mailbox, now: u32) {
    let limit = shared.config.server.idle_timeout;
    let idle: Vec<usize> = conns
        .info
        .iter()
        .enumerate()
        .filter_map(|(key, i)| {
            let i = i.as_ref()?;
            let waiting = conns.slab.get(key).is_some_and(Client::busy);
            (i.idle_secs(now) > limit && !waiting).then_some(key)
        })
        .collect();
    for key in idle {
        if let Some(i) = &conns.info[key] {
            tracing::debug!(peer = %i.peer, idle = i.idle_secs(now), "closing an idle connection (idle_timeout)");
        }
        bump(&shared.conns.idle_kicks);
        close(poll, conns, key, shared, mailbox, "idle_timeout");
    }
}

/// Accepts what the listen queue holds and returns whether accepting is
/// blocked (`was`: it was blocked before), counting and logging the changes.
fn accept(
    listeners: &[(Listener, Proto)],
    poll: &Poll,
    conns: &mut Conns,
    shared: &Shared,
    dispatch: &Dispatch,
    was: bool,
) -> bool {
    let all = listeners
        .iter()
        .try_for_each(|(l, p)| accept_all(l, *p, poll, conns, shared, dispatch));
    let blocked = match all {
        Ok(()) => false,
        Err(e) => {
            if !was {
                bump(&shared.conns.listen_disabled_num);
                let now = shared.started.elapsed().as_micros() as u64;
                shared.conns.accept_stopped(now);
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
        let now = shared.started.elapsed().as_micros() as u64;
        shared.conns.accept_resumed(now);
        tracing::info!("accepting connections again");
    }
    blocked
}

/// Drives connection `key` after its socket's event `ev`, or after flash
/// reads or the flusher woke it (None).
fn drive(
    key: usize,
    ev: Option<&mio::event::Event>,
    conns: &mut Conns,
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
    let Some(conn) = conns.slab.get_mut(key) else {
        return;
    };
    let info = conns.info.get(key).and_then(Option::as_ref);
    if ev.is_some_and(|e| e.is_readable()) {
        if let Some(i) = info {
            i.touch(ctx.now);
        }
    }
    // The peer closed its side or reset: its FIN may have come with the
    // last data in this one edge.
    let hup = ev.is_some_and(|e| e.is_read_closed() || e.is_error());
    crate::admin::registry::set_current_fd(info.map(|i| i.fd));
    let state = conn.drive(
        ctx,
        &limits,
        cfg.server.max_pending_output,
        ev.is_some(),
        hup,
    );
    crate::admin::registry::set_current_fd(None);
    match state {
        State::Open => {}
        State::Closed => {
            let reason = conns.slab.get(key).map_or("normal", Client::close_reason);
            close(poll, conns, key, shared, mailbox, reason);
        }
        State::Watch => hand_to_watch(poll, conns, key, shared, mailbox),
        State::Shutdown => {
            tracing::info!("shutdown command received");
            shared.shutdown.store(true, Ordering::Relaxed);
        }
    }
}

/// Accepts until the queue is empty (`Ok`) or accept fails for a reason
/// that retrying at once would not cure (`Err`: EMFILE, ENFILE, ...).
fn accept_all(
    listener: &Listener,
    proto: Proto,
    poll: &Poll,
    conns: &mut Conns,
    shared: &Shared,
    dispatch: &Dispatch,
) -> io::Result<()> {
    let me = conns.me;
    loop {
        match listener.accept() {
            Ok(mut incoming) => {
                incoming.proto = proto;
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
                    tracing::warn!(peer = %incoming.peer, "connection refused: too many open connections");
                    incoming.refuse(match proto {
                        Proto::Memcached => b"ERROR Too many open connections\r\n",
                        Proto::Redis => b"-ERR max number of clients reached\r\n",
                    });
                    continue;
                }
                bump(&shared.conns.total_connections);
                tracing::debug!(peer = %incoming.peer, "connection accepted");
                let to = dispatch.pick();
                let mailbox = &dispatch.boxes[to];
                if to == me {
                    adopt(incoming, poll, conns, shared, mailbox, unix_now());
                } else {
                    mailbox
                        .inbox
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(incoming);
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

/// Registers a connection with this worker (`mailbox` is this worker's);
/// one from a TLS listener gets its TLS session here.
fn adopt(
    incoming: Incoming,
    poll: &Poll,
    conns: &mut Conns,
    shared: &Shared,
    mailbox: &Mailbox,
    now: u32,
) {
    let Incoming {
        conn,
        peer,
        local,
        proto,
    } = incoming;
    // CLIENT KILL shuts a copy of a RESP connection's socket to wake us.
    let handle = match (&conn, proto) {
        (Accepted::Tcp { sock, .. }, Proto::Redis) => crate::conn::resp::kill_handle(sock),
        _ => None,
    };
    let mut stream = match Stream::new(conn, shared.tls.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot start the connection's TLS session");
            return uncount(shared, mailbox);
        }
    };
    let entry = conns.slab.vacant_entry();
    let token = Token(entry.key());
    if let Err(e) =
        poll.registry()
            .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
    {
        tracing::warn!(error = %e, "cannot register connection");
        return uncount(shared, mailbox);
    }
    static SERIAL: AtomicU64 = AtomicU64::new(1);
    let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
    let info = Arc::new(ConnInfo::new(stream.raw_fd(), peer, local, now));
    let authed = shared.auth.is_none();
    let base = token_base(token.0, serial);
    let client = match (proto, &conns.resp) {
        (Proto::Redis, Some((env, stats))) => {
            let addr = |e: &Endpoint| match e {
                Endpoint::Tcp(a) => a.to_string(),
                e => e.to_string(),
            };
            let (p, l) = (addr(&info.peer), addr(&info.local));
            let (env, stats) = (env.clone(), stats.clone());
            Client::Redis(RespConn::new(stream, env, stats, handle, p, l, base))
        }
        _ => Client::Memcached(Conn::new(stream, base, authed)),
    };
    entry.insert(client);
    let key = token.0;
    if conns.info.len() <= key {
        conns.info.resize(key + 1, None);
    }
    shared.registry.add(conns.me, key, info.clone());
    shared.watch.conn_event(&info.peer, info.fd, None);
    conns.info[key] = Some(info);
}

/// Closes a client connection; `reason` as `watch connevents` gives it.
fn close(
    poll: &Poll,
    conns: &mut Conns,
    key: usize,
    shared: &Shared,
    mailbox: &Mailbox,
    reason: &str,
) {
    if let Some(info) = conns.info.get_mut(key).and_then(Option::take) {
        shared.watch.conn_event(&info.peer, info.fd, Some(reason));
    }
    shared.registry.remove(conns.me, key);
    let mut conn = conns.slab.remove(key);
    conn.stream().close();
    let _ = poll.registry().deregister(conn.stream());
    uncount(shared, mailbox);
}

/// A connection that sent `watch` leaves this worker for the watch thread,
/// which closes it (and uncounts it from `curr_connections`) when its client
/// goes.
fn hand_to_watch(poll: &Poll, conns: &mut Conns, key: usize, shared: &Shared, mailbox: &Mailbox) {
    if let Some(slot) = conns.info.get_mut(key) {
        *slot = None;
    }
    shared.registry.remove(conns.me, key);
    let mut conn = conns.slab.remove(key);
    let _ = poll.registry().deregister(conn.stream());
    match conn.into_watcher() {
        Some((w, stream)) => {
            mailbox.conns.fetch_sub(1, Ordering::Relaxed);
            shared.watch.adopt(w, stream);
        }
        None => uncount(shared, mailbox),
    }
}

/// A connection is gone: it no longer counts against its worker nor in
/// `curr_connections`.
fn uncount(shared: &Shared, mailbox: &Mailbox) {
    mailbox.conns.fetch_sub(1, Ordering::Relaxed);
    shared
        .conns
        .curr_connections
        .fetch_sub(1, Ordering::Relaxed);
}
