//! Hot keys survive a stream of new keys, through the server (issue 31):
//! for every policy that claims scan resistance (s3fifo, the default; 2q;
//! midlru), RAM-only and with a flash file. 1,000 hot keys are set and read
//! once, then 400,000 new keys (about twice what `-m 32` holds) are set
//! over the socket while one hot key is read every 100 sets: each hot key
//! is read once per 100,000 sets, well within what the cache holds, and
//! must be found every time, in RAM (no hot read served from flash).
//!
//! Cost: about 5-10 s per case in the test profile (six cases).

mod common;

use common::{server_with, Client};

const HOT: usize = 1000;
const STREAM: usize = 400_000;
const EVERY: usize = 100;

fn hot_misses(policy: &str, flash: Option<&std::path::Path>) -> (usize, usize) {
    let h = server_with(|c| {
        c.cache.policy = policy.into();
        c.flash.paths = flash
            .map(|d| vec![format!("{}:256M", d.join("flash").display())])
            .unwrap_or_default();
    });
    let mut c = Client::new(&h);
    // Sets wait for the flash writer (the tests' servers wait without a
    // bound), slow on a loaded machine.
    c.s.set_read_timeout(Some(std::time::Duration::from_secs(120)))
        .unwrap();
    let v = "h".repeat(100);
    let mut req = String::new();
    for i in 0..HOT {
        req += &format!("set hot:{i} 0 0 100 noreply\r\n{v}\r\n");
    }
    c.tx(req.as_bytes());
    let mut req = String::new();
    for i in 0..HOT {
        req += &format!("mg hot:{i} k\r\n");
    }
    let got = c.tx_str(req.as_bytes());
    assert_eq!(got.matches("HD k").count(), HOT, "every hot key set");
    let (mut reads, mut misses) = (0, 0);
    let v = "n".repeat(100);
    let mut n = 0;
    while n < STREAM {
        // 1,000 sets of new keys, then ten hot keys read (in the same
        // pipeline, so the reads land between the sets that follow).
        let mut req = String::with_capacity(1000 * 140);
        for _ in 0..1000 / EVERY {
            for _ in 0..EVERY {
                req += &format!("set new:{n} 0 0 100 noreply\r\n{v}\r\n");
                n += 1;
            }
            req += &format!("mg hot:{} k\r\n", (n / EVERY) % HOT);
        }
        let got = c.tx_str(req.as_bytes());
        reads += 1000 / EVERY;
        misses += got.matches("EN\r\n").count();
    }
    let stats = c.tx_str(b"stats\r\n");
    let stat =
        |name: &str| -> u64 { common::stat_of(&stats, name).map_or(0, |v| v.parse().unwrap()) };
    let left_ram = stat("evictions") + stat("extstore_objects_written");
    assert!(
        left_ram > (STREAM / 4) as u64,
        "{policy}: the stream did not fill RAM ({left_ram} items evicted or demoted)"
    );
    // Only the hot keys were read since: none of them from flash.
    assert_eq!(
        stat("get_extstore"),
        0,
        "{policy}: hot keys read from flash"
    );
    h.shutdown();
    (misses, reads)
}

fn check(policy: &str, flash: bool) {
    let dir = common::tempdir(&format!("hot-keys-{policy}-{flash}"));
    let (misses, reads) = hot_misses(policy, flash.then_some(dir.as_path()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        misses, 0,
        "{policy} (flash {flash}): {misses} of {reads} hot reads missed"
    );
}

#[test]
fn s3fifo_keeps_hot_keys_ram_only() {
    check("s3fifo", false);
}

#[test]
fn s3fifo_keeps_hot_keys_with_flash() {
    check("s3fifo", true);
}

#[test]
fn two_q_keeps_hot_keys_ram_only() {
    check("2q", false);
}

#[test]
fn two_q_keeps_hot_keys_with_flash() {
    check("2q", true);
}

#[test]
fn midlru_keeps_hot_keys_ram_only() {
    check("midlru", false);
}

#[test]
fn midlru_keeps_hot_keys_with_flash() {
    check("midlru", true);
}
