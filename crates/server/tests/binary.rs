//! The binary protocol (magic 0x80): every request gets a well-formed
//! response with its opaque, as memcached 1.6.18 gives it. A raw-socket
//! script of the core commands (quiet variants, CAS, incr with initial
//! value, touch/gat, stat, SASL refused, unknown opcodes, a key with
//! spaces) runs against the binary and, when installed, against Debian's
//! memcached, and the responses are compared field by field (CAS values
//! only as zero or not: the counters differ); then pylibmc with
//! `binary=True` (tests/interop/pylibmc_binary_test.py) when Debian's
//! python3-pylibmc is there (tests/interop/install.sh installs it).
//!
//! Cost: under a second.

mod common;

use common::memcached::Memcached;
use common::process::Proc;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn req(op: u8, key: &[u8], extras: &[u8], value: &[u8], opaque: u32, cas: u64) -> Vec<u8> {
    let mut b = vec![0x80, op];
    b.extend_from_slice(&(key.len() as u16).to_be_bytes());
    b.push(extras.len() as u8);
    b.extend_from_slice(&[0, 0, 0]);
    b.extend_from_slice(&((extras.len() + key.len() + value.len()) as u32).to_be_bytes());
    b.extend_from_slice(&opaque.to_be_bytes());
    b.extend_from_slice(&cas.to_be_bytes());
    b.extend_from_slice(extras);
    b.extend_from_slice(key);
    b.extend_from_slice(value);
    b
}

/// One response: opcode, status, opaque, whether CAS is set, extras, key, value.
#[derive(Debug, PartialEq, Eq)]
struct Res {
    op: u8,
    status: u16,
    opaque: u32,
    has_cas: bool,
    extras: Vec<u8>,
    key: Vec<u8>,
    value: Vec<u8>,
}

fn read_res(s: &mut TcpStream) -> Res {
    let mut h = [0u8; 24];
    s.read_exact(&mut h).expect("a response header");
    assert_eq!(h[0], 0x81, "response magic");
    let klen = usize::from(u16::from_be_bytes([h[2], h[3]]));
    let elen = usize::from(h[4]);
    let blen = u32::from_be_bytes(h[8..12].try_into().unwrap()) as usize;
    let mut body = vec![0u8; blen];
    s.read_exact(&mut body).unwrap();
    Res {
        op: h[1],
        status: u16::from_be_bytes([h[6], h[7]]),
        opaque: u32::from_be_bytes(h[12..16].try_into().unwrap()),
        has_cas: h[16..24] != [0; 8],
        extras: body[..elen].to_vec(),
        key: body[elen..elen + klen].to_vec(),
        value: body[elen + klen..].to_vec(),
    }
}

fn flags_exp(flags: u32, exp: u32) -> Vec<u8> {
    [flags.to_be_bytes(), exp.to_be_bytes()].concat()
}

fn arith(delta: u64, initial: u64, exp: u32) -> Vec<u8> {
    [
        &delta.to_be_bytes()[..],
        &initial.to_be_bytes(),
        &exp.to_be_bytes(),
    ]
    .concat()
}

/// Runs the script on a fresh server; returns each step's responses.
fn script(addr: &str) -> Vec<(String, Vec<Res>)> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut steps = Vec::new();
    let mut step = |name: &str, bytes: Vec<u8>, n: usize| {
        let s = &mut s;
        s.write_all(&bytes).unwrap();
        let got: Vec<Res> = (0..n).map(|_| read_res(s)).collect();
        steps.push((name.to_string(), got));
    };
    let fe = flags_exp(7, 0);
    step("get miss", req(0x00, b"nokey", &[], &[], 1, 0), 1);
    step("getk miss", req(0x0c, b"nokey", &[], &[], 2, 0), 1);
    // A quiet miss says nothing: only the noop answers.
    step(
        "getq miss, noop",
        [
            req(0x09, b"nokey", &[], &[], 3, 0),
            req(0x0a, b"", &[], &[], 4, 0),
        ]
        .concat(),
        1,
    );
    step("set", req(0x01, b"k1", &fe, b"val", 5, 0), 1);
    step("get", req(0x00, b"k1", &[], &[], 6, 0), 1);
    step("getk", req(0x0c, b"k1", &[], &[], 7, 0), 1);
    step("add exists", req(0x02, b"k1", &fe, b"v", 8, 0), 1);
    step("replace miss", req(0x03, b"k2", &fe, b"v", 9, 0), 1);
    step("set bad cas", req(0x01, b"k1", &fe, b"v", 10, 999_999), 1);
    step(
        "incr creates",
        req(0x05, b"c", &arith(1, 10, 0), &[], 11, 0),
        1,
    );
    step("incr", req(0x05, b"c", &arith(5, 10, 0), &[], 12, 0), 1);
    step("decr", req(0x06, b"c", &arith(20, 0, 0), &[], 13, 0), 1);
    step(
        "incr no create",
        req(0x05, b"c2", &arith(5, 10, u32::MAX), &[], 14, 0),
        1,
    );
    step(
        "incr non-numeric",
        req(0x05, b"k1", &arith(5, 10, 0), &[], 15, 0),
        1,
    );
    step("delete", req(0x04, b"k1", &[], &[], 16, 0), 1);
    step("delete miss", req(0x04, b"k1", &[], &[], 17, 0), 1);
    step("version", req(0x0b, b"", &[], &[], 18, 0), 1);
    step("unknown opcode", req(0x55, b"", &[], &[], 19, 0), 1);
    step("sasl list mechs", req(0x20, b"", &[], &[], 20, 0), 1);
    step("sasl auth", req(0x21, b"PLAIN", &[], b"\0u\0p", 21, 0), 1);
    step(
        "stat unknown group",
        req(0x10, b"nosuch", &[], &[], 22, 0),
        1,
    );
    step("flush", req(0x08, b"", &[], &[], 23, 0), 1);
    step(
        "setq, getq, getkq miss, noop",
        [
            req(0x11, b"q", &flags_exp(1, 0), b"x", 24, 0),
            req(0x09, b"q", &[], &[], 25, 0),
            req(0x0d, b"nokey", &[], &[], 26, 0),
            req(0x0a, b"", &[], &[], 27, 0),
        ]
        .concat(),
        2,
    );
    step(
        "touch",
        req(0x1c, b"q", &100u32.to_be_bytes(), &[], 28, 0),
        1,
    );
    step("gat", req(0x1d, b"q", &100u32.to_be_bytes(), &[], 29, 0), 1);
    step("append", req(0x0e, b"q", &[], b"yz", 30, 0), 1);
    step("prepend", req(0x0f, b"q", &[], b"w", 31, 0), 1);
    step("get appended", req(0x00, b"q", &[], &[], 32, 0), 1);
    step(
        "set key with space",
        req(0x01, b"a b\x01", &fe, b"sp", 33, 0),
        1,
    );
    step(
        "getk key with space",
        req(0x0c, b"a b\x01", &[], &[], 34, 0),
        1,
    );
    // A value over the item limit: Too large, its body discarded, the
    // key's old item removed, the connection goes on.
    step("set old", req(0x01, b"big", &fe, b"old", 37, 0), 1);
    let huge = vec![b'h'; 2 << 20];
    step(
        "set too large, noop",
        [
            req(0x01, b"big", &fe, &huge, 38, 0),
            req(0x0a, b"", &[], &[], 39, 0),
        ]
        .concat(),
        2,
    );
    step("get after too large", req(0x00, b"big", &[], &[], 40, 0), 1);
    // Invalid arguments, and the connection is closed (as memcached does).
    step("get without key", req(0x00, b"", &[], &[], 35, 0), 1);
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "bytes after an invalid request: {rest:?}");
    // quit answers, then closes; quitq closes silently.
    for (name, op, n) in [("quit", 0x07, 1), ("quitq", 0x17, 0)] {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(&req(op, b"", &[], &[], 36, 0)).unwrap();
        let got: Vec<Res> = (0..n).map(|_| read_res(&mut s)).collect();
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
        assert!(rest.is_empty(), "bytes after {name}: {rest:?}");
        steps.push((name.to_string(), got));
    }
    steps
}

fn find<'a>(steps: &'a [(String, Vec<Res>)], name: &str) -> &'a [Res] {
    &steps.iter().find(|(n, _)| n == name).unwrap().1
}

#[test]
fn binary_requests_get_memcached_responses() {
    let tc = Proc::start(&["-m", "32"]);
    let ours = script(&tc.addr.to_string());
    for (i, (name, res)) in ours.iter().enumerate() {
        assert!(
            res.iter().all(|r| r.opaque > 0 && r.op != 0xff),
            "{name}: {res:?}"
        );
        let _ = i;
    }
    // The essentials, whatever memcached is installed.
    assert_eq!(find(&ours, "get miss")[0].status, 1);
    assert_eq!(find(&ours, "get miss")[0].value, b"Not found");
    assert_eq!(find(&ours, "getk miss")[0].key, b"nokey");
    assert_eq!(find(&ours, "getq miss, noop")[0].op, 0x0a);
    let get = &find(&ours, "get")[0];
    assert_eq!((get.status, get.opaque, get.has_cas), (0, 6, true));
    assert_eq!(
        (get.extras.as_slice(), get.value.as_slice()),
        (&7u32.to_be_bytes()[..], &b"val"[..])
    );
    assert_eq!(find(&ours, "add exists")[0].status, 2);
    assert_eq!(find(&ours, "replace miss")[0].status, 1);
    assert_eq!(find(&ours, "set bad cas")[0].status, 2);
    assert_eq!(find(&ours, "incr creates")[0].value, 10u64.to_be_bytes());
    assert_eq!(find(&ours, "incr")[0].value, 15u64.to_be_bytes());
    assert_eq!(find(&ours, "decr")[0].value, 0u64.to_be_bytes());
    assert_eq!(find(&ours, "incr non-numeric")[0].status, 6);
    assert_eq!(find(&ours, "version")[0].value, b"1.6.18");
    for refused in ["unknown opcode", "sasl list mechs", "sasl auth"] {
        let r = &find(&ours, refused)[0];
        assert_eq!(
            (r.status, r.value.as_slice()),
            (0x81, &b"Unknown command"[..]),
            "{refused}"
        );
    }
    assert_eq!(find(&ours, "get appended")[0].value, b"wxyz");
    assert_eq!(find(&ours, "getk key with space")[0].value, b"sp");
    assert_eq!(find(&ours, "get without key")[0].status, 4);
    let large = find(&ours, "set too large, noop");
    assert_eq!(
        (large[0].status, large[0].value.as_slice()),
        (3, &b"Too large."[..])
    );
    assert_eq!(large[1].op, 0x0a);
    assert_eq!(find(&ours, "get after too large")[0].status, 1);

    let Some(mc) = Memcached::start() else {
        eprintln!("skipped the comparison: /usr/bin/memcached absent (tests/interop/install.sh)");
        return;
    };
    let theirs = script(&mc.addr());
    for ((name, a), (_, b)) in ours.iter().zip(&theirs) {
        assert_eq!(
            a, b,
            "{name}: tiercache (left) and memcached (right) differ"
        );
    }
}

#[test]
fn pylibmc_binary_client_works() {
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", "import pylibmc"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: /usr/bin/python3 has no pylibmc (tests/interop/install.sh installs python3-pylibmc)");
        return;
    }
    let tc = Proc::start(&["-m", "32"]);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/interop/pylibmc_binary_test.py");
    let out = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(tc.addr.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "pylibmc: {out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("pylibmc binary ok"));
}
