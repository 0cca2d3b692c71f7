//! TLS (`-Z`) with rustls, non-blocking: a [`TlsStream`] is the socket and
//! a rustls `ServerConnection`, read and written as the plain socket is (a
//! `WouldBlock` when nothing can move), so the connection code is the same
//! for both. Records are read from the socket with `read_tls`, decrypted by
//! `process_new_packets` and taken as plaintext; replies are encrypted into
//! rustls's output (bounded by `ssl_wbuf_size`) and written with
//! `write_tls`. The handshake runs inside the first reads.
//!
//! Certificates are read at start (`ssl_chain_cert`, `ssl_key`) and, for
//! client certificates (`ssl_verify_mode` 1-3), `ssl_ca_cert`, and again by
//! memcached's `refresh_certs` command ([`TlsSetup::refresh`]): connections
//! made after it use the new files, those open keep theirs; files that do
//! not load leave the configuration as it was.

use crate::config::TlsSection;
use anyhow::{bail, Context, Result};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::ServerConnection;
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

/// What a TLS connection is made with: rustls's configuration and the
/// bound on its encrypted output (`ssl_wbuf_size`).
pub struct TlsSetup {
    /// Replaced whole by `refresh_certs`; a connection takes the one of the
    /// moment it starts.
    config: RwLock<Arc<rustls::ServerConfig>>,
    pub wbuf: usize,
    /// Connections whose handshake failed (`ssl_handshake_errors`).
    pub handshake_errors: Arc<AtomicU64>,
    /// When the certificates were read (`time_since_server_cert_refresh`).
    loaded: RwLock<Instant>,
}

impl TlsSetup {
    /// Reads the certificates; None when TLS is off.
    pub fn from_config(t: &TlsSection) -> Result<Option<TlsSetup>> {
        if !t.enabled {
            return Ok(None);
        }
        Ok(Some(TlsSetup {
            config: RwLock::new(server_config(t)?),
            wbuf: t.wbuf_size,
            handshake_errors: Arc::new(AtomicU64::new(0)),
            loaded: RwLock::new(Instant::now()),
        }))
    }

    /// The configuration new connections get.
    pub fn current(&self) -> Arc<rustls::ServerConfig> {
        self.config
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// `refresh_certs`: reads the files of `t` again; on error the
    /// configuration stays as it was and the error says which file failed.
    pub fn refresh(&self, t: &TlsSection) -> Result<()> {
        let cfg = server_config(t)?;
        *self.config.write().unwrap_or_else(PoisonError::into_inner) = cfg;
        *self.loaded.write().unwrap_or_else(PoisonError::into_inner) = Instant::now();
        tracing::info!(cert = %t.chain_cert, "refresh_certs: TLS certificates read again");
        Ok(())
    }

    /// Seconds since the certificates were last read.
    pub fn since_refresh(&self) -> u64 {
        self.loaded
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .elapsed()
            .as_secs()
    }
}

/// The rustls server configuration for `t`.
pub fn server_config(t: &TlsSection) -> Result<Arc<rustls::ServerConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match t.min_version {
        3 => &[&rustls::version::TLS13],
        _ => &[&rustls::version::TLS13, &rustls::version::TLS12],
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&t.chain_cert)
        .and_then(|it| it.collect::<Result<_, _>>())
        .with_context(|| {
            format!(
                "Error loading the certificate chain: -o ssl_chain_cert={}",
                t.chain_cert
            )
        })?;
    if certs.is_empty() {
        bail!(
            "Error loading the certificate chain: no certificate in {}",
            t.chain_cert
        );
    }
    let key_file = if t.key.is_empty() {
        &t.chain_cert
    } else {
        &t.key
    };
    let key = PrivateKeyDer::from_pem_file(key_file)
        .with_context(|| format!("Error loading the private key: -o ssl_key={key_file}"))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .context("TLS protocol versions")?;
    let builder = if t.verify_mode == 0 {
        builder.with_no_client_auth()
    } else {
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(&t.ca_cert)
            .with_context(|| format!("Error loading the CA: -o ssl_ca_cert={}", t.ca_cert))?
        {
            let c = c.with_context(|| format!("Error loading the CA: {}", t.ca_cert))?;
            roots
                .add(c)
                .with_context(|| format!("Error loading the CA: {}", t.ca_cert))?;
        }
        let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        let v = if t.verify_mode == 1 {
            v.allow_unauthenticated()
        } else {
            v
        };
        builder.with_client_cert_verifier(v.build().context("client certificate verifier")?)
    };
    let mut cfg = builder
        .with_single_cert(certs, key)
        .context("the certificate and the private key (ssl_chain_cert, ssl_key) do not match")?;
    if !t.session_cache {
        // memcached's default (SSL_SESS_CACHE_OFF); rustls still resumes
        // TLS 1.3 sessions through tickets only when a ticketer is set,
        // which it is not.
        cfg.session_storage = Arc::new(NoServerSessionStorage {});
    }
    Ok(Arc::new(cfg))
}

/// A TLS server connection over a socket `S` (a mio `TcpStream`).
pub struct TlsStream<S> {
    pub sock: S,
    tls: ServerConnection,
    /// The socket gave end of file: what rustls holds is all there is.
    eof: bool,
    /// Counts a failed handshake (`TlsSetup::handshake_errors`).
    errors: Arc<AtomicU64>,
}

impl<S: Read + Write> TlsStream<S> {
    pub fn new(sock: S, setup: &TlsSetup) -> io::Result<Self> {
        let mut tls = ServerConnection::new(setup.current()).map_err(io::Error::other)?;
        tls.set_buffer_limit(Some(setup.wbuf));
        Ok(TlsStream {
            sock,
            tls,
            eof: false,
            errors: setup.handshake_errors.clone(),
        })
    }

    /// Writes the records rustls holds until the socket would block.
    /// Returns bytes written.
    pub fn push(&mut self) -> io::Result<usize> {
        let mut total = 0;
        while self.tls.wants_write() {
            match self.tls.write_tls(&mut self.sock) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => total += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }

    /// Encrypted output not yet written to the socket.
    pub fn pending(&self) -> bool {
        self.tls.wants_write()
    }

    /// Says goodbye (close_notify), best effort: the socket is closed next.
    pub fn close(&mut self) {
        self.tls.send_close_notify();
        let _ = self.push();
    }
}

impl<S: Read + Write> Read for TlsStream<S> {
    /// Plaintext that rustls holds, else records read from the socket and
    /// decrypted; `WouldBlock` when the socket has no complete record.
    /// `Ok(0)` at the peer's close_notify or end of file.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.tls.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // Closed without close_notify: an end of file all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            if self.eof {
                return Ok(0);
            }
            match self.tls.read_tls(&mut self.sock) {
                Ok(0) => self.eof = true,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.tls.process_new_packets() {
                if self.tls.is_handshaking() {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                }
                // rustls queued an alert saying why: send it, then close.
                let _ = self.push();
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
            // Handshake messages, key updates.
            self.push()?;
        }
    }
}

impl<S: Read + Write> Write for TlsStream<S> {
    /// Encrypts what fits in rustls's bounded output and writes it out;
    /// `WouldBlock` when that output is full and the socket takes nothing.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.push()?;
        let n = self.tls.writer().write(buf)?;
        self.push()?;
        if n == 0 && !buf.is_empty() {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push().map(|_| ())
    }
}
