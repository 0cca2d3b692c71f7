//! `-I` above the segment size (up to 1g, as memcached's chunked items):
//! the same replies as memcached 1.6.18 for large values stored, read,
//! appended and refused, with and without a flash tier; the bounds on `-I`
//! as memcached sets them; four clients at once on large values, every
//! value read whole. Cost: about 8 s (hundreds of MB moved over loopback).

mod common;

use common::memcached::Memcached;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A value naming its key and length.
fn value(k: &str, len: usize) -> Vec<u8> {
    let seed = format!("<{k}:{len}>");
    seed.bytes().cycle().take(len).collect()
}

struct Conn {
    w: TcpStream,
    r: BufReader<TcpStream>,
}

impl Conn {
    fn new(addr: SocketAddr) -> Conn {
        let w = TcpStream::connect(addr).unwrap();
        w.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        Conn {
            r: BufReader::new(w.try_clone().unwrap()),
            w,
        }
    }

    fn line(&mut self) -> Vec<u8> {
        let mut l = Vec::new();
        self.r.read_until(b'\n', &mut l).unwrap();
        assert!(l.ends_with(b"\r\n"), "cut short: {l:?}");
        l
    }

    /// Sends a command and reads its whole reply: lines, and the data
    /// blocks that `VALUE`/`VA` lines announce, up to `END`, `EN` or a
    /// one-line reply.
    fn ask(&mut self, req: &[u8]) -> Vec<u8> {
        self.w.write_all(req).unwrap();
        let mut out = Vec::new();
        loop {
            let l = self.line();
            out.extend_from_slice(&l);
            let words: Vec<&[u8]> = l.trim_ascii_end().split(|&b| b == b' ').collect();
            let len = match words[0] {
                b"VALUE" => Some(words[3]),
                b"VA" => Some(words[1]),
                _ => None,
            };
            if let Some(n) = len {
                let n: usize = std::str::from_utf8(n).unwrap().parse().unwrap();
                let mut d = vec![0u8; n + 2];
                self.r.read_exact(&mut d).unwrap();
                out.extend_from_slice(&d);
                if words[0] == b"VA" {
                    return out;
                }
                continue;
            }
            return out;
        }
    }
}

fn set(k: &str, len: usize, mode: &str) -> Vec<u8> {
    let mut r = format!("{mode} {k} 7 0 {len}\r\n").into_bytes();
    r.extend(value(k, len));
    r.extend_from_slice(b"\r\n");
    r
}

/// The commands both servers answer; replies compared byte for byte.
fn script() -> Vec<(String, Vec<u8>)> {
    let mut s = Vec::new();
    let mb = 1 << 20;
    for (k, len) in [
        ("a", 2 * mb),
        ("b", 9 * mb + 3),
        ("c", 15 * mb),
        ("small", 100),
    ] {
        s.push((format!("set {k}"), set(k, len, "set")));
    }
    // Too large by memcached's count (header, key, value): refused, and the
    // old item under the key goes, as memcached does.
    s.push(("set c too large".into(), set("c", 16 * mb, "set")));
    s.push(("get c after".into(), b"get c\r\n".to_vec()));
    s.push(("get a b small".into(), b"get a b small\r\n".to_vec()));
    s.push(("mg b v f s".into(), b"mg b v f s\r\n".to_vec()));
    // Append across the segment size, and past -I.
    s.push(("set d".into(), set("d", 900 << 10, "set")));
    s.push(("append d".into(), set("d", 3 * mb, "append")));
    s.push(("get d".into(), b"get d\r\n".to_vec()));
    s.push(("append d past -I".into(), set("d", 14 * mb, "append")));
    s.push(("get d again".into(), b"get d\r\n".to_vec()));
    s.push(("prepend a".into(), set("a", 5, "prepend")));
    s.push(("get a".into(), b"get a\r\n".to_vec()));
    s.push(("delete b".into(), b"delete b\r\n".to_vec()));
    s.push(("get b".into(), b"get b\r\n".to_vec()));
    s
}

fn run(addr: SocketAddr) -> Vec<(String, Vec<u8>)> {
    let mut c = Conn::new(addr);
    script()
        .into_iter()
        .map(|(name, req)| {
            let got = c.ask(&req);
            (name, got)
        })
        .collect()
}

fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(80)]).into_owned();
    format!("{s:?} ({} bytes)", b.len())
}

fn compare_with_memcached(tiercache: SocketAddr) {
    let Some(mc) = Memcached::start_with(&["-m", "64", "-I", "16m"]) else {
        eprintln!("memcached not installed: tests/interop/install.sh installs it");
        return;
    };
    let want = run(format!("127.0.0.1:{}", mc.port).parse().unwrap());
    let got = run(tiercache);
    for ((name, w), (_, g)) in want.iter().zip(&got) {
        assert!(
            w == g,
            "{name}: memcached {} tiercache {}",
            show(w),
            show(g)
        );
    }
}

#[test]
fn large_items_as_memcached_without_flash() {
    let h = common::server_with(|c| {
        c.cache.memory_mb = 64;
        c.cache.max_item_size = 16 << 20;
        c.flash.paths.clear();
    });
    compare_with_memcached(h.addr);
    let mut s = TcpStream::connect(h.addr).unwrap();
    let st = common::tx(&mut s, "stats settings\r\n", "END\r\n");
    assert_eq!(
        common::stat_of(&st, "item_size_max").as_deref(),
        Some("16777216")
    );
}

#[test]
fn large_items_as_memcached_with_flash_and_small_items_around_them() {
    let dir = common::tempdir("large-items");
    let path = dir.join("tc.flash");
    // -m 128: the flash tier's write buffers (4 of 8 MiB with 3 MiB RAM
    // segments) come out of -m, and the script must not evict.
    let h = common::server_with(|c| {
        c.cache.memory_mb = 128;
        c.cache.max_item_size = 16 << 20;
        c.flash.paths = vec![format!("{}:256M", path.display())];
    });
    compare_with_memcached(h.addr);
    // Small items push the large ones out of RAM (they are evicted, never
    // written to flash) and go to flash themselves; every value read back
    // is the one stored.
    let mut c = Conn::new(h.addr);
    let mut sizes = std::collections::HashMap::new();
    for i in 0..20_000 {
        let k = format!("s{i}");
        let len = if i % 500 == 0 { 5 << 20 } else { 2000 };
        assert_eq!(c.ask(&set(&k, len, "set")), b"STORED\r\n", "{k}");
        sizes.insert(k, len);
    }
    let mut hits = 0;
    for (k, &len) in &sizes {
        let got = c.ask(format!("get {k}\r\n").as_bytes());
        if got != b"END\r\n" {
            let mut want = format!("VALUE {k} 7 {len}\r\n").into_bytes();
            want.extend(value(k, len));
            want.extend_from_slice(b"\r\nEND\r\n");
            assert!(got == want, "{k}: {}", show(&got));
            hits += 1;
        }
    }
    let st = common::tx(&mut c.w, "stats\r\n", "END\r\n");
    let on_flash: u64 = common::stat_of(&st, "extstore_objects_written")
        .unwrap()
        .parse()
        .unwrap();
    assert!(on_flash > 5_000, "{on_flash} written to flash");
    assert!(hits > 15_000, "{hits} of 20,000 read back");
    drop(h);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Four clients at once set, append, delete and get large and small values
/// of a few keys, so that jumbo items are made, moved, evicted and given
/// memory from other shards while other connections work: every value read
/// is whole (a sequence of values written for that key, each intact).
/// About 3 s.
#[test]
fn large_items_under_concurrent_clients_stay_whole() {
    let h = common::server_with(|c| {
        c.cache.memory_mb = 48;
        c.cache.max_item_size = 16 << 20;
        c.server.threads = 2;
        c.flash.paths.clear();
    });
    let addr = h.addr;
    let piece = |k: &str, ver: u64, len: usize| {
        let head = format!("{k}|{ver}|{len}|");
        let mut v: Vec<u8> = head.bytes().cycle().take(len.max(head.len())).collect();
        v.truncate(len.max(head.len()));
        v
    };
    // Splits a value into the pieces written, checking each.
    let whole = move |k: &str, v: &[u8]| -> bool {
        let mut at = 0;
        while at < v.len() {
            let s = String::from_utf8_lossy(&v[at..(at + 64).min(v.len())]).into_owned();
            let f: Vec<&str> = s.splitn(4, '|').collect();
            let (Some(ver), Some(len)) = (
                f.get(1).and_then(|x| x.parse::<u64>().ok()),
                f.get(2).and_then(|x| x.parse::<usize>().ok()),
            ) else {
                return false;
            };
            if f[0] != k || at + len > v.len() || v[at..at + len] != piece(k, ver, len)[..] {
                return false;
            }
            at += len;
        }
        true
    };
    // The check itself tells a whole value from a damaged one.
    let mut two = piece("k1", 5, 300);
    two.extend(piece("k1", 9, 700));
    assert!(whole("k1", &two));
    two[500] ^= 1;
    assert!(!whole("k1", &two) && !whole("k2", &piece("k1", 5, 300)));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            std::thread::spawn(move || {
                let mut c = Conn::new(addr);
                let mut x = t * 7919 + 1;
                let mut rnd = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let sizes = [200, 3000, 600 << 10, 1_500_000, 3_500_000, 9 << 20];
                let mut reads = 0;
                for i in 0..150u64 {
                    let k = format!("k{}", rnd() % 8);
                    let len = sizes[(rnd() % sizes.len() as u64) as usize];
                    let ver = t << 32 | i;
                    let op = rnd() % 10;
                    let mut send = |mode: &str, v: Vec<u8>| {
                        let mut r = format!("{mode} {k} 0 0 {}\r\n", v.len()).into_bytes();
                        r.extend(v);
                        r.extend_from_slice(b"\r\n");
                        c.ask(&r)
                    };
                    match op {
                        0..=3 => {
                            let r = send("set", piece(&k, ver, len));
                            assert_eq!(r, b"STORED\r\n", "set {k} of {len}");
                        }
                        4 => {
                            let r = send("append", piece(&k, ver, len.min(2 << 20)));
                            assert!(r == b"STORED\r\n" || r == b"NOT_STORED\r\n", "{r:?}");
                        }
                        5 => {
                            c.ask(format!("delete {k}\r\n").as_bytes());
                        }
                        _ => {
                            let r = c.ask(format!("get {k}\r\n").as_bytes());
                            if r != b"END\r\n" {
                                let start = r.iter().position(|&b| b == b'\n').unwrap() + 1;
                                let v = &r[start..r.len() - 7];
                                assert!(whole(&k, v), "{k}: a value not whole ({} bytes)", v.len());
                                reads += 1;
                            }
                        }
                    }
                }
                reads
            })
        })
        .collect();
    let reads: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(reads > 20, "only {reads} values read");
}
