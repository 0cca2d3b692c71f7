//! Debian's memcached 1.6.18 as the reference server for differential
//! tests: started on a free port, stopped when dropped; None when it is
//! not installed (tests/interop/install.sh installs it).

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Memcached {
    child: Child,
    pub port: u16,
}

impl Memcached {
    pub fn start() -> Option<Memcached> {
        Memcached::start_with(&[])
    }

    /// Started with `extra` flags too (`-Y file`, ...).
    pub fn start_with(extra: &[&str]) -> Option<Memcached> {
        Memcached::start_env(extra, &[])
    }

    /// Started with `extra` flags and `env` in its environment
    /// (`SASL_CONF_PATH`, ...).
    pub fn start_env(extra: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> Option<Memcached> {
        let bin = Path::new("/usr/bin/memcached");
        if !bin.exists() {
            return None;
        }
        let port = super::free_port();
        let child = Command::new(bin)
            .args(super::as_root())
            .args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let m = Memcached { child, port };
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "memcached did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(m)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
