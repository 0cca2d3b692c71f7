//! The Redis (RESP) port end to end: raw bytes over real sockets to an
//! in-process server, replies compared byte for byte with Redis 7's.

mod common;

use common::resp::{cmd, is, pipeline, redis, server_with, tx};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

#[test]
fn get_set_ping_and_pipelining() {
    let h = server_with(|_| {});
    let mut s = redis(&h);
    is(&mut s, &["PING"], "+PONG\r\n");
    is(&mut s, &["GET", "k"], "$-1\r\n");
    is(&mut s, &["SET", "k", "hello"], "+OK\r\n");
    is(&mut s, &["get", "k"], "$5\r\nhello\r\n");
    // Inline commands, and three requests in one write.
    tx(
        &mut s,
        b"PING\r\nECHO \"a b\"\r\nGET k\r\n",
        b"+PONG\r\n$3\r\na b\r\n$5\r\nhello\r\n",
    );
    let mut pipe = Vec::new();
    for i in 0..100 {
        pipe.extend(cmd(&["SET", &format!("p{i}"), &i.to_string()]));
    }
    tx(&mut s, &pipe, "+OK\r\n".repeat(100).as_bytes());
    is(
        &mut s,
        &["MGET", "p7", "nope", "p99"],
        "*3\r\n$1\r\n7\r\n$-1\r\n$2\r\n99\r\n",
    );
    h.shutdown();
}

#[test]
fn same_items_as_memcached_port() {
    let h = server_with(|_| {});
    let mut mc = common::Client::new(&h);
    assert_eq!(mc.tx_str(b"set a 5 0 3\r\nabc\r\n"), "STORED\r\n");
    let mut s = redis(&h);
    is(&mut s, &["GET", "a"], "$3\r\nabc\r\n");
    is(&mut s, &["SET", "b", "xyz"], "+OK\r\n");
    assert_eq!(mc.tx_str(b"get b\r\n"), "VALUE b 0 3\r\nxyz\r\nEND\r\n");
    is(&mut s, &["INCR", "n"], ":1\r\n");
    assert_eq!(mc.tx_str(b"incr n 5\r\n"), "6\r\n");
    is(&mut s, &["INCRBY", "n", "-10"], ":-4\r\n");
    h.shutdown();
}

#[test]
fn string_commands_as_redis() {
    let h = server_with(|_| {});
    let mut s = redis(&h);
    is(&mut s, &["SET", "k", "v", "NX"], "+OK\r\n");
    is(&mut s, &["SET", "k", "w", "NX"], "$-1\r\n");
    is(&mut s, &["SET", "k", "w", "XX", "GET"], "$1\r\nv\r\n");
    is(
        &mut s,
        &["SET", "k", "v", "NX", "XX"],
        "-ERR syntax error\r\n",
    );
    is(
        &mut s,
        &["SET", "k", "v", "EX", "0"],
        "-ERR invalid expire time in 'set' command\r\n",
    );
    is(
        &mut s,
        &["SET", "k", "v", "EX", "x"],
        "-ERR value is not an integer or out of range\r\n",
    );
    is(
        &mut s,
        &["SET", "k"],
        "-ERR wrong number of arguments for 'set' command\r\n",
    );
    is(&mut s, &["APPEND", "k", "xyz"], ":4\r\n");
    is(&mut s, &["STRLEN", "k"], ":4\r\n");
    is(&mut s, &["GETRANGE", "k", "1", "-2"], "$2\r\nxy\r\n");
    is(&mut s, &["SETRANGE", "k", "6", "ab"], ":8\r\n");
    is(&mut s, &["GET", "k"], "$8\r\nwxyz\0\0ab\r\n");
    is(
        &mut s,
        &["INCR", "k"],
        "-ERR value is not an integer or out of range\r\n",
    );
    is(&mut s, &["SET", "n", "9223372036854775807"], "+OK\r\n");
    is(
        &mut s,
        &["INCR", "n"],
        "-ERR increment or decrement would overflow\r\n",
    );
    is(&mut s, &["DECRBY", "n", "7"], ":9223372036854775800\r\n");
    is(&mut s, &["INCRBYFLOAT", "f", "10.5"], "$4\r\n10.5\r\n");
    is(&mut s, &["INCRBYFLOAT", "f", "0.1"], "$4\r\n10.6\r\n");
    is(&mut s, &["GETDEL", "f"], "$4\r\n10.6\r\n");
    is(&mut s, &["EXISTS", "f", "k", "k"], ":2\r\n");
    is(&mut s, &["MSET", "a", "1", "b", "2"], "+OK\r\n");
    is(&mut s, &["MSETNX", "a", "1", "c", "2"], ":0\r\n");
    is(&mut s, &["GETSET", "a", "9"], "$1\r\n1\r\n");
    is(&mut s, &["SETNX", "a", "2"], ":0\r\n");
    is(&mut s, &["DEL", "a", "b", "zz"], ":2\r\n");
    is(
        &mut s,
        &["FOO", "x", "y"],
        "-ERR unknown command 'FOO', with args beginning with: 'x' 'y' \r\n",
    );
    h.shutdown();
}

#[test]
fn expiry() {
    let h = server_with(|_| {});
    let mut s = redis(&h);
    is(&mut s, &["SET", "k", "v", "EX", "100"], "+OK\r\n");
    is(&mut s, &["TTL", "k"], ":100\r\n");
    is(&mut s, &["EXPIRE", "k", "50", "GT"], ":0\r\n");
    is(&mut s, &["EXPIRE", "k", "50", "LT"], ":1\r\n");
    is(&mut s, &["TTL", "k"], ":50\r\n");
    is(
        &mut s,
        &["EXPIRE", "k", "5", "NX", "XX"],
        "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n",
    );
    is(&mut s, &["PERSIST", "k"], ":1\r\n");
    is(&mut s, &["TTL", "k"], ":-1\r\n");
    is(&mut s, &["TTL", "nope"], ":-2\r\n");
    is(&mut s, &["SET", "k", "v", "PX", "1200"], "+OK\r\n");
    is(&mut s, &["GET", "k"], "$1\r\nv\r\n");
    std::thread::sleep(Duration::from_millis(2300));
    is(&mut s, &["GET", "k"], "$-1\r\n");
    is(&mut s, &["SET", "k", "v"], "+OK\r\n");
    is(&mut s, &["EXPIRE", "k", "-1"], ":1\r\n");
    is(&mut s, &["EXISTS", "k"], ":0\r\n");
    h.shutdown();
}

#[test]
fn hashes() {
    let h = server_with(|_| {});
    let mut s = redis(&h);
    is(&mut s, &["HSET", "h", "a", "1", "b", "2"], ":2\r\n");
    is(&mut s, &["HSET", "h", "a", "3"], ":0\r\n");
    is(&mut s, &["HGET", "h", "a"], "$1\r\n3\r\n");
    is(
        &mut s,
        &["HGETALL", "h"],
        "*4\r\n$1\r\na\r\n$1\r\n3\r\n$1\r\nb\r\n$1\r\n2\r\n",
    );
    is(&mut s, &["HINCRBY", "h", "b", "5"], ":7\r\n");
    is(&mut s, &["TYPE", "h"], "+hash\r\n");
    is(
        &mut s,
        &["GET", "h"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    is(&mut s, &["HDEL", "h", "a", "b"], ":2\r\n");
    is(&mut s, &["EXISTS", "h"], ":0\r\n");
    is(&mut s, &["SET", "s", "x"], "+OK\r\n");
    is(
        &mut s,
        &["HGET", "s", "a"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    h.shutdown();
}

#[test]
fn resp3_multi_and_select() {
    let h = server_with(|_| {});
    let mut s = redis(&h);
    is(
        &mut s,
        &["HELLO", "4"],
        "-NOPROTO unsupported protocol version\r\n",
    );
    s.write_all(&cmd(&["HELLO", "3"])).unwrap();
    let mut b = [0u8; 4];
    s.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"%7\r\n");
    let mut rest = vec![0u8; 4096];
    std::thread::sleep(Duration::from_millis(100));
    let _ = s.read(&mut rest).unwrap();
    is(&mut s, &["GET", "nope"], "_\r\n");
    is(&mut s, &["MULTI"], "+OK\r\n");
    is(&mut s, &["SET", "m", "1"], "+QUEUED\r\n");
    is(&mut s, &["INCR", "m"], "+QUEUED\r\n");
    is(&mut s, &["EXEC"], "*2\r\n+OK\r\n:2\r\n");
    is(&mut s, &["EXEC"], "-ERR EXEC without MULTI\r\n");
    is(
        &mut s,
        &["SELECT", "1"],
        "-ERR DB index is out of range\r\n",
    );
    is(&mut s, &["SELECT", "0"], "+OK\r\n");
    h.shutdown();
}

#[test]
fn bad_input_gets_redis_errors_and_closes() {
    let h = server_with(|_| {});
    let mut s = redis(&h);
    is(&mut s, &["SET", "keep", "me"], "+OK\r\n");
    for bad in [
        &b"*1\r\n$536870913\r\n"[..],
        b"*9999999\r\n",
        b"*1\r\n+x\r\n",
        b"SET \"a\r\n",
    ] {
        let mut c = redis(&h);
        c.write_all(bad).unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("-ERR Protocol error: "), "{got:?}");
    }
    // A bulk over the item size limit is refused before it is read.
    let mut c = redis(&h);
    c.write_all(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$100000000\r\n")
        .unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"-ERR Protocol error: invalid bulk length\r\n");
    is(&mut s, &["GET", "keep"], "$2\r\nme\r\n");
    h.shutdown();
}

#[test]
fn auth_against_the_users_file() {
    let dir = common::tempdir("resp-auth");
    let file = dir.join("users");
    std::fs::write(&file, "default:sesame\nbob:pw\n").unwrap();
    let h = server_with(|c| c.server.auth_file = file.to_string_lossy().into_owned());
    let mut s = redis(&h);
    is(
        &mut s,
        &["GET", "k"],
        "-NOAUTH Authentication required.\r\n",
    );
    is(
        &mut s,
        &["AUTH", "nope"],
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    is(&mut s, &["AUTH", "sesame"], "+OK\r\n");
    is(&mut s, &["GET", "k"], "$-1\r\n");
    let mut s = redis(&h);
    is(&mut s, &["AUTH", "bob", "pw"], "+OK\r\n");
    is(&mut s, &["PING"], "+PONG\r\n");
    // Before authentication, Redis's tighter bounds.
    let mut c = redis(&h);
    c.write_all(b"*11\r\n").unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(
        got,
        b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    );
    h.shutdown();
}

#[test]
fn graceful_restart_keeps_resp_items() {
    let dir = common::tempdir("resp-restart");
    let flash = format!("{}:64M", dir.join("flash").display());
    let port = common::free_port();
    let cfg = |c: &mut tiercache_server::config::Config| {
        c.flash.paths = vec![flash.clone()];
        c.redis.port = port;
    };
    let h = common::server_with(cfg);
    let mut s = redis(&h);
    is(&mut s, &["SET", "str", "v1", "EX", "1000"], "+OK\r\n");
    is(&mut s, &["HSET", "h", "f", "x"], ":1\r\n");
    drop(s);
    h.shutdown();
    h.wait();
    let h = common::server_with(cfg);
    let mut s = redis(&h);
    is(&mut s, &["GET", "str"], "$2\r\nv1\r\n");
    is(&mut s, &["HGET", "h", "f"], "$1\r\nx\r\n");
    // INFO's tiercache section shows the flash tier.
    s.write_all(&cmd(&["INFO", "tiercache"])).unwrap();
    let mut info = vec![0u8; 4096];
    let n = s.read(&mut info).unwrap();
    let info = String::from_utf8_lossy(&info[..n]);
    assert!(
        info.contains("# Tiercache") && info.contains("flash_capacity:"),
        "{info}"
    );
    // The restart took some of the second the deadline was rounded to.
    s.write_all(&cmd(&["TTL", "str"])).unwrap();
    let mut got = [0u8; 16];
    let n = s.read(&mut got).unwrap();
    let ttl = String::from_utf8_lossy(&got[..n]);
    assert!(ttl == ":1000\r\n" || ttl == ":999\r\n", "{ttl:?}");
    h.shutdown();
}

#[test]
fn resp_latency_in_metrics_and_sla() {
    let mport = common::free_port();
    let h = server_with(|c| c.server.metrics_port = mport);
    let mut s = redis(&h);
    is(&mut s, &["SET", "k", "v"], "+OK\r\n");
    is(&mut s, &["GET", "k"], "$1\r\nv\r\n");
    is(&mut s, &["GET", "nope"], "$-1\r\n");
    let mut m = TcpStream::connect(h.metrics_addr.unwrap()).unwrap();
    m.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").unwrap();
    let mut body = String::new();
    m.read_to_string(&mut body).unwrap();
    let mut mc = common::Client::new(&h);
    let stats = mc.tx_str(b"stats\r\n");
    assert_eq!(common::stat_of(&stats, "get_hits").as_deref(), Some("1"));
    assert_eq!(common::stat_of(&stats, "get_misses").as_deref(), Some("1"));
    assert_eq!(common::stat_of(&stats, "cmd_set").as_deref(), Some("1"));
    for want in [
        r#"command="redis_get",outcome="hit""#,
        r#"command="redis_get",outcome="miss""#,
        r#"command="redis_set",outcome="store""#,
    ] {
        assert!(body.contains(want), "{want} not in /metrics");
    }
    h.shutdown();
}

/// Sends many commands at once and reads `n` replies of one line each
/// (simple strings, integers, errors) or bulk strings; returns them.
fn big(i: usize) -> String {
    format!("{i:06}-{}", "v".repeat(900 + i % 200))
}

#[test]
fn kill_9_of_resp_items_brings_nothing_stale_back_and_reads_from_flash() {
    use std::process::{Command, Stdio};
    let dir = common::tempdir("resp-kill9");
    let port = common::free_port();
    let rport = common::free_port();
    let spawn = || {
        Command::new(env!("CARGO_BIN_EXE_tiercache"))
            .args(common::as_root())
            .args(["-p", &port.to_string(), "-m", "32", "-t", "2"])
            .args(["-o", &format!("redis_port={rport}"), "-o"])
            .arg(format!("ext_path={}:256M", dir.join("flash").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut child = spawn();
    let mut s = common::connect_port(rport);
    let n = 40_000;
    for from in (0..n).step_by(1000) {
        let cmds: Vec<_> = (from..from + 1000)
            .map(|i| cmd(&["SET", &format!("k{i}"), &big(i)]))
            .collect();
        assert!(pipeline(&mut s, &cmds).iter().all(|r| r == b"+OK"));
    }
    // Old copies are on flash now: overwrite some, delete others, count.
    let mut cmds = Vec::new();
    for i in 0..300 {
        cmds.push(cmd(&["SET", &format!("k{i}"), &format!("new{i:04}")]));
        cmds.push(cmd(&["DEL", &format!("k{}", 300 + i)]));
        cmds.push(cmd(&["INCR", "counter"]));
    }
    pipeline(&mut s, &cmds);
    // Reads over RESP of keys that are on flash by now.
    let firsts: Vec<_> = (900..1000)
        .map(|i| cmd(&["GET", &format!("k{i}")]))
        .collect();
    let got = pipeline(&mut s, &firsts);
    let hits = (900..1000)
        .zip(&got)
        .filter(|(i, g)| **g == big(*i).into_bytes())
        .count();
    assert!(
        hits > 50,
        "only {hits} of 100 early keys read back before the kill"
    );
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    let mut child = spawn();
    let mut s = common::connect_port(rport);
    let mut back = 0;
    for from in (0..n).step_by(1000) {
        let cmds: Vec<_> = (from..from + 1000)
            .map(|i| cmd(&["GET", &format!("k{i}")]))
            .collect();
        for (i, got) in (from..from + 1000).zip(pipeline(&mut s, &cmds)) {
            if got == b"$-1" {
                continue;
            }
            match i {
                0..300 => assert_eq!(got, format!("new{i:04}").into_bytes(), "k{i} stale"),
                300..600 => panic!("k{i} was deleted before kill -9 and came back"),
                _ => {
                    assert_eq!(got, big(i).into_bytes(), "k{i}");
                    back += 1;
                }
            }
        }
    }
    let c = pipeline(&mut s, &[cmd(&["GET", "counter"])]);
    assert!(
        c[0] == b"300" || c[0] == b"$-1",
        "{:?}",
        String::from_utf8_lossy(&c[0])
    );
    eprintln!("{back} of {n} RESP items came back after kill -9");
    assert!(
        back > 5_000,
        "only {back} of {n} items came back from flash"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Clients that pipeline gets of large values and never read their replies
/// hold a bounded amount of the server's memory (each blocks its own
/// connection thread once its socket is full), and others are still served.
#[test]
fn clients_that_never_read_hold_bounded_memory() {
    let rport = common::free_port();
    let p = common::process::Proc::start(&["-m", "64", "-o", &format!("redis_port={rport}")]);
    let mut s = common::connect_port(rport);
    let v = "x".repeat(100_000);
    is(&mut s, &["SET", "big", &v], "+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    let before = p.rss();
    let gets: Vec<u8> = (0..2000).flat_map(|_| cmd(&["GET", "big"])).collect();
    let mut idle = Vec::new();
    for _ in 0..20 {
        let mut c = common::connect_port(rport);
        c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
        // Sends what the socket takes (the server stops reading once its
        // replies are stuck), never reads.
        let _ = c.write_all(&gets);
        idle.push(c);
    }
    std::thread::sleep(Duration::from_millis(500));
    let grew = p.rss().saturating_sub(before);
    eprintln!("20 clients that never read: RSS grew {} KiB", grew >> 10);
    assert!(grew < 40 << 20, "RSS grew {grew} bytes");
    is(&mut s, &["STRLEN", "big"], ":100000\r\n");
    // A stop does not wait for them: SIGTERM ends the server.
    let started = std::time::Instant::now();
    // SAFETY: kill(2) on the child's pid.
    #[allow(unsafe_code)]
    unsafe {
        libc::kill(p.pid() as i32, libc::SIGTERM);
    }
    let mut p = p;
    let status = p.child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stop took {:?}",
        started.elapsed()
    );
    assert!(status.code().is_some(), "{status:?}");
    drop(idle);
}

#[test]
fn redis_options_on_the_command_line_and_in_toml() {
    use std::process::Command;
    let out = Command::new(env!("CARGO_BIN_EXE_tiercache"))
        .args(common::as_root())
        .args(["-o", "redis_port=x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-o redis_port: 'x' is not a port number"),
        "{err}"
    );
    let dir = common::tempdir("resp-toml");
    let rport = common::free_port();
    let toml = dir.join("tc.toml");
    std::fs::write(
        &toml,
        format!("[redis]\nport = {rport}\nlisten = \"127.0.0.1\"\n"),
    )
    .unwrap();
    let p = common::process::Proc::start(&["--config", toml.to_str().unwrap()]);
    let mut s = common::connect_port(rport);
    is(&mut s, &["PING"], "+PONG\r\n");
    drop(p);
}
