//! RESP test helpers: a server with a Redis port, raw RESP requests and
//! replies over a real socket.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;
use tiercache_server::server::ServerHandle;

pub fn server_with(f: impl Fn(&mut tiercache_server::config::Config)) -> ServerHandle {
    // The free port can be taken by another test's server before this one
    // binds it (tests run in parallel): then another port.
    let mut last = None;
    for _ in 0..5 {
        match super::try_server_with(|c| {
            c.redis.port = super::free_port();
            f(c);
        }) {
            Ok(h) => return h,
            Err(e) if format!("{e:#}").contains("in use") => last = Some(e),
            Err(e) => panic!("server starts: {e:#}"),
        }
    }
    panic!("server starts: {:#}", last.expect("an error"));
}

pub fn redis(h: &ServerHandle) -> TcpStream {
    let s = TcpStream::connect(h.redis_addrs[0]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Sends `req`, reads until `want`'s length has come, returns it.
pub fn tx(s: &mut TcpStream, req: &[u8], want: &[u8]) {
    s.write_all(req).unwrap();
    let mut got = vec![0u8; want.len()];
    let mut n = 0;
    while n < want.len() {
        let r = s.read(&mut got[n..]).unwrap();
        assert!(
            r > 0,
            "closed; got {:?}",
            String::from_utf8_lossy(&got[..n])
        );
        n += r;
    }
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(want),
        "after {:?}",
        String::from_utf8_lossy(req)
    );
}

/// A command as a RESP array of bulk strings.
pub fn cmd(args: &[&str]) -> Vec<u8> {
    let mut b = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        b.extend_from_slice(format!("${}\r\n{a}\r\n", a.len()).as_bytes());
    }
    b
}

pub fn is(s: &mut TcpStream, args: &[&str], want: &str) {
    tx(s, &cmd(args), want.as_bytes());
}

pub fn pipeline(s: &mut TcpStream, cmds: &[Vec<u8>]) -> Vec<Vec<u8>> {
    s.write_all(&cmds.concat()).unwrap();
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut at = 0;
    while out.len() < cmds.len() {
        // Parse what is buffered.
        while let Some(nl) = buf[at..].windows(2).position(|w| w == b"\r\n") {
            let line = &buf[at..at + nl];
            if line[0] == b'$' && line != b"$-1" {
                let len: usize = std::str::from_utf8(&line[1..]).unwrap().parse().unwrap();
                let end = at + nl + 2 + len + 2;
                if buf.len() < end {
                    break;
                }
                out.push(buf[at + nl + 2..end - 2].to_vec());
                at = end;
            } else {
                out.push(line.to_vec());
                at += nl + 2;
            }
            if out.len() == cmds.len() {
                break;
            }
        }
        if out.len() == cmds.len() {
            break;
        }
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
    out
}
