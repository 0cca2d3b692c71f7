//! The Rust `memcache` crate, unchanged, against tiercache.

mod common;
use common::server;

#[test]
fn memcache_crate_round_trips() {
    let h = server();
    let url = format!("memcache://{}?protocol=ascii", h.addr);
    let c = memcache::Client::connect(url).unwrap();
    c.set("k", "v", 0).unwrap();
    assert_eq!(c.get::<String>("k").unwrap().as_deref(), Some("v"));
    c.set("empty", "", 0).unwrap();
    assert_eq!(c.get::<String>("empty").unwrap().as_deref(), Some(""));
    let bin: Vec<u8> = vec![0, 1, b'\r', b'\n', 255, 0];
    c.set("bin", bin.as_slice(), 0).unwrap();
    assert_eq!(c.get::<Vec<u8>>("bin").unwrap(), Some(bin));
    let big = vec![b'x'; 1_000_000];
    c.set("big", big.as_slice(), 0).unwrap();
    assert_eq!(
        c.get::<Vec<u8>>("big").unwrap().map(|v| v.len()),
        Some(1_000_000)
    );
    let m: std::collections::HashMap<String, String> = c.gets(&["k", "empty", "none"]).unwrap();
    assert_eq!(m.len(), 2);
    let _ = c.add("k", "x", 0);
    assert_eq!(
        c.get::<String>("k").unwrap().as_deref(),
        Some("v"),
        "add must not overwrite"
    );
    c.add("fresh", "x", 0).unwrap();
    let _ = c.replace("absent", "x", 0);
    assert_eq!(
        c.get::<String>("absent").unwrap(),
        None,
        "replace must not create"
    );
    assert_eq!(c.get::<String>("fresh").unwrap().as_deref(), Some("x"));
    c.set("n", 10u64, 0).unwrap();
    assert_eq!(c.increment("n", 5).unwrap(), 15);
    assert_eq!(c.decrement("n", 20).unwrap(), 0);
    assert!(c.touch("n", 100).unwrap());
    assert!(c.delete("n").unwrap());
    assert!(!c.delete("n").unwrap());
    c.append("k", "w").unwrap();
    c.prepend("k", "u").unwrap();
    assert_eq!(c.get::<String>("k").unwrap().as_deref(), Some("uvw"));
    h.shutdown();
}
