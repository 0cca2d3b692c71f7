//! The Prometheus endpoint (`-o metrics_port`): `GET /metrics` serves every
//! numeric `stats` line and per-command, per-outcome latency histograms in
//! the text format, which Debian's `promtool check metrics` accepts (when
//! installed: tests/interop/install.sh installs the prometheus package);
//! other paths get 404; a bad port is refused at start.
//!
//! Cost: well under a second.

mod common;

use common::{free_port, Client};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use tiercache_server::admin::endpoint::stat_kinds;
use tiercache_server::server::ServerHandle;
use tiercache_server::stats::kinds;

fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    let (head, body) = got.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_string(), body.to_string())
}

/// A server (2 threads, -m 32, as `f` changes it) with the endpoint on a
/// free port, and that port. A free port may be taken by another process
/// before the server binds it: another is tried then.
fn with_metrics(f: impl Fn(&mut tiercache_server::config::Config)) -> (ServerHandle, u16) {
    (0..10)
        .find_map(|_| {
            let port = free_port();
            let mut cfg = tiercache_server::config::Config::default();
            cfg.server.port = 0;
            cfg.server.threads = 2;
            cfg.cache.memory_mb = 32;
            cfg.server.metrics_port = port;
            f(&mut cfg);
            match tiercache_server::server::start(cfg) {
                Ok(h) => Some((h, port)),
                Err(e) if format!("{e:#}").contains("in use") => None,
                Err(e) => panic!("server starts: {e:#}"),
            }
        })
        .expect("a free metrics port in 10 tries")
}

#[test]
fn metrics_endpoint_serves_stats_and_latency_histograms() {
    let (h, port) = with_metrics(|cfg| cfg.flash.paths.clear());
    let addr = h.metrics_addr.expect("endpoint on");
    assert_eq!(addr.port(), port);
    let mut c = Client::new(&h);
    c.tx(b"set a 0 0 1\r\nx\r\nget a\r\nget nope\r\ndelete a\r\n");

    let (head, body) = http_get(addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    for want in [
        "tiercache_curr_connections ",
        "tiercache_get_hits 1",
        "tiercache_get_misses 1",
        "tiercache_cmd_set 1",
        "tiercache_time_in_listen_disabled_seconds ",
        "tiercache_sla_p99_last_minute_seconds 0\n",
        "tiercache_sla_daily_level_seconds 0\n",
        "tiercache_sla_unavailable_seconds 0\n",
        "tiercache_sla_closed_seconds 0\n",
        "tiercache_request_duration_seconds_count{command=\"get\",outcome=\"ram_hit\"} 1",
        "tiercache_request_duration_seconds_count{command=\"get\",outcome=\"miss\"} 1",
        "tiercache_request_duration_seconds_count{command=\"set\",outcome=\"store\"} 1",
        "tiercache_request_duration_seconds_count{command=\"delete\",outcome=\"other\"} 1",
        "tiercache_request_duration_seconds_bucket{command=\"get\",outcome=\"ram_hit\",le=\"+Inf\"} 1",
    ] {
        assert!(body.contains(want), "{want} missing from:\n{body}");
    }
    // Every numeric stat is there, under its declared kind and name.
    every_stat_is_exported(&mut c, &h, &body);
    assert!(
        body.contains("# TYPE tiercache_get_hits_total counter\n"),
        "{body}"
    );
    assert!(body.contains("tiercache_get_hits_total 1\n"), "{body}");
    assert!(
        body.contains("# TYPE tiercache_curr_items gauge\n"),
        "{body}"
    );

    let (head, _) = http_get(addr, "/");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");

    promtool_accepts(&body);
}

/// Every numeric `stats` line is in `body` under the name and type
/// `stats::kinds` gives it from the kind the line declares; no name is
/// shown twice.
fn every_stat_is_exported(c: &mut Client, h: &ServerHandle, body: &str) {
    let stats = c.tx_str(b"stats\r\n");
    let declared = stat_kinds(&h.shared);
    let mut counted = 0;
    let mut seen = std::collections::HashSet::new();
    for line in stats.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        // A name shown twice would be one metric with the first value.
        assert!(w.len() < 2 || seen.insert(w[1]), "{} shown twice", w[1]);
        if w.len() == 3 && w[2].parse::<f64>().is_ok() {
            let kind = *declared
                .get(w[1])
                .unwrap_or_else(|| panic!("{} declares no kind", w[1]));
            let e = kinds::export(w[1], kind, 60.0);
            let kind = if e.counter { "counter" } else { "gauge" };
            assert!(
                body.contains(&format!("# TYPE tiercache_{} {kind}\n", e.name)),
                "{} missing as the {kind} tiercache_{}",
                w[1],
                e.name
            );
            counted += 1;
        }
    }
    assert!(counted > 50, "only {counted} numeric stats:\n{stats}");
}

/// `promtool check metrics` (Debian's prometheus package, installed by
/// tests/interop/install.sh) finds nothing to say about `body`; skipped
/// only where promtool is absent.
fn promtool_accepts(body: &str) {
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut p) => {
            p.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
            let out = p.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "promtool check metrics: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Err(_) => {
            eprintln!("skipped promtool: absent (tests/interop/install.sh installs prometheus)")
        }
    }
}

/// At the defaults there is a flash tier, with per-class lines and sums of
/// microseconds (`flash_fast_device_us_sum`) that were once exported as
/// gauges with a `_sum` suffix, which promtool refuses.
#[test]
fn metrics_with_a_flash_tier_pass_promtool() {
    let dir = common::tempdir("metrics-flash");
    let (h, _) =
        with_metrics(|cfg| cfg.flash.paths = vec![format!("{}:256M", dir.join("f").display())]);
    let addr = h.metrics_addr.expect("endpoint on");
    let mut c = Client::new(&h);
    // Enough to push items to flash and read them back.
    let v = vec![b'v'; 4000];
    for i in 0..16000 {
        let mut cmd = format!("set k{i} 0 0 {}\r\n", v.len()).into_bytes();
        cmd.extend_from_slice(&v);
        cmd.extend_from_slice(b"\r\n");
        c.tx(&cmd);
    }
    for i in 0..50 {
        c.tx(format!("get k{i}\r\n").as_bytes());
    }
    let (head, body) = http_get(addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    for want in [
        "# TYPE tiercache_flash_fast_device_seconds_total counter\n",
        "# TYPE tiercache_flash_fast_read_latency_seconds_total counter\n",
        "# TYPE tiercache_flash_hits_total counter\n",
        "# TYPE tiercache_flash_fast_segments gauge\n",
    ] {
        assert!(body.contains(want), "{want} missing from:\n{body}");
    }
    assert!(
        !body
            .lines()
            .any(|l| !l.starts_with('#') && l.contains("_us_sum")),
        "{body}"
    );
    let hits = body
        .lines()
        .find_map(|l| l.strip_prefix("tiercache_flash_hits_total "))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("flash hits exported");
    assert!(
        hits > 0.0,
        "no flash hit counted: the test did not reach flash"
    );
    every_stat_is_exported(&mut c, &h, &body);
    // The shards' lock holds by cause: the sets ran evacuations.
    let bucket = |cause: &str| {
        body.lines()
            .find_map(|l| {
                l.strip_prefix(&format!(
                    "tiercache_shard_lock_hold_seconds_bucket{{cause=\"{cause}\",le=\"+Inf\"}} "
                ))
            })
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no {cause} lock holds in:\n{body}"))
    };
    assert!(bucket("command") + bucket("evacuation") > 16_000);
    assert!(bucket("evacuation") > 0);
    let locks = c.tx_str(b"stats locks\r\n");
    let n = |k: &str| common::stat_of(&locks, k).unwrap_or_else(|| panic!("{k} in {locks}"));
    assert_eq!(n("shard_lock_holds_flush"), "0");
    assert!(n("shard_lock_holds_evacuation").parse::<u64>().unwrap() > 0);
    let stats = c.tx_str(b"stats\r\n");
    assert!(
        common::stat_of(&stats, "shard_lock_hold_max_us").is_some(),
        "{stats}"
    );
    assert!(common::stat_of(&stats, "shard_lock_hold_evacuation_max_us").is_some());
    // The waits for the locks: a command's in `stats`, every cause's in
    // `stats locks` and `/metrics`, as many in each bucket series.
    let waits: u64 = common::stat_of(&stats, "shard_lock_waits_command")
        .unwrap_or_else(|| panic!("shard_lock_waits_command in {stats}"))
        .parse()
        .unwrap();
    assert!(common::stat_of(&stats, "shard_lock_wait_command_max_us").is_some());
    let le: u64 = (0..20)
        .map(|b| {
            let k = if b == 19 {
                "shard_lock_wait_command_le_inf".to_string()
            } else {
                format!("shard_lock_wait_command_le_{}", 1u64 << b)
            };
            n(&k).parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(le, n("shard_lock_waits_command").parse::<u64>().unwrap());
    assert!(le >= waits, "stats locks came after stats");
    assert!(
        body.contains("tiercache_shard_lock_wait_seconds_bucket{cause=\"command\",le=\"+Inf\"}")
    );
    promtool_accepts(&body);
}

#[test]
fn bad_metrics_options_are_refused() {
    for (opt, want) in [
        (
            "metrics_port=x",
            "-o metrics_port: 'x' is not a port number",
        ),
        (
            "metrics_addr=nowhere",
            "-o metrics_addr: 'nowhere' is not an IP address",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(common::as_root())
            .args(["-p", "0", "-o", opt])
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{opt}: {err}");
    }
}
