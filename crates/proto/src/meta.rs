//! Meta command flags (`mg`, `ms`, `md`, `ma`): parsed once into a struct, with
//! the original order kept so that return flags are echoed as the client wrote
//! them, as memcached does.

use crate::number::{parse_i32, parse_u32, parse_u64};
use base64::Engine as _;
use std::borrow::Cow;

/// Opaque tokens longer than this are refused.
pub const MAX_OPAQUE_LENGTH: usize = 32;
/// memcached refuses meta commands with more tokens than this (command and key included).
pub const MAX_META_TOKENS: usize = 20;

/// The flags of one meta command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetaFlags<'a> {
    /// Flag tokens in request order (first byte is the flag letter).
    pub order: Vec<&'a [u8]>,
    pub base64_key: bool,
    pub quiet: bool,
    pub value: bool,
    pub no_update: bool,
    /// `I`: invalidate (mark stale) instead of deleting / set stale with CAS.
    pub invalidate: bool,
    /// `T`: new TTL.
    pub ttl: Option<i32>,
    /// `N`: vivify on miss with this TTL.
    pub vivify: Option<i32>,
    /// `R`: recache when TTL is below this.
    pub recache: Option<i32>,
    /// `F`: client flags to store.
    pub client_flags: u32,
    /// `C`: compare CAS.
    pub compare_cas: Option<u64>,
    /// `M`: mode letter.
    pub mode: Option<u8>,
    /// `D`: ma delta (default 1).
    pub delta: u64,
    /// `J`: ma initial value for vivify.
    pub initial: u64,
}

impl<'a> MetaFlags<'a> {
    /// Whether a return flag (no-argument letter) was requested.
    pub fn has(&self, letter: u8) -> bool {
        self.order.iter().any(|t| t[0] == letter)
    }

    /// The opaque token including its leading `O`, if any.
    pub fn opaque(&self) -> Option<&'a [u8]> {
        self.order.iter().copied().find(|t| t[0] == b'O')
    }
}

/// What went wrong while parsing flags; the string is memcached's reply.
pub type FlagError = &'static str;

/// Parses flag tokens. `key` is replaced by its decoded form when `b` is given.
/// Returns the error string memcached gives for the first problem found.
///
/// The flags are those memcached 1.6.18 knows. Later versions added `E`
/// (explicit new CAS) and `x` (md: drop the value, keep the item); 1.6.18
/// refuses both as unknown flags, and so does tiercache.
pub fn parse_flags<'a>(
    tokens: &[&'a [u8]],
    key: &mut Cow<'a, [u8]>,
) -> Result<MetaFlags<'a>, FlagError> {
    let mut f = MetaFlags {
        delta: 1,
        ..Default::default()
    };
    let mut seen = [false; 128];
    let mut error: Option<FlagError> = None;
    for &tok in tokens {
        let o = tok[0];
        if o >= 127 || seen[o as usize] {
            return Err("CLIENT_ERROR duplicate flag");
        }
        seen[o as usize] = true;
        let arg = &tok[1..];
        let bad_token = "CLIENT_ERROR bad token in command line format";
        match o {
            b'b' => match base64::engine::general_purpose::STANDARD.decode(key.as_ref()) {
                Ok(decoded) if !decoded.is_empty() => {
                    f.base64_key = true;
                    *key = Cow::Owned(decoded);
                }
                _ => {
                    f.base64_key = true;
                    error.get_or_insert("CLIENT_ERROR error decoding key");
                }
            },
            b'N' => match parse_i32(arg) {
                Some(v) => f.vivify = Some(v),
                None => {
                    error.get_or_insert(bad_token);
                }
            },
            b'T' => match parse_i32(arg) {
                Some(v) => f.ttl = Some(v),
                None => {
                    error.get_or_insert(bad_token);
                }
            },
            b'R' => match parse_i32(arg) {
                Some(v) => f.recache = Some(v),
                None => {
                    error.get_or_insert(bad_token);
                }
            },
            b'O' => {
                if tok.len() > MAX_OPAQUE_LENGTH {
                    error.get_or_insert("CLIENT_ERROR opaque token too long");
                }
            }
            b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'h' | b'l' => {}
            b'v' => f.value = true,
            b'u' => f.no_update = true,
            b'q' => f.quiet = true,
            b'I' => f.invalidate = true,
            b'F' => match parse_u32(arg) {
                Some(v) => f.client_flags = v,
                None => {
                    error.get_or_insert("CLIENT_ERROR bad command line format");
                }
            },
            b'C' => match parse_u64(arg) {
                Some(v) => f.compare_cas = Some(v),
                None => {
                    error.get_or_insert(bad_token);
                }
            },
            b'M' => {
                if tok.len() != 2 {
                    error.get_or_insert("CLIENT_ERROR incorrect length for M token");
                } else {
                    f.mode = Some(tok[1]);
                }
            }
            b'J' => match parse_u64(arg) {
                Some(v) => f.initial = v,
                None => {
                    error.get_or_insert("CLIENT_ERROR invalid numeric initial value");
                }
            },
            b'D' => match parse_u64(arg) {
                Some(v) => f.delta = v,
                None => {
                    error.get_or_insert("CLIENT_ERROR invalid numeric delta value");
                }
            },
            _ => return Err("CLIENT_ERROR invalid flag"),
        }
        f.order.push(tok);
    }
    match error {
        Some(e) => Err(e),
        None => Ok(f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(s: &str) -> Result<MetaFlags<'_>, FlagError> {
        let toks: Vec<&[u8]> = s.split(' ').map(|t| t.as_bytes()).collect();
        let mut key = Cow::Borrowed(&b"foo"[..]);
        parse_flags(&toks, &mut key)
    }

    #[test]
    fn parses_and_keeps_order() {
        let f = flags("v k T30 O123 c").unwrap();
        assert!(f.value);
        assert_eq!(f.ttl, Some(30));
        assert_eq!(f.opaque(), Some(&b"O123"[..]));
        let letters: Vec<u8> = f.order.iter().map(|t| t[0]).collect();
        assert_eq!(letters, b"vkTOc");
    }

    #[test]
    fn errors_match_memcached() {
        assert_eq!(flags("v v").unwrap_err(), "CLIENT_ERROR duplicate flag");
        assert_eq!(flags("Z").unwrap_err(), "CLIENT_ERROR invalid flag");
        // Not in memcached 1.6.18.
        assert_eq!(flags("E5").unwrap_err(), "CLIENT_ERROR invalid flag");
        assert_eq!(flags("x").unwrap_err(), "CLIENT_ERROR invalid flag");
        assert_eq!(
            flags("Tabc").unwrap_err(),
            "CLIENT_ERROR bad token in command line format"
        );
        assert_eq!(
            flags("MSS").unwrap_err(),
            "CLIENT_ERROR incorrect length for M token"
        );
    }

    #[test]
    fn base64_key_is_decoded() {
        let toks: Vec<&[u8]> = vec![b"b"];
        let mut key = Cow::Borrowed(&b"Zm9v"[..]);
        let f = parse_flags(&toks, &mut key).unwrap();
        assert!(f.base64_key);
        assert_eq!(key.as_ref(), b"foo");
    }
}
