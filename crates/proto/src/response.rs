//! Small helpers for composing replies into an output buffer, kept for the
//! server until it moves to the typed encoders of [`crate::reply`]; the
//! whole-reply helpers here are written with those encoders. Every function
//! but [`number`], [`signed`], [`meta_key`], [`meta_num`] and [`meta_token`]
//! (which write parts of a line) appends complete lines with `\r\n`, so that a
//! pipeline of replies is one contiguous write. None of them allocates.

use crate::reply::{self, MetaFlag};

/// Appends `line\r\n`.
#[inline]
pub fn line(out: &mut Vec<u8>, line: &[u8]) {
    reply::line(out, line);
}

/// Appends a decimal number (no `\r\n`; the incr/decr reply is
/// [`reply::number`]).
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
    reply::value_header(out, key, flags, len, cas);
}

/// Appends a whole classic `VALUE` block, data and terminator included.
#[inline]
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    reply::value(out, key, flags, cas, data);
}

/// Appends a key in meta form: ` k<key>`, or base64 and ` b` for binary keys.
pub fn meta_key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    MetaFlag::key(key, binary).encode(out);
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
