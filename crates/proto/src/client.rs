//! The client side of the codec: parsing server replies, used by the load
//! generator and the tests so that they agree with the server by construction.

use crate::number::parse_u64;

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
    Malformed(String),
}

/// Parses one reply unit; `Ok(None)` when more bytes are needed.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ReplyError> {
    let nl = match memchr::memchr(b'\n', buf) {
        Some(i) => i,
        None => return Ok(None),
    };
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    let after = nl + 1;
    let bad = || ReplyError::Malformed(String::from_utf8_lossy(line).into_owned());
    if let Some(rest) = line.strip_prefix(b"VALUE ") {
        let mut it = rest.split(|&b| b == b' ');
        let key = it.next().ok_or_else(bad)?;
        let flags = it.next().and_then(parse_u64).ok_or_else(bad)? as u32;
        let len = it.next().and_then(parse_u64).ok_or_else(bad)? as usize;
        let cas = it.next().and_then(parse_u64);
        let end = after + len + 2;
        if buf.len() < end {
            return Ok(None);
        }
        let data = &buf[after..after + len];
        return Ok(Some((
            Reply::Value {
                key,
                flags,
                data,
                cas,
            },
            end,
        )));
    }
    if let Some(rest) = line.strip_prefix(b"VA ") {
        let (len_s, flags) = match memchr::memchr(b' ', rest) {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => (rest, &b""[..]),
        };
        let len = parse_u64(len_s).ok_or_else(bad)? as usize;
        let end = after + len + 2;
        if buf.len() < end {
            return Ok(None);
        }
        return Ok(Some((
            Reply::Meta {
                code: *b"VA",
                flags,
                data: Some(&buf[after..after + len]),
            },
            end,
        )));
    }
    if line.len() >= 2
        && matches!(
            &line[..2],
            b"HD" | b"EN" | b"NF" | b"NS" | b"EX" | b"MN" | b"ME"
        )
        && (line.len() == 2 || line[2] == b' ')
    {
        let flags = if line.len() > 3 { &line[3..] } else { &b""[..] };
        return Ok(Some((
            Reply::Meta {
                code: [line[0], line[1]],
                flags,
                data: None,
            },
            after,
        )));
    }
    Ok(Some((Reply::Line(line), after)))
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
