//! Operating the binary as memcached is operated: the version reply,
//! `verbosity` and `cache_memlimit` at run time, several `-l` addresses,
//! `-o idle_timeout`, a small `-m` with the default flash file, `-d`, `-P`
//! and `-u`. Each test runs the real binary on real sockets.
//!
//! Cost: about 6 s in all; the idle timeout test waits 3 s (the shortest
//! timeout is 1 s and is checked once a second), the daemon tests up to 2 s
//! for the daemon to stop; the others take well under a second.

mod common;

use common::process::Proc;
use common::{as_root, free_port, is_root, stat_of, tx};
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ops-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the binary to completion (a refusal, or `-d`'s foreground part).
fn run(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("run tiercache")
}

fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid, 0) == 0
    }
}

fn wait_gone(pid: i32, within: Duration) -> bool {
    let t = Instant::now();
    while alive(pid) {
        if t.elapsed() > within {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// memcached-aware clients (Node's `memcached`, pylibmc's feature checks)
/// parse the `VERSION` line as a dotted version: a reply of
/// `1.6.18-tiercache-0.1.0` read as semver gave 0.1.0 to some of them.
/// The wire says the protocol level alone; `stats` carries ours.
#[test]
fn version_is_the_memcached_protocol_level_and_stats_has_ours() {
    let p = Proc::start(&[]);
    let mut s = p.client();
    assert_eq!(tx(&mut s, "version\r\n", "\r\n"), "VERSION 1.6.18\r\n");
    // What a semver parser makes of it: 1.6.18, no pre-release part.
    let v = "1.6.18";
    let parts: Vec<u32> = v.split('.').map(|x| x.parse().unwrap()).collect();
    assert_eq!(parts, [1, 6, 18]);
    let st = tx(&mut s, "stats\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "version").as_deref(), Some("1.6.18"));
    assert_eq!(
        stat_of(&st, "tiercache_version").as_deref(),
        Some(env!("CARGO_PKG_VERSION"))
    );
}

/// `verbosity N` changes the log level while the server runs: connection
/// accepts are logged at debug, so they appear after `verbosity 1` and
/// stop after `verbosity 0`; `stats settings` shows the level.
#[test]
fn verbosity_changes_the_log_level_at_run_time() {
    let p = Proc::start(&[]);
    let accepted = || {
        p.log()
            .iter()
            .filter(|l| l.contains("connection accepted"))
            .count()
    };
    let mut s = p.client();
    assert_eq!(tx(&mut s, "version\r\n", "\r\n"), "VERSION 1.6.18\r\n");
    assert_eq!(accepted(), 0, "debug lines at verbosity 0");
    assert_eq!(tx(&mut s, "verbosity 1\r\n", "\r\n"), "OK\r\n");
    let st = tx(&mut s, "stats settings\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "verbosity").as_deref(), Some("1"));
    let mut c = p.client();
    assert_eq!(tx(&mut c, "version\r\n", "\r\n"), "VERSION 1.6.18\r\n");
    let t = Instant::now();
    while accepted() == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "no debug line after verbosity 1: {:?}",
            p.log()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(tx(&mut s, "verbosity 0\r\n", "\r\n"), "OK\r\n");
    let before = accepted();
    let mut c = p.client();
    assert_eq!(tx(&mut c, "version\r\n", "\r\n"), "VERSION 1.6.18\r\n");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(accepted(), before, "debug lines after verbosity 0");
    // A bad level is refused as memcached refuses it.
    assert_eq!(
        tx(&mut s, "verbosity abc\r\n", "\r\n"),
        "CLIENT_ERROR bad command line format\r\n"
    );
}

/// `cache_memlimit` resizes the RAM tier at run time, as memcached's does:
/// lower, and the cache's next writes bring the memory in use down to it
/// (segments go back to the allocator as shards evict); higher, and it
/// grows again. Below the configuration's minimum (or memcached's 8 MB) it
/// is refused with memcached's replies and the reason in the log. About 3 s.
#[test]
fn cache_memlimit_resizes_the_ram_tier_at_run_time() {
    let p = Proc::start(&["-m", "64", "-o", "ext_path=none"]);
    let mut s = p.client();
    let in_use = |s: &mut TcpStream| {
        let st = tx(s, "stats\r\n", "END\r\n");
        let n = |k: &str| stat_of(&st, k).unwrap().parse::<u64>().unwrap();
        (
            n("limit_maxbytes"),
            n("segments_allocated") * n("segment_size") + n("index_bytes"),
        )
    };
    let fill = |s: &mut TcpStream, from: usize, mb: usize| {
        let v = "x".repeat(1000);
        let mut batch = String::new();
        for i in from..from + mb * 1000 {
            batch.push_str(&format!("set k{i} 0 0 1000 noreply\r\n{v}\r\n"));
            if batch.len() > 256 << 10 {
                tx(s, &(std::mem::take(&mut batch) + "mn\r\n"), "MN\r\n");
            }
        }
        tx(s, &(batch + "mn\r\n"), "MN\r\n");
    };
    fill(&mut s, 0, 70);
    let (limit, used) = in_use(&mut s);
    assert_eq!(limit, 64 << 20);
    assert!(
        used > 48 << 20,
        "{used} bytes in use after 70 MB of sets at -m 64"
    );
    assert_eq!(tx(&mut s, "cache_memlimit 24\r\n", "\r\n"), "OK\r\n");
    fill(&mut s, 100_000, 40);
    let (limit, used) = in_use(&mut s);
    assert_eq!(limit, 24 << 20);
    assert!(used <= 24 << 20, "{used} bytes in use at cache_memlimit 24");
    let settings = tx(&mut s, "stats settings\r\n", "END\r\n");
    assert_eq!(stat_of(&settings, "maxbytes").as_deref(), Some("25165824"));
    assert_eq!(
        tx(&mut s, "get k139999\r\n", "END\r\n").lines().count(),
        3,
        "newest key"
    );
    assert_eq!(tx(&mut s, "cache_memlimit 48\r\n", "\r\n"), "OK\r\n");
    fill(&mut s, 200_000, 60);
    let (_, used) = in_use(&mut s);
    assert!(
        used > 32 << 20 && used <= 48 << 20,
        "{used} bytes in use at cache_memlimit 48"
    );
    assert_eq!(
        tx(&mut s, "cache_memlimit 4\r\n", "\r\n"),
        "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m\r\n"
    );
    // With a flash tier, less than its write buffers need is refused.
    let f = Proc::start(&["-m", "64"]);
    let mut c = f.client();
    assert_eq!(
        tx(&mut c, "cache_memlimit 9\r\n", "\r\n"),
        "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust\r\n"
    );
    let t = Instant::now();
    while !f
        .log()
        .iter()
        .any(|l| l.contains("cache_memlimit 9 refused"))
    {
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", f.log());
        std::thread::sleep(Duration::from_millis(10));
    }
    let st = tx(&mut c, "stats\r\n", "END\r\n");
    assert_eq!(
        stat_of(&st, "limit_maxbytes").as_deref(),
        Some("67108864"),
        "unchanged"
    );
}

/// The listening addresses `stats conns` shows (`tcp:` / `tcp6:`).
fn listeners(s: &mut TcpStream) -> Vec<SocketAddr> {
    let text = tx(s, "stats conns\r\n", "END\r\n");
    let fds: Vec<String> = text
        .lines()
        .filter(|l| l.ends_with(":state conn_listening"))
        .map(|l| l.split([' ', ':']).nth(1).unwrap().to_string())
        .collect();
    fds.iter()
        .map(|fd| {
            let want = format!("STAT {fd}:addr ");
            let a = text.lines().find_map(|l| l.strip_prefix(&want)).unwrap();
            let a = a
                .strip_prefix("tcp6:")
                .or_else(|| a.strip_prefix("tcp:"))
                .unwrap();
            a.parse().unwrap()
        })
        .collect()
}

/// `-l` repeated and `-l a,b` lists: every address listens and serves,
/// IPv4 and IPv6 (memcached's syntax; an IPv6 socket is v6-only).
#[test]
fn several_listen_addresses_repeated_and_comma_separated() {
    // Proc gives `-l 127.0.0.1`; add a comma list with IPv6 and another
    // loopback address.
    let p = Proc::start(&["-l", "::1,127.0.0.2"]);
    let mut s = p.client();
    // Connections opened after the start never share a listener's fd in
    // `stats conns` (the listeners stay open).
    let more: Vec<TcpStream> = (0..8).map(|_| p.client()).collect();
    std::thread::sleep(Duration::from_millis(50));
    let conns = tx(&mut s, "stats conns\r\n", "END\r\n");
    let fd_of = |l: &str| l.split([' ', ':']).nth(1).unwrap().to_string();
    let listening: Vec<String> = conns
        .lines()
        .filter(|l| l.ends_with(":state conn_listening"))
        .map(fd_of)
        .collect();
    let clients: Vec<String> = conns
        .lines()
        .filter(|l| l.contains(":listen_addr "))
        .map(fd_of)
        .collect();
    assert_eq!(clients.len(), 9, "{conns}");
    assert!(listening.iter().all(|fd| !clients.contains(fd)), "{conns}");
    drop(more);
    let addrs = listeners(&mut s);
    assert_eq!(addrs.len(), 3, "{addrs:?}");
    assert!(
        addrs.iter().any(|a| a.ip().to_string() == "::1"),
        "{addrs:?}"
    );
    assert!(
        addrs.iter().any(|a| a.ip().to_string() == "127.0.0.2"),
        "{addrs:?}"
    );
    for a in &addrs {
        let mut c = TcpStream::connect(a).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(
            tx(&mut c, "set k 0 0 1\r\nx\r\n", "\r\n"),
            "STORED\r\n",
            "{a}"
        );
        // `stats settings` names them in memcached's key.
        let st = tx(&mut c, "stats settings\r\n", "END\r\n");
        assert_eq!(
            stat_of(&st, "inter").as_deref(),
            Some("127.0.0.1,::1,127.0.0.2")
        );
    }
    // A port per address, and bad lists are refused clearly.
    let dir = scratch("listen");
    let port = free_port();
    let one = format!("127.0.0.1:{port}");
    let out = run(
        &[
            &["-p", "0", "-l", "127.0.0.1,", "-o", "ext_path=none"][..],
            &as_root(),
        ]
        .concat(),
        &dir,
    );
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("an empty address"));
    let out = run(
        &[&["-l", "[::1", "-o", "ext_path=none"][..], &as_root()].concat(),
        &dir,
    );
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no ']'"));
    let p = Proc::start(&["-l", &one]);
    let mut s = p.client();
    assert!(listeners(&mut s).contains(&one.parse().unwrap()));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-o idle_timeout=1`: a connection that sends nothing is closed after
/// more than a second (checked once a second, so within about 3 s) and
/// counted in `idle_kicks`; one that keeps talking stays open.
#[test]
fn idle_connections_are_closed_and_counted() {
    let p = Proc::start(&["-o", "idle_timeout=1"]);
    let mut idle = p.client();
    let mut busy = p.client();
    let t = Instant::now();
    let mut closed_after = None;
    idle.set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    while t.elapsed() < Duration::from_secs(4) {
        assert_eq!(tx(&mut busy, "version\r\n", "\r\n"), "VERSION 1.6.18\r\n");
        let mut b = [0u8; 16];
        match idle.read(&mut b) {
            Ok(0) => {
                closed_after = Some(t.elapsed());
                break;
            }
            Ok(n) => panic!("unexpected bytes {:?}", &b[..n]),
            Err(_) => {} // timed out: still open
        }
    }
    let after = closed_after.expect("the idle connection was not closed within 4 s");
    // Idle time is counted on the server's one-second clock (as in
    // memcached), so "more than 1 s" may be a little under 1 s of wall
    // time; never a fraction of it.
    assert!(
        after >= Duration::from_millis(900),
        "closed after {after:?}"
    );
    let st = tx(&mut busy, "stats\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "idle_kicks").as_deref(), Some("1"));
    let st = tx(&mut busy, "stats settings\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "idle_timeout").as_deref(), Some("1"));
    // Without the option nobody is kicked and memcached's stat is absent.
    let q = Proc::start(&[]);
    let st = tx(&mut q.client(), "stats\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "idle_kicks"), None);
}

/// Starts the binary in `dir` (no `-o ext_path`: the default flash file)
/// and returns its log lines up to "listening", and the child.
// The child is returned to the caller, which kills and waits for it.
#[allow(clippy::zombie_processes)]
fn start_in(dir: &Path, args: &[&str]) -> (std::process::Child, Vec<String>, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(["-p", "0", "-l", "127.0.0.1"])
        .args(args)
        .args(as_root())
        .current_dir(dir)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run tiercache");
    let mut lines = Vec::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            let _ = child.kill();
            let _ = child.wait();
            panic!("did not start: {lines:?}");
        }
        lines.push(line.trim_end().to_string());
        if let Some(i) = line.find("addr=") {
            let a: String = line[i + 5..]
                .chars()
                .take_while(|c| !c.is_whitespace())
                .collect();
            // Keep draining stderr so the server never blocks on it.
            std::thread::spawn(move || for _ in err.lines() {});
            return (child, lines, a.parse().unwrap());
        }
    }
}

/// `-m 16` with no `ext_path`: the default 1 GiB flash file's four write
/// buffers (16 MiB) and its index do not fit in 16 MiB, so the flash tier is
/// fitted to `-m` (fewer buffers, a smaller file if need be; the log says
/// so) and the server starts with a flash tier.
#[test]
fn a_small_memory_limit_starts_with_a_fitted_default_flash_file() {
    let dir = scratch("m16");
    let (mut child, lines, addr) = start_in(&dir, &["-m", "16"]);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("too small for the default flash file")
                && l.contains("ext_wbuf_count=")),
        "{lines:?}"
    );
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(tx(&mut s, "set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    assert_eq!(
        tx(&mut s, "get k\r\n", "END\r\n"),
        "VALUE k 0 1\r\nx\r\nEND\r\n"
    );
    let st = tx(&mut s, "stats\r\n", "END\r\n");
    let flash: u64 = stat_of(&st, "extstore_limit_maxbytes")
        .unwrap()
        .parse()
        .unwrap();
    assert!(flash > 0, "{flash}");
    assert_eq!(stat_of(&st, "limit_maxbytes").as_deref(), Some("16777216"));
    assert!(dir.join("tiercache.flash").exists());
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-d -P file`: the command returns 0 once the server listens; the pid
/// file holds the daemon's pid (not the command's), which serves; SIGTERM
/// stops it and the pid file is removed. A daemon that cannot start says
/// why in the foreground with the exit code of a foreground start.
#[test]
fn daemon_with_pidfile_and_clean_exit() {
    let dir = scratch("daemon");
    let pidfile = dir.join("tiercache.pid");
    let port = free_port();
    let port_s = port.to_string();
    let daemon = |pidfile: &Path| -> Vec<String> {
        let mut a: Vec<String> = ["-d", "-P", pidfile.to_str().unwrap(), "-p", &port_s]
            .iter()
            .map(|x| x.to_string())
            .collect();
        a.extend(["-l", "127.0.0.1", "-o", "ext_path=none"].map(String::from));
        a.extend(as_root().into_iter().map(String::from));
        a
    };
    let args = daemon(&pidfile);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = Instant::now();
    let out = run(&args, &dir);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("pid file written")
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("the daemon listens");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let st = tx(&mut s, "stats\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "pid"), Some(pid.to_string()));
    // A second daemon on the same port cannot bind: the foreground says so.
    let pid2 = dir.join("second.pid");
    let args2 = daemon(&pid2);
    let args2: Vec<&str> = args2.iter().map(String::as_str).collect();
    let out = run(&args2, &dir);
    assert_eq!(out.status.code(), Some(71));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("cannot listen on 127.0.0.1"), "{msg}");
    assert!(!pid2.exists(), "a pid file for a server that did not start");
    // SAFETY: signals the daemon this test started (its pid from its file).
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    assert!(
        wait_gone(pid, Duration::from_secs(5)),
        "the daemon did not stop"
    );
    assert!(!pidfile.exists(), "the pid file was not removed");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pid file that cannot be written is an error, not ignored.
#[test]
fn an_unwritable_pidfile_is_refused() {
    let dir = scratch("badpid");
    let out = run(
        &[
            &[
                "-p",
                "0",
                "-l",
                "127.0.0.1",
                "-o",
                "ext_path=none",
                "-P",
                "/nonexistent-ops-dir/x.pid",
            ][..],
            &as_root(),
        ]
        .concat(),
        &dir,
    );
    assert_eq!(out.status.code(), Some(73));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("cannot write the pid file"), "{msg}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `-u` as root: an unknown user is refused before anything starts (exit
/// 67, as memcached's "can't find the user"), no -u is refused (exit 64, as
/// memcached) and `-u nobody` switches to nobody after binding (so a port
/// below 1024 would still work). Not as root, `-u` is not looked up
/// (`cli.rs`, `dash_u_is_not_looked_up_when_not_root`).
#[test]
fn dash_u_switches_user_after_binding_and_refuses_unknown_users() {
    if !is_root() {
        eprintln!("skipped: not running as root");
        return;
    }
    let dir = scratch("user");
    let out = run(
        &["-p", "0", "-o", "ext_path=none", "-u", "no-such-user-ops"],
        &dir,
    );
    assert_eq!(out.status.code(), Some(67));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("can't find the user no-such-user-ops"),
        "{msg}"
    );
    // As memcached: root must name the user (exit 64, memcached's words).
    let out = run(&["-p", "0", "-o", "ext_path=none"], &dir);
    assert_eq!(out.status.code(), Some(64));
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("can't run as root without the -u switch"),
        "{msg}"
    );
    let r = Proc::start(&[]); // with -u root
    assert!(
        r.log().iter().any(|l| l.contains("staying root (-u root)")),
        "{:?}",
        r.log()
    );
    drop(r);
    let nobody = tiercache_server::daemon::lookup_user("nobody").expect("user nobody");
    let p = Proc::start(&["-u", "nobody"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid())).unwrap();
    let line = |k: &str| -> Vec<u32> {
        let l = status.lines().find(|l| l.starts_with(k)).unwrap();
        l.split_whitespace()
            .skip(1)
            .map(|x| x.parse().unwrap())
            .collect()
    };
    assert_eq!(line("Uid:"), [nobody.uid; 4], "{status}");
    assert_eq!(line("Gid:"), [nobody.gid; 4], "{status}");
    let mut s = p.client();
    assert_eq!(tx(&mut s, "set k 0 0 1\r\nx\r\n", "\r\n"), "STORED\r\n");
    assert!(
        p.log().iter().any(|l| l.contains("switched user")),
        "{:?}",
        p.log()
    );
    // With a flash tier in a directory only root may write, the start warns
    // that the shutdown snapshot will not be written there.
    let ext = format!("ext_path={}:64M", dir.join("flash").display());
    let f = Proc::start(&["-u", "nobody", "-o", &ext]);
    assert!(
        f.log()
            .iter()
            .any(|l| l.contains("shutdown snapshot cannot be written")),
        "{:?}",
        f.log()
    );
    drop(f);
    let _ = std::fs::remove_dir_all(&dir);
}

/// memcached's remaining flags: `-b` (listen backlog), `-r` (core limit)
/// and, as root, `-k` (mlockall) are applied; `-R`, `-f`, `-n`, `-L` and
/// the `-o` options without a counterpart start the server with a note
/// each in the log saying why they do nothing; `-M` and `-C` are refused.
/// Under a second.
#[test]
fn memcached_tuning_flags_are_applied_noted_or_refused() {
    let p = Proc::start(&[
        "-b",
        "64",
        "-r",
        "-R",
        "20",
        "-f",
        "1.25",
        "-n",
        "48",
        "-L",
        "-o",
        "slab_reassign,lru_crawler,hash_algorithm=murmur3",
    ]);
    let mut s = p.client();
    let st = tx(&mut s, "stats settings\r\n", "END\r\n");
    assert_eq!(stat_of(&st, "tcp_backlog").as_deref(), Some("64"));
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", p.pid())).unwrap();
    let core: Vec<&str> = limits
        .lines()
        .find(|l| l.starts_with("Max core file size"))
        .unwrap()
        .split_whitespace()
        .skip(4)
        .take(2)
        .collect();
    assert_eq!(core[0], core[1], "soft core limit not raised: {limits}");
    let log = p.log();
    for want in [
        "-R 20 has no effect",
        "-f 1.25 has no effect",
        "-n 48 has no effect",
        "-L has no effect",
        "-o slab_reassign has no effect",
        "-o lru_crawler has no effect",
        "-o hash_algorithm=murmur3 has no effect",
    ] {
        assert!(
            log.iter().any(|l| l.contains(want)),
            "no note {want:?}: {log:?}"
        );
    }
    let dir = scratch("flags");
    for (flag, why) in [
        ("-M", "tiercache always evicts"),
        ("-C", "keeps a CAS value"),
    ] {
        let out = run(
            &[&["-p", "0", "-o", "ext_path=none", flag][..], &as_root()].concat(),
            &dir,
        );
        assert_eq!(out.status.code(), Some(64), "{flag}");
        let msg = String::from_utf8_lossy(&out.stderr);
        assert!(msg.contains(why), "{flag}: {msg}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    if !is_root() {
        eprintln!("skipped -k: not running as root");
        return;
    }
    let k = Proc::start(&["-k", "-m", "8"]);
    let status = std::fs::read_to_string(format!("/proc/{}/status", k.pid())).unwrap();
    let locked: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmLck:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(locked > 0, "{status}");
    assert_eq!(
        tx(&mut k.client(), "set k 0 0 1\r\nx\r\n", "\r\n"),
        "STORED\r\n"
    );
}
