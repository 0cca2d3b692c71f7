//! Flash reads of pipelined requests routed back to the right request.
//! A connection tells its flights (the records of the request at the head
//! and of the gets read ahead behind it) apart by an 8-bit id carried in
//! the read tokens; every request looked at while reading ahead takes one,
//! so the ids wrap after 256 requests while a get read ahead may still
//! wait for its turn. Two live flights with one id: the read of the later
//! one was credited to the earlier one, and the connection waited for it
//! forever (a client setting 100 new keys per `mg` of a hot key stalled
//! after about 380,000 sets). The RESP port's flights had the same fault:
//! there every head request answered takes an id.

mod common;

use common::{server_with, tempdir, Client};
use std::io::Write;
use std::time::{Duration, Instant};

fn stat(c: &mut Client, name: &str) -> u64 {
    common::stat_of(&c.tx_str(b"stats\r\n"), name)
        .unwrap_or_else(|| panic!("no stat {name}"))
        .parse()
        .unwrap()
}

#[test]
fn a_get_read_ahead_256_requests_after_another_gets_its_own_record() {
    let dir = tempdir("read-ahead-ids");
    let h = server_with(|c| {
        c.cache.memory_mb = 16;
        c.flash.paths = vec![format!("{}:64M", dir.join("flash").display())];
        c.flash.tier.write_buffers = 2;
        c.flash.tier.low_ttl = 0;
    });
    let mut c = Client::new(&h);
    let value = |i: usize| format!("{i:04}{}", "f".repeat(996));
    // Three keys, then enough others to push them out of RAM and out of
    // the write buffers onto the device.
    let mut load = Vec::new();
    for i in 0..3 {
        let v = value(i);
        load.extend_from_slice(format!("set f{i} 0 0 {}\r\n{v}\r\n", v.len()).as_bytes());
    }
    let filler = "x".repeat(4000);
    for i in 0..6_000 {
        load.extend_from_slice(format!("set fill{i} 0 0 4000 noreply\r\n{filler}\r\n").as_bytes());
    }
    c.s.write_all(&load).unwrap();
    assert_eq!(c.tx_str(b""), "STORED\r\n".repeat(3));
    // The first keys' records are read from the device (not copied from a
    // write buffer): wait for the flusher to have written them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&mut c, "flash_segments_written") < 2 {
        assert!(Instant::now() < deadline, "nothing written to flash");
        std::thread::sleep(Duration::from_millis(50));
    }
    let read_before = stat(&mut c, "extstore_objects_read");
    // The head waits for its read; behind it f1 is read ahead, then 255
    // requests each take an id, then f2 is read ahead with the id f1's
    // flight still holds (all of it in one read of the socket: one sweep
    // of reads ahead, before any completion is reaped).
    let mut req = b"mg f0 v\r\nmg f1 v\r\n".to_vec();
    for i in 0..255 {
        req.extend_from_slice(format!("set new{i} 0 0 1\r\nn\r\n").as_bytes());
    }
    req.extend_from_slice(b"mg f2 v\r\n");
    let got = c.tx_str(&req);
    let mut expect = String::new();
    for i in 0..2 {
        expect.push_str(&format!("VA 1000\r\n{}\r\n", value(i)));
    }
    expect.push_str(&"STORED\r\n".repeat(255));
    expect.push_str(&format!("VA 1000\r\n{}\r\n", value(2)));
    assert_eq!(got, expect);
    assert!(
        stat(&mut c, "extstore_objects_read") >= read_before + 3,
        "the three keys were not read from flash"
    );
    drop(c);
    h.shutdown();
    h.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The RESP port's flights: a GET read ahead behind 256 requests answered
/// one after another (each takes an id as it comes to the head), whose
/// record takes two reads (a value longer than the first 4 KiB read), so
/// its second read is still in flight when a STRLEN comes to the head with
/// the GET's id and waits for its own read: both completions went to the
/// head, the GET waited forever for its second read.
#[test]
fn a_resp_get_read_ahead_256_heads_after_another_gets_its_own_record() {
    use common::resp::{cmd, pipeline, redis};
    let dir = tempdir("read-ahead-ids-resp");
    let h = common::resp::server_with(|c| {
        c.cache.memory_mb = 16;
        c.flash.paths = vec![format!("{}:64M", dir.join("flash").display())];
        c.flash.tier.write_buffers = 2;
        c.flash.tier.low_ttl = 0;
    });
    let mut s = redis(&h);
    let small = "s".repeat(1000);
    let big = "b".repeat(20_000);
    let keys = [("f0", &small), ("f1", &big), ("f2", &small)];
    let sets: Vec<_> = keys.iter().map(|(k, v)| cmd(&["SET", k, v])).collect();
    assert!(pipeline(&mut s, &sets).iter().all(|r| r == b"+OK"));
    let filler = "x".repeat(4000);
    for from in (0..6_000).step_by(500) {
        let cmds: Vec<_> = (from..from + 500)
            .map(|i| cmd(&["SET", &format!("fill{i}"), &filler]))
            .collect();
        assert!(pipeline(&mut s, &cmds).iter().all(|r| r == b"+OK"));
    }
    let mut c = Client::new(&h);
    let deadline = Instant::now() + Duration::from_secs(10);
    while stat(&mut c, "flash_segments_written") < 2 {
        assert!(Instant::now() < deadline, "nothing written to flash");
        std::thread::sleep(Duration::from_millis(50));
    }
    let read_before = stat(&mut c, "extstore_objects_read");
    let mut req = vec![cmd(&["GET", "f0"])];
    req.extend((0..255).map(|i| cmd(&["SET", &format!("new{i}"), "n"])));
    req.push(cmd(&["STRLEN", "f2"]));
    req.push(cmd(&["GET", "f1"]));
    let got = pipeline(&mut s, &req);
    assert_eq!(got[0], small.as_bytes());
    assert!(got[1..256].iter().all(|r| r == b"+OK"));
    assert_eq!(got[256], b":1000");
    assert_eq!(got[257], big.as_bytes());
    assert!(
        stat(&mut c, "extstore_objects_read") >= read_before + 3,
        "the three keys were not read from flash"
    );
    drop((c, s));
    h.shutdown();
    h.wait();
    std::fs::remove_dir_all(&dir).unwrap();
}
