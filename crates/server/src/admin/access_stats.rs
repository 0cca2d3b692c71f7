//! The access settings and counters in `stats` and `stats settings`, with
//! memcached 1.6.18's keys and spellings: the unix socket (`domain_socket`,
//! `umask`), authentication (`auth_enabled_*`, `auth_cmds`, `auth_errors`)
//! and TLS (`ssl_*`, `ssl_handshake_errors`,
//! `time_since_server_cert_refresh`). Kept apart from `stats.rs`, which
//! prints the rest; the two settings `stats.rs` prints as constants are
//! given their values here.

use crate::config::{tls_version_name, Config};
use crate::shared::Shared;
use crate::stats::line::{counter, stat, Sink};
use std::sync::atomic::Ordering;

/// Sets `key`'s value in `out` (a `stats` reply without its END), or
/// appends the line when it is not there.
fn set(out: &mut Vec<u8>, key: &str, v: impl std::fmt::Display) {
    let head = format!("STAT {key} ");
    let at = out
        .windows(head.len())
        .position(|w| w == head.as_bytes())
        .filter(|&i| i == 0 || out[i - 1] == b'\n');
    match at {
        Some(i) => {
            let end = out[i..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(out.len(), |e| i + e + 1);
            let mut line = Vec::new();
            stat(&mut line, key, v);
            out.splice(i..end, line);
        }
        None => stat(out, key, v),
    }
}

/// `stats settings`: the access settings.
pub fn settings(out: &mut Vec<u8>, cfg: &Config) {
    let s = &cfg.server;
    let or_null = |v: &str, null: &'static str| -> String {
        if v.is_empty() {
            null.into()
        } else {
            v.into()
        }
    };
    set(out, "domain_socket", or_null(&s.unix_socket, "NULL"));
    set(out, "umask", format!("{:o}", s.unix_mask));
    set(out, "auth_enabled_sasl", if s.sasl { "yes" } else { "no" });
    set(out, "auth_enabled_ascii", or_null(&s.auth_file, "no"));
    let t = &cfg.tls;
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    set(out, "ssl_enabled", yes_no(t.enabled));
    // memcached prints a missing file name with printf's "(null)".
    set(out, "ssl_chain_cert", or_null(&t.chain_cert, "(null)"));
    set(out, "ssl_key", or_null(&t.key, "(null)"));
    // OpenSSL's verify flags, as memcached prints them: PEER (1),
    // | FAIL_IF_NO_PEER_CERT (2), | CLIENT_ONCE (4).
    set(
        out,
        "ssl_verify_mode",
        [0, 1, 3, 7][usize::from(t.verify_mode.min(3))],
    );
    set(out, "ssl_keyformat", 1);
    set(out, "ssl_ciphers", "NULL");
    set(out, "ssl_ca_cert", or_null(&t.ca_cert, "NULL"));
    set(out, "ssl_wbuf_size", t.wbuf_size);
    set(out, "ssl_session_cache", yes_no(t.session_cache));
    set(out, "ssl_kernel_tls", "no");
    set(out, "ssl_min_version", tls_version_name(t.min_version));
}

/// `stats`: the access counters.
pub fn general(out: &mut dyn Sink, shared: &Shared) {
    let (cmds, errors) = shared.auth.as_ref().map_or((0, 0), |a| a.counts());
    counter(out, "auth_cmds", cmds);
    counter(out, "auth_errors", errors);
    if let Some(t) = &shared.tls {
        stat(
            out,
            "ssl_handshake_errors",
            t.handshake_errors.load(Ordering::Relaxed),
        );
        stat(out, "time_since_server_cert_refresh", t.since_refresh());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn set_replaces_a_line_or_appends_one() {
        let mut out = b"STAT a 1\r\nSTAT ab 2\r\n".to_vec();
        super::set(&mut out, "a", 5);
        super::set(&mut out, "b", "x");
        assert_eq!(out, b"STAT a 5\r\nSTAT ab 2\r\nSTAT b x\r\n");
    }
}
