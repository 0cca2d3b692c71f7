//! Composing replies into an output buffer. Every function appends complete
//! lines (with `\r\n`) so that a pipeline of replies is one contiguous write.

use base64::Engine as _;

/// Appends `line\r\n`.
#[inline]
pub fn line(out: &mut Vec<u8>, line: &[u8]) {
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

/// Appends a decimal number.
#[inline]
pub fn number(out: &mut Vec<u8>, n: u64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(n).as_bytes());
}

/// Appends a signed decimal number.
#[inline]
pub fn signed(out: &mut Vec<u8>, n: i64) {
    let mut b = itoa::Buffer::new();
    out.extend_from_slice(b.format(n).as_bytes());
}

/// Appends the header of a classic `VALUE` reply: `VALUE <key> <flags> <bytes>[ <cas>]\r\n`.
#[inline]
pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    number(out, u64::from(flags));
    out.push(b' ');
    number(out, len as u64);
    if let Some(cas) = cas {
        out.push(b' ');
        number(out, cas);
    }
    out.extend_from_slice(b"\r\n");
}

/// Appends a whole classic `VALUE` block, data and terminator included.
#[inline]
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    value_header(out, key, flags, data.len(), cas);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Appends a key in meta form: ` k<key>`, or base64 and ` b` for binary keys.
pub fn meta_key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    out.extend_from_slice(b" k");
    if binary {
        let enc = base64::engine::general_purpose::STANDARD.encode(key);
        out.extend_from_slice(enc.as_bytes());
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// Appends ` <letter><number>`.
#[inline]
pub fn meta_num(out: &mut Vec<u8>, letter: u8, n: u64) {
    out.push(b' ');
    out.push(letter);
    number(out, n);
}

/// Appends a space and a raw token (opaque `O...`).
#[inline]
pub fn meta_token(out: &mut Vec<u8>, token: &[u8]) {
    out.push(b' ');
    out.extend_from_slice(token);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_block() {
        let mut out = Vec::new();
        value(&mut out, b"k", 5, b"ab\r\n", Some(9));
        assert_eq!(out, b"VALUE k 5 4 9\r\nab\r\n\r\n");
    }

    #[test]
    fn binary_meta_key() {
        let mut out = Vec::new();
        meta_key(&mut out, b"foo", true);
        assert_eq!(out, b" kZm9v b");
    }
}
