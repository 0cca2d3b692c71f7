//! End-to-end over real sockets: pipelining, noreply, large and binary
//! values, malformed input, and what survives it.

mod common;
use common::{server, server_with, Client};
use std::io::{Read, Write};
use std::net::TcpStream;

#[test]
fn pipelined_requests_answer_in_order() {
    let h = server();
    let mut c = Client::new(&h);
    let mut batch = Vec::new();
    for i in 0..200 {
        batch.extend_from_slice(
            format!("set k{i} {i} 0 {}\r\nv{i}\r\n", format!("v{i}").len()).as_bytes(),
        );
    }
    for i in 0..200 {
        batch.extend_from_slice(format!("get k{i}\r\n").as_bytes());
    }
    let out = c.tx_str(&batch);
    let mut expect = "STORED\r\n".repeat(200);
    for i in 0..200 {
        expect.push_str(&format!(
            "VALUE k{i} {i} {}\r\nv{i}\r\nEND\r\n",
            format!("v{i}").len()
        ));
    }
    assert_eq!(out, expect);
    h.shutdown();
}

#[test]
fn trickled_bytes_and_reads_larger_than_a_chunk_are_all_answered() {
    // The server stops reading after a short read and relies on the next
    // readiness event: a request that arrives a few bytes at a time, and a
    // pipeline far larger than one 64 KiB read, must both be answered.
    let h = server();
    let mut c = Client::new(&h);
    for part in [
        &b"se"[..],
        b"t tr 0 0 5\r",
        b"\nhel",
        b"lo",
        b"\r\nget t",
        b"r\r\n",
    ] {
        c.s.write_all(part).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(c.tx_str(b""), "STORED\r\nVALUE tr 0 5\r\nhello\r\nEND\r\n");
    let mut batch = Vec::new();
    for i in 0..20_000 {
        batch.extend_from_slice(format!("get nokey{i}\r\n").as_bytes());
    }
    assert!(batch.len() > 4 * 64 * 1024);
    assert_eq!(c.tx_str(&batch), "END\r\n".repeat(20_000));
    h.shutdown();
}

#[test]
fn noreply_is_silent_and_effective() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(
        c.tx_str(b"set a 0 0 1 noreply\r\n1\r\nincr a 5 noreply\r\ndelete zz noreply\r\n"),
        ""
    );
    assert_eq!(c.tx_str(b"get a\r\n"), "VALUE a 0 1\r\n6\r\nEND\r\n");
    h.shutdown();
}

#[test]
fn large_binary_and_empty_values_round_trip() {
    let h = server();
    let mut c = Client::new(&h);
    let mut big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
    big[10] = b'\r';
    big[11] = b'\n';
    let mut req = format!("set big 1 0 {}\r\n", big.len()).into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n");
    assert_eq!(c.tx(&req), b"STORED\r\n");
    let got = c.tx(b"get big\r\n");
    let header = format!("VALUE big 1 {}\r\n", big.len());
    assert!(got.starts_with(header.as_bytes()));
    assert_eq!(&got[header.len()..header.len() + big.len()], &big[..]);
    assert_eq!(
        c.tx(b"set e 0 0 0\r\n\r\nget e\r\n"),
        b"STORED\r\nVALUE e 0 0\r\n\r\nEND\r\n"
    );
    h.shutdown();
}

#[test]
fn too_large_value_is_refused_swallowed_and_old_value_removed() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(c.tx(b"set k 0 0 1\r\nx\r\n"), b"STORED\r\n");
    let mut req = b"set k 0 0 2000000\r\n".to_vec();
    req.extend(std::iter::repeat_n(b'z', 2_000_000));
    req.extend_from_slice(b"\r\nget k\r\n");
    assert_eq!(
        c.tx_str(&req),
        "SERVER_ERROR object too large for cache\r\nEND\r\n"
    );
    h.shutdown();
}

#[test]
fn malformed_input_gets_errors_and_keeps_data() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(c.tx(b"set keep 0 0 4\r\ndata\r\n"), b"STORED\r\n");
    assert_eq!(c.tx_str(b"bogus\r\n"), "ERROR\r\n");
    assert_eq!(
        c.tx_str(b"set k abc 0 1\r\nx\r\n"),
        "CLIENT_ERROR bad command line format\r\nERROR\r\n"
    );
    assert_eq!(
        c.tx_str(b"set k 0 0 2\r\nabcd\r\n"),
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n"
    );
    let long_key = "a".repeat(251);
    assert_eq!(
        c.tx_str(format!("get {long_key}\r\n").as_bytes()),
        "CLIENT_ERROR bad command line format\r\n"
    );
    assert_eq!(
        c.tx_str(b"incr keep 1\r\n"),
        "CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
    );
    assert_eq!(
        c.tx_str(b"get keep\r\n"),
        "VALUE keep 0 4\r\ndata\r\nEND\r\n"
    );
    h.shutdown();
}

#[test]
fn disconnect_mid_value_loses_nothing_stored() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(c.tx(b"set k 0 0 3\r\nold\r\n"), b"STORED\r\n");
    {
        let mut s = TcpStream::connect(h.addr).unwrap();
        s.write_all(b"set k 0 0 100\r\nnew-but-trunc").unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(c.tx_str(b"get k\r\n"), "VALUE k 0 3\r\nold\r\nEND\r\n");
    h.shutdown();
}

#[test]
fn endless_garbage_line_closes_connection() {
    let h = server();
    let mut s = TcpStream::connect(h.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _ = s.write_all(&vec![b'x'; 10_000]);
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "server must hang up on a 10 kB line without newline");
    let mut c = Client::new(&h);
    assert_eq!(
        c.tx_str(b"version\r\n"),
        format!("VERSION {}\r\n", tiercache_server::VERSION)
    );
    h.shutdown();
}

#[test]
fn client_that_never_reads_does_not_block_others() {
    let h = server();
    let mut c = Client::new(&h);
    let value = vec![b'v'; 100_000];
    let mut req = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    req.extend_from_slice(&value);
    req.extend_from_slice(b"\r\n");
    assert_eq!(c.tx(&req), b"STORED\r\n");
    let flooder = TcpStream::connect(h.addr).unwrap();
    flooder.set_nonblocking(true).unwrap();
    let mut f = &flooder;
    // Ask for ~2 GB of replies without reading any.
    let line = b"get big big big big big big big big big big\r\n".repeat(100);
    let mut sent = 0usize;
    let start = std::time::Instant::now();
    while sent < 2000 * line.len() && start.elapsed().as_secs() < 3 {
        match f.write(&line) {
            Ok(n) => sent += n,
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
        }
    }
    assert!(
        sent < 2000 * line.len(),
        "the server stopped reading from a client that does not read"
    );
    assert_eq!(c.tx_str(b"get nothing\r\n"), "END\r\n");
    h.shutdown();
}

#[test]
fn connection_limit_rejects_with_error() {
    let h = server_with(|c| c.server.max_connections = 2);
    let _a = Client::new(&h);
    let _b = Client::new(&h);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let mut s = TcpStream::connect(h.addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let mut got = String::new();
    let _ = s.read_to_string(&mut got);
    assert_eq!(got, "ERROR Too many open connections\r\n");
    h.shutdown();
}

#[test]
fn ttl_and_flush_all() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(
        c.tx_str(b"set t 0 1 1\r\nx\r\nset n 0 -1 1\r\ny\r\nget n\r\n"),
        "STORED\r\nSTORED\r\nEND\r\n"
    );
    std::thread::sleep(std::time::Duration::from_millis(2100));
    assert_eq!(c.tx_str(b"get t\r\n"), "END\r\n");
    assert_eq!(
        c.tx_str(b"set a 0 0 1\r\n1\r\nflush_all\r\nget a\r\n"),
        "STORED\r\nOK\r\nEND\r\n"
    );
    h.shutdown();
}

#[test]
fn meta_commands() {
    let h = server();
    let mut c = Client::new(&h);
    assert_eq!(
        c.tx_str(b"ms foo 2 T0 F5 c O123 k\r\nhi\r\n"),
        "HD c1 O123 kfoo\r\n"
    );
    assert_eq!(
        c.tx_str(b"mg foo v f k s t c\r\n"),
        "VA 2 f5 kfoo s2 t-1 c1\r\nhi\r\n"
    );
    assert_eq!(c.tx_str(b"mg miss v q\r\nmg miss v\r\n"), "EN\r\n");
    assert_eq!(c.tx_str(b"ms foo 2 C99\r\nxx\r\n"), "EX\r\n");
    assert_eq!(
        c.tx_str(b"ma cnt N0 J10 v\r\nma cnt MD D3 v\r\n"),
        "VA 2\r\n10\r\nVA 1\r\n7\r\n"
    );
    assert_eq!(
        c.tx_str(b"md foo I T30\r\nmg foo c v\r\nmg foo v\r\n"),
        "HD\r\nVA 2 c4 X W\r\nhi\r\nVA 2 Z X\r\nhi\r\n"
    );
    assert_eq!(c.tx_str(b"mg Zm9v b k v\r\n"), "VA 2 kfoo Z X\r\nhi\r\n");
    assert_eq!(c.tx_str(b"md foo q\r\nmg foo\r\n"), "EN\r\n");
    assert_eq!(c.tx_str(b"mg newkey N30 v c\r\n"), "VA 0 c5 W\r\n\r\n");
    h.shutdown();
}

#[test]
fn connections_are_spread_over_workers() {
    // A burst of connections must not all land on the worker that happens
    // to wake first: each worker gets its share (fewest connections first).
    let h = server_with(|c| c.server.threads = 3);
    let mut clients: Vec<Client> = (0..6).map(|_| Client::new(&h)).collect();
    for c in &mut clients {
        assert_eq!(c.tx_str(b"get nothing\r\n"), "END\r\n");
    }
    let per_worker: Vec<u64> = h
        .shared
        .workers
        .iter()
        .map(|w| w.cmd_get.load(std::sync::atomic::Ordering::Relaxed))
        .collect();
    assert_eq!(per_worker, vec![2, 2, 2]);
    h.shutdown();
}

#[test]
fn stats_report_counters() {
    let h = server();
    let mut c = Client::new(&h);
    c.tx(b"set a 0 0 1\r\n1\r\nget a\r\nget b\r\n");
    let s = c.tx_str(b"stats\r\n");
    for want in [
        "STAT cmd_get 2\r\n",
        "STAT get_hits 1\r\n",
        "STAT get_misses 1\r\n",
        "STAT curr_items 1\r\n",
        "STAT cmd_set 1\r\n",
    ] {
        assert!(s.contains(want), "missing {want:?} in {s}");
    }
    assert!(s.ends_with("END\r\n"));
    assert_eq!(c.tx_str(b"stats reset\r\n"), "RESET\r\n");
    assert!(c.tx_str(b"stats\r\n").contains("STAT cmd_get 0\r\n"));
    assert!(c
        .tx_str(b"stats settings\r\n")
        .contains("STAT item_size_max 1048576\r\n"));
    h.shutdown();
}
