//! memcached's flags that change what clients may do, on the real binary
//! and, where Debian's memcached 1.6.18 is installed, byte for byte
//! against it: `-F` (no `flush_all`), `-X` (no key dumps), `-W` (no
//! `watch`) and `-B` (binding protocol).

mod common;

use common::memcached::Memcached;
use common::process::Proc;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Sends `req` on a new connection and reads until `want` bytes are in
/// (up to 10 s), then for a moment more (or until the server closes; then
/// the reply ends with `<closed>`).
fn script(addr: SocketAddr, req: &[u8], want: usize) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(req).unwrap();
    let mut end = Instant::now() + Duration::from_secs(10);
    let mut lingering = false;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if !lingering && got.len() >= want {
            lingering = true;
            end = Instant::now() + Duration::from_millis(if want == 0 { 400 } else { 150 });
        }
        let Some(left) = end.checked_duration_since(Instant::now()) else {
            break;
        };
        s.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => {
                got.extend_from_slice(b"<closed>");
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
    }
    got
}

/// A binary request header: magic, opcode, no key, extras or body.
fn bin(opcode: u8) -> Vec<u8> {
    let mut h = vec![0u8; 24];
    h[0] = 0x80;
    h[1] = opcode;
    h
}

const FLUSH: u8 = 0x08;
const VERSION: u8 = 0x0b;

/// The same requests to tiercache with `flags` and, when installed, to
/// memcached with them: tiercache's replies are `want`, and memcached's
/// the same bytes.
fn same_as_memcached(flags: &[&str], req: &[u8], want: &[u8]) {
    let t = Proc::start(flags);
    let got = script(t.addr, req, want.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(want),
        "tiercache {flags:?}"
    );
    match Memcached::start_with(flags) {
        Some(m) => {
            let theirs = script(m.addr().parse().unwrap(), req, want.len());
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&theirs),
                "memcached {flags:?} answers otherwise"
            );
        }
        None => eprintln!("memcached not installed: compared with the expected bytes only"),
    }
}

fn settings(p: &Proc) -> String {
    let r = common::process::roundtrip(p.addr, b"stats settings\r\n", b"END\r\n").unwrap();
    String::from_utf8(r).unwrap()
}

#[test]
fn dash_f_refuses_flush_all_and_keeps_the_items() {
    let text = b"set k 0 0 1\r\nv\r\nflush_all\r\nflush_all noreply\r\nflush_all 10\r\nget k\r\n";
    same_as_memcached(
        &["-F"],
        text,
        b"STORED\r\nCLIENT_ERROR flush_all not allowed\r\nCLIENT_ERROR flush_all not allowed\r\nVALUE k 0 1\r\nv\r\nEND\r\n",
    );
    // The binary flush: "Auth failure." (status 0x20), connection kept.
    let mut req = bin(FLUSH);
    req.extend(bin(VERSION));
    let t = Proc::start(&["-F"]);
    // Two responses: 24 + 13 ("Auth failure.") and 24 + 6 ("1.6.18").
    let got = script(t.addr, &req, 24 + 13 + 24 + 6);
    assert_eq!(&got[..2], &[0x81, FLUSH]);
    assert_eq!(u16::from_be_bytes([got[6], got[7]]), 0x20, "{got:?}");
    assert!(got.ends_with(b"1.6.18"), "{got:?}");
    same_as_memcached(&["-F"], &req, &got);
    let s = settings(&t);
    assert!(s.contains("STAT flush_enabled no\r\n"), "{s}");
    // A refused text flush is counted, a binary one not, as in memcached.
    let r = script(t.addr, b"flush_all\r\n", 36);
    assert_eq!(r, b"CLIENT_ERROR flush_all not allowed\r\n");
    assert_eq!(t.stat("cmd_flush"), Some(1));
    let plain = Proc::start(&[]);
    assert!(settings(&plain).contains("STAT flush_enabled yes\r\n"));
}

#[test]
fn dash_x_refuses_key_dumps() {
    same_as_memcached(
        &["-X"],
        b"set k 0 0 1\r\nv\r\nstats cachedump 1 0\r\nlru_crawler metadump all\r\nlru_crawler metadump 1\r\n",
        b"STORED\r\nCLIENT_ERROR stats cachedump not allowed\r\nERROR metadump not allowed\r\nERROR metadump not allowed\r\n",
    );
    let t = Proc::start(&["--disable-dumping"]);
    assert!(settings(&t).contains("STAT dump_enabled no\r\n"));
    let plain = Proc::start(&[]);
    assert!(settings(&plain).contains("STAT dump_enabled yes\r\n"));
}

#[test]
fn dash_w_refuses_watch() {
    same_as_memcached(
        &["-W"],
        b"watch\r\nwatch fetchers\r\nversion\r\n",
        b"CLIENT_ERROR watch commands not allowed\r\nCLIENT_ERROR watch commands not allowed\r\nVERSION 1.6.18\r\n",
    );
}

#[test]
fn dash_b_binds_the_protocol() {
    let mut version = bin(VERSION);
    // ascii: a binary request is text without a newline (no reply); text works.
    same_as_memcached(&["-B", "ascii"], &version, b"");
    same_as_memcached(&["-B", "ascii"], b"version\r\n", b"VERSION 1.6.18\r\n");
    // binary: a binary request works; text closes the connection once a
    // header's worth of bytes is in (memcached's "Invalid magic").
    let t = Proc::start(&["-B", "binary"]);
    let got = script(t.addr, &version, 24 + 6);
    assert!(got.starts_with(&[0x81, VERSION]) && got.ends_with(b"1.6.18"));
    same_as_memcached(&["-B", "binary"], &version, &got);
    same_as_memcached(&["-B", "binary"], b"version\r\n", b"");
    same_as_memcached(
        &["-B", "binary"],
        b"version\r\nversion\r\nversion\r\n",
        b"<closed>",
    );
    let asc = Proc::start(&["-B", "ascii"]);
    assert!(settings(&asc).contains("STAT binding_protocol ascii\r\n"));
    // auto (the default): both.
    let a = Proc::start(&["--protocol=auto"]);
    version.extend_from_slice(b"version\r\n");
    let got = script(a.addr, &version, 24 + 6 + 16);
    assert!(got.starts_with(&[0x81, VERSION]) && got.ends_with(b"VERSION 1.6.18\r\n"));
    assert!(settings(&a).contains("STAT binding_protocol auto-negotiate\r\n"));
}
