//! Every open connection and listening socket, for `stats conns` and the
//! idle timeout (`-o idle_timeout=N`).
//!
//! Each worker has its own table (a mutex that only that worker and a
//! `stats conns` ever take, on a connection's open and close); the time of
//! a connection's last request is an atomic the worker stores on each
//! socket event, so the hot path takes no lock.

use crate::transport::Endpoint;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// One connection as `stats conns` shows it.
#[derive(Debug)]
pub struct ConnInfo {
    /// The socket's file descriptor (memcached numbers `stats conns` lines by it).
    pub fd: i32,
    pub peer: Endpoint,
    pub local: Endpoint,
    /// Unix time (seconds) of the last socket event that brought input.
    pub last_cmd: AtomicU32,
}

impl ConnInfo {
    pub fn new(fd: i32, peer: Endpoint, local: Endpoint, now: u32) -> ConnInfo {
        ConnInfo {
            fd,
            peer,
            local,
            last_cmd: AtomicU32::new(now),
        }
    }

    pub fn touch(&self, now: u32) {
        self.last_cmd.store(now, Ordering::Relaxed);
    }

    /// Seconds since the last request, at `now`.
    pub fn idle_secs(&self, now: u32) -> u32 {
        now.saturating_sub(self.last_cmd.load(Ordering::Relaxed))
    }
}

/// A listening socket.
#[derive(Debug, Clone)]
pub struct ListenerInfo {
    pub fd: i32,
    pub addr: Endpoint,
}

/// The connections of every worker, and the listeners.
#[derive(Debug)]
pub struct Registry {
    workers: Vec<Mutex<BTreeMap<usize, Arc<ConnInfo>>>>,
    pub listeners: Vec<ListenerInfo>,
    /// When the server started listening (the listeners' "last command").
    pub started: u32,
}

impl Registry {
    pub fn new(workers: usize, listeners: Vec<ListenerInfo>, now: u32) -> Registry {
        Registry {
            workers: (0..workers).map(|_| Mutex::new(BTreeMap::new())).collect(),
            listeners,
            started: now,
        }
    }

    pub fn add(&self, worker: usize, key: usize, info: Arc<ConnInfo>) {
        self.table(worker).insert(key, info);
    }

    pub fn remove(&self, worker: usize, key: usize) {
        self.table(worker).remove(&key);
    }

    fn table(&self, worker: usize) -> std::sync::MutexGuard<'_, BTreeMap<usize, Arc<ConnInfo>>> {
        self.workers[worker]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// All connections, ordered by file descriptor.
    pub fn snapshot(&self) -> Vec<Arc<ConnInfo>> {
        let mut all: Vec<Arc<ConnInfo>> = (0..self.workers.len())
            .flat_map(|w| self.table(w).values().cloned().collect::<Vec<_>>())
            .collect();
        all.sort_by_key(|c| c.fd);
        all
    }
}

/// `stats conns`, without the final `END`: for each listener `addr`,
/// `state conn_listening`, `secs_since_last_cmd`; for each connection
/// `addr`, `listen_addr`, `state` and `secs_since_last_cmd`, as memcached
/// 1.6 prints them. `me` is the fd of the connection asking: it is parsing
/// a command (`conn_parse_cmd`); the others wait for input (`conn_waiting`).
pub fn stats_conns(out: &mut Vec<u8>, reg: &Registry, me: Option<i32>, now: u32) {
    use std::io::Write;
    let mut lines: Vec<(i32, Vec<u8>)> = Vec::new();
    for l in &reg.listeners {
        let mut b = Vec::new();
        let _ = write!(
            b,
            "STAT {fd}:addr {}\r\nSTAT {fd}:state conn_listening\r\nSTAT {fd}:secs_since_last_cmd {}\r\n",
            l.addr,
            now.saturating_sub(reg.started),
            fd = l.fd
        );
        lines.push((l.fd, b));
    }
    for c in reg.snapshot() {
        let state = if Some(c.fd) == me {
            "conn_parse_cmd"
        } else {
            "conn_waiting"
        };
        let mut b = Vec::new();
        let _ = write!(
            b,
            "STAT {fd}:addr {}\r\nSTAT {fd}:listen_addr {}\r\nSTAT {fd}:state {state}\r\nSTAT {fd}:secs_since_last_cmd {}\r\n",
            c.peer,
            c.local,
            c.idle_secs(now),
            fd = c.fd
        );
        lines.push((c.fd, b));
    }
    lines.sort_by_key(|(fd, _)| *fd);
    for (_, b) in lines {
        out.extend_from_slice(&b);
    }
}

std::thread_local! {
    /// The fd of the connection this worker is running requests of, for
    /// `stats conns` (which shows that one as `conn_parse_cmd`).
    static CURRENT_FD: Cell<Option<i32>> = const { Cell::new(None) };
}

/// The fd of the connection whose requests the calling worker runs.
pub fn current_fd() -> Option<i32> {
    CURRENT_FD.with(Cell::get)
}

/// Sets the fd of the connection whose requests the calling worker runs.
pub fn set_current_fd(fd: Option<i32>) {
    CURRENT_FD.with(|c| c.set(fd));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_spelled_as_memcached_does() {
        let tcp = |a: &str| Endpoint::Tcp(a.parse().unwrap()).to_string();
        assert_eq!(tcp("127.0.0.1:11211"), "tcp:127.0.0.1:11211");
        assert_eq!(tcp("[::1]:5"), "tcp6:[::1]:5");
        assert_eq!(
            Endpoint::Unix("/run/m.sock".into()).to_string(),
            "unix:/run/m.sock"
        );
        assert_eq!(Endpoint::UnixPeer.to_string(), "?:<AF 0>");
    }

    #[test]
    fn conns_are_listed_by_fd_with_their_state() {
        let l = ListenerInfo {
            fd: 7,
            addr: Endpoint::Tcp("127.0.0.1:1".parse().unwrap()),
        };
        let reg = Registry::new(2, vec![l], 100);
        let c = |fd| {
            Arc::new(ConnInfo::new(
                fd,
                Endpoint::Tcp("127.0.0.1:9".parse().unwrap()),
                Endpoint::Tcp("127.0.0.1:1".parse().unwrap()),
                100,
            ))
        };
        reg.add(1, 0, c(12));
        reg.add(0, 3, c(9));
        let mut out = Vec::new();
        stats_conns(&mut out, &reg, Some(12), 105);
        let text = String::from_utf8(out).unwrap();
        let fds: Vec<&str> = text
            .lines()
            .map(|l| l.split([' ', ':']).nth(1).unwrap())
            .collect();
        assert_eq!(
            fds,
            ["7", "7", "7", "9", "9", "9", "9", "12", "12", "12", "12"]
        );
        assert!(text.contains("STAT 12:state conn_parse_cmd\r\n"), "{text}");
        assert!(text.contains("STAT 9:state conn_waiting\r\n"), "{text}");
        assert!(text.contains("STAT 9:secs_since_last_cmd 5\r\n"), "{text}");
        reg.remove(0, 3);
        assert_eq!(reg.snapshot().len(), 1);
    }
}
