//! End to end: runs the real `tiercache-bench` binary against a real
//! `memcached` (started here on a free port) and checks that what it reports
//! is sane. Skipped, with a message, when `memcached` is not on PATH.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Memcached {
    child: Child,
    addr: String,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

fn euid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// The pid of the memcached answering at `addr` (`stats`), if one does.
fn served_by(addr: &str) -> Option<u32> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"stats\r\n").ok()?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b"END\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            return None;
        }
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got)
        .lines()
        .find_map(|l| l.strip_prefix("STAT pid "))
        .and_then(|p| p.trim().parse().ok())
}

/// Starts memcached on a free port, or says why not.
fn start_memcached() -> Option<Memcached> {
    let Some(bin) = find_on_path("memcached") else {
        eprintln!("SKIPPED: memcached is not on PATH; install it (apt-get install memcached) to run this test");
        return None;
    };
    for _ in 0..5 {
        // memcached has no port 0: take a free port and hand it over
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let mut cmd = Command::new(&bin);
        cmd.args(["-p", &port.to_string(), "-l", "127.0.0.1", "-U", "0"])
            .args(["-t", "2", "-m", "64"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if euid_is_root() {
            cmd.args(["-u", "root"]);
        }
        let mut child = cmd.spawn().expect("spawn memcached");
        let addr = format!("127.0.0.1:{port}");
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            // Ours, not another test's memcached that took the port first
            // (ours then fails to bind and exits): its pid says so.
            if served_by(&addr) == Some(child.id()) {
                return Some(Memcached { child, addr });
            }
            if let Ok(Some(_)) = child.try_wait() {
                break; // lost the port race; try another
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("memcached did not start");
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tiercache-bench-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs the bench with `args` plus `--json`, returns the parsed JSON.
fn bench(addr: &str, json: &Path, args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache-bench"))
        .args(["--server", addr, "--quiet", "--json"])
        .arg(json)
        .args(args)
        .output()
        .expect("run tiercache-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tiercache-bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    println!("{stdout}");
    serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} missing in {v}"))
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("{k} missing"))
}

#[test]
fn throughput_get_only_after_preload_hits_everything() {
    let Some(mc) = start_memcached() else { return };
    let json = tmp("tp.json");
    let v = bench(
        &mc.addr,
        &json,
        &[
            "--keys",
            "3000",
            "--preload",
            "--get-ratio",
            "1",
            "--duration",
            "1s",
            "--threads",
            "2",
            "--conns",
            "2",
            "--pipeline",
            "8",
            "--value-size",
            "uniform:10-200",
        ],
    );
    let pre = &v["preload"];
    assert_eq!(u(pre, "sets"), 3000, "preload sets every key once");
    assert_eq!(u(pre, "errors"), 0);
    let r = &v["runs"][0];
    let ops = u(r, "ops");
    assert!(ops > 1000, "only {ops} ops in 1 s");
    assert_eq!(u(r, "gets"), ops);
    assert_eq!(u(r, "sets"), 0);
    assert_eq!(u(r, "keys"), ops);
    assert_eq!(u(r, "hits"), ops);
    assert_eq!(u(r, "misses"), 0);
    assert_eq!(u(r, "errors"), 0);
    assert_eq!(u(r, "unanswered"), 0);
    assert_eq!(f(r, "hit_ratio"), 1.0);
    let el = f(r, "elapsed_s");
    assert!((0.95..3.0).contains(&el), "elapsed {el}");
    assert!((f(r, "ops_per_sec") - ops as f64 / el).abs() < 1.0);
    assert_eq!(u(&r["latency"]["all"], "count"), ops);
    assert_eq!(u(&r["latency"]["get_hit"], "count"), ops);
    // values are 10..=200 bytes
    let vb = u(r, "value_bytes_received");
    assert!(vb >= ops * 10 && vb <= ops * 200, "value bytes {vb}");
    // the server saw the same load
    let s = &r["server"];
    let server_gets = f(&s["rates"], "cmd_get") * f(s, "window_s");
    assert!(
        (server_gets - ops as f64).abs() < ops as f64 * 0.1 + 100.0,
        "server counted {server_gets} gets, client {ops}"
    );
    assert_eq!(f(s, "hit_ratio"), 1.0);
}

#[test]
fn meta_multiget_and_misses() {
    let Some(mc) = start_memcached() else { return };
    let json = tmp("meta.json");
    // fresh keys, no preload: every get misses
    let v = bench(
        &mc.addr,
        &json,
        &[
            "--keys",
            "1000",
            "--key-prefix",
            "cold:",
            "--get-ratio",
            "1",
            "--multiget",
            "4",
            "--protocol",
            "meta",
            "--duration",
            "500ms",
            "--threads",
            "1",
            "--conns",
            "2",
            "--pipeline",
            "4",
            "--no-stats",
        ],
    );
    let r = &v["runs"][0];
    let ops = u(r, "ops");
    assert!(ops > 100);
    assert_eq!(u(r, "keys"), 4 * ops);
    assert_eq!(u(r, "hits"), 0);
    assert_eq!(u(r, "misses"), 4 * ops);
    assert_eq!(f(r, "hit_ratio"), 0.0);
    assert_eq!(u(r, "errors"), 0);
    assert!(r["server"].is_null());

    // now preload with meta sets and read them back with meta multigets
    let v = bench(
        &mc.addr,
        &json,
        &[
            "--keys",
            "1000",
            "--key-prefix",
            "warm:",
            "--preload",
            "--get-ratio",
            "1",
            "--multiget",
            "10",
            "--protocol",
            "meta",
            "--duration",
            "500ms",
            "--threads",
            "1",
            "--conns",
            "2",
            "--pipeline",
            "4",
        ],
    );
    let r = &v["runs"][0];
    assert_eq!(u(&v["preload"], "sets"), 1000);
    assert_eq!(f(r, "hit_ratio"), 1.0);
    assert_eq!(u(r, "hits"), 10 * u(r, "ops"));
    // 32-byte values by default
    assert_eq!(u(r, "value_bytes_received"), 32 * u(r, "hits"));
}

#[test]
fn latency_mode_follows_the_schedule() {
    let Some(mc) = start_memcached() else { return };
    let json = tmp("lat.json");
    let samples = tmp("lat.csv");
    let plots = tmp("plots");
    let v = bench(
        &mc.addr,
        &json,
        &[
            "--keys",
            "2000",
            "--preload",
            "--get-ratio",
            "0.9",
            "--mode",
            "latency",
            "--rate",
            "2000",
            "--duration",
            "1s",
            "--threads",
            "2",
            "--conns",
            "2",
            "--samples",
            samples.to_str().unwrap(),
            "--plot-dir",
            plots.to_str().unwrap(),
        ],
    );
    let r = &v["runs"][0];
    // intended times k/rate for k < rate * duration: exactly 2000 requests
    assert_eq!(u(r, "ops"), 2000);
    assert_eq!(u(r, "unanswered"), 0);
    assert_eq!(u(r, "errors"), 0);
    assert_eq!(f(r, "hit_ratio"), 1.0, "preloaded keys all hit");
    // 2000 requests over 1 s plus the last reply (loose: CI machines are busy)
    let rate = f(r, "ops_per_sec");
    assert!((1000.0..2100.0).contains(&rate), "achieved {rate}/s");
    let lat = &r["latency"]["all"];
    assert_eq!(u(lat, "count"), 2000);
    assert!(f(lat, "p50_us") > 0.0 && f(lat, "p50_us") < 100_000.0);
    assert!(f(lat, "max_us") >= f(lat, "p99_us"));
    assert_eq!(u(&r["send_lag"], "count"), 2000);
    assert!(r["latency_kind"].as_str().unwrap().contains("intended"));
    let csv = std::fs::read_to_string(&samples).unwrap();
    assert_eq!(csv.lines().count(), 2001, "header + one line per request");
    for p in ["latency-percentiles.svg", "latency-timeline.svg"] {
        let svg = std::fs::read_to_string(plots.join(p)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("polyline"), "{p}");
    }
}

/// The point of the open loop: a server that stops answering for 300 ms is
/// charged for every request that was due during the pause, not just one.
/// With half-second SLA minutes, the minute of the pause is unavailable.
#[test]
fn latency_mode_charges_a_stalled_server() {
    let Some(mc) = start_memcached() else { return };
    let json = tmp("stall.json");
    let child = Command::new(env!("CARGO_BIN_EXE_tiercache-bench"))
        .args(["--server", &mc.addr, "--quiet", "--json"])
        .arg(&json)
        .args([
            "--keys",
            "1000",
            "--get-ratio",
            "1",
            "--mode",
            "latency",
            "--rate",
            "2000",
        ])
        .args([
            "--duration",
            "2s",
            "--threads",
            "1",
            "--conns",
            "2",
            "--no-stats",
            "--sla-interval",
            "500ms",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tiercache-bench");
    std::thread::sleep(Duration::from_millis(700));
    let pid = mc.child.id().to_string();
    let stopped = Command::new("kill").args(["-STOP", &pid]).status();
    if !stopped.is_ok_and(|s| s.success()) {
        eprintln!("SKIPPED: cannot send SIGSTOP to memcached");
        let _ = child.wait_with_output();
        return;
    }
    std::thread::sleep(Duration::from_millis(300));
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let r = &v["runs"][0];
    assert_eq!(u(r, "ops"), 4000);
    assert_eq!(u(r, "unanswered"), 0);
    let lat = &r["latency"]["all"];
    // ~600 requests were due during the pause: the one sent first waited
    // ~300 ms, and the slowest 1% all waited well over 100 ms
    assert!(f(lat, "max_us") >= 250_000.0, "max {}", f(lat, "max_us"));
    assert!(f(lat, "p99_us") >= 150_000.0, "p99 {}", f(lat, "p99_us"));
    assert!(f(lat, "p50_us") < 100_000.0, "p50 {}", f(lat, "p50_us"));
    // The SLA view: the first minute (before the pause) sets the level; a
    // minute the pause falls in has a p99 over 100 ms and is unavailable.
    let sla = &r["sla"];
    assert_eq!(f(sla, "interval_s"), 0.5);
    let minutes = sla["minutes"].as_array().unwrap();
    assert!(minutes.len() >= 4, "{sla}");
    assert!(minutes[0]["level_us"].is_null() && minutes[0]["unavailable"] == false);
    let stalled: Vec<&Value> = minutes
        .iter()
        .filter(|m| m["p99_us"].as_f64().unwrap_or(0.0) >= 100_000.0)
        .collect();
    assert!(!stalled.is_empty(), "{sla}");
    for m in &stalled {
        assert_eq!(m["unavailable"], true, "{m}");
        assert!(f(m, "p99_us") > f(m, "threshold_us"));
    }
    let unavailable = minutes.iter().filter(|m| m["unavailable"] == true).count();
    assert_eq!(u(sla, "unavailable_minutes"), unavailable as u64);
    assert!(f(sla, "daily_level_us") < 100_000.0, "{sla}");
}
