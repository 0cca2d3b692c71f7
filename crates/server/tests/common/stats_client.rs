//! A client's view of a server's `stats` groups, for the tests that compare
//! them with memcached's (`stats_keys.rs`) and parse them as the Prometheus
//! exporter does (`stats_exporter.rs`).

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One client's view of a server: the reply to a command, up to `END`.
pub struct Client(TcpStream);

impl Client {
    pub fn new(addr: SocketAddr) -> Client {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client(s)
    }

    pub fn until(&mut self, cmd: &str, end: &str) -> String {
        super::tx(&mut self.0, cmd, end)
    }

    /// `stats <group>` as (key, value) lines, in order.
    pub fn stats(&mut self, group: &str) -> Vec<(String, String)> {
        let cmd = if group.is_empty() {
            "stats\r\n".to_string()
        } else {
            format!("stats {group}\r\n")
        };
        self.until(&cmd, "END\r\n")
            .lines()
            .filter_map(|l| l.strip_prefix("STAT "))
            .map(|l| {
                let (k, v) = l.split_once(' ').unwrap_or((l, ""));
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    /// A key stored and read, so that per-class groups have a class.
    pub fn prime(&mut self) {
        assert_eq!(self.until("set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
        assert!(self
            .until("get k\r\n", "END\r\n")
            .starts_with("VALUE k 0 1"));
    }
}
