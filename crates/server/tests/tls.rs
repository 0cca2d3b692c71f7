//! TLS (`-Z`) end to end with a rustls client: certificates made at test
//! time (rcgen: a CA, a server certificate and a client certificate it
//! signs), gets, sets and multigets over TLS, values larger than a TLS
//! record, a pipeline whose replies the client does not read until it has
//! sent it all, `notls:` listeners, and client certificates
//! (`ssl_verify_mode`).

mod common;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tiercache_server::server::ServerHandle;

/// PEM files of a CA, a server certificate for localhost / 127.0.0.1 and
/// a client certificate, in a fresh directory removed on drop.
struct Certs {
    dir: PathBuf,
    ca: rcgen::Certificate,
    client: (rcgen::Certificate, KeyPair),
}

impl Certs {
    fn new(tag: &str) -> Certs {
        let dir = std::env::temp_dir().join(format!("tc-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .unwrap()
            .signed_by(&server_key, &ca, &ca_key)
            .unwrap();
        let client_key = KeyPair::generate().unwrap();
        let client = CertificateParams::new(vec!["client".into()])
            .unwrap()
            .signed_by(&client_key, &ca, &ca_key)
            .unwrap();
        std::fs::write(dir.join("server.pem"), server.pem()).unwrap();
        std::fs::write(dir.join("server.key"), server_key.serialize_pem()).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Certs {
            dir,
            ca,
            client: (client, client_key),
        }
    }

    fn path(&self, f: &str) -> String {
        self.dir.join(f).display().to_string()
    }

    /// A client that trusts the CA, with the client certificate or not.
    fn client_config(&self, with_cert: bool) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(if with_cert {
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.client.1.serialize_der()));
            let chain: Vec<CertificateDer<'static>> = vec![self.client.0.der().clone()];
            b.with_client_auth_cert(chain, key).unwrap()
        } else {
            b.with_no_client_auth()
        })
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn connect(addr: SocketAddr, cfg: Arc<rustls::ClientConfig>) -> Tls {
    let sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(cfg, name).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

/// Sends `req`, reads until the reply ends with `until`.
fn tx(s: &mut impl ReadWrite, req: &[u8], until: &[u8]) -> Vec<u8> {
    s.write_all(req).unwrap();
    s.flush().unwrap();
    read_until(s, until)
}

fn read_until(s: &mut impl ReadWrite, until: &[u8]) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while !got.ends_with(until) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed; got {:?}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    got
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// A server with TLS on its first listener and a `notls:` second one.
fn tls_server(c: &Certs, verify: u8) -> ServerHandle {
    common::server_with(|cfg| {
        cfg.server.listen = "127.0.0.1,notls:127.0.0.1".into();
        cfg.tls.enabled = true;
        cfg.tls.chain_cert = c.path("server.pem");
        cfg.tls.key = c.path("server.key");
        cfg.tls.verify_mode = verify;
        if verify > 0 {
            cfg.tls.ca_cert = c.path("ca.pem");
        }
    })
}

#[test]
fn get_set_and_multiget_over_tls() {
    let certs = Certs::new("basic");
    let h = tls_server(&certs, 0);
    assert_eq!(h.addrs.len(), 2);
    let mut s = connect(h.addrs[0], certs.client_config(false));
    assert_eq!(tx(&mut s, b"version\r\n", b"\r\n"), b"VERSION 1.6.18\r\n");
    assert_eq!(
        tx(&mut s, b"set a 5 0 3\r\nabc\r\n", b"\r\n"),
        b"STORED\r\n"
    );
    assert_eq!(
        tx(&mut s, b"get a\r\n", b"END\r\n"),
        b"VALUE a 5 3\r\nabc\r\nEND\r\n"
    );
    // A value over one TLS record (16 KiB) each way.
    let big: Vec<u8> = (0..300_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    let mut req = format!("set big 0 0 {}\r\n", big.len()).into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\n");
    assert_eq!(tx(&mut s, &req, b"\r\n"), b"STORED\r\n");
    let got = tx(&mut s, b"get a big nope\r\n", b"END\r\n");
    let mut want = b"VALUE a 5 3\r\nabc\r\n".to_vec();
    want.extend_from_slice(format!("VALUE big 0 {}\r\n", big.len()).as_bytes());
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\nEND\r\n");
    assert!(
        got == want,
        "multiget over TLS differs ({} bytes)",
        got.len()
    );
    // 500 pipelined gets of the big value sent before any reply is read:
    // 150 MB of replies, far over the output bound, drained in order.
    let mut pipe = Vec::new();
    for _ in 0..500 {
        pipe.extend_from_slice(b"get big\r\n");
    }
    pipe.extend_from_slice(b"mn\r\n");
    s.write_all(&pipe).unwrap();
    s.flush().unwrap();
    let all = read_until(&mut s, b"MN\r\n");
    let one = format!("VALUE big 0 {}\r\n", big.len()).len() + big.len() + 7;
    assert_eq!(all.len(), 500 * one + 4);
    // The plain listener serves the same cache in clear.
    let mut plain = TcpStream::connect(h.addrs[1]).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(
        tx(&mut plain, b"get a\r\n", b"END\r\n"),
        b"VALUE a 5 3\r\nabc\r\nEND\r\n"
    );
    // Clear text on the TLS listener is not served: the handshake fails
    // and the connection is closed.
    let mut wrong = TcpStream::connect(h.addrs[0]).unwrap();
    wrong
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    wrong.write_all(b"get a\r\n").unwrap();
    let mut buf = Vec::new();
    let _ = wrong.read_to_end(&mut buf);
    assert!(!buf.windows(5).any(|w| w == b"VALUE"), "{buf:?}");
    let stats = String::from_utf8(tx(&mut s, b"stats\r\n", b"END\r\n")).unwrap();
    assert_eq!(
        common::stat_of(&stats, "ssl_handshake_errors").as_deref(),
        Some("1")
    );
    let set = String::from_utf8(tx(&mut s, b"stats settings\r\n", b"END\r\n")).unwrap();
    assert_eq!(common::stat_of(&set, "ssl_enabled").as_deref(), Some("yes"));
    assert_eq!(
        common::stat_of(&set, "ssl_chain_cert"),
        Some(certs.path("server.pem"))
    );
    assert_eq!(
        common::stat_of(&set, "ssl_min_version").as_deref(),
        Some("tlsv1.2")
    );
    h.shutdown();
    h.wait();
}

#[test]
fn client_certificates_are_required_with_verify_mode_2() {
    let certs = Certs::new("verify");
    let h = tls_server(&certs, 2);
    let mut ok = connect(h.addrs[0], certs.client_config(true));
    assert_eq!(tx(&mut ok, b"version\r\n", b"\r\n"), b"VERSION 1.6.18\r\n");
    let mut anon = connect(h.addrs[0], certs.client_config(false));
    let _ = anon.write_all(b"version\r\n");
    let _ = anon.flush();
    let mut buf = [0u8; 64];
    let r = anon.read(&mut buf);
    assert!(
        !matches!(r, Ok(n) if n > 0),
        "a client without a certificate was served: {r:?}"
    );
    h.shutdown();
    h.wait();
}

#[test]
fn bad_tls_settings_are_refused_at_start() {
    let certs = Certs::new("refuse");
    let start = |f: &dyn Fn(&mut tiercache_server::config::Config)| {
        let mut cfg = tiercache_server::config::Config::default();
        cfg.server.port = 0;
        cfg.tls.enabled = true;
        f(&mut cfg);
        tiercache_server::server::start(cfg)
            .err()
            .map(|e| format!("{e:#}"))
    };
    let e = start(&|c| c.tls.chain_cert = certs.path("missing.pem")).unwrap();
    assert!(e.contains("certificate chain"), "{e}");
    // The key of another certificate.
    let other = KeyPair::generate().unwrap();
    std::fs::write(certs.dir.join("other.key"), other.serialize_pem()).unwrap();
    let e = start(&|c| {
        c.tls.chain_cert = certs.path("server.pem");
        c.tls.key = certs.path("other.key");
    })
    .unwrap();
    assert!(e.contains("do not match"), "{e}");
}

#[test]
fn refresh_certs_gives_new_connections_the_new_certificate() {
    let certs = Certs::new("refresh");
    let next = Certs::new("refresh-next");
    let h = tls_server(&certs, 0);
    let mut open = connect(h.addrs[0], certs.client_config(false));
    tx(&mut open, b"set k 0 0 1\r\nx\r\n", b"STORED\r\n");
    // The files now hold a certificate of another CA.
    for f in ["server.pem", "server.key"] {
        std::fs::copy(next.dir.join(f), certs.dir.join(f)).unwrap();
    }
    assert_eq!(tx(&mut open, b"refresh_certs\r\n", b"\r\n"), b"OK\r\n");
    let stats = String::from_utf8(tx(&mut open, b"stats\r\n", b"END\r\n")).unwrap();
    assert_eq!(
        common::stat_of(&stats, "time_since_server_cert_refresh").as_deref(),
        Some("0")
    );
    // The open connection keeps its session; a new one gets the new
    // certificate, which a client of the old CA refuses.
    let got = tx(&mut open, b"get k\r\n", b"END\r\n");
    assert_eq!(got, b"VALUE k 0 1\r\nx\r\nEND\r\n");
    let mut fresh = connect(h.addrs[0], next.client_config(false));
    assert_eq!(tx(&mut fresh, b"get k\r\n", b"END\r\n"), got);
    let mut old_ca = connect(h.addrs[0], certs.client_config(false));
    let refused = old_ca
        .write_all(b"version\r\n")
        .and_then(|_| old_ca.flush())
        .and_then(|_| old_ca.read(&mut [0u8; 64]));
    assert!(refused.is_err(), "{refused:?}");
    // Files that do not load: memcached's error line (sent even with
    // noreply), and the certificate in use stays.
    std::fs::write(certs.dir.join("server.pem"), "not a certificate").unwrap();
    let e = String::from_utf8(tx(&mut open, b"refresh_certs noreply\r\n", b"\r\n")).unwrap();
    assert!(
        e.starts_with("Error loading the certificate chain") && !e.trim_end().contains('\n'),
        "{e:?}"
    );
    let mut again = connect(h.addrs[0], next.client_config(false));
    assert_eq!(tx(&mut again, b"get k\r\n", b"END\r\n"), got);
    // noreply keeps back the OK only.
    for f in ["server.pem", "server.key"] {
        std::fs::copy(next.dir.join(f), certs.dir.join(f)).unwrap();
    }
    assert_eq!(
        tx(&mut open, b"refresh_certs noreply\r\nmn\r\n", b"MN\r\n"),
        b"MN\r\n"
    );
    // Without -Z, as memcached built with TLS answers.
    let plain = common::server();
    let mut c = common::Client::new(&plain);
    assert_eq!(c.tx_str(b"refresh_certs\r\n"), "Error TLS not enabled\r\n");
}

/// With -Z the Redis port (`-o redis_port`) speaks TLS too.
#[test]
fn redis_port_over_tls() {
    let c = Certs::new("resp");
    let rport = common::free_port();
    let h = common::server_with(|cfg| {
        cfg.tls.enabled = true;
        cfg.tls.chain_cert = c.path("server.pem");
        cfg.tls.key = c.path("server.key");
        cfg.redis.port = rport;
    });
    let mut s = connect(h.redis_addrs[0], c.client_config(false));
    let big = "x".repeat(100_000);
    let set = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{big}\r\n", big.len());
    assert_eq!(tx(&mut s, set.as_bytes(), b"\r\n"), b"+OK\r\n");
    let got = tx(&mut s, b"GET k\r\nPING\r\n", b"+PONG\r\n");
    assert_eq!(
        got,
        format!("${}\r\n{big}\r\n+PONG\r\n", big.len()).into_bytes()
    );
    h.shutdown();
}
