//! The key dump, the binary protocol and the metrics endpoint with a flash
//! tier: a metadump lists the RAM items only (each once, none on flash), a
//! binary GETK of an item that went to flash returns its value (the
//! request waits for its flash read as a text get does), and such a get
//! counts as `flash_hit` in the latency histograms.
//!
//! Cost: about 3 s (60 MB of sets through a 48 MiB cache).

mod common;

use common::{free_port, server_with, tx, Client};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;

fn payload(i: usize) -> Vec<u8> {
    let mut v = format!("{i}|").into_bytes();
    v.resize(2000, b'a' + (i % 26) as u8);
    v
}

fn getk(s: &mut TcpStream, key: &[u8]) -> (u16, Vec<u8>) {
    let mut req = vec![0x80, 0x0c, 0, key.len() as u8, 0, 0, 0, 0];
    req.extend_from_slice(&(key.len() as u32).to_be_bytes());
    req.extend_from_slice(&[0; 12]);
    req.extend_from_slice(key);
    s.write_all(&req).unwrap();
    let mut h = [0u8; 24];
    s.read_exact(&mut h).unwrap();
    let mut body = vec![0u8; u32::from_be_bytes(h[8..12].try_into().unwrap()) as usize];
    s.read_exact(&mut body).unwrap();
    let skip = usize::from(h[4]) + usize::from(u16::from_be_bytes([h[2], h[3]]));
    (u16::from_be_bytes([h[6], h[7]]), body[skip..].to_vec())
}

#[test]
fn dump_binary_and_metrics_with_items_on_flash() {
    let dir = std::env::temp_dir().join(format!("ops2-flashfront-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let h = server_with(|c| {
        c.cache.memory_mb = 48;
        c.flash.paths = vec![format!("{}:256M", dir.join("flash").display())];
        c.flash.tier.write_buffers = 3;
        c.server.metrics_port = port;
    });
    let mut c = Client::new(&h);
    let n = 30_000;
    for start in (0..n).step_by(100) {
        let mut req = Vec::new();
        for i in start..start + 100 {
            let v = payload(i);
            req.extend_from_slice(format!("set k{i} 0 0 {} noreply\r\n", v.len()).as_bytes());
            req.extend_from_slice(&v);
            req.extend_from_slice(b"\r\n");
        }
        c.tx(&req);
    }
    let stats = c.tx_str(b"stats\r\n");
    let demoted: u64 = common::stat_of(&stats, "flash_demoted")
        .unwrap()
        .parse()
        .unwrap();
    assert!(demoted > 5_000, "too few items went to flash: {demoted}");

    // The dump: RAM items only, each once.
    let dump = tx(&mut c.s, "lru_crawler metadump all\r\n", "END\r\n");
    let keys: Vec<&str> = dump
        .lines()
        .filter_map(|l| l.strip_prefix("key=")?.split(' ').next())
        .collect();
    let unique: BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(unique.len(), keys.len(), "a key listed twice");
    assert!(
        !keys.is_empty() && keys.len() < n - 5_000,
        "{} listed",
        keys.len()
    );
    assert!(!unique.contains("k0"), "k0 (on flash) listed");

    // k0 went to flash first: a binary GETK waits for its read.
    let mut b = TcpStream::connect(h.addr).unwrap();
    for i in [0, 1, 2, n - 1] {
        let key = format!("k{i}");
        let (status, value) = getk(&mut b, key.as_bytes());
        assert_eq!(status, 0, "{key}");
        assert_eq!(value, payload(i), "{key}");
    }

    // A text get from flash is a flash hit in the histograms.
    let got = c.tx(b"get k3\r\n");
    assert!(
        got.starts_with(b"VALUE k3 0 2000\r\n3|"),
        "{:?}",
        &got[..20]
    );
    let mut m = TcpStream::connect(h.metrics_addr.unwrap()).unwrap();
    m.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    m.read_to_string(&mut body).unwrap();
    assert!(
        body.contains(
            "tiercache_request_duration_seconds_count{command=\"get\",outcome=\"flash_hit\"}"
        ),
        "no flash_hit histogram"
    );
    drop(c);
    h.shutdown();
    h.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
