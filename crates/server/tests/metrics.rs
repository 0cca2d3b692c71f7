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

fn http_get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = String::new();
    s.read_to_string(&mut got).unwrap();
    let (head, body) = got.split_once("\r\n\r\n").expect("an HTTP response");
    (head.to_string(), body.to_string())
}

#[test]
fn metrics_endpoint_serves_stats_and_latency_histograms() {
    // A free port may be taken by another process before the server binds
    // it: try another then.
    let (h, port) = (0..10)
        .find_map(|_| {
            let port = free_port();
            let mut cfg = tiercache_server::config::Config::default();
            cfg.server.port = 0;
            cfg.server.threads = 2;
            cfg.cache.memory_mb = 32;
            cfg.server.metrics_port = port;
            cfg.flash.paths.clear();
            match tiercache_server::server::start(cfg) {
                Ok(h) => Some((h, port)),
                Err(e) if format!("{e:#}").contains("in use") => None,
                Err(e) => panic!("server starts: {e:#}"),
            }
        })
        .expect("a free metrics port in 10 tries");
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
    // Every numeric stat is there.
    let stats = c.tx_str(b"stats\r\n");
    for line in stats.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        if w.len() == 3 && w[2].parse::<f64>().is_ok() {
            let name = w[1]
                .strip_suffix("_us")
                .or_else(|| w[1].strip_suffix("_minutes"))
                .map_or(w[1].to_string(), |b| format!("{b}_seconds"));
            assert!(
                body.contains(&format!("\ntiercache_{name} ")),
                "{} missing",
                w[1]
            );
        }
    }

    let (head, _) = http_get(addr, "/");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");

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
            assert!(out.status.success(), "promtool check metrics: {out:?}");
        }
        Err(_) => {
            eprintln!("skipped promtool: absent (tests/interop/install.sh installs prometheus)")
        }
    }
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
