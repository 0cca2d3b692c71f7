//! The real `tiercache` binary as a child process: started on an ephemeral
//! port (read back from its log), with its log lines kept, and its file
//! descriptors and RSS read from /proc, for tests of what a client can do
//! to the server's resources.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Proc {
    pub child: Child,
    pub addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

/// How to start it.
#[derive(Default)]
pub struct Opts<'a> {
    pub args: &'a [&'a str],
    /// RLIMIT_NOFILE (soft, hard) to run it under.
    pub nofile: Option<(u64, u64)>,
}

impl Proc {
    /// Starts `tiercache -p 0 -l 127.0.0.1 <args>` and waits until it listens.
    pub fn start(args: &[&str]) -> Proc {
        Proc::start_with(Opts {
            args,
            ..Opts::default()
        })
    }

    pub fn start_with(o: Opts<'_>) -> Proc {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tiercache"));
        // As root, tiercache (as memcached) wants to be told the user.
        if !o.args.contains(&"-u") {
            cmd.args(super::as_root());
        }
        cmd.args(["-p", "0", "-l", "127.0.0.1", "-o", "ext_path=none"])
            .args(o.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((soft, hard)) = o.nofile {
            // SAFETY: runs in the child between fork and exec and only calls
            // setrlimit, which is async-signal-safe, on a struct it owns.
            #[allow(unsafe_code)]
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: soft,
                        rlim_max: hard,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("run tiercache");
        let stderr = child.stderr.take().expect("stderr");
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let l = log.clone();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(i) = line.find("addr=") {
                    let a: String = line[i + 5..]
                        .chars()
                        .take_while(|c| !c.is_whitespace())
                        .collect();
                    if let (Ok(a), Some(tx)) = (a.parse::<SocketAddr>(), tx.take()) {
                        let _ = tx.send(a);
                    }
                }
                l.lock().unwrap().push(line);
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("tiercache did not start: {:?}", log.lock().unwrap());
            }
        };
        Proc { child, addr, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Open file descriptors of the server.
    pub fn fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("/proc/PID/fd")
            .count()
    }

    /// Resident set size of the server, bytes.
    pub fn rss(&self) -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// Waits up to `within` for the fd count to come down to `to`; returns
    /// the last count seen.
    pub fn fds_settle(&self, to: usize, within: Duration) -> usize {
        let t = Instant::now();
        loop {
            let n = self.fds();
            if n <= to || t.elapsed() > within {
                return n;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// A connected client with a read timeout.
    pub fn client(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        s
    }

    /// One `stats` value.
    pub fn stat(&self, name: &str) -> Option<u64> {
        let mut s = self.client();
        s.write_all(b"stats\r\n").unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 65536];
        while !got.ends_with(b"END\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "stats: connection closed");
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&got).into_owned();
        let want = format!("STAT {name} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&want).map(|v| v.trim().parse().unwrap()))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `req` on a fresh connection and returns the reply up to `until`.
pub fn roundtrip(addr: SocketAddr, req: &[u8], until: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(3))?;
    s.set_read_timeout(Some(Duration::from_secs(3)))?;
    s.write_all(req)?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(until) {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(got)
}

fn setsockopt_int(s: &TcpStream, opt: libc::c_int, v: libc::c_int) {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket fd we own and a pointer to a c_int with its size.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt: {}", std::io::Error::last_os_error());
}

/// Closes with a reset (SO_LINGER on, timeout 0) instead of a FIN.
pub fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let lin = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd we own and a pointer to a linger struct with its size.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&lin as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_LINGER: {}", std::io::Error::last_os_error());
    drop(s);
}

/// A client socket whose receive buffer is set to `rcvbuf` before it
/// connects (so the window it offers is small from the start).
pub fn connect_with_rcvbuf(addr: SocketAddr, rcvbuf: i32) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(a) = addr else {
        panic!("IPv4 only")
    };
    // SAFETY: socket() returns a new fd or -1; the fd is owned by the
    // TcpStream made from it right away, so it is closed on every path.
    #[allow(unsafe_code)]
    let s = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    };
    setsockopt_int(&s, libc::SO_RCVBUF, rcvbuf);
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    use std::os::fd::AsRawFd;
    // SAFETY: a valid socket fd and a sockaddr_in with its size.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::connect(
            s.as_raw_fd(),
            (&sin as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "connect: {}", std::io::Error::last_os_error());
    s
}
