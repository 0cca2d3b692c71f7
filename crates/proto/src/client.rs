//! The client side of the codec: parsing server replies, used by the load
//! generator and the tests so that they agree with the server by construction.

use crate::number::parse_u64;
use crate::reply::{frame, malformed};

/// One reply unit from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<'a> {
    /// One `VALUE` block of a classic retrieval (more may follow before `END`).
    Value {
        key: &'a [u8],
        flags: u32,
        data: &'a [u8],
        cas: Option<u64>,
    },
    /// A meta reply: two-letter code, the flag words, and data for `VA`.
    Meta {
        code: [u8; 2],
        flags: &'a [u8],
        data: Option<&'a [u8]>,
    },
    /// Any other single line (`END`, `STORED`, `ERROR`, numbers, `STAT ...`).
    Line(&'a [u8]),
}

/// Why a reply could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyError {
    /// The line (lossily as text) that is no reply, or whose data block does
    /// not end in `\r\n`.
    Malformed(String),
}

/// Parses one reply unit; `Ok(None)` when more bytes are needed. The framing
/// (where the line ends, how long the data block is) is
/// [`crate::reply::parse_reply`]'s; this keeps meta flags as raw words and
/// other lines untyped, for clients that only look at a few replies.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ReplyError> {
    let Some(f) = frame(buf)? else {
        return Ok(None);
    };
    let line = f.line;
    let bad = || malformed(line);
    let reply = if let Some(data) = f.data {
        if let Some(rest) = line.strip_prefix(b"VALUE ") {
            let mut it = rest.split(|&b| b == b' ');
            let key = it.next().ok_or_else(bad)?;
            let flags = it.next().and_then(parse_u64).ok_or_else(bad)? as u32;
            it.next();
            let cas = it.next().and_then(parse_u64);
            Reply::Value {
                key,
                flags,
                data,
                cas,
            }
        } else {
            let rest = line.strip_prefix(b"VA ").ok_or_else(bad)?;
            let flags = match memchr::memchr(b' ', rest) {
                Some(i) => &rest[i + 1..],
                None => &b""[..],
            };
            Reply::Meta {
                code: *b"VA",
                flags,
                data: Some(data),
            }
        }
    } else if line.len() >= 2
        && matches!(
            &line[..2],
            b"HD" | b"EN" | b"NF" | b"NS" | b"EX" | b"MN" | b"ME"
        )
        && (line.len() == 2 || line[2] == b' ')
    {
        let flags = if line.len() > 3 { &line[3..] } else { &b""[..] };
        Reply::Meta {
            code: [line[0], line[1]],
            flags,
            data: None,
        }
    } else {
        Reply::Line(line)
    };
    Ok(Some((reply, f.len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_values_and_lines() {
        let buf = b"VALUE a 1 3 7\r\nabc\r\nEND\r\n";
        let (r, n) = parse_reply(buf).unwrap().unwrap();
        assert_eq!(
            r,
            Reply::Value {
                key: b"a",
                flags: 1,
                data: b"abc",
                cas: Some(7)
            }
        );
        let (r, _) = parse_reply(&buf[n..]).unwrap().unwrap();
        assert_eq!(r, Reply::Line(b"END"));
        assert_eq!(parse_reply(b"VALUE a 1 3\r\nab").unwrap(), None);
    }

    #[test]
    fn parses_meta() {
        let (r, n) = parse_reply(b"VA 2 f5 c3\r\nhi\r\n").unwrap().unwrap();
        assert_eq!(n, 16);
        assert_eq!(
            r,
            Reply::Meta {
                code: *b"VA",
                flags: b"f5 c3",
                data: Some(b"hi")
            }
        );
        let (r, _) = parse_reply(b"EN\r\n").unwrap().unwrap();
        assert!(matches!(
            r,
            Reply::Meta {
                code: [b'E', b'N'],
                ..
            }
        ));
    }
}
