//! Reading replies back: framing (a reply's line and data block) and the
//! typed parse of each line. Used by the property test and, through
//! [`crate::client`], by the load generator.

use super::{fixed_replies, FlagList, MetaCode, MetaDebug, MetaFlag, Reply, B64};
use crate::client::ReplyError;
use base64::Engine as _;
use std::borrow::Cow;

/// One reply's bytes: its line and, for `VALUE` and `VA`, its data block.
pub(crate) struct Frame<'a> {
    /// The line without `\n` and without the `\r` before it.
    pub line: &'a [u8],
    /// Whether the line ended in `\r\n` (not a bare `\n`).
    pub crlf: bool,
    /// The data block without its `\r\n`.
    pub data: Option<&'a [u8]>,
    /// Bytes used, data block included.
    pub len: usize,
}

/// Splits one reply off the front of `buf`; `Ok(None)` when it is incomplete.
/// The data block's length is the third word of `VALUE` or the first of `VA`.
pub(crate) fn frame(buf: &[u8]) -> Result<Option<Frame<'_>>, ReplyError> {
    let Some(nl) = memchr::memchr(b'\n', buf) else {
        return Ok(None);
    };
    let (line, crlf) = match buf[..nl].strip_suffix(b"\r") {
        Some(l) => (l, true),
        None => (&buf[..nl], false),
    };
    let after = nl + 1;
    let len_word = if let Some(rest) = line.strip_prefix(b"VALUE ") {
        Some(rest.split(|&b| b == b' ').nth(2))
    } else {
        line.strip_prefix(b"VA ")
            .map(|rest| rest.split(|&b| b == b' ').next())
    };
    let Some(word) = len_word else {
        return Ok(Some(Frame {
            line,
            crlf,
            data: None,
            len: after,
        }));
    };
    let n = word
        .and_then(dec_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| malformed(line))?;
    let end = after
        .checked_add(n)
        .and_then(|e| e.checked_add(2))
        .ok_or_else(|| malformed(line))?;
    if buf.len() < end {
        return Ok(None);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(malformed(line));
    }
    Ok(Some(Frame {
        line,
        crlf,
        data: Some(&buf[after..end - 2]),
        len: end,
    }))
}

pub(crate) fn malformed(line: &[u8]) -> ReplyError {
    ReplyError::Malformed(String::from_utf8_lossy(line).into_owned())
}

/// Reads one typed reply from the front of `buf`: the reply and the bytes it
/// used (data block included), `Ok(None)` when more bytes are needed, or an
/// error for bytes that are no reply the server sends.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ReplyError> {
    let Some(f) = frame(buf)? else {
        return Ok(None);
    };
    if !f.crlf {
        return Err(malformed(f.line));
    }
    match parse_line(f.line, f.data) {
        Some(r) => Ok(Some((r, f.len))),
        None => Err(malformed(f.line)),
    }
}

fn parse_line<'a>(line: &'a [u8], data: Option<&'a [u8]>) -> Option<Reply<'a>> {
    if let Some(data) = data {
        if let Some(rest) = line.strip_prefix(b"VALUE ") {
            let mut w = rest.split(|&b| b == b' ');
            let key = w.next().filter(|k| !k.is_empty())?;
            let flags = u32::try_from(dec_u64(w.next()?)?).ok()?;
            w.next()?; // the length, read by `frame`
            let cas = w.next().map(dec_u64);
            if w.next().is_some() {
                return None;
            }
            return Some(Reply::Value {
                key,
                flags,
                cas: cas.map_or(Some(None), |c| c.map(Some))?,
                data,
            });
        }
        let rest = line.strip_prefix(b"VA ")?;
        let flags = match memchr::memchr(b' ', rest) {
            Some(i) => meta_flags(&rest[i + 1..])?,
            None => Vec::new(),
        };
        return Some(Reply::MetaValue {
            flags: FlagList::Owned(flags),
            data,
        });
    }
    if let Some(r) = fixed_replies()
        .into_iter()
        .find(|r| r.fixed_line() == Some(line))
    {
        return Some(r);
    }
    if !line.is_empty() && line.iter().all(u8::is_ascii_digit) {
        return dec_u64(line).map(Reply::Number);
    }
    if let Some(v) = line.strip_prefix(b"VERSION ") {
        return Some(Reply::Version(v));
    }
    if let Some(m) = line.strip_prefix(b"CLIENT_ERROR ") {
        return Some(Reply::ClientError(m));
    }
    if let Some(m) = line.strip_prefix(b"SERVER_ERROR ") {
        return Some(Reply::ServerError(m));
    }
    if let Some(rest) = line.strip_prefix(b"STAT ") {
        let i = memchr::memchr(b' ', rest)?;
        return Some(Reply::Stat {
            name: &rest[..i],
            value: &rest[i + 1..],
        });
    }
    if let Some(rest) = line.strip_prefix(b"PREFIX ") {
        return parse_prefix(rest);
    }
    if let Some(rest) = line.strip_prefix(b"ME ") {
        return parse_debug(rest).map(Reply::MetaDebug);
    }
    let code = MetaCode::from_bytes(line.get(..2)?)?;
    let flags = match line.get(2) {
        None => Vec::new(),
        Some(b' ') => meta_flags(&line[3..])?,
        Some(_) => return None,
    };
    Some(Reply::Meta {
        code,
        flags: FlagList::Owned(flags),
    })
}

/// The return flags of a meta reply, from the words after its code.
fn meta_flags(words: &[u8]) -> Option<Vec<MetaFlag<'_>>> {
    let toks: Vec<&[u8]> = words.split(|&b| b == b' ').collect();
    let mut flags = Vec::with_capacity(toks.len());
    let mut i = 0;
    while i < toks.len() {
        let (f, used_next) = flag(toks[i], toks.get(i + 1).copied())?;
        flags.push(f);
        i += 1 + usize::from(used_next);
    }
    Some(flags)
}

fn parse_prefix(rest: &[u8]) -> Option<Reply<'_>> {
    let w: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
    match w[..] {
        [prefix, b"get", get, b"hit", hit, b"set", set, b"del", del] => Some(Reply::Prefix {
            prefix,
            get: dec_u64(get)?,
            hit: dec_u64(hit)?,
            set: dec_u64(set)?,
            del: dec_u64(del)?,
        }),
        _ => None,
    }
}

fn parse_debug(rest: &[u8]) -> Option<MetaDebug<'_>> {
    let w: Vec<&[u8]> = rest.split(|&b| b == b' ').collect();
    let [key, exp, la, cas, fetch, cls, size] = w[..] else {
        return None;
    };
    let exp = exp.strip_prefix(b"exp=")?;
    let exp = match exp.strip_prefix(b"-") {
        Some(m) => 0i64.checked_sub_unsigned(dec_u64(m)?)?,
        None => i64::try_from(dec_u64(exp)?).ok()?,
    };
    Some(MetaDebug {
        key,
        binary: false,
        exp,
        la: dec_u64(la.strip_prefix(b"la=")?)?,
        cas: dec_u64(cas.strip_prefix(b"cas=")?)?,
        fetch: match fetch {
            b"fetch=yes" => true,
            b"fetch=no" => false,
            _ => return None,
        },
        cls: u32::try_from(dec_u64(cls.strip_prefix(b"cls=")?)?).ok()?,
        size: dec_u64(size.strip_prefix(b"size=")?)?,
    })
    .filter(|d| !d.key.is_empty())
}

/// A plain decimal: digits only, at least one, no overflow.
fn dec_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |v, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        v.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// Parses one flag token; `next` is the token after it (a binary key's
/// ` b`). Returns the flag and whether it used `next`.
fn flag<'a>(tok: &'a [u8], next: Option<&[u8]>) -> Option<(MetaFlag<'a>, bool)> {
    let (&letter, v) = tok.split_first()?;
    let flag = match letter {
        b'c' => MetaFlag::Cas(dec_u64(v)?),
        b'f' => MetaFlag::Flags(u32::try_from(dec_u64(v)?).ok()?),
        b's' => MetaFlag::Size(dec_u64(v)?),
        b't' if v == b"-1" => MetaFlag::Ttl(None),
        b't' => MetaFlag::Ttl(Some(dec_u64(v)?)),
        b'l' => MetaFlag::LastAccess(dec_u64(v)?),
        b'h' => match v {
            b"0" => MetaFlag::Hit(false),
            b"1" => MetaFlag::Hit(true),
            _ => return None,
        },
        b'O' => MetaFlag::Opaque(v),
        b'k' if v.is_empty() => return None,
        b'k' if next == Some(b"b") => {
            let key = B64.decode(v).ok()?;
            return Some((
                MetaFlag::Key {
                    key: Cow::Owned(key),
                    binary: true,
                },
                true,
            ));
        }
        b'k' => MetaFlag::key(v, false),
        b'W' | b'X' | b'Z' if !v.is_empty() => return None,
        b'W' => MetaFlag::Win,
        b'X' => MetaFlag::Stale,
        b'Z' => MetaFlag::TokenSent,
        _ => return None,
    };
    Some((flag, false))
}
