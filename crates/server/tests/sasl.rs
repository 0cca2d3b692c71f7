//! Binary SASL PLAIN (`-S`, `sasl.rs`).
//!
//! - the same script of binary requests against tiercache and against
//!   memcached 1.6.18 started with `-S` (libsasl's PLAIN over a sasldb made
//!   with `saslpasswd2`), every response compared (opcode, status, body) and
//!   whether the connection is closed after it; then `auth_cmds` and
//!   `auth_errors`. Skipped with a message when memcached or saslpasswd2
//!   (Debian's sasl2-bin) is not installed, after checking tiercache's
//!   responses against the ones memcached gives.
//! - pylibmc (`binary=True, username=, password=`, libmemcached's SASL)
//!   stores and reads with the right password and is refused with a wrong
//!   one; skipped when Debian's python3-pylibmc is not installed.

mod common;

use common::memcached::Memcached;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn req(op: u8, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
    let mut r = vec![0x80, op];
    r.extend_from_slice(&(key.len() as u16).to_be_bytes());
    r.push(extras.len() as u8);
    r.extend_from_slice(&[0, 0, 0]);
    let body = (extras.len() + key.len() + value.len()) as u32;
    r.extend_from_slice(&body.to_be_bytes());
    r.extend_from_slice(&7u32.to_be_bytes());
    r.extend_from_slice(&[0; 8]);
    r.extend_from_slice(extras);
    r.extend_from_slice(key);
    r.extend_from_slice(value);
    r
}

/// The next response.
fn resp(s: &mut TcpStream) -> Response {
    let mut h = [0u8; 24];
    s.read_exact(&mut h).ok()?;
    let len = u32::from_be_bytes(h[8..12].try_into().unwrap()) as usize;
    let mut body = vec![0; len];
    s.read_exact(&mut body).ok()?;
    Some((h[1], u16::from_be_bytes([h[6], h[7]]), body))
}

/// Whether the server closed the connection (a read sees its end rather
/// than waiting).
fn closed(s: &mut TcpStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    match s.read(&mut [0u8; 1]) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// The binary `stat` responses: name and value each.
fn stats(s: &mut TcpStream) -> Vec<(String, String)> {
    s.write_all(&req(0x10, b"", &[], b"")).unwrap();
    let mut out = Vec::new();
    loop {
        let mut h = [0u8; 24];
        s.read_exact(&mut h).unwrap();
        let klen = usize::from(u16::from_be_bytes([h[2], h[3]]));
        let len = u32::from_be_bytes(h[8..12].try_into().unwrap()) as usize;
        let mut body = vec![0; len];
        s.read_exact(&mut body).unwrap();
        if len == 0 {
            return out;
        }
        let (k, v) = body.split_at(klen);
        out.push((
            String::from_utf8_lossy(k).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ));
    }
}

/// A response's opcode, status and body; None: the connection closed.
type Response = Option<(u8, u16, Vec<u8>)>;
/// Each step's name and response.
type Steps = Vec<(String, Response)>;

const PLAIN_OK: &[u8] = b"\0alice\0secret";

/// Runs the script on a server; each step's response (None: closed).
fn script(port: u16) -> Steps {
    let connect = || {
        let s = common::connect_port(port);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s
    };
    let mut got = Vec::new();
    fn run(got: &mut Steps, s: &mut TcpStream, name: &str, r: Vec<u8>) {
        s.write_all(&r).unwrap();
        got.push((name.to_string(), resp(s)));
    }
    let set = req(0x01, b"foo", &[0, 0, 0, 5, 0, 0, 0, 0], b"hello");
    let mut a = connect();
    run(
        &mut got,
        &mut a,
        "version unauthenticated",
        req(0x0b, b"", &[], b""),
    );
    run(&mut got, &mut a, "list mechs", req(0x20, b"", &[], b""));
    run(
        &mut got,
        &mut a,
        "wrong password",
        req(0x21, b"PLAIN", &[], b"\0alice\0nope"),
    );
    run(
        &mut got,
        &mut a,
        "unknown user",
        req(0x21, b"PLAIN", &[], b"\0bob\0secret"),
    );
    run(
        &mut got,
        &mut a,
        "step before start",
        req(0x22, b"PLAIN", &[], PLAIN_OK),
    );
    run(
        &mut got,
        &mut a,
        "other mechanism",
        req(0x21, b"CRAM-MD5", &[], b"x"),
    );
    run(
        &mut got,
        &mut a,
        "other authzid",
        req(0x21, b"PLAIN", &[], b"bob\0alice\0secret"),
    );
    run(
        &mut got,
        &mut a,
        "no NULs",
        req(0x21, b"PLAIN", &[], b"alice secret"),
    );
    run(&mut got, &mut a, "auth", req(0x21, b"PLAIN", &[], PLAIN_OK));
    run(&mut got, &mut a, "set", set.clone());
    run(&mut got, &mut a, "get", req(0x00, b"foo", &[], b""));
    run(
        &mut got,
        &mut a,
        "list mechs again",
        req(0x20, b"", &[], b""),
    );
    run(
        &mut got,
        &mut a,
        "get after list mechs",
        req(0x00, b"foo", &[], b""),
    );
    got.push(("closed".into(), closed(&mut a).then(|| (0, 0, vec![]))));
    let mut b = connect();
    run(
        &mut got,
        &mut b,
        "get unauthenticated",
        req(0x00, b"foo", &[], b""),
    );
    got.push(("closed".into(), closed(&mut b).then(|| (0, 0, vec![]))));
    let mut c = connect();
    run(&mut got, &mut c, "auth", req(0x21, b"PLAIN", &[], PLAIN_OK));
    run(
        &mut got,
        &mut c,
        "auth again",
        req(0x21, b"PLAIN", &[], PLAIN_OK),
    );
    run(
        &mut got,
        &mut c,
        "get after the second auth",
        req(0x00, b"foo", &[], b""),
    );
    let mut d = connect();
    d.write_all(b"get foo\r\nget foo\r\nget foo\r\n").unwrap();
    got.push(("text".into(), resp(&mut d)));
    let mut e = connect();
    run(&mut got, &mut e, "auth", req(0x21, b"PLAIN", &[], PLAIN_OK));
    let counts: Vec<String> = stats(&mut e)
        .into_iter()
        .filter(|(k, _)| k.starts_with("auth_"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    got.push(("stats".into(), Some((0, 0, counts.join(" ").into_bytes()))));
    got
}

/// tiercache's expected responses, which memcached 1.6.18 gives too
/// (`sasl_script_matches_memcacheds` checks them against it).
fn check(got: &Steps) {
    let failure = |op| Some((op, 0x20, b"Auth failure.".to_vec()));
    let want: Vec<(&str, Response)> = vec![
        ("version unauthenticated", None),
        ("list mechs", Some((0x20, 0, b"PLAIN".to_vec()))),
        ("wrong password", failure(0x21)),
        ("unknown user", failure(0x21)),
        ("step before start", failure(0x22)),
        ("other mechanism", failure(0x21)),
        ("other authzid", failure(0x21)),
        ("no NULs", failure(0x21)),
        ("auth", Some((0x21, 0, b"Authenticated".to_vec()))),
        ("set", Some((0x01, 0, vec![]))),
        ("get", Some((0x00, 0, b"\0\0\0\x05hello".to_vec()))),
        ("list mechs again", Some((0x20, 0, b"PLAIN".to_vec()))),
        ("get after list mechs", failure(0x00)),
        ("closed", Some((0, 0, vec![]))),
        ("get unauthenticated", failure(0x00)),
        ("closed", Some((0, 0, vec![]))),
        ("auth", Some((0x21, 0, b"Authenticated".to_vec()))),
        ("auth again", failure(0x21)),
        ("get after the second auth", failure(0x00)),
        ("text", None),
    ];
    for (i, (name, w)) in want.iter().enumerate() {
        assert_eq!(got[i].0, *name);
        match (name, w) {
            (&"version unauthenticated", _) => {
                let (op, status, _) = got[i].1.clone().expect("version answered");
                assert_eq!((op, status), (0x0b, 0));
            }
            _ => assert_eq!(&got[i].1, w, "{name}"),
        }
    }
}

/// The `auth_*` stats the script ends with.
fn auth_counts(got: &Steps) -> String {
    String::from_utf8_lossy(&got.last().unwrap().1.as_ref().unwrap().2).into_owned()
}

fn tiercache(dir: &std::path::Path) -> tiercache_server::server::ServerHandle {
    let pw = dir.join("pwdb");
    std::fs::write(&pw, "alice:secret\ncarol:pw\n").unwrap();
    common::server_with(|c| {
        c.server.sasl = true;
        c.server.sasl_pwdb = pw.display().to_string();
    })
}

#[test]
fn sasl_plain_is_served_as_memcached_serves_it() {
    let dir = common::tempdir("sasl");
    let h = tiercache(&dir);
    let ours = script(h.addr.port());
    check(&ours);
    // Seven failures and three successes, counted as memcached counts
    // them (a SASL_AUTH or SASL_STEP each; list mechs is not an attempt).
    assert_eq!(auth_counts(&ours), "auth_cmds=10 auth_errors=7");
    let Some(mc) = memcached_sasl(&dir) else {
        eprintln!(
            "skipped the comparison: /usr/bin/memcached or saslpasswd2 absent (apt-get install memcached sasl2-bin)"
        );
        return;
    };
    let theirs = script(mc.port);
    assert_eq!(theirs.len(), ours.len());
    for ((n, t), (_, o)) in theirs.iter().zip(&ours) {
        if n == "version unauthenticated" || n == "stats" {
            continue;
        }
        assert_eq!(o, t, "{n}");
    }
    assert_eq!(auth_counts(&ours), auth_counts(&theirs));
}

/// memcached with `-S`, PLAIN through libsasl and a sasldb holding alice
/// (made with saslpasswd2); None when either is not installed.
fn memcached_sasl(dir: &std::path::Path) -> Option<Memcached> {
    let passwd = std::path::Path::new("/usr/sbin/saslpasswd2");
    if !passwd.exists() {
        return None;
    }
    let db = dir.join("sasldb2");
    let mut p = Command::new(passwd)
        .args(["-p", "-a", "memcached", "-c", "-f"])
        .arg(&db)
        .arg("alice")
        .stdin(Stdio::piped())
        .spawn()
        .ok()?;
    p.stdin.take()?.write_all(b"secret").ok()?;
    assert!(p.wait().ok()?.success(), "saslpasswd2 failed");
    let conf = format!("mech_list: plain\nsasldb_path: {}\n", db.display());
    std::fs::write(dir.join("memcached.conf"), conf).unwrap();
    Memcached::start_env(&["-S"], &[("SASL_CONF_PATH", dir.as_os_str())])
}

#[test]
fn pylibmc_authenticates_with_sasl_plain() {
    let py = std::path::Path::new("/usr/bin/python3");
    let has = py.exists()
        && Command::new(py)
            .args(["-c", "import pylibmc; assert pylibmc.support_sasl"])
            .status()
            .is_ok_and(|s| s.success());
    if !has {
        eprintln!("skipped: Debian's python3-pylibmc (with SASL) is not installed");
        return;
    }
    let dir = common::tempdir("sasl-pylibmc");
    let h = tiercache(&dir);
    let code = format!(
        r#"
import pylibmc
addr = "127.0.0.1:{port}"
c = pylibmc.Client([addr], binary=True, username="carol", password="pw")
c.set("k", "v" * 100)
assert c.get("k") == "v" * 100, c.get("k")
bad = pylibmc.Client([addr], binary=True, username="carol", password="wrong")
try:
    bad.get("k")
    raise SystemExit("a wrong password was let in")
except pylibmc.Error:
    pass
print("ok")
"#,
        port = h.addr.port()
    );
    let out = Command::new(py).args(["-c", &code]).output().unwrap();
    assert!(
        out.status.success() && out.stdout.starts_with(b"ok"),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// As memcached's password database (`sasl_server_userdb_checkpass` opens
/// it on every check), a change to the file counts from the next
/// authentication, with no SIGHUP.
#[test]
fn a_changed_password_file_counts_at_the_next_authentication() {
    let dir = common::tempdir("sasl-change");
    let h = tiercache(&dir);
    let auth = |user: &str, pass: &str| {
        let mut s = TcpStream::connect(h.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let token = format!("\0{user}\0{pass}");
        s.write_all(&req(0x21, b"PLAIN", &[], token.as_bytes()))
            .unwrap();
        resp(&mut s).expect("a response").1
    };
    assert_eq!(auth("alice", "secret"), 0);
    assert_eq!(auth("dave", "new"), 0x20, "not in the file yet");
    // The same length as before, written within milliseconds.
    std::fs::write(dir.join("pwdb"), "alice:secret\ndave:new\n").unwrap();
    assert_eq!(auth("dave", "new"), 0, "added without a SIGHUP");
    std::fs::write(dir.join("pwdb"), "dave:new\n").unwrap();
    assert_eq!(auth("alice", "secret"), 0x20, "removed without a SIGHUP");
    assert_eq!(auth("dave", "new"), 0);
    // A file that cannot be read keeps the users read before (as a SIGHUP
    // reload that fails does).
    std::fs::remove_file(dir.join("pwdb")).unwrap();
    assert_eq!(auth("dave", "new"), 0);
}
