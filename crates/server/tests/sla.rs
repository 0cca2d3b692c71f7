//! The SLA view end to end (`stats sla`, seed `002_*`): with half-second
//! minutes (the test hook `Sla::restart`), a minute of fast requests sets
//! the daily level, then multigets that a client leaves unread for 200 ms
//! (the server cannot finish them: 16 MB of replies against a 16 KiB output
//! bound) make the minutes they end in unavailable, and the counts in
//! `stats sla`, `stats` and the metrics text move.
//!
//! Cost: about 2 s.

mod common;

use common::{server_with, Client};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const MINUTE: Duration = Duration::from_millis(500);
const STALL: Duration = Duration::from_millis(200);

fn stat(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("STAT {name} ")))
        .map(|v| v.trim().parse().expect("a number"))
}

/// Polls `stats sla` until `ok` holds (10 s at most).
fn wait_for(c: &mut Client, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = c.tx_str(b"stats sla\r\n");
        if ok(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "{what}; last:\n{text}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A multiget of 16 copies of a 900 kB value, read only after `STALL`.
fn stalled_get(h: &tiercache_server::server::ServerHandle) {
    let mut s = TcpStream::connect(h.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let keys = vec!["big"; 16].join(" ");
    write!(s, "get {keys}\r\n").unwrap();
    std::thread::sleep(STALL);
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    while !got.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed");
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.len() > 16 * 900_000);
}

#[test]
fn stalled_requests_make_unavailable_minutes() {
    let h = server_with(|c| c.server.max_pending_output = 16 << 10);
    let mut c = Client::new(&h);
    let value = vec![b'v'; 900_000];
    let mut set = b"set big 0 0 900000\r\n".to_vec();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n");
    assert_eq!(c.tx_str(&set), "STORED\r\n");

    h.shared.sla.restart(MINUTE, Instant::now());
    for i in 0..50 {
        c.tx(format!("set k{i} 0 0 1\r\nx\r\nget k{i}\r\n").as_bytes());
    }
    // The first minute is not judged: it sets the level.
    let text = wait_for(&mut c, "a first minute closed", |t| {
        stat(t, "sla_closed_minutes") >= Some(1)
    });
    assert_eq!(stat(&text, "sla_unavailable_minutes"), Some(0), "{text}");
    let level = stat(&text, "sla_daily_level_us").unwrap();
    assert!(level > 0, "the fast minute set the level:\n{text}");
    assert!(level < 100_000, "fast requests took {level} µs (p99)");
    let threshold = stat(&text, "sla_unavailable_threshold_us").unwrap();
    assert!(threshold >= 10_000 && threshold < STALL.as_micros() as u64);

    let before = stat(&text, "sla_closed_minutes").unwrap();
    for _ in 0..3 {
        stalled_get(&h);
    }
    let done = Instant::now();
    // Every minute the stalled gets ended in is closed.
    let text = wait_for(&mut c, "the stalled minutes closed", |t| {
        stat(t, "sla_closed_minutes").unwrap() > before
            && done.elapsed() > MINUTE + Duration::from_millis(100)
    });
    let unavailable = stat(&text, "sla_unavailable_minutes").unwrap();
    assert_eq!(stat(&text, "sla_unavailable_minutes_2h"), Some(unavailable));
    // Each minute whose p99 is a stalled get's is unavailable.
    let minutes = stat(&text, "sla_closed_minutes").unwrap();
    let mut stalled = 0;
    for i in 1..=minutes.min(120) {
        let p99 = stat(&text, &format!("minute:{i}:p99_us")).unwrap();
        if p99 >= STALL.as_micros() as u64 {
            stalled += 1;
            let t = stat(&text, &format!("minute:{i}:threshold_us")).unwrap();
            assert!(
                p99 > t && t >= 10_000,
                "minute {i}: {p99} µs, threshold {t}"
            );
            assert_eq!(
                stat(&text, &format!("minute:{i}:unavailable")),
                Some(1),
                "minute {i}:\n{text}"
            );
        }
    }
    assert!(stalled >= 1, "no minute with a stalled p99:\n{text}");
    assert!(unavailable >= stalled, "{text}");
    // They did not raise the level.
    let level_now = stat(&text, "sla_daily_level_us").unwrap();
    assert!(level_now < STALL.as_micros() as u64, "{text}");
    assert_eq!(stat(&text, "sla_interval_ms"), Some(500));

    // The general `stats` has the same figures under the same names.
    let general = c.tx_str(b"stats\r\n");
    assert!(stat(&general, "sla_unavailable_minutes").unwrap() >= unavailable);
    assert!(stat(&general, "sla_daily_level_us").unwrap() < STALL.as_micros() as u64);
    for name in [
        "sla_p99_last_minute_us",
        "sla_unavailable_threshold_us",
        "sla_closed_minutes",
    ] {
        assert!(stat(&general, name).is_some(), "{name} missing");
    }
    // The metrics endpoint's text: unavailable time in seconds (minutes of
    // 0.5 s here), the level in seconds.
    let text = String::from_utf8(tiercache_server::admin::endpoint::render(&h.shared)).unwrap();
    let gauge = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} missing:\n{text}"))
            .parse()
            .unwrap()
    };
    let unavailable_s = gauge("tiercache_sla_unavailable_seconds");
    assert!(unavailable_s >= unavailable as f64 * 0.5, "{unavailable_s}");
    assert_eq!(unavailable_s % 0.5, 0.0);
    assert!(gauge("tiercache_sla_daily_level_seconds") < STALL.as_secs_f64());
    h.shutdown();
    h.wait();
}
