//! The small-object store through the protocol (`-o ext_small_max`): small
//! items that left RAM are served with their flags and values, `stats` shows
//! the store, a delete of an item in the store answers `DELETED` and it stays
//! gone, pipelined overwrites and deletes of its items wait for batched
//! invalidations and never bring an old value back, and a graceful restart
//! serves the store's items again. About 10 s in debug builds.

mod common;

use common::{server_with, tempdir, Client};

fn value(i: usize) -> String {
    format!("{i:07}.").repeat(12)
}

const N: usize = 120_000;

#[test]
fn small_items_are_served_from_the_store_deleted_for_good_and_kept_across_a_restart() {
    let dir = tempdir("small-store");
    let flash = format!("{}:128M", dir.join("flash").display());
    let start = || {
        let f = flash.clone();
        server_with(move |c| {
            c.cache.memory_mb = 16;
            c.flash.paths = vec![f];
            c.flash.tier.write_buffers = 2;
            c.flash.tier.low_ttl = 0;
            c.flash.engine.small_max = 300;
            // The store takes small items whether the index has room or not
            // (the default waits for its budget, which 16 MB and N keys never reach).
            c.flash.engine.small_first = true;
        })
    };
    let h = start();
    let mut c = Client::new(&h);
    for i in 0..N {
        let v = value(i);
        c.tx(format!("set s{i} {} 0 {} noreply\r\n{v}\r\n", i % 7, v.len()).as_bytes());
    }
    let stats = c.tx_str(b"stats\r\n");
    let objects: usize = common::stat_of(&stats, "small_objects")
        .and_then(|v| v.parse().ok())
        .expect("small_objects");
    // Items whose admission would wait for a segment flush go to the log
    // tier instead (`small_deferred`): both tiers hold some.
    assert!(objects > N / 10, "only {objects} in the store");
    for k in [
        "small_dram_bytes_per_object",
        "small_write_amplification",
        "small_sets_written",
        "small_deferred",
    ] {
        assert!(common::stat_of(&stats, k).is_some(), "stats lacks {k}");
    }
    // The oldest keys left RAM long ago: served from flash, verified.
    let mut served = 0;
    for i in 0..2000 {
        let got = c.tx_str(format!("get s{i}\r\n").as_bytes());
        if got == "END\r\n" {
            continue;
        }
        let v = value(i);
        assert_eq!(
            got,
            format!("VALUE s{i} {} {}\r\n{v}\r\nEND\r\n", i % 7, v.len())
        );
        served += 1;
    }
    assert!(served > 1500, "{served} of 2000 served");
    let hits = common::stat_of(&c.tx_str(b"stats\r\n"), "small_hits").unwrap();
    assert_ne!(hits, "0", "no get was served from the store");
    // Deletes of keys in the store.
    let mut deleted = Vec::new();
    for i in 2000..2100 {
        let held = c.tx_str(format!("get s{i}\r\n").as_bytes()) != "END\r\n";
        let want = if held { "DELETED\r\n" } else { "NOT_FOUND\r\n" };
        assert_eq!(
            c.tx_str(format!("delete s{i}\r\n").as_bytes()),
            want,
            "s{i}"
        );
        if held {
            deleted.push(i);
        }
        assert_eq!(c.tx_str(format!("get s{i}\r\n").as_bytes()), "END\r\n");
    }
    assert!(deleted.len() > 50);
    // Pipelined overwrites and deletes of keys the store holds: each change
    // waits for an invalidation job, and the changes behind it in the
    // pipeline join the same job (asked for ahead).
    let stat = |c: &mut Client, k: &str| -> u64 {
        common::stat_of(&c.tx_str(b"stats\r\n"), k)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("stats lacks {k}"))
    };
    let (jobs, keys) = (
        stat(&mut c, "small_invalidate_jobs"),
        stat(&mut c, "small_invalidate_keys"),
    );
    let held: Vec<usize> = (3000..3600)
        .filter(|i| c.tx_str(format!("get s{i}\r\n").as_bytes()) != "END\r\n")
        .collect();
    assert!(held.len() > 300, "{} of 600 held", held.len());
    let new_value = |i: usize| format!("new{i}");
    let mut req = String::new();
    let mut want = String::new();
    for (n, &i) in held.iter().enumerate() {
        if n % 3 == 0 {
            req += &format!("delete s{i}\r\n");
            want += "DELETED\r\n";
            deleted.push(i);
        } else {
            let v = new_value(i);
            req += &format!("set s{i} 1 0 {}\r\n{v}\r\n", v.len());
            want += "STORED\r\n";
        }
    }
    assert_eq!(c.tx_str(req.as_bytes()), want);
    let (jobs, keys) = (
        stat(&mut c, "small_invalidate_jobs") - jobs,
        stat(&mut c, "small_invalidate_keys") - keys,
    );
    // (Some of the keys were in the log-structured tier or the store's
    // open buffer: no invalidation.)
    assert!(keys >= 50, "{keys} keys invalidated");
    assert!(jobs * 2 <= keys, "{jobs} jobs for {keys} keys: not batched");
    let overwritten: Vec<usize> = held
        .iter()
        .copied()
        .filter(|i| !deleted.contains(i))
        .collect();
    for &i in &held {
        let got = c.tx_str(format!("get s{i}\r\n").as_bytes());
        match deleted.contains(&i) {
            true => assert_eq!(got, "END\r\n", "deleted s{i}"),
            false => {
                let v = new_value(i);
                assert_eq!(got, format!("VALUE s{i} 1 {}\r\n{v}\r\nEND\r\n", v.len()));
            }
        }
    }
    drop(c);
    h.shutdown();
    h.wait();
    let h = start();
    let mut c = Client::new(&h);
    let mut back = 0;
    for i in (0..N).step_by(13) {
        let got = c.tx_str(format!("get s{i}\r\n").as_bytes());
        if got == "END\r\n" {
            continue;
        }
        assert!(!deleted.contains(&i), "deleted s{i} came back");
        let v = match overwritten.contains(&i) {
            true => new_value(i),
            false => value(i),
        };
        let flags = if overwritten.contains(&i) { 1 } else { i % 7 };
        assert_eq!(
            got,
            format!("VALUE s{i} {flags} {}\r\n{v}\r\nEND\r\n", v.len())
        );
        back += 1;
    }
    assert!(back > N / 13 * 8 / 10, "{back} back after the restart");
    for i in &deleted {
        assert_eq!(c.tx_str(format!("get s{i}\r\n").as_bytes()), "END\r\n");
    }
    // An overwritten key is its new value or gone, never its old one.
    for &i in &overwritten {
        let got = c.tx_str(format!("get s{i}\r\n").as_bytes());
        let v = new_value(i);
        assert!(
            got == "END\r\n" || got == format!("VALUE s{i} 1 {}\r\n{v}\r\nEND\r\n", v.len()),
            "s{i} after a restart: {got:?}"
        );
    }
    drop(c);
    h.shutdown();
    h.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
