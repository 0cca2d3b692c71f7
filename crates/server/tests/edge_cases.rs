//! Protocol edge cases where tiercache must answer as memcached 1.6.18 does,
//! byte for byte (issue 19, section 4), end to end over real sockets. Each
//! expectation was checked against a real memcached 1.6.18 with the same
//! bytes; tests/interop/cases/17-edge-cases.case compares them directly.

mod common;

use common::{server, Client};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `bytes` in one write and reads until the server closes the
/// connection (true) or stays silent for a while (false).
fn send_and_read(h: &tiercache_server::server::ServerHandle, bytes: &[u8]) -> (Vec<u8>, bool) {
    let mut s = TcpStream::connect(h.addr).unwrap();
    s.set_nodelay(true).unwrap();
    s.write_all(bytes).unwrap();
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return (got, false)
            }
            // A reset after the server closed with unread input.
            Err(_) => return (got, true),
        }
    }
}

fn version_line() -> String {
    format!("VERSION {}\r\n", tiercache_server::VERSION)
}

#[test]
fn an_http_request_line_closes_the_connection() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(c.tx_str(b"set a 0 0 1\r\nx\r\n"), "STORED\r\n");

    for line in [
        &b"GET / HTTP/1.0\r\n"[..],
        b"POST /x HTTP/1.1\r\nHost: a\r\n\r\n",
        b"foo HTTP/\r\n",
        b"mfoo HTTP/1.1\r\n",
        b"Delete HTTP/1.1\r\n",
        b"foo HTTP/1.1\n",
        b"foo HTTP/1.1\0 x\r\n",
        // The 23rd word is the last one memcached looks at.
        b"foo a b c d e f g h i j k l m n o p q r s t u HTTP/1 x\r\n",
    ] {
        let (got, closed) = send_and_read(&h, line);
        assert_eq!(got, b"", "{:?}", String::from_utf8_lossy(line));
        assert!(closed, "{:?} must close", String::from_utf8_lossy(line));
    }
    // Replies due before it (a get's, mn's) are written; later ones are not.
    let (got, closed) = send_and_read(&h, b"get a\r\nversion\r\nGET / HTTP/1.0\r\nget a\r\n");
    assert_eq!(got, b"VALUE a 0 1\r\nx\r\nEND\r\n");
    assert!(closed);
    let (got, closed) = send_and_read(&h, b"mn\r\nversion\r\nGET / HTTP/1.0\r\n");
    assert_eq!(got, b"MN\r\n");
    assert!(closed);

    // Not an HTTP hang-up: known first letters, known commands, other words.
    for (line, reply) in [
        (&b"gxx HTTP/1.1\r\n"[..], "ERROR\r\n".to_string()),
        (b"mx HTTP/1.1\r\n", "ERROR\r\n".into()),
        (b"sfoo HTTP/1.1\r\n", "ERROR\r\n".into()),
        (b"lru HTTP/1.1\r\n", "ERROR\r\n".into()),
        (b"foo http/1.1\r\n", "ERROR\r\n".into()),
        (b"foo HTTP\r\n", "ERROR\r\n".into()),
        (b"foo HTTP/1.1 noreply\r\n", "ERROR\r\n".into()),
        (b"H HTTP/1.1\r\n", "ERROR\r\n".into()),
        (
            b"foo a b c d e f g h i j k l m n o p q r s t u v HTTP/1 x\r\n",
            "ERROR\r\n".into(),
        ),
        (b"get HTTP/1.1\r\n", "END\r\n".into()),
        (b"version HTTP/1.1\r\n", version_line()),
    ] {
        assert_eq!(c.tx_str(line), reply, "{:?}", String::from_utf8_lossy(line));
    }
    // Nothing stored was lost.
    assert_eq!(c.tx_str(b"get a\r\n"), "VALUE a 0 1\r\nx\r\nEND\r\n");
    h.shutdown();
}

#[test]
fn a_long_key_get_keeps_the_replies_already_due() {
    let h = server();
    let long = "k".repeat(251);
    let bad = "CLIENT_ERROR bad command line format\r\n";
    let mut c = Client::new(&h);
    assert_eq!(c.tx_str(b"set a 0 0 1\r\nx\r\n"), "STORED\r\n");
    // mn writes out everything before it.
    let got = c.tx_str(format!("mn\r\nversion\r\nget {long}\r\nversion\r\n").as_bytes());
    assert_eq!(got, format!("MN\r\n{bad}{}", version_line()));
    let got = c
        .tx_str(format!("set b 0 0 1\r\ny\r\nmn\r\nset c 0 0 1\r\nz\r\nget {long}\r\n").as_bytes());
    assert_eq!(got, format!("STORED\r\nMN\r\n{bad}"));
    // So does a get; the version after it is dropped.
    let got = c.tx_str(format!("get a\r\nversion\r\nget {long}\r\n").as_bytes());
    assert_eq!(got, format!("VALUE a 0 1\r\nx\r\nEND\r\n{bad}"));
    // Without a flush point everything pending goes, as before.
    let got = c.tx_str(format!("version\r\nget a {long}\r\nversion\r\n").as_bytes());
    assert_eq!(got, format!("{bad}{}", version_line()));
    // The stores went through all the same.
    assert_eq!(
        c.tx_str(b"get b c\r\n"),
        "VALUE b 0 1\r\ny\r\nVALUE c 0 1\r\nz\r\nEND\r\n"
    );
    h.shutdown();
}

/// The number after ` <flag>` in a meta reply line.
fn meta_num(reply: &str, flag: char) -> i64 {
    let tok = reply
        .split_whitespace()
        .find(|t| t.starts_with(flag) && t[1..].parse::<i64>().is_ok())
        .unwrap_or_else(|| panic!("no {flag} in {reply:?}"));
    tok[1..].parse().unwrap()
}

#[test]
fn mg_l_counts_seconds_since_the_last_access() {
    let h = server();
    let mut c = Client::new(&h);
    // l and h are as before this access; t is the TTL left.
    let r = c.tx_str(b"set k 0 100 1\r\nx\r\nmg k l h t\r\n");
    assert!(r.starts_with("STORED\r\nHD l"), "{r}");
    assert!(meta_num(&r, 'l') <= 1, "just set: {r}");
    assert_eq!(meta_num(&r, 'h'), 0, "{r}");
    assert!((99..=100).contains(&meta_num(&r, 't')), "{r}");
    std::thread::sleep(Duration::from_millis(1100));
    let r = c.tx_str(b"mg k l h\r\n");
    assert!((1..=2).contains(&meta_num(&r, 'l')), "a second later: {r}");
    assert_eq!(meta_num(&r, 'h'), 1, "{r}");
    let r = c.tx_str(b"mg k l\r\n");
    assert!(meta_num(&r, 'l') <= 1, "just read: {r}");
    // An item stored a second ago, never read.
    let r = c.tx_str(b"set n 0 0 1\r\ny\r\n");
    assert_eq!(r, "STORED\r\n");
    std::thread::sleep(Duration::from_millis(1100));
    let r = c.tx_str(b"mg n l h t\r\n");
    assert!((1..=2).contains(&meta_num(&r, 'l')), "{r}");
    assert!(r.ends_with(" h0 t-1\r\n"), "{r}");
    h.shutdown();
}

#[test]
fn meta_e_and_md_x_are_refused_as_memcached_1_6_18_does() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(c.tx_str(b"set k 0 0 1\r\nx\r\n"), "STORED\r\n");
    let invalid = "CLIENT_ERROR invalid flag\r\n";
    let md_ma = "CLIENT_ERROR invalid or duplicate flag\r\n";
    assert_eq!(c.tx_str(b"mg k E5 c\r\n"), invalid);
    assert_eq!(c.tx_str(b"mg new N30 E5 c\r\n"), invalid);
    // ms: the data block is swallowed, nothing is stored.
    assert_eq!(c.tx_str(b"ms k 1 E12345 c\r\ny\r\n"), invalid);
    assert_eq!(c.tx_str(b"md k E5\r\n"), md_ma);
    assert_eq!(c.tx_str(b"md k x\r\n"), md_ma);
    assert_eq!(c.tx_str(b"ma k E5\r\n"), md_ma);
    assert_eq!(c.tx_str(b"mg k x\r\n"), invalid);
    // Nothing changed: same value, same CAS (1), nothing created.
    assert_eq!(c.tx_str(b"mg k v c\r\n"), "VA 1 c1\r\nx\r\n");
    assert_eq!(c.tx_str(b"mg new\r\n"), "EN\r\n");
    h.shutdown();
}

#[test]
fn stats_detail_dump_counts_by_key_prefix() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(c.tx_str(b"stats detail dump\r\n"), "END\r\n");
    assert_eq!(c.tx_str(b"stats detail on\r\n"), "OK\r\n");
    c.tx(b"set a:1 0 0 1\r\nx\r\nget a:1 a:2 nodelim\r\ndelete a:1\r\nmg a:2 v\r\nincr a:3 1\r\n");
    assert_eq!(
        c.tx_str(b"stats detail dump\r\n"),
        "PREFIX a get 2 hit 1 set 1 del 1\r\nEND\r\n"
    );
    // Two prefixes come in memcached's order (its hash table's), not by name.
    c.tx(b"get b:1\r\n");
    assert_eq!(
        c.tx_str(b"stats detail dump\r\n"),
        "PREFIX b get 1 hit 0 set 0 del 0\r\nPREFIX a get 2 hit 1 set 1 del 1\r\nEND\r\n"
    );
    assert_eq!(c.tx_str(b"stats detail off\r\n"), "OK\r\n");
    c.tx(b"get a:1\r\n");
    assert!(c
        .tx_str(b"stats detail dump\r\n")
        .contains("PREFIX a get 2 "));
    assert_eq!(c.tx_str(b"stats reset\r\n"), "RESET\r\n");
    assert_eq!(c.tx_str(b"stats detail dump\r\n"), "END\r\n");
    h.shutdown();

    // -D sets the delimiter and turns detail on from the start.
    let h = common::server_with(|c| {
        c.server.detail_enabled = true;
        c.server.detail_delimiter = b'/';
    });
    let mut c = Client::new(&h);
    c.tx(b"set x/1 0 0 1\r\nx\r\nget x/1 y:1\r\n");
    assert_eq!(
        c.tx_str(b"stats detail dump\r\n"),
        "PREFIX x get 1 hit 1 set 1 del 0\r\nEND\r\n"
    );
    h.shutdown();
}

fn stat(c: &mut Client, name: &str) -> u64 {
    let out = c.tx_str(b"stats\r\n");
    let prefix = format!("STAT {name} ");
    out.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in stats"))
        .parse()
        .unwrap()
}

#[test]
fn get_expired_get_flushed_and_reclaimed_count_as_in_memcached() {
    let h = server();
    let mut c = Client::new(&h);
    // A lookup that finds its item expired: get_expired, from get, mg, set,
    // touch, delete and incr alike (memcached's lookup counts it). The
    // once-a-second sweep may take an item first: then try again.
    for (i, cmd) in [
        "get k{}\r\n",
        "mg k{} v\r\n",
        "set k{} 0 0 1\r\ny\r\n",
        "touch k{} 0\r\n",
        "delete k{}\r\n",
        "incr k{} 1\r\n",
    ]
    .iter()
    .enumerate()
    {
        let before = stat(&mut c, "get_expired");
        let counted = (0..5).any(|try_| {
            let key = format!("{i}x{try_}");
            let set = format!("set k{key} 0 -1 1\r\n1\r\n");
            c.tx(format!("{set}{}", cmd.replace("{}", &key)).as_bytes());
            stat(&mut c, "get_expired") == before + 1
        });
        assert!(counted, "{cmd:?} counts get_expired");
    }
    assert_eq!(stat(&mut c, "get_flushed"), 0);

    // Lookups of items flush_all dropped: get_flushed (get and set alike);
    // the others are reclaimed by the sweep after next.
    let reclaimed = stat(&mut c, "reclaimed");
    let got = c.tx_str(
        b"set f1 0 0 1\r\nx\r\nset f2 0 0 1\r\nx\r\nset f3 0 0 1\r\nx\r\nflush_all\r\nget f1\r\nset f2 0 0 1\r\nz\r\n",
    );
    assert_eq!(got, "STORED\r\nSTORED\r\nSTORED\r\nOK\r\nEND\r\nSTORED\r\n");
    assert_eq!(stat(&mut c, "get_flushed"), 2);
    std::thread::sleep(Duration::from_millis(2600));
    assert!(
        stat(&mut c, "reclaimed") > reclaimed,
        "f3, never looked up, is reclaimed"
    );
    assert_eq!(
        c.tx_str(b"get f1 f2 f3\r\n"),
        "VALUE f2 0 1\r\nz\r\nEND\r\n"
    );
    assert_eq!(stat(&mut c, "get_flushed"), 2, "counted once");
    assert_eq!(c.tx_str(b"stats reset\r\n"), "RESET\r\n");
    assert_eq!(stat(&mut c, "get_expired"), 0);
    assert_eq!(stat(&mut c, "get_flushed"), 0);
    h.shutdown();
}
