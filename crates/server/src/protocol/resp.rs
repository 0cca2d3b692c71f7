//! The Redis protocol (RESP2, and RESP3 after `HELLO 3`) over the same
//! engine, keys and items as the memcached port: [`codec`] frames requests,
//! [`reply`] encodes replies, [`db`] is the engine as whole items with
//! types and millisecond expiry, [`cmd`] holds the commands. A
//! connection's state is its [`Session`]; what all RESP connections share
//! (the server, the client list) is the [`Env`]. The connections
//! themselves are served by [`crate::conn::resp`].

pub mod cmd;
pub mod codec;
pub mod db;
pub mod reply;

use crate::shared::Shared;
use crate::stats::WorkerStats;
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// One RESP connection's state.
#[derive(Debug)]
pub struct Session {
    pub id: u64,
    pub authed: bool,
    pub name: Vec<u8>,
    /// Commands queued since MULTI.
    pub multi: Option<Vec<Vec<Vec<u8>>>>,
    /// A command queued since MULTI was refused: EXEC aborts.
    pub multi_failed: bool,
    /// Close once the replies so far are written (QUIT, CLIENT KILL).
    pub close: bool,
    pub last_cmd: &'static str,
    pub addr: String,
    pub laddr: String,
    pub created: Instant,
    /// Its worker's counters (`stats`) and latency recorder (the SLA
    /// view): each worker's own, so no two threads write them.
    pub stats: Arc<WorkerStats>,
}

/// A connected client as CLIENT LIST shows it.
pub struct ClientEntry {
    pub addr: String,
    pub laddr: String,
    pub name: Vec<u8>,
    pub created: Instant,
    pub last_cmd: &'static str,
    pub resp: u8,
    /// Set by CLIENT KILL; the connection closes.
    pub kill: Arc<AtomicBool>,
    /// A handle on its socket, to wake it from a read.
    pub stream: Option<TcpStream>,
}

/// What all RESP connections share.
pub struct Env {
    pub shared: Arc<Shared>,
    pub clients: Mutex<BTreeMap<u64, ClientEntry>>,
    pub next_id: AtomicU64,
}

impl Env {
    pub fn new(shared: Arc<Shared>) -> Env {
        Env {
            shared,
            clients: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(1),
        }
    }

    pub fn clients(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, ClientEntry>> {
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a password is needed (`-Y`).
    pub fn needs_auth(&self) -> bool {
        self.shared.auth.is_some()
    }

    /// A new connection's session, registered in the client list; it
    /// counts in `stats`, its worker's.
    pub fn open(
        &self,
        stream: Option<TcpStream>,
        addr: String,
        laddr: String,
        stats: Arc<WorkerStats>,
    ) -> (Session, Arc<AtomicBool>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let kill = Arc::new(AtomicBool::new(false));
        let created = Instant::now();
        self.clients().insert(
            id,
            ClientEntry {
                addr: addr.clone(),
                laddr: laddr.clone(),
                name: Vec::new(),
                created,
                last_cmd: "NULL",
                resp: 2,
                kill: kill.clone(),
                stream,
            },
        );
        let s = Session {
            id,
            authed: !self.needs_auth(),
            name: Vec::new(),
            multi: None,
            multi_failed: false,
            close: false,
            last_cmd: "NULL",
            addr,
            laddr,
            created,
            stats,
        };
        (s, kill)
    }

    /// The session's name, last command and protocol, for CLIENT LIST.
    pub fn update(&self, s: &Session, resp3: bool) {
        if let Some(e) = self.clients().get_mut(&s.id) {
            e.name.clone_from(&s.name);
            e.last_cmd = s.last_cmd;
            e.resp = if resp3 { 3 } else { 2 };
        }
    }

    pub fn close(&self, id: u64) {
        self.clients().remove(&id);
    }
}
