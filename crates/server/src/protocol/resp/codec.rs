//! RESP request framing, pure functions on bytes: a multibulk array of bulk
//! strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or an inline command line
//! (`GET k\r\n`, with Redis's quoting), one frame at a time off the front of
//! a buffer, so that pipelined requests are taken one after the other.
//!
//! Bounded as Redis 7 bounds them: at most [`MAX_MULTIBULK`] arguments, a
//! bulk string at most [`MAX_BULK`] bytes (or the caller's lower bound), a
//! count or inline line at most [`MAX_INLINE`] bytes without its newline.
//! A frame that breaks a bound or the grammar is a [`Frame::Error`] with
//! Redis's text; the connection answers it and closes, as Redis does.

use std::borrow::Cow;

/// Longest bulk string Redis accepts (`proto-max-bulk-len`, 512 MB).
pub const MAX_BULK: usize = 512 * 1024 * 1024;
/// Most arguments in one multibulk request.
pub const MAX_MULTIBULK: usize = 1024 * 1024;
/// Longest inline line or count line without its newline.
pub const MAX_INLINE: usize = 64 * 1024;

/// One frame off the front of the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Not all of it is here yet.
    Incomplete,
    /// A command and its arguments, `consumed` bytes long. An empty line or
    /// an empty array is a command with no arguments (skipped).
    Command {
        args: Vec<Cow<'a, [u8]>>,
        consumed: usize,
    },
    /// A protocol error: its text (after `-ERR `); the connection closes.
    Error(String),
}

/// Redis's bounds before a client has authenticated (when a password is
/// needed): at most this many arguments...
pub const UNAUTH_MULTIBULK: usize = 10;
/// ... each at most this long.
pub const UNAUTH_BULK: usize = 16384;

/// What [`parse_into`] found at the front of the input.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not all of it is here yet.
    Incomplete,
    /// A multibulk command, `consumed` bytes long: its arguments were
    /// pushed to the caller's list (none: an empty array, skipped).
    Command { consumed: usize },
    /// An inline command line (its words unquoted, so owned), `consumed`
    /// bytes long; no words: an empty line, skipped.
    Inline {
        words: Vec<Vec<u8>>,
        consumed: usize,
    },
    /// A protocol error: its text (after `-ERR `); the connection closes.
    Error(String),
}

/// Takes one frame off the front of `buf`. `max_bulk`: the longest bulk
/// string accepted (at most [`MAX_BULK`]). `unauth`: the client must
/// still authenticate (Redis's tighter bounds and their errors).
pub fn parse(buf: &[u8], max_bulk: usize, unauth: bool) -> Frame<'_> {
    let mut args = Vec::new();
    match parse_into(buf, max_bulk, unauth, &mut args) {
        Parsed::Incomplete => Frame::Incomplete,
        Parsed::Error(e) => Frame::Error(e),
        Parsed::Command { consumed } => Frame::Command {
            args: args.into_iter().map(Cow::Borrowed).collect(),
            consumed,
        },
        Parsed::Inline { words, consumed } => Frame::Command {
            args: words.into_iter().map(Cow::Owned).collect(),
            consumed,
        },
    }
}

/// [`parse`] without an allocation per request: a multibulk command's
/// arguments are pushed to `args` (cleared first), borrowed from `buf`.
pub fn parse_into<'a>(
    buf: &'a [u8],
    max_bulk: usize,
    unauth: bool,
    args: &mut Vec<&'a [u8]>,
) -> Parsed {
    args.clear();
    match buf.first() {
        None => Parsed::Incomplete,
        Some(b'*') => multibulk(buf, max_bulk.min(MAX_BULK), unauth, args),
        Some(_) => inline(buf),
    }
}

fn perr(what: &str) -> Parsed {
    Parsed::Error(format!("Protocol error: {what}"))
}

/// The line starting at `from` (without `\r\n`) and the offset after it.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = &buf[from..];
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let l = &rest[..nl];
    let l = l.strip_suffix(b"\r").unwrap_or(l);
    Some((l, from + nl + 1))
}

/// A count line's number as `i64::from_str` reads it, without a leading
/// `+`: an optional `-`, then ASCII digits, within i64 (the hot path of
/// every request: no UTF-8 check, no generic parse).
fn count(l: &[u8]) -> Option<i64> {
    let (neg, digits) = match l.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, l),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &c in digits {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        // Accumulated negative for `-`, so that i64::MIN fits.
        n = n.checked_mul(10)?;
        n = match neg {
            true => n.checked_sub(i64::from(d))?,
            false => n.checked_add(i64::from(d))?,
        };
    }
    Some(n)
}

fn multibulk<'a>(buf: &'a [u8], max_bulk: usize, unauth: bool, args: &mut Vec<&'a [u8]>) -> Parsed {
    let Some((l, mut at)) = line(buf, 0) else {
        return match buf.len() > MAX_INLINE {
            true => perr("too big mbulk count string"),
            false => Parsed::Incomplete,
        };
    };
    let n = match count(&l[1..]) {
        Some(n) if n > MAX_MULTIBULK as i64 => return perr("invalid multibulk length"),
        Some(n) if unauth && n > UNAUTH_MULTIBULK as i64 => {
            return perr("unauthenticated multibulk length")
        }
        Some(n) => n,
        None => return perr("invalid multibulk length"),
    };
    if n <= 0 {
        return Parsed::Command { consumed: at };
    }
    args.reserve((n as usize).min(1024));
    for _ in 0..n {
        if at >= buf.len() {
            return Parsed::Incomplete;
        }
        if buf[at] != b'$' {
            return Parsed::Error(format!(
                "Protocol error: expected '$', got '{}'",
                char::from(buf[at])
            ));
        }
        let Some((l, data)) = line(buf, at) else {
            return match buf.len() - at > MAX_INLINE {
                true => perr("too big bulk count string"),
                false => Parsed::Incomplete,
            };
        };
        let len = match count(&l[1..]) {
            Some(len) if unauth && len > UNAUTH_BULK as i64 => {
                return perr("unauthenticated bulk length")
            }
            Some(len) if len >= 0 && (len as u64) <= max_bulk as u64 => len as usize,
            _ => return perr("invalid bulk length"),
        };
        if buf.len() < data + len + 2 {
            return Parsed::Incomplete;
        }
        args.push(&buf[data..data + len]);
        at = data + len + 2;
    }
    Parsed::Command { consumed: at }
}

fn inline(buf: &[u8]) -> Parsed {
    let Some((l, consumed)) = line(buf, 0) else {
        return match buf.len() > MAX_INLINE {
            true => perr("too big inline request"),
            false => Parsed::Incomplete,
        };
    };
    match split_args(l) {
        Some(words) => Parsed::Inline { words, consumed },
        None => perr("unbalanced quotes in request"),
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Splits an inline line into words as Redis's `sdssplitargs` does:
/// spaces separate, `"..."` takes `\n \r \t \b \a \\ \" \xHH` escapes,
/// `'...'` only `\'`; a closing quote must be followed by a space or the
/// end. None: unbalanced quotes.
pub fn split_args(l: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    loop {
        while i < l.len() && l[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= l.len() {
            return Some(out);
        }
        let mut w = Vec::new();
        let (mut dq, mut sq) = (false, false);
        loop {
            let Some(&c) = l.get(i) else {
                if dq || sq {
                    return None;
                }
                break;
            };
            if dq {
                if c == b'\\' && l.get(i + 1) == Some(&b'x') && i + 3 < l.len() {
                    if let (Some(a), Some(b)) = (hex(l[i + 2]), hex(l[i + 3])) {
                        w.push(a * 16 + b);
                        i += 4;
                        continue;
                    }
                }
                if c == b'\\' && i + 1 < l.len() {
                    w.push(match l[i + 1] {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 8,
                        b'a' => 7,
                        o => o,
                    });
                    i += 2;
                    continue;
                }
                if c == b'"' {
                    if l.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                w.push(c);
            } else if sq {
                if c == b'\\' && l.get(i + 1) == Some(&b'\'') {
                    w.push(b'\'');
                    i += 2;
                    continue;
                }
                if c == b'\'' {
                    if l.get(i + 1).is_some_and(|n| !n.is_ascii_whitespace()) {
                        return None;
                    }
                    i += 1;
                    break;
                }
                w.push(c);
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => dq = true,
                    b'\'' => sq = true,
                    _ => w.push(c),
                }
            }
            i += 1;
        }
        out.push(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(f: Frame<'_>) -> (Vec<Vec<u8>>, usize) {
        match f {
            Frame::Command { args, consumed } => {
                (args.into_iter().map(|a| a.into_owned()).collect(), consumed)
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn multibulk_and_pipelining() {
        let b = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        let (a, n) = words(parse(b, MAX_BULK, false));
        assert_eq!(a, vec![b"GET".to_vec(), b"k".to_vec()]);
        let (a, m) = words(parse(&b[n..], MAX_BULK, false));
        assert_eq!(a, vec![b"PING".to_vec()]);
        assert_eq!(n + m, b.len());
        for cut in 1..n {
            assert_eq!(
                parse(&b[..cut], MAX_BULK, false),
                Frame::Incomplete,
                "{cut}"
            );
        }
    }

    #[test]
    fn bounds_and_errors() {
        let e = |b: &[u8]| match parse(b, MAX_BULK, false) {
            Frame::Error(e) => e,
            f => panic!("{f:?}"),
        };
        assert_eq!(
            e(b"*1\r\n$536870913\r\n"),
            "Protocol error: invalid bulk length"
        );
        assert_eq!(e(b"*1\r\n$-5\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(
            e(b"*2000000\r\n"),
            "Protocol error: invalid multibulk length"
        );
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(e(b"*1\r\n+ok\r\n"), "Protocol error: expected '$', got '+'");
        assert_eq!(
            e(b"GET \"k\r\n"),
            "Protocol error: unbalanced quotes in request"
        );
        assert_eq!(
            e(&[b'a'; MAX_INLINE + 1]),
            "Protocol error: too big inline request"
        );
        match parse(b"*1\r\n$9\r\n", 8, false) {
            Frame::Error(e) => assert_eq!(e, "Protocol error: invalid bulk length"),
            f => panic!("{f:?}"),
        }
    }

    #[test]
    fn counts_as_i64_from_str_reads_them() {
        for (l, want) in [
            (&b"0"[..], Some(0)),
            (b"007", Some(7)),
            (b"-1", Some(-1)),
            (b"-0", Some(0)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-9223372036854775809", None),
            (b"", None),
            (b"-", None),
            (b"+1", None),
            (b"1 ", None),
            (b"1a", None),
            (b"\xff", None),
        ] {
            assert_eq!(count(l), want, "{:?}", String::from_utf8_lossy(l));
        }
    }

    #[test]
    fn parse_into_borrows_and_reuses_the_list() {
        let b = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\nGET k\r\n";
        let mut args = vec![&b"stale"[..]];
        let n = match parse_into(b, MAX_BULK, false, &mut args) {
            Parsed::Command { consumed } => consumed,
            p => panic!("{p:?}"),
        };
        assert_eq!(args, vec![&b"SET"[..], b"k", b"vv"]);
        match parse_into(&b[n..], MAX_BULK, false, &mut args) {
            Parsed::Inline { words, consumed } => {
                assert_eq!(words, vec![b"GET".to_vec(), b"k".to_vec()]);
                assert_eq!(n + consumed, b.len());
            }
            p => panic!("{p:?}"),
        }
        assert!(args.is_empty());
    }

    #[test]
    fn tighter_before_auth() {
        let e = |b: &[u8]| match parse(b, MAX_BULK, true) {
            Frame::Error(e) => e,
            f => panic!("{f:?}"),
        };
        assert_eq!(
            e(b"*11\r\n"),
            "Protocol error: unauthenticated multibulk length"
        );
        assert_eq!(
            e(b"*1\r\n$16385\r\n"),
            "Protocol error: unauthenticated bulk length"
        );
        assert_eq!(
            parse(b"*2\r\n$4\r\nAUTH\r\n", MAX_BULK, true),
            Frame::Incomplete
        );
    }

    #[test]
    fn inline_quoting() {
        let (a, n) = words(parse(b"SET k \"a b\\x41\\n\" 'c\\'d'\r\n", MAX_BULK, false));
        assert_eq!(n, 26);
        assert_eq!(
            a,
            vec![
                b"SET".to_vec(),
                b"k".to_vec(),
                b"a bA\n".to_vec(),
                b"c'd".to_vec()
            ]
        );
        assert_eq!(words(parse(b"\r\n", MAX_BULK, false)).0.len(), 0);
        assert_eq!(
            words(parse(b"PING\n", MAX_BULK, false)).0,
            vec![b"PING".to_vec()]
        );
    }
}
