//! `watch`: memcached 1.6's log streams. A connection that sends `watch
//! [fetchers] [mutations] [evictions] [connevents] [sysevents]` gets `OK`
//! and from then on one line per event of the kinds it asked for, in
//! memcached's format:
//!
//! ```text
//! ts=<sec>.<usec> gid=<n> type=item_get key=<uri> status=found|not_found clsid=<n> cfd=<fd> size=<n>
//! ts=<sec>.<usec> gid=<n> type=item_store key=<uri> status=stored|not_stored|exists|not_found|too_large|no_memory cmd=<set|add|...> ttl=<n> clsid=<n> cfd=<fd> size=<n>
//! ts=<sec>.<usec> gid=<n> type=eviction key=<uri> fetch=yes|no ttl=<secs left, -1: none> la=<secs since last access> clsid=1 size=<n>
//! ts=<sec>.<usec> gid=<n> type=conn_new rip=<ip|unix> rport=<port|0> transport=tcp|local cfd=<fd>
//! ts=<sec>.<usec> gid=<n> type=conn_close rip=<ip|unix> rport=<port|0> transport=tcp|local reason=normal|error|idle_timeout|shutdown cfd=<fd>
//! ts=<sec>.<usec> gid=<n> type=lru_crawler crawler=1 lru=na low_mark=0 next_reclaims=0 since_run=<s> next_run=1 elapsed=<s> examined=<n> reclaimed=<n>
//! ```
//!
//! Evictions are the engine's RAM evictions (`tiercache_engine::evictions`:
//! an item dropped from flash is counted, not logged: its key is on the
//! device).
//!
//! `reason=shutdown`: at a stop (SIGTERM, SIGINT, `shutdown`) every worker
//! logs each client connection it still has, the one that sent `shutdown`
//! included, and the watch thread writes the watchers' lines out before it
//! closes them. memcached 1.6.18 names the reason `shutdown` for the
//! connection that sent `shutdown`, but its watchers never see the line
//! (nor any other at a stop): the process exits before its logger thread
//! writes them out, and a SIGTERM or SIGINT closes no connection first.
//!
//! `sysevents`: memcached 1.6.18 writes `lru_crawler` lines (its LRU
//! crawler's autocrawl finished a class and LRU and planned the next run),
//! `slab_move` (slab automove) and, with extstore, `compact_*` (its
//! compaction). tiercache has the first: its expiry sweep (the maintenance
//! thread, once a second, `Engine::maintain`) walks every RAM item as the
//! crawler does, and each sweep is one `lru_crawler` line of memcached's
//! fields: `crawler=1` (the one class, as `clsid=1` elsewhere), `lru=na`
//! (memcached's name for no LRU: the sweep walks both queues), `low_mark=0
//! next_reclaims=0` (memcached's estimates that decide whether to crawl:
//! the sweep runs whatever it expects), `since_run` and `elapsed` in whole
//! seconds, `next_run=1`, `examined` the RAM items before the sweep,
//! `reclaimed` those it freed. There are no slabs to move, and the flash
//! tier reclaims whole segments without memcached's compaction.
//!
//! `rawcmds` and the proxy's kinds (`proxyreqs`, `proxyevents`,
//! `proxyuser`) are taken (`OK`) and make no line, as in memcached 1.6.18:
//! it has no call site for raw commands, and a build without the proxy
//! (Debian's) writes none of the proxy's. `deletions` came after 1.6.18:
//! `ERROR`, as 1.6.18 answers.
//!
//! It sends no commands any more (its input is read and dropped, to see it
//! close), as in memcached. The worker hands its socket to the watch thread
//! ([`run`]), which writes each watcher's lines out and closes it when the
//! client goes.
//!
//! Cost: with no watcher, each logging point is one relaxed load of
//! [`Watch::on`]'s flags. With watchers, the worker that ran the command
//! formats the line and appends it to each watcher's buffer under that
//! watcher's lock; it never waits for a socket. A buffer holds at most
//! `watcher_logbuf_size` bytes (256 KiB as memcached's): a line that does
//! not fit is dropped and counted, and the watcher gets `skipped=N` before
//! its next line, as memcached's do (`stats` `log_watcher_skipped`).

use crate::transport::{Endpoint, Stream};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tiercache_engine::evictions::{Eviction, EvictionSink};
pub use tiercache_proto::request::watch::{CONNEVENTS, EVICTIONS, FETCHERS, MUTATIONS, SYSEVENTS};

/// memcached's limit on watchers at once.
pub const MAX_WATCHERS: usize = 20;
pub use crate::config::DEFAULT_WATCH_BUF as DEFAULT_BUF;
/// Room kept for a `skipped=N` line.
const SKIPPED_LINE: usize = 32;
/// At a stop: how long the watch thread waits for the workers to log the
/// connections they close, then how long it tries to write the watchers'
/// lines out.
const STOP_WAIT: Duration = Duration::from_secs(2);
const STOP_FLUSH: Duration = Duration::from_secs(1);

/// All watchers, the kinds any of them asks for, and the counters.
pub struct Watch {
    /// Union of the watchers' kinds: the request path's one load.
    flags: AtomicU8,
    /// memcached's global event id (`gid=`).
    gid: AtomicU64,
    watchers: RwLock<Vec<Arc<Watcher>>>,
    buf_size: usize,
    to_thread: Mutex<Sender<Handed>>,
    from_workers: Mutex<Option<Receiver<Handed>>>,
    /// Lines made (`log_worker_written`), given to a watcher
    /// (`log_watcher_sent`), dropped for want of room (`log_watcher_skipped`).
    written: AtomicU64,
    sent: AtomicU64,
    skipped: AtomicU64,
    /// Workers still running: at a stop, the watch thread writes out the
    /// lines of the connections they close before it closes the watchers.
    workers: AtomicUsize,
}

/// One expiry sweep, as `watch sysevents` tells it (a `type=lru_crawler`
/// line; see the module doc for how memcached's fields map).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    /// RAM items before the sweep.
    pub examined: u64,
    /// Items it freed.
    pub reclaimed: u64,
    /// Whole seconds it took.
    pub elapsed: u64,
    /// Whole seconds since the previous sweep ended.
    pub since_run: u64,
    /// Seconds to the next one.
    pub next_run: u64,
}

/// A watcher and its socket, on their way from a worker to the watch thread.
type Handed = (Arc<Watcher>, Stream);

/// One watching connection's kinds and its bounded buffer of lines.
pub struct Watcher {
    flags: u8,
    /// Events before the watch started are not its.
    min_gid: u64,
    lines: Mutex<Lines>,
}

#[derive(Default)]
struct Lines {
    data: Vec<u8>,
    /// Lines dropped since the last one that fitted.
    skipped: u64,
}

/// Why a watch could not start.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// memcached's WATCHER_TOO_MANY.
    TooMany,
}

impl Watch {
    /// No watchers; buffers of `buf_size` bytes each.
    pub fn new(buf_size: usize) -> Watch {
        let (tx, rx) = mpsc::channel();
        Watch {
            flags: AtomicU8::new(0),
            gid: AtomicU64::new(0),
            watchers: RwLock::new(Vec::new()),
            buf_size: buf_size.max(4096),
            to_thread: Mutex::new(tx),
            from_workers: Mutex::new(Some(rx)),
            written: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            workers: AtomicUsize::new(0),
        }
    }

    /// A worker starts (called before its thread is spawned).
    pub fn worker_started(&self) {
        self.workers.fetch_add(1, Relaxed);
    }

    /// A worker has ended, every connection it closed logged.
    pub fn worker_stopped(&self) {
        self.workers.fetch_sub(1, Relaxed);
    }

    /// Whether a watcher wants lines of `kind`: the only cost of a logging
    /// point when nobody watches.
    #[inline]
    pub fn on(&self, kind: u8) -> bool {
        self.flags.load(Relaxed) & kind != 0
    }

    /// Starts a watcher of `flags`; its buffer starts with `OK`.
    pub fn add(&self, flags: u8) -> Result<Arc<Watcher>, Refused> {
        let mut list = self
            .watchers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if list.len() >= MAX_WATCHERS {
            return Err(Refused::TooMany);
        }
        let w = Arc::new(Watcher {
            flags,
            min_gid: self.gid.fetch_add(1, Relaxed) + 1,
            lines: Mutex::new(Lines {
                data: b"OK\r\n".to_vec(),
                skipped: 0,
            }),
        });
        list.push(w.clone());
        self.flags.fetch_or(flags, Relaxed);
        Ok(w)
    }

    fn remove(&self, w: &Arc<Watcher>) {
        let mut list = self
            .watchers
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        list.retain(|x| !Arc::ptr_eq(x, w));
        let flags = list.iter().fold(0, |f, x| f | x.flags);
        self.flags.store(flags, Relaxed);
    }

    /// Gives a watching connection's socket to the watch thread.
    pub fn adopt(&self, w: Arc<Watcher>, stream: Stream) {
        let tx = self
            .to_thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Err(mpsc::SendError((w, _))) = tx.send((w, stream)) {
            self.remove(&w);
        }
    }

    /// `ts=... gid=... type=<kind> `: the start of every line.
    fn head(&self, kind: &str) -> (u64, Vec<u8>) {
        let (gid, mut line) = self.head_of(kind);
        line.extend_from_slice(b"key=");
        (gid, line)
    }

    /// [`head`](Self::head) without the `key=` that item lines go on with.
    fn head_of(&self, kind: &str) -> (u64, Vec<u8>) {
        let gid = self.gid.fetch_add(1, Relaxed) + 1;
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut line = Vec::with_capacity(160);
        // memcached prints the microseconds with %d: not zero-padded.
        let _ = write!(
            line,
            "ts={}.{} gid={gid} type={kind} ",
            t.as_secs(),
            t.subsec_micros()
        );
        (gid, line)
    }

    /// Appends `line` (event `gid`, of `kind`) to every watcher of `kind`.
    fn deliver(&self, kind: u8, gid: u64, line: &[u8]) {
        self.written.fetch_add(1, Relaxed);
        let list = self.watchers.read().unwrap_or_else(PoisonError::into_inner);
        for w in list
            .iter()
            .filter(|w| w.flags & kind != 0 && gid >= w.min_gid)
        {
            let mut l = w.lines.lock().unwrap_or_else(PoisonError::into_inner);
            let room = line.len() + if l.skipped > 0 { SKIPPED_LINE } else { 0 };
            if l.data.len() + room > self.buf_size {
                l.skipped += 1;
                self.skipped.fetch_add(1, Relaxed);
                continue;
            }
            if l.skipped > 0 {
                let n = std::mem::take(&mut l.skipped);
                let _ = writeln!(l.data, "skipped={n}");
            }
            l.data.extend_from_slice(line);
            self.sent.fetch_add(1, Relaxed);
        }
    }

    /// `watch fetchers`: a key a command looked up, found with a value of
    /// `size` bytes, or not (`None`).
    #[inline]
    pub fn fetched(&self, key: &[u8], size: Option<usize>) {
        if self.on(FETCHERS) {
            self.item_get(key, size);
        }
    }

    /// `watch mutations`: a store's outcome, `status` and `cmd` as memcached
    /// names them, with the seconds the item has to live (0: no limit) and
    /// its value's length.
    #[inline]
    pub fn stored(&self, key: &[u8], status: &str, cmd: &str, ttl: u32, size: usize) {
        if self.on(MUTATIONS) {
            self.item_store(key, status, cmd, ttl, size);
        }
    }

    /// `watch connevents`: a client connection opened (`close` None) or
    /// closed, for the reason memcached gives (`normal`: the client closed
    /// or quit; `error`: the socket failed, e.g. reset with a reply unread;
    /// `idle_timeout`; `shutdown`: still open at a stop).
    #[inline]
    pub fn conn_event(&self, peer: &Endpoint, fd: i32, close: Option<&str>) {
        if self.on(CONNEVENTS) {
            self.conn_line(peer, fd, close);
        }
    }

    #[cold]
    fn conn_line(&self, peer: &Endpoint, fd: i32, close: Option<&str>) {
        let kind = if close.is_some() {
            "conn_close"
        } else {
            "conn_new"
        };
        let (gid, mut line) = self.head_of(kind);
        // As memcached: a unix socket's client is `rip=unix rport=0`.
        let _ = match peer {
            Endpoint::Tcp(a) => write!(line, "rip={} rport={} transport=tcp", a.ip(), a.port()),
            _ => write!(line, "rip=unix rport=0 transport=local"),
        };
        if let Some(reason) = close {
            let _ = write!(line, " reason={reason}");
        }
        let _ = writeln!(line, " cfd={fd}");
        self.deliver(CONNEVENTS, gid, &line);
    }

    /// `watch sysevents`: an expiry sweep ended.
    #[cold]
    pub fn swept(&self, s: &Sweep) {
        let (gid, mut line) = self.head_of("lru_crawler");
        let _ = writeln!(
            line,
            "crawler=1 lru=na low_mark=0 next_reclaims=0 since_run={} next_run={} elapsed={} examined={} reclaimed={}",
            s.since_run, s.next_run, s.elapsed, s.examined, s.reclaimed
        );
        self.deliver(SYSEVENTS, gid, &line);
    }

    #[cold]
    fn eviction(&self, e: &Eviction<'_>) {
        let (gid, mut line) = self.head("eviction");
        tiercache_proto::reply::uri_encode(&mut line, e.key);
        let fetch = if e.fetched { "yes" } else { "no" };
        let _ = writeln!(
            line,
            " fetch={fetch} ttl={} la={} clsid=1 size={}",
            e.ttl, e.idle, e.value_len
        );
        self.deliver(EVICTIONS, gid, &line);
    }

    #[cold]
    fn item_get(&self, key: &[u8], size: Option<usize>) {
        let fd = client_fd();
        let (gid, mut line) = self.head("item_get");
        tiercache_proto::reply::uri_encode(&mut line, key);
        let (status, clsid) = match size {
            Some(_) => ("found", 1),
            None => ("not_found", 0),
        };
        let size = size.unwrap_or(0);
        let _ = writeln!(line, " status={status} clsid={clsid} cfd={fd} size={size}");
        self.deliver(FETCHERS, gid, &line);
    }

    #[cold]
    fn item_store(&self, key: &[u8], status: &str, cmd: &str, ttl: u32, size: usize) {
        let fd = client_fd();
        let (gid, mut line) = self.head("item_store");
        tiercache_proto::reply::uri_encode(&mut line, key);
        let _ = writeln!(
            line,
            " status={status} cmd={cmd} ttl={ttl} clsid=1 cfd={fd} size={size}"
        );
        self.deliver(MUTATIONS, gid, &line);
    }

    /// `stats`: memcached's `log_*` counters.
    pub fn stats(&self, out: &mut dyn crate::stats::line::Sink) {
        use crate::stats::line::{counter, stat};
        let watchers = self
            .watchers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        // Lines go straight to each watcher's buffer: none is dropped
        // before that (memcached's per-worker buffers can overflow).
        counter(out, "log_worker_dropped", 0);
        counter(out, "log_worker_written", self.written.load(Relaxed));
        counter(out, "log_watcher_skipped", self.skipped.load(Relaxed));
        counter(out, "log_watcher_sent", self.sent.load(Relaxed));
        stat(out, "log_watchers", watchers);
    }
}

/// The fd of the connection whose command is logged (`cfd=`).
fn client_fd() -> i32 {
    crate::admin::registry::current_fd().unwrap_or(-1)
}

/// The watch thread's part of one watcher: its socket and the lines taken
/// from its buffer and not yet written.
struct Streaming {
    watcher: Arc<Watcher>,
    stream: Stream,
    out: Vec<u8>,
    at: usize,
}

impl Streaming {
    fn new((watcher, stream): Handed) -> Streaming {
        Streaming {
            watcher,
            stream,
            out: Vec::new(),
            at: 0,
        }
    }

    /// Whether it has lines not yet written.
    fn pending(&self) -> bool {
        self.at < self.out.len()
            || !self
                .watcher
                .lines
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .data
                .is_empty()
    }

    /// Writes what it can; reads and drops the client's input to see it
    /// close. Returns bytes written, or an error when the watcher is gone.
    fn pump(&mut self) -> io::Result<usize> {
        let mut scratch = [0u8; 512];
        loop {
            match self.stream.read(&mut scratch) {
                Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let mut total = self.stream.push()?;
        loop {
            if self.at == self.out.len() {
                self.out.clear();
                self.at = 0;
                let mut l = self
                    .watcher
                    .lines
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                std::mem::swap(&mut self.out, &mut l.data);
                if self.out.is_empty() {
                    return Ok(total);
                }
            }
            match self.stream.write(&self.out[self.at..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.at += n;
                    total += n;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(total),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The watch thread: takes watching sockets from the workers, writes their
/// lines out every millisecond while lines come (backing off to 50 ms when
/// none do), and closes those whose client went. Blocks on its channel
/// while nobody watches. At shutdown it waits for the workers to log the
/// connections they close, writes out what it can within a second, and
/// closes the watchers. `shutdown` is the server's flag; `curr_connections`
/// counts the open connections, watchers among them.
pub fn run(watch: &Watch, shutdown: &AtomicBool, curr_connections: &AtomicU64) {
    let Some(rx) = watch
        .from_workers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    else {
        return;
    };
    let mut streams: Vec<Streaming> = Vec::new();
    let mut sleep = Duration::from_millis(1);
    while !shutdown.load(Relaxed) {
        let wait = if streams.is_empty() {
            Duration::from_millis(100)
        } else {
            sleep
        };
        match rx.recv_timeout(wait) {
            Ok(handed) => streams.push(Streaming::new(handed)),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let moved = pump_all(&mut streams, watch, curr_connections);
        sleep = if moved > 0 {
            Duration::from_millis(1)
        } else {
            (sleep * 2).min(Duration::from_millis(50))
        };
    }
    let deadline = Instant::now() + STOP_WAIT;
    while watch.workers.load(Relaxed) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    streams.extend(rx.try_iter().map(Streaming::new));
    let deadline = Instant::now() + STOP_FLUSH;
    while streams.iter().any(Streaming::pending) && Instant::now() < deadline {
        if pump_all(&mut streams, watch, curr_connections) == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    for mut s in streams {
        watch.remove(&s.watcher);
        s.stream.close();
        curr_connections.fetch_sub(1, Relaxed);
    }
}

/// Writes out what each watcher has and the socket takes; closes those
/// whose client went. Returns the bytes written.
fn pump_all(streams: &mut Vec<Streaming>, watch: &Watch, curr_connections: &AtomicU64) -> usize {
    let mut moved = 0;
    streams.retain_mut(|s| match s.pump() {
        Ok(n) => {
            moved += n;
            true
        }
        Err(e) => {
            tracing::debug!(error = %e, "watcher closed");
            watch.remove(&s.watcher);
            s.stream.close();
            curr_connections.fetch_sub(1, Relaxed);
            false
        }
    });
    moved
}

/// The engine's evictions, for `watch evictions`.
impl EvictionSink for Watch {
    #[inline]
    fn wants(&self) -> bool {
        self.on(EVICTIONS)
    }
    fn evicted(&self, e: &Eviction<'_>) {
        self.eviction(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the watcher has buffered, taken.
    fn taken(w: &Watcher) -> String {
        let mut l = w.lines.lock().unwrap();
        String::from_utf8(std::mem::take(&mut l.data)).unwrap()
    }

    fn names(line: &str) -> Vec<&str> {
        line.trim_end()
            .split(' ')
            .map(|f| f.split_once('=').map_or(f, |(k, _)| k))
            .collect()
    }

    /// memcached 1.6.18's line for a finished autocrawl (logger.c's
    /// LOGGER_CRAWLER_STATUS), as Debian's printed it a second after start.
    const MEMCACHED_CRAWL: &str = "ts=1795559882.899011 gid=2 type=lru_crawler crawler=1 lru=hot low_mark=1 next_reclaims=0 since_run=1 next_run=65 elapsed=0 examined=0 reclaimed=0";

    #[test]
    fn a_sweep_is_an_lru_crawler_line_of_memcacheds_fields() {
        let watch = Watch::new(DEFAULT_BUF);
        assert!(!watch.on(SYSEVENTS));
        let w = watch.add(SYSEVENTS).unwrap();
        let fetchers = watch.add(FETCHERS).unwrap();
        assert!(watch.on(SYSEVENTS));
        watch.swept(&Sweep {
            examined: 10,
            reclaimed: 3,
            elapsed: 0,
            since_run: 1,
            next_run: 1,
        });
        let got = taken(&w);
        let line = got.strip_prefix("OK\r\n").unwrap();
        assert_eq!(line.matches('\n').count(), 1, "{got:?}");
        assert!(line.ends_with('\n'));
        assert_eq!(names(line), names(MEMCACHED_CRAWL));
        assert!(
            line.contains(" type=lru_crawler crawler=1 lru=na low_mark=0 next_reclaims=0 since_run=1 next_run=1 elapsed=0 examined=10 reclaimed=3\n"),
            "{line:?}"
        );
        assert_eq!(taken(&fetchers), "OK\r\n", "not a fetchers' line");
        watch.remove(&w);
        assert!(!watch.on(SYSEVENTS));
    }

    /// `watch rawcmds` or a proxy kind: a watcher (it counts, it holds a
    /// place of the 20) of no line, and no logging point turns on for it.
    #[test]
    fn a_watcher_of_kinds_without_lines_gets_none() {
        let watch = Watch::new(DEFAULT_BUF);
        let w = watch.add(0).unwrap();
        for kind in [FETCHERS, MUTATIONS, EVICTIONS, CONNEVENTS, SYSEVENTS] {
            assert!(!watch.on(kind));
        }
        watch.fetched(b"k", Some(1));
        watch.stored(b"k", "stored", "set", 0, 1);
        watch.conn_event(&Endpoint::Tcp(([127, 0, 0, 1], 5).into()), 9, None);
        assert_eq!(taken(&w), "OK\r\n");
        let mut stats = Vec::new();
        watch.stats(&mut stats);
        let stats = String::from_utf8(stats).unwrap();
        assert!(stats.contains("STAT log_watchers 1\r\n"), "{stats}");
        assert!(stats.contains("STAT log_worker_written 0\r\n"), "{stats}");
    }

    /// At a stop the workers' closes carry memcached's `shutdown`.
    #[test]
    fn a_close_at_a_stop_says_shutdown() {
        let watch = Watch::new(DEFAULT_BUF);
        let w = watch.add(CONNEVENTS).unwrap();
        watch.conn_event(
            &Endpoint::Tcp(([127, 0, 0, 1], 4000).into()),
            12,
            Some("shutdown"),
        );
        let got = taken(&w);
        assert!(
            got.ends_with(
                " type=conn_close rip=127.0.0.1 rport=4000 transport=tcp reason=shutdown cfd=12\n"
            ),
            "{got:?}"
        );
    }
}
