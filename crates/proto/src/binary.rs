//! memcached's binary protocol (magic 0x80), served by translation: a
//! binary request becomes the text or meta request that does the same
//! ([`translate`], e.g. GETK is `mg <key> v f c`, SET is `ms <key> <n> F T c
//! MS`), which the server runs like any other, and the text reply is
//! encoded back as the binary response ([`encode`]), opaque echoed, quiet
//! variants silent where memcached is. Keys that are not plain text are
//! passed base64-encoded (meta `b`).
//!
//! Served: get, getq, getk, getkq, set, add, replace, append, prepend (and
//! their quiet forms, with CAS), delete(q), incr(q), decr(q) (with initial
//! value and exptime), touch, gat(q), gatk(q), noop, version, verbosity,
//! flush(q), stat, quit(q). Anything else is answered `0x0081 Unknown
//! command`, as memcached 1.6.18 answers, SASL included when started without
//! `-S` (with `-S` the server runs the SASL commands before this: its
//! `sasl.rs`).

use base64::Engine as _;
use std::io::Write as _;

pub const REQ_MAGIC: u8 = 0x80;
const RES_MAGIC: u8 = 0x81;
pub const HEADER_LEN: usize = 24;

/// Response status codes.
pub mod status {
    pub const OK: u16 = 0x0000;
    pub const NOT_FOUND: u16 = 0x0001;
    pub const EXISTS: u16 = 0x0002;
    pub const TOO_LARGE: u16 = 0x0003;
    pub const INVALID: u16 = 0x0004;
    pub const NOT_STORED: u16 = 0x0005;
    pub const NON_NUMERIC: u16 = 0x0006;
    /// SASL: not authenticated, or the authentication failed.
    pub const AUTH_ERROR: u16 = 0x0020;
    pub const UNKNOWN_COMMAND: u16 = 0x0081;
    pub const OUT_OF_MEMORY: u16 = 0x0082;
    pub const INTERNAL: u16 = 0x0084;
}

/// What a request's response needs from the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub opcode: u8,
    pub opaque: u32,
    pub key: Vec<u8>,
}

/// The result of reading a binary request.
#[derive(Debug, PartialEq, Eq)]
pub enum BinParsed {
    /// Fewer than `need` bytes are buffered.
    Incomplete { need: usize },
    /// The text request is in the scratch buffer; `consumed` input bytes.
    Text { frame: Frame, consumed: usize },
    /// Answered without running anything (an error status); `consumed`
    /// bytes of input, and `close` the connection after it (an invalid
    /// request, as memcached does).
    Answer {
        frame: Frame,
        status: u16,
        consumed: usize,
        close: bool,
        /// Bytes of the body still to come, to discard.
        skip: usize,
    },
    /// A store whose value is over the limit: the scratch buffer holds its
    /// text line without the data (a text parser refuses it, removing the
    /// key's old item as memcached does); `consumed` bytes are buffered
    /// and `skip` more of the body are still to come, to discard.
    Refused {
        frame: Frame,
        consumed: usize,
        skip: usize,
    },
}

fn quiet(op: u8) -> bool {
    matches!(op, 0x09 | 0x0d | 0x11..=0x1a | 0x1e | 0x24)
}

/// Reads the binary request at the start of `buf` and writes the text
/// request that does the same into `text` (cleared first). A body over
/// `max_body` bytes is refused (Too large) and discarded, as memcached
/// swallows it.
pub fn translate(buf: &[u8], max_body: usize, text: &mut Vec<u8>) -> BinParsed {
    if buf.len() < HEADER_LEN {
        return BinParsed::Incomplete { need: HEADER_LEN };
    }
    let opcode = buf[1];
    let klen = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    let elen = usize::from(buf[4]);
    let blen = u32::from_be_bytes(buf[8..12].try_into().unwrap()) as usize;
    let opaque = u32::from_be_bytes(buf[12..16].try_into().unwrap());
    let cas = u64::from_be_bytes(buf[16..24].try_into().unwrap());
    let mut frame = Frame {
        opcode,
        opaque,
        key: Vec::new(),
    };
    let consumed = (HEADER_LEN + blen).min(buf.len());
    let skip = HEADER_LEN + blen - consumed;
    let answer = |frame, status, close| BinParsed::Answer {
        frame,
        status,
        consumed,
        close,
        skip,
    };
    if buf[0] != REQ_MAGIC || klen + elen > blen {
        return answer(frame, status::INVALID, true);
    }
    if blen > max_body {
        let head = HEADER_LEN + elen + klen;
        let store = matches!(opcode, 0x01..=0x03 | 0x11..=0x13) && elen == 8;
        if !store || klen == 0 || klen > crate::KEY_MAX_LENGTH {
            return answer(frame, status::TOO_LARGE, false);
        }
        if buf.len() < head {
            return BinParsed::Incomplete { need: head };
        }
        frame.key = buf[HEADER_LEN + elen..head].to_vec();
        let extras = &buf[HEADER_LEN..HEADER_LEN + 8];
        let flags = u32::from_be_bytes(extras[..4].try_into().unwrap());
        let exp = u32::from_be_bytes(extras[4..].try_into().unwrap());
        text.clear();
        let mode = [b'S', b'E', b'R'][usize::from((opcode & 0x0f) - 1)];
        store_line(
            text,
            &frame.key,
            blen - elen - klen,
            cas,
            mode,
            Some((flags, exp)),
        );
        return BinParsed::Refused {
            frame,
            consumed,
            skip,
        };
    }
    if buf.len() < HEADER_LEN + blen {
        return BinParsed::Incomplete {
            need: HEADER_LEN + blen,
        };
    }
    let extras = &buf[HEADER_LEN..HEADER_LEN + elen];
    let key = &buf[HEADER_LEN + elen..HEADER_LEN + elen + klen];
    let value = &buf[HEADER_LEN + elen + klen..HEADER_LEN + blen];
    frame.key = key.to_vec();
    let consumed = HEADER_LEN + blen;
    let u32_at = |i: usize| u32::from_be_bytes(extras[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_be_bytes(extras[i..i + 8].try_into().unwrap());
    if !matches!(opcode, 0x00..=0x1e | 0x23 | 0x24) {
        return answer(frame, status::UNKNOWN_COMMAND, false);
    }
    let needs_key = !matches!(
        opcode,
        0x07 | 0x08 | 0x0a | 0x0b | 0x10 | 0x17 | 0x18 | 0x1b
    );
    // memcached closes the connection after an invalid request.
    if needs_key && (klen == 0 || klen > crate::KEY_MAX_LENGTH) {
        return answer(frame, status::INVALID, true);
    }
    text.clear();
    let invalid = |frame| BinParsed::Answer {
        frame,
        status: status::INVALID,
        consumed,
        close: true,
        skip: 0,
    };
    let ok = match opcode {
        // get, getq, getk, getkq
        0x00 | 0x09 | 0x0c | 0x0d if elen == 0 && value.is_empty() => {
            meta(text, b"mg", key, b" v f c") && line(text, b"")
        }
        // touch, gat, gatq, gatk, gatkq
        0x1c | 0x1d | 0x1e | 0x23 | 0x24 if elen == 4 && value.is_empty() => {
            let flags: &[u8] = if opcode == 0x1c { b" f c" } else { b" v f c" };
            meta(text, b"mg", key, flags);
            write!(text, " T{}\r\n", u32_at(0) as i32).is_ok()
        }
        // set, add, replace (and quiet)
        0x01..=0x03 | 0x11..=0x13 if elen == 8 => {
            let mode = [b'S', b'E', b'R'][usize::from((opcode & 0x0f) - 1)];
            store(text, key, value, cas, mode, Some((u32_at(0), u32_at(4))))
        }
        // append, prepend (and quiet)
        0x0e | 0x0f | 0x19 | 0x1a if elen == 0 => {
            let mode = if matches!(opcode, 0x0e | 0x19) {
                b'A'
            } else {
                b'P'
            };
            store(text, key, value, cas, mode, None)
        }
        0x04 | 0x14 if elen == 0 && value.is_empty() => {
            meta(text, b"md", key, b"");
            (cas == 0 || write!(text, " C{cas}").is_ok()) && line(text, b"")
        }
        // incr, decr (and quiet)
        0x05 | 0x06 | 0x15 | 0x16 if elen == 20 && value.is_empty() => {
            let m = if opcode & 0x0f == 0x05 { 'I' } else { 'D' };
            meta(text, b"ma", key, b" v c");
            let _ = write!(text, " M{m} D{}", u64_at(0));
            if u32_at(16) != u32::MAX {
                let _ = write!(text, " N{} J{}", u32_at(16) as i32, u64_at(8));
            }
            line(text, b"")
        }
        0x07 | 0x17 if blen == 0 => line(text, b"quit"),
        0x08 | 0x18 if klen == 0 && value.is_empty() && (elen == 0 || elen == 4) => {
            let delay = if elen == 4 { u32_at(0) as i32 } else { 0 };
            write!(text, "flush_all {delay}\r\n").is_ok()
        }
        0x0a if blen == 0 => line(text, b"mn"),
        0x0b if blen == 0 => line(text, b"version"),
        0x1b if elen == 4 && klen == 0 => write!(text, "verbosity {}\r\n", u32_at(0)).is_ok(),
        0x10 if elen == 0 && value.is_empty() => {
            plain(key) && {
                text.extend_from_slice(b"stats ");
                text.extend_from_slice(key);
                line(text, b"")
            }
        }
        _ => false,
    };
    if !ok {
        return invalid(frame);
    }
    BinParsed::Text { frame, consumed }
}

/// A key a text command can carry as it is.
fn plain(key: &[u8]) -> bool {
    key.iter().all(|&b| b > b' ' && b != 0x7f)
}

fn line(text: &mut Vec<u8>, l: &[u8]) -> bool {
    text.extend_from_slice(l);
    text.extend_from_slice(b"\r\n");
    true
}

/// `<cmd> <key><flags>[ b]` without the line end (added by the caller or
/// by [`store`]).
fn meta(text: &mut Vec<u8>, cmd: &[u8], key: &[u8], flags: &[u8]) -> bool {
    text.extend_from_slice(cmd);
    text.push(b' ');
    if plain(key) {
        text.extend_from_slice(key);
        text.extend_from_slice(flags);
    } else {
        let enc = base64::engine::general_purpose::STANDARD.encode(key);
        text.extend_from_slice(enc.as_bytes());
        text.extend_from_slice(flags);
        text.extend_from_slice(b" b");
    }
    true
}

fn store(
    text: &mut Vec<u8>,
    key: &[u8],
    value: &[u8],
    cas: u64,
    mode: u8,
    flags_exp: Option<(u32, u32)>,
) -> bool {
    store_line(text, key, value.len(), cas, mode, flags_exp);
    text.extend_from_slice(value);
    line(text, b"")
}

/// An `ms` line with its `\r\n`, for a value of `len` bytes.
fn store_line(
    text: &mut Vec<u8>,
    key: &[u8],
    len: usize,
    cas: u64,
    mode: u8,
    flags_exp: Option<(u32, u32)>,
) {
    // The data length must follow the key.
    meta(text, b"ms", key, format!(" {len}").as_bytes());
    let _ = write!(text, " c M{}", mode as char);
    if let Some((flags, exp)) = flags_exp {
        let _ = write!(text, " F{flags} T{}", exp as i32);
    }
    if cas != 0 {
        let _ = write!(text, " C{cas}");
    }
    text.extend_from_slice(b"\r\n");
}

/// Appends one binary response.
pub fn response(
    out: &mut Vec<u8>,
    f: &Frame,
    status: u16,
    cas: u64,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) {
    out.push(RES_MAGIC);
    out.push(f.opcode);
    out.extend_from_slice(&(key.len() as u16).to_be_bytes());
    out.push(extras.len() as u8);
    out.push(0);
    out.extend_from_slice(&status.to_be_bytes());
    let body = (extras.len() + key.len() + value.len()) as u32;
    out.extend_from_slice(&body.to_be_bytes());
    out.extend_from_slice(&f.opaque.to_be_bytes());
    out.extend_from_slice(&cas.to_be_bytes());
    out.extend_from_slice(extras);
    out.extend_from_slice(key);
    out.extend_from_slice(value);
}

/// An error response with memcached's message for the status.
pub fn error(out: &mut Vec<u8>, f: &Frame, status: u16) {
    let msg: &[u8] = match status {
        status::NOT_FOUND => b"Not found",
        status::EXISTS => b"Data exists for key.",
        status::TOO_LARGE => b"Too large.",
        status::INVALID => b"Invalid arguments",
        status::NOT_STORED => b"Not stored.",
        status::NON_NUMERIC => b"Non-numeric server-side value for incr or decr",
        status::UNKNOWN_COMMAND => b"Unknown command",
        status::AUTH_ERROR => b"Auth failure.",
        status::OUT_OF_MEMORY => b"Out of memory",
        _ => b"Internal error",
    };
    response(out, f, status, 0, &[], &[], msg);
}

/// A return flag's number in a meta reply line (`c123` → 123).
fn flag(line: &[u8], letter: u8) -> u64 {
    line.split(|&b| b == b' ')
        .skip(1)
        .find(|w| w.first() == Some(&letter))
        .and_then(|w| crate::number::parse_u64(&w[1..]))
        .unwrap_or(0)
}

/// Encodes the text reply `text` to the request of `f` as its binary
/// response(s), appended to `out`.
pub fn encode(out: &mut Vec<u8>, f: &Frame, text: &[u8]) {
    let op = f.opcode;
    let nl = text
        .windows(2)
        .position(|w| w == b"\r\n")
        .unwrap_or(text.len());
    let first = &text[..nl];
    let word = first.split(|&b| b == b' ').next().unwrap_or(b"");
    let with_key = matches!(op, 0x0c | 0x0d | 0x23 | 0x24);
    let ok_silent = quiet(op) && !matches!(op, 0x09 | 0x0d | 0x1e | 0x24);
    let status = match word {
        b"VA" => {
            let len = first
                .split(|&b| b == b' ')
                .nth(1)
                .and_then(crate::number::parse_u64)
                .unwrap_or(0) as usize;
            let data = text.get(nl + 2..nl + 2 + len).unwrap_or(b"");
            let cas = flag(first, b'c');
            if matches!(op, 0x05 | 0x06 | 0x15 | 0x16) {
                if !ok_silent {
                    let n = crate::number::parse_u64(data).unwrap_or(0);
                    response(out, f, 0, cas, &[], &[], &n.to_be_bytes());
                }
            } else {
                let flags = (flag(first, b'f') as u32).to_be_bytes();
                let key: &[u8] = if with_key { &f.key } else { b"" };
                response(out, f, 0, cas, &flags, key, data);
            }
            return;
        }
        b"HD" => {
            if !ok_silent {
                let extras = (flag(first, b'f') as u32).to_be_bytes();
                let extras: &[u8] = if op == 0x1c { &extras } else { &[] };
                response(out, f, 0, flag(first, b'c'), extras, &[], &[]);
            }
            return;
        }
        b"MN" | b"OK" | b"RESET" | b"" => {
            if !ok_silent {
                response(out, f, 0, 0, &[], &[], &[]);
            }
            return;
        }
        b"VERSION" => {
            response(out, f, 0, 0, &[], &[], &first[8.min(first.len())..]);
            return;
        }
        b"STAT" | b"END" if op == 0x10 => {
            for l in text.split(|&b| b == b'\n') {
                let l = l.strip_suffix(b"\r").unwrap_or(l);
                let mut parts = l.splitn(3, |&b| b == b' ');
                if parts.next() == Some(b"STAT") {
                    let name = parts.next().unwrap_or(b"");
                    response(out, f, 0, 0, &[], name, parts.next().unwrap_or(b""));
                }
            }
            response(out, f, 0, 0, &[], &[], &[]);
            return;
        }
        b"EN" | b"NF" => {
            if quiet(op) && matches!(op, 0x09 | 0x0d | 0x1e | 0x24) {
                return;
            }
            if with_key {
                response(out, f, status::NOT_FOUND, 0, &[], &f.key, &[]);
                return;
            }
            status::NOT_FOUND
        }
        b"EX" => status::EXISTS,
        b"NS" => match op {
            0x02 | 0x12 => status::EXISTS,
            0x03 | 0x13 => status::NOT_FOUND,
            _ => status::NOT_STORED,
        },
        b"CLIENT_ERROR" if first.ends_with(b"non-numeric value") => status::NON_NUMERIC,
        b"CLIENT_ERROR" => status::INVALID,
        b"SERVER_ERROR" if first.ends_with(b"too large for cache") => status::TOO_LARGE,
        b"SERVER_ERROR" if first.windows(13).any(|w| w == b"out of memory") => {
            status::OUT_OF_MEMORY
        }
        b"ERROR" if op == 0x10 => status::NOT_FOUND,
        _ => status::INTERNAL,
    };
    error(out, f, status);
}
