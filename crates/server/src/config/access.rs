//! Who may connect and how: TLS (`-Z` and memcached's `ssl_*` options),
//! ASCII authentication (`-Y`), binary SASL PLAIN (`-S` with
//! `MEMCACHED_SASL_PWDB`) and the unix socket
//! (`-s`, `-a`), parsed as memcached 1.6.18 parses them. An option memcached
//! has and tiercache does not implement is refused with the reason, never
//! accepted and ignored.

use super::{Args, Config};
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// TLS settings (memcached's `-Z` and `-o ssl_*`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// Serve TLS on every TCP listener but those written `notls:` (`-Z`).
    pub enabled: bool,
    /// Certificate chain, PEM (`ssl_chain_cert`).
    pub chain_cert: String,
    /// Private key, PEM; empty: the key is in `chain_cert` (`ssl_key`).
    pub key: String,
    /// PEM file of the CAs whose client certificates are accepted (`ssl_ca_cert`).
    pub ca_cert: String,
    /// Client certificates: 0 none, 1 request (checked when given), 2
    /// require, 3 require once (as 2: rustls never renegotiates)
    /// (`ssl_verify_mode`).
    pub verify_mode: u8,
    /// Oldest protocol accepted: 2 TLS 1.2, 3 TLS 1.3 (`ssl_min_version`;
    /// memcached's 0 and 1, TLS 1.0 and 1.1, are refused: rustls has neither).
    pub min_version: u8,
    /// Keep a server-side session cache for resumption (`ssl_session_cache`).
    pub session_cache: bool,
    /// Encrypted output a connection may hold before it stops taking
    /// replies to encrypt, bytes (`ssl_wbuf_size`, in KiB as memcached).
    pub wbuf_size: usize,
}

impl Default for TlsSection {
    fn default() -> Self {
        TlsSection {
            enabled: false,
            chain_cert: String::new(),
            key: String::new(),
            ca_cert: String::new(),
            verify_mode: 0,
            min_version: 2,
            session_cache: false,
            wbuf_size: 16 << 10,
        }
    }
}

/// memcached's spelling of a minimum TLS version (`stats settings`).
pub fn tls_version_name(v: u8) -> &'static str {
    match v {
        3 => "tlsv1.3",
        _ => "tlsv1.2",
    }
}

/// A listen entry with its `notls:` prefix taken off (memcached's
/// `-l notls:<ip>:<port>`): the rest, and whether it serves TLS.
pub fn strip_notls<'a>(entry: &'a str, tls: &TlsSection) -> Result<(&'a str, bool)> {
    match entry.strip_prefix("notls:") {
        Some(_) if !tls.enabled => {
            bail!("-l {entry}: 'notls' option is valid only when SSL is enabled (-Z)")
        }
        Some(rest) => Ok((rest, false)),
        None => Ok((entry, tls.enabled)),
    }
}

impl Config {
    /// The access flags: `-Z`, `-Y`, `-S`, `-s`, `-a`.
    pub(super) fn apply_access_flags(&mut self, args: &Args) -> Result<()> {
        self.tls.enabled |= args.enable_ssl;
        if let Some(f) = &args.auth_file {
            self.server.auth_file = f.display().to_string();
        }
        self.server.sasl |= args.enable_sasl;
        if self.server.sasl && self.server.sasl_pwdb.is_empty() {
            if let Ok(f) = std::env::var("MEMCACHED_SASL_PWDB") {
                self.server.sasl_pwdb = f;
            }
        }
        if let Some(s) = &args.unix_socket {
            self.server.unix_socket = s.display().to_string();
        }
        if let Some(a) = &args.unix_mask {
            self.server.unix_mask = u32::from_str_radix(a.trim_start_matches("0o"), 8)
                .ok()
                .filter(|m| *m <= 0o777)
                .with_context(|| {
                    format!(
                        "-a {a}: the unix socket's access mask is octal, like chmod (700, 0660)"
                    )
                })?;
        }
        Ok(())
    }

    /// An `ssl_*` extended option; false when `k` is not one.
    pub(super) fn apply_ssl_option(&mut self, k: &str, v: &str) -> Result<bool> {
        let t = &mut self.tls;
        let need = |v: &str| -> Result<String> {
            if v.is_empty() {
                bail!("Missing {k} argument (-o {k}=...)");
            }
            Ok(v.to_string())
        };
        match k {
            "ssl_chain_cert" => t.chain_cert = need(v)?,
            "ssl_key" => t.key = need(v)?,
            "ssl_ca_cert" => t.ca_cert = need(v)?,
            "ssl_verify_mode" => {
                t.verify_mode = match v {
                    "0" | "1" | "2" | "3" => v.parse()?,
                    _ => bail!("-o ssl_verify_mode={v}: invalid; valid values are 0 (none), 1 (request), 2 (require) and 3 (once)"),
                }
            }
            "ssl_min_version" => {
                t.min_version = match v {
                    "2" => 2,
                    "3" => 3,
                    "0" | "1" => bail!("-o ssl_min_version={v}: TLS 1.0 and 1.1 are not supported (rustls implements TLS 1.2 and 1.3 only); use 2 (tlsv1.2) or 3 (tlsv1.3)"),
                    _ => bail!("-o ssl_min_version={v}: invalid; valid values are 2 (tlsv1.2) and 3 (tlsv1.3)"),
                }
            }
            "ssl_keyformat" => {
                // OpenSSL's SSL_FILETYPE_PEM is 1.
                if v != "1" {
                    bail!("-o ssl_keyformat={v}: only PEM (1) keys are supported; convert the key with `openssl pkey -in KEY -out KEY.pem`");
                }
            }
            "ssl_wbuf_size" => {
                let kb: usize = v
                    .parse()
                    .with_context(|| format!("could not parse argument to ssl_wbuf_size: '{v}'"))?;
                if kb == 0 {
                    bail!("-o ssl_wbuf_size must be at least 1 (KiB)");
                }
                t.wbuf_size = kb << 10;
            }
            "ssl_session_cache" => t.session_cache = true,
            "ssl_ciphers" => bail!(
                "-o ssl_ciphers is not supported: tiercache's TLS (rustls) offers only its own safe suites (TLS 1.3: AES-GCM, ChaCha20-Poly1305; TLS 1.2: ECDHE with the same AEADs) and does not take OpenSSL cipher strings; remove the option"
            ),
            "ssl_kernel_tls" => bail!(
                "-o ssl_kernel_tls is not supported: tiercache encrypts in user space (rustls); remove the option"
            ),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Checks the access settings together, with memcached's refusals.
    pub(super) fn validate_access(&self) -> Result<()> {
        let s = &self.server;
        let t = &self.tls;
        if t.enabled {
            if !s.unix_socket.is_empty() {
                bail!("-Z with -s: TLS is served on TCP listeners only, and -s disables TCP; remove one of them");
            }
            if t.chain_cert.is_empty() {
                bail!("-Z needs a certificate: -o ssl_chain_cert=FILE.pem (and ssl_key=KEY.pem unless the key is in that file)");
            }
            if t.verify_mode > 0 && t.ca_cert.is_empty() {
                bail!(
                    "-o ssl_verify_mode={} checks client certificates against -o ssl_ca_cert=FILE.pem, which is not given",
                    t.verify_mode
                );
            }
        } else if !t.chain_cert.is_empty() || !t.key.is_empty() || !t.ca_cert.is_empty() {
            bail!("-o ssl_chain_cert/ssl_key/ssl_ca_cert are given but TLS is not enabled: add -Z");
        }
        if s.sasl {
            if !s.auth_file.is_empty() {
                bail!("-S with -Y: -Y (ASCII authentication) turns the binary protocol off and -S serves nothing else; choose one");
            }
            if s.sasl_pwdb.is_empty() {
                bail!("-S needs its password file of user:password lines (as -Y's): set MEMCACHED_SASL_PWDB=FILE, as for memcached's sasl_pwdb");
            }
            crate::transport::auth::AuthFile::load(std::path::Path::new(&s.sasl_pwdb))?;
        }
        if !s.auth_file.is_empty() {
            crate::transport::auth::AuthFile::load(std::path::Path::new(&s.auth_file))?;
        }
        Ok(())
    }
}
