//! ASCII authentication (`-Y`) compared byte for byte with memcached
//! 1.6.18 started with the same auth file, and the unix socket (`-s`,
//! `-a`): permissions, no TCP listener, requests and `stats conns` over it.

mod common;

use common::memcached::Memcached;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

/// Reads what arrives until the connection has been quiet for 300 ms (or
/// closed: then "<closed>" is appended).
fn read_quiet(s: &mut impl Read) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) => {
                got.extend_from_slice(b"<closed>");
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                break
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                got.extend_from_slice(b"<closed>");
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    got
}

/// Sends each step on one connection and returns the replies, all run
/// against `port`.
fn replay(port: u16, steps: &[&[u8]]) -> Vec<String> {
    let mut s = common::connect_port(port);
    s.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    steps
        .iter()
        .map(|step| {
            let _ = s.write_all(step);
            String::from_utf8_lossy(&read_quiet(&mut s)).into_owned()
        })
        .collect()
}

fn auth_file(tag: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!("tc-auth-{tag}-{}", std::process::id()));
    std::fs::write(&p, "alice:secret\nbob:pa:ss\n").unwrap();
    p
}

#[test]
fn ascii_auth_replies_as_memcached_does() {
    let file = auth_file("diff");
    let f = file.to_str().unwrap();
    let Some(mc) = Memcached::start_with(&["-Y", f]) else {
        eprintln!("memcached not installed (tests/interop/install.sh): skipped");
        let _ = std::fs::remove_file(&file);
        return;
    };
    let tc = common::process::Proc::start(&["-Y", f]);
    let sessions: &[&[&[u8]]] = &[
        &[
            b"version\r\n",
            b"get foo\r\n",
            b"mn\r\n",
            b"stats\r\n",
            b"set a 0 0 5\r\nhello\r\n",
            b"set a 0 0 10\r\nalice nope\r\n",
            b"set a 0 0 4\r\nalicexx\r\n",
            b"set a 0 0 9\r\nbob pa:ss\r\n",
            b"get a\r\n",
            b"set b 0 0 1\r\nx\r\nget b\r\n",
            // After auth, as memcached with -Y: no binary protocol.
            b"\x80\x0a\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        ],
        &[
            b"set k 0 0 12 noreply\r\nalice secret\r\n",
            b"set k 0 0 12\r\nalice secret\r\n",
            b"get k\r\n",
        ],
        &[b"set k 0 0 6\r\nalice \r\n", b"set k 1 2 3\r\nabc\r\n"],
        // A failure, then an attempt whose data comes in the next read.
        &[
            b"set a 0 0 10\r\nalice nope\r\nset b 0 0 12\r\nali",
            b"ce secret\r\nget b\r\n",
        ],
        // 3000 bytes without a newline: closed.
        &[&[b'x'; 3000]],
    ];
    for steps in sessions {
        let want = replay(mc.port, steps);
        let got = replay(tc.addr.port(), steps);
        assert_eq!(got, want, "steps {steps:?}");
    }
    // The same attempts and failures counted (auth_cmds, auth_errors).
    let counts = |port: u16| {
        let r = replay(port, &[b"set x 0 0 12\r\nalice secret\r\n", b"stats\r\n"]);
        let get = |k: &str| common::stat_of(&r[1], k).unwrap_or_else(|| panic!("{k}: {r:?}"));
        (get("auth_cmds"), get("auth_errors"))
    };
    assert_eq!(counts(tc.addr.port()), counts(mc.port));
    // The replies are the ones documented (not only the same).
    let first = replay(tc.addr.port(), sessions[0]);
    assert_eq!(first[0], "CLIENT_ERROR unauthenticated\r\n");
    assert_eq!(first[5], "CLIENT_ERROR authentication failure\r\n");
    assert_eq!(first[7], "STORED\r\n");
    assert!(first[9].contains("VALUE b 0 1"), "{first:?}");
    drop(tc);
    drop(mc);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn the_auth_file_is_read_again_on_sighup() {
    let file = auth_file("hup");
    let tc = common::process::Proc::start(&["-Y", file.to_str().unwrap()]);
    let port = tc.addr.port();
    let login = b"set x 0 0 9\r\ncarol pw3\r\n";
    assert_eq!(
        replay(port, &[login])[0],
        "CLIENT_ERROR authentication failure\r\n"
    );
    std::fs::write(&file, "carol:pw3\n").unwrap();
    // SAFETY: kill sends a signal to the child we started.
    #[allow(unsafe_code)]
    let r = unsafe { libc::kill(tc.child.id() as i32, libc::SIGHUP) };
    assert_eq!(r, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = replay(port, &[login]);
        if got[0] == "STORED\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "not reloaded: {got:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // A malformed file keeps the users loaded before.
    std::fs::write(&file, "no colon here\n").unwrap();
    // SAFETY: as above.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(tc.child.id() as i32, libc::SIGHUP)
    };
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(replay(port, &[login])[0], "STORED\r\n");
    drop(tc);
    let _ = std::fs::remove_file(&file);
}

#[test]
fn a_unix_socket_replaces_tcp_with_its_mask() {
    let path = std::env::temp_dir().join(format!("tc-unix-{}.sock", std::process::id()));
    let p = path.display().to_string();
    // A socket file left behind by an earlier server is replaced.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let h = common::server_with(|c| {
        c.server.unix_socket = p.clone();
        c.server.unix_mask = 0o660;
    });
    assert!(h.addrs.is_empty(), "no TCP listener with -s: {:?}", h.addrs);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o660, "{mode:o}");
    let mut s = std::os::unix::net::UnixStream::connect(&path).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let got = common::tx(&mut s, "set a 0 0 2\r\nhi\r\nget a\r\n", "END\r\n");
    assert_eq!(got, "STORED\r\nVALUE a 0 2\r\nhi\r\nEND\r\n");
    let settings = common::tx(&mut s, "stats settings\r\n", "END\r\n");
    assert_eq!(common::stat_of(&settings, "domain_socket"), Some(p.clone()));
    assert_eq!(common::stat_of(&settings, "umask").as_deref(), Some("660"));
    let conns = common::tx(&mut s, "stats conns\r\n", "END\r\n");
    assert!(
        conns.contains(&format!(":addr unix:{p}\r\n"))
            && conns.contains(&format!(":listen_addr unix:{p}\r\n"))
            && conns.contains(":state conn_listening\r\n"),
        "{conns}"
    );
    h.shutdown();
    h.wait();
    let _ = std::fs::remove_file(&path);
}
