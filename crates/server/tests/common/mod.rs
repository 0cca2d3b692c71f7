//! Test helpers: an in-process server on an ephemeral port, and a raw client.

#![allow(dead_code)]

pub mod memcached;
pub mod process;
pub mod resp;
pub mod stats_client;
pub mod stats_differences;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use tiercache_server::config::Config;
use tiercache_server::server::{start, ServerHandle};

pub fn server_with(f: impl FnOnce(&mut Config)) -> ServerHandle {
    try_server_with(f).expect("server starts")
}

/// [`server_with`], the error returned.
pub fn try_server_with(f: impl FnOnce(&mut Config)) -> anyhow::Result<ServerHandle> {
    let mut cfg = Config::default();
    cfg.server.port = 0;
    cfg.server.threads = 2;
    cfg.cache.memory_mb = 32;
    // Sets wait for the flash device as long as it needs
    // (`ext_max_write_wait=0`): with the default 10 ms bound, a flusher
    // starved of CPU on a loaded machine makes evacuations evict, and tests
    // that count what is kept would count the machine's load (seen:
    // flash.rs missing 2,666 of 40,000 items). Tests of the bound set it.
    cfg.flash.tier.max_write_wait = std::time::Duration::ZERO;
    f(&mut cfg);
    start(cfg)
}

/// A fresh directory under the system's temp dir, named for the test and
/// the process (emptied if it was left behind).
pub fn tempdir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn server() -> ServerHandle {
    server_with(|_| {})
}

pub struct Client {
    pub s: TcpStream,
}

impl Client {
    pub fn new(h: &ServerHandle) -> Client {
        let s = TcpStream::connect(h.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Client { s }
    }

    /// Sends bytes followed by `mn`, returns everything before the `MN` reply.
    pub fn tx(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.s.write_all(bytes).unwrap();
        self.s.write_all(b"mn\r\n").unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !got.ends_with(b"MN\r\n") {
            let n = match self.s.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                r => r.unwrap(),
            };
            assert!(
                n > 0,
                "connection closed; got so far: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
        got.truncate(got.len() - 4);
        got
    }

    pub fn tx_str(&mut self, bytes: &[u8]) -> String {
        String::from_utf8_lossy(&self.tx(bytes)).into_owned()
    }
}

/// Sends `req` and reads the reply up to the end marker `until`.
pub fn tx(s: &mut (impl Read + Write), req: &str, until: &str) -> String {
    s.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(until.as_bytes()) {
        let n = s.read(&mut buf).unwrap();
        assert!(
            n > 0,
            "closed after {req:?}: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(got).unwrap()
}

/// The value of `STAT <key>` in a `stats` reply.
pub fn stat_of(text: &str, key: &str) -> Option<String> {
    let want = format!("STAT {key} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&want).map(|v| v.trim().to_string()))
}

/// A port free now on 127.0.0.1 (for servers that must be told a port).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no effects.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid() == 0
    }
}

/// `-u root` when the test runs as root (memcached and tiercache want to be
/// told which user to run as).
pub fn as_root() -> Vec<&'static str> {
    if is_root() {
        vec!["-u", "root"]
    } else {
        vec![]
    }
}

/// Connects to a server (a child process) that may still be starting:
/// retries for up to 20 s; reads time out after 10 s.
pub fn connect_port(port: u16) -> TcpStream {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => {
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                return s;
            }
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("server did not start: {e}"),
        }
    }
}

/// Sends `req` then `mn`; returns everything before the `MN` reply.
pub fn tx_mn(s: &mut TcpStream, req: &[u8]) -> String {
    s.write_all(req).unwrap();
    s.write_all(b"mn\r\n").unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 65536];
    while !got.ends_with(b"MN\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0);
        got.extend_from_slice(&buf[..n]);
    }
    got.truncate(got.len() - 4);
    String::from_utf8_lossy(&got).into_owned()
}
