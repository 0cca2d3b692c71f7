//! The request parser for memcached's text protocol, classic and meta
//! commands, following memcached 1.6's `proto_text.c` rules: line splitting,
//! tokenizing (single spaces, at most 24 tokens), token-count checks that
//! answer `ERROR`, `noreply` detection before validation, and which malformed
//! data blocks are swallowed versus parsed as the next command.

use crate::meta::{parse_flags, MAX_META_TOKENS};
use crate::number::{parse_i32, parse_u32, parse_u64};
use crate::request::{errors, ErrorReply, Get, Request, Store, StoreMode, KEY_MAX_LENGTH};
use std::borrow::Cow;

/// A line longer than this without a newline closes the connection (unless it
/// is a multiget, see [`Limits::max_get_line`]).
pub const MAX_LINE: usize = 2048;
const MAX_TOKENS: usize = 24;
/// memcached's read size: a non-get line longer than this is never parsed.
const MAX_COMPLETE_LINE: usize = 16384;

/// Limits that depend on server configuration.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Item size limit (`-I`), counted as memcached counts it (header, key, value).
    pub item_size_max: usize,
    /// Longest multiget line accepted before the connection is closed.
    pub max_get_line: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            item_size_max: 1024 * 1024,
            max_get_line: 1024 * 1024,
        }
    }
}

impl Limits {
    /// Whether memcached would refuse an item of this shape as too large.
    /// memcached counts a 48-byte header, 8 bytes of CAS, the key and its NUL,
    /// 4 bytes of flags when non-zero, and the value with its `\r\n`.
    pub fn too_large(&self, nkey: usize, flags: u32, vlen: usize) -> bool {
        let total = 56 + nkey + 1 + vlen + 2 + if flags != 0 { 4 } else { 0 };
        total > self.item_size_max
    }
}

/// Outcome of trying to parse one request from the front of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed<'a> {
    /// More bytes are needed; `need` is the total buffer length required when known.
    Incomplete { need: Option<usize> },
    /// The input is garbage memcached would hang up on; close the connection.
    Close,
    /// A request, and how many bytes of the buffer it used.
    Request {
        request: Request<'a>,
        consumed: usize,
    },
    /// A request to answer, after which `skip` further bytes (a refused data
    /// block, possibly not yet received) must be discarded.
    Swallow {
        request: Request<'a>,
        consumed: usize,
        skip: usize,
    },
}

fn done(request: Request<'_>, consumed: usize) -> Parsed<'_> {
    Parsed::Request { request, consumed }
}

fn error<'a>(reply: ErrorReply, noreply: bool, consumed: usize) -> Parsed<'a> {
    done(Request::Error { reply, noreply }, consumed)
}

/// Tokens of one command line: at most 23 words, plus the unparsed rest.
struct Tokens<'a> {
    words: [&'a [u8]; MAX_TOKENS],
    len: usize,
    /// Unprocessed remainder when the line had more tokens than fit.
    rest: Option<&'a [u8]>,
}

impl<'a> Tokens<'a> {
    fn split(line: &'a [u8]) -> Tokens<'a> {
        let mut t = Tokens {
            words: [&[][..]; MAX_TOKENS],
            len: 0,
            rest: None,
        };
        let mut start = 0;
        let mut i = 0;
        while i < line.len() {
            if line[i] == b' ' {
                if start != i {
                    t.words[t.len] = &line[start..i];
                    t.len += 1;
                    if t.len == MAX_TOKENS - 1 {
                        let rest = &line[i + 1..];
                        t.rest = if rest.is_empty() { None } else { Some(rest) };
                        return t;
                    }
                }
                start = i + 1;
            }
            i += 1;
        }
        if start != i {
            t.words[t.len] = &line[start..i];
            t.len += 1;
        }
        t
    }

    /// memcached's `ntokens` (words plus the terminal token).
    fn ntokens(&self) -> usize {
        self.len + 1
    }

    fn get(&self, i: usize) -> &'a [u8] {
        if i < self.len {
            self.words[i]
        } else {
            &[]
        }
    }

    /// memcached's `set_noreply_maybe`: the last word is `noreply`.
    fn noreply(&self) -> bool {
        self.len >= 1 && self.words[self.len - 1] == b"noreply"
    }
}

/// Parses the request at the start of `buf`.
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Parsed<'a> {
    let nl = match memchr(b'\n', buf) {
        Some(nl) => nl,
        None => return incomplete_line(buf, limits),
    };
    let consumed = nl + 1;
    if nl > MAX_COMPLETE_LINE && incomplete_line(&buf[..nl], limits) == Parsed::Close {
        // memcached reads 16 KiB at a time and hangs up on such a line before its end.
        return Parsed::Close;
    }
    let mut line = &buf[..nl];
    if line.len() > 1 && line[line.len() - 1] == b'\r' {
        line = &line[..line.len() - 1];
    }
    // memcached treats the line as a C string: a NUL ends it.
    if let Some(z) = memchr(0, line) {
        line = &line[..z];
    }
    let tokens = Tokens::split(line);
    if tokens.len == 0 || tokens.words[0].len() < 2 {
        return error(ErrorReply::Error, false, consumed);
    }
    let cmd = tokens.words[0];
    let nt = tokens.ntokens();
    let want = |ok: bool, p: Parsed<'a>| -> Parsed<'a> {
        if ok {
            p
        } else {
            error(ErrorReply::Error, false, consumed)
        }
    };
    if cmd.len() == 2 && cmd[0] == b'm' {
        return parse_meta(cmd[1], &tokens, buf, consumed, limits);
    }
    match cmd {
        b"get" | b"gets" | b"gat" | b"gats" | b"bget" => {
            if nt < 3 {
                return error(ErrorReply::Error, false, consumed);
            }
            parse_get(cmd, line, &tokens, consumed)
        }
        b"set" => want(
            nt == 6 || nt == 7,
            store(StoreMode::Set, &tokens, buf, consumed, limits),
        ),
        b"add" => want(
            nt == 6 || nt == 7,
            store(StoreMode::Add, &tokens, buf, consumed, limits),
        ),
        b"replace" => want(
            nt == 6 || nt == 7,
            store(StoreMode::Replace, &tokens, buf, consumed, limits),
        ),
        b"append" => want(
            nt == 6 || nt == 7,
            store(StoreMode::Append, &tokens, buf, consumed, limits),
        ),
        b"prepend" => want(
            nt == 6 || nt == 7,
            store(StoreMode::Prepend, &tokens, buf, consumed, limits),
        ),
        b"cas" => want(
            nt == 7 || nt == 8,
            store(StoreMode::Cas, &tokens, buf, consumed, limits),
        ),
        b"incr" | b"decr" => want(nt == 4 || nt == 5, arith(cmd == b"incr", &tokens, consumed)),
        b"touch" => want(nt == 4 || nt == 5, touch(&tokens, consumed)),
        b"delete" => want((3..=5).contains(&nt), delete(&tokens, consumed)),
        b"flush_all" => want((2..=4).contains(&nt), flush_all(&tokens, consumed)),
        b"version" => done(Request::Version, consumed),
        b"quit" => done(Request::Quit, consumed),
        b"verbosity" => want(nt == 3 || nt == 4, verbosity(&tokens, consumed)),
        b"stats" => {
            let args = if tokens.len > 1 {
                let off = tokens.words[1].as_ptr() as usize - line.as_ptr() as usize;
                &line[off..]
            } else {
                &[][..]
            };
            done(Request::Stats(args), consumed)
        }
        b"shutdown" => match (nt, tokens.get(1)) {
            (2, _) => done(Request::Shutdown { graceful: false }, consumed),
            (3, b"graceful") => done(Request::Shutdown { graceful: true }, consumed),
            _ => error(
                ErrorReply::Client("CLIENT_ERROR invalid shutdown mode"),
                false,
                consumed,
            ),
        },
        b"lru_crawler" => match crate::crawler::parse(&tokens.words[1..tokens.len]) {
            Ok(c) => done(Request::LruCrawler(c), consumed),
            Err(reply) => error(reply, false, consumed),
        },
        b"cache_memlimit" => want(nt == 3 || nt == 4, {
            let noreply = tokens.noreply();
            match parse_u32(tokens.get(1)) {
                Some(megabytes) => done(Request::CacheMemlimit { megabytes, noreply }, consumed),
                None => error(ErrorReply::Error, noreply, consumed),
            }
        }),
        b"watch" => parse_watch(&tokens, consumed),
        b"refresh_certs" => done(
            Request::RefreshCerts {
                noreply: tokens.noreply(),
            },
            consumed,
        ),
        _ if http_hangup(cmd, tokens.words[tokens.len - 1]) => done(Request::HttpHangup, consumed),
        _ => error(ErrorReply::Error, false, consumed),
    }
}

/// memcached 1.6's `process_command_ascii` hangs up on an unknown command
/// whose last word starts with `HTTP/` (an HTTP request line), but only
/// after every branch it knows: command words starting with `g s a c i d t`
/// (and two-letter `m` words) answer `ERROR` whatever they end with, and a
/// few commands tiercache does not have answer their own errors.
fn http_hangup(cmd: &[u8], last: &[u8]) -> bool {
    const OWN_REPLY: [&[u8]; 5] = [
        b"lru_crawler",
        b"watch",
        b"lru",
        b"extstore",
        b"refresh_certs",
    ];
    last.starts_with(b"HTTP/") && !b"gsacidt".contains(&cmd[0]) && !OWN_REPLY.contains(&cmd)
}

/// `watch` and the kinds it names (fetchers when none): memcached answers
/// `ERROR` to a name it does not know, and takes every kind it has, even
/// those it writes no line of (`rawcmds`, the proxy's: see
/// [`watch::kind`](crate::request::watch::kind)).
fn parse_watch<'a>(tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    use crate::request::watch;
    if tokens.len == 1 {
        return done(
            Request::Watch {
                flags: watch::FETCHERS,
            },
            consumed,
        );
    }
    let mut flags = 0;
    for w in &tokens.words[1..tokens.len] {
        match watch::kind(w) {
            Some(f) => flags |= f,
            None => return error(ErrorReply::Error, tokens.noreply(), consumed),
        }
    }
    done(Request::Watch { flags }, consumed)
}

/// No newline yet: wait, or hang up on a long line that is not a multiget.
fn incomplete_line<'a>(buf: &[u8], limits: &Limits) -> Parsed<'a> {
    if buf.len() <= MAX_LINE {
        return Parsed::Incomplete { need: None };
    }
    let lead = buf.iter().take_while(|&&b| b == b' ').count();
    let rest = &buf[lead..];
    let is_get = rest.starts_with(b"get ") || rest.starts_with(b"gets ");
    if lead > 100 || !is_get || buf.len() > limits.max_get_line {
        Parsed::Close
    } else {
        Parsed::Incomplete { need: None }
    }
}

fn parse_get<'a>(cmd: &[u8], line: &'a [u8], tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    let return_cas = cmd == b"gets" || cmd == b"gats";
    let mut first_key = 1;
    let mut touch = None;
    if cmd == b"gat" || cmd == b"gats" {
        match parse_i32(tokens.get(1)) {
            Some(t) => touch = Some(t),
            None => return error(ErrorReply::Client(errors::INVALID_EXPTIME), false, consumed),
        }
        first_key = 2;
    }
    let keys: &'a [u8] = if first_key < tokens.len {
        let off = tokens.words[first_key].as_ptr() as usize - line.as_ptr() as usize;
        &line[off..]
    } else {
        &[]
    };
    if keys.split(|&b| b == b' ').any(|k| k.len() > KEY_MAX_LENGTH) {
        return done(Request::GetKeyTooLong, consumed);
    }
    done(
        Request::Get(Get {
            keys,
            return_cas,
            touch,
        }),
        consumed,
    )
}

fn store<'a>(
    mode: StoreMode,
    tokens: &Tokens<'a>,
    buf: &'a [u8],
    consumed: usize,
    limits: &Limits,
) -> Parsed<'a> {
    let noreply = tokens.noreply();
    let key = tokens.get(1);
    let bad = || error(ErrorReply::Client(errors::BAD_FORMAT), noreply, consumed);
    if key.len() > KEY_MAX_LENGTH {
        return bad();
    }
    let (flags, exptime, vlen) = match (
        parse_u32(tokens.get(2)),
        parse_i32(tokens.get(3)),
        parse_i32(tokens.get(4)),
    ) {
        (Some(f), Some(e), Some(v)) => (f, e, v),
        _ => return bad(),
    };
    let mut cas = 0;
    if mode == StoreMode::Cas {
        match parse_u64(tokens.get(5)) {
            Some(c) => cas = c,
            None => return bad(),
        }
    }
    if !(0..=i32::MAX - 2).contains(&vlen) {
        return bad();
    }
    let vlen = vlen as usize;
    if limits.too_large(key.len(), flags, vlen) {
        return Parsed::Swallow {
            request: Request::StoreRefused {
                key: Cow::Borrowed(key),
                classic: true,
                remove_existing: mode == StoreMode::Set,
                reply: ErrorReply::Server(errors::TOO_LARGE),
                noreply,
            },
            consumed,
            skip: vlen + 2,
        };
    }
    let total = consumed + vlen + 2;
    if buf.len() < total {
        return Parsed::Incomplete { need: Some(total) };
    }
    if &buf[total - 2..total] != b"\r\n" {
        return error(ErrorReply::Client(errors::BAD_CHUNK), noreply, total);
    }
    done(
        Request::Store(Store {
            mode,
            key,
            flags,
            exptime,
            data: &buf[consumed..consumed + vlen],
            cas,
            noreply,
        }),
        total,
    )
}

fn arith<'a>(incr: bool, tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    let noreply = tokens.noreply();
    let key = tokens.get(1);
    if key.len() > KEY_MAX_LENGTH {
        return error(ErrorReply::Client(errors::BAD_FORMAT), noreply, consumed);
    }
    match parse_u64(tokens.get(2)) {
        Some(delta) => done(
            Request::Arith {
                incr,
                key,
                delta,
                noreply,
            },
            consumed,
        ),
        None => error(ErrorReply::Client(errors::INVALID_DELTA), noreply, consumed),
    }
}

fn touch<'a>(tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    let noreply = tokens.noreply();
    let key = tokens.get(1);
    if key.len() > KEY_MAX_LENGTH {
        return error(ErrorReply::Client(errors::BAD_FORMAT), noreply, consumed);
    }
    match parse_i32(tokens.get(2)) {
        Some(exptime) => done(
            Request::Touch {
                key,
                exptime,
                noreply,
            },
            consumed,
        ),
        None => error(
            ErrorReply::Client(errors::INVALID_EXPTIME),
            noreply,
            consumed,
        ),
    }
}

fn delete<'a>(tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    let nt = tokens.ntokens();
    let mut noreply = false;
    if nt > 3 {
        let hold_is_zero = tokens.get(2) == b"0";
        noreply = tokens.noreply();
        let valid = (nt == 4 && (hold_is_zero || noreply)) || (nt == 5 && hold_is_zero && noreply);
        if !valid {
            return error(ErrorReply::Client(errors::DELETE_USAGE), noreply, consumed);
        }
    }
    let key = tokens.get(1);
    if key.len() > KEY_MAX_LENGTH {
        return error(ErrorReply::Client(errors::BAD_FORMAT), noreply, consumed);
    }
    done(Request::Delete { key, noreply }, consumed)
}

fn flush_all<'a>(tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    let noreply = tokens.noreply();
    let mut delay = 0;
    if tokens.ntokens() != if noreply { 3 } else { 2 } {
        match parse_i32(tokens.get(1)) {
            Some(d) => delay = d,
            None => {
                return error(
                    ErrorReply::Client(errors::INVALID_EXPTIME),
                    noreply,
                    consumed,
                )
            }
        }
    }
    done(Request::FlushAll { delay, noreply }, consumed)
}

fn verbosity<'a>(tokens: &Tokens<'a>, consumed: usize) -> Parsed<'a> {
    let noreply = tokens.noreply();
    match parse_u32(tokens.get(1)) {
        Some(level) => done(Request::Verbosity { level, noreply }, consumed),
        None => error(ErrorReply::Client(errors::BAD_FORMAT), noreply, consumed),
    }
}

fn parse_meta<'a>(
    letter: u8,
    tokens: &Tokens<'a>,
    buf: &'a [u8],
    consumed: usize,
    limits: &Limits,
) -> Parsed<'a> {
    let nt = tokens.ntokens();
    let client = |s: &'static str| error(ErrorReply::Client(s), false, consumed);
    match letter {
        b'n' => return done(Request::MetaNoop, consumed),
        b'g' | b's' | b'd' | b'a' => {}
        b'e' => {
            if nt < 3 || tokens.get(1).len() > KEY_MAX_LENGTH {
                return client(errors::BAD_FORMAT);
            }
            let mut key = Cow::Borrowed(tokens.get(1));
            if nt >= 4 && tokens.get(2) == b"b" {
                match base64_decode(&key) {
                    Some(k) => key = Cow::Owned(k),
                    None => return client(errors::BAD_FORMAT),
                }
            }
            return done(Request::MetaDebug { key }, consumed);
        }
        _ => return error(ErrorReply::Error, false, consumed),
    }
    if nt < 3 {
        return error(ErrorReply::Error, false, consumed);
    }
    let raw_key = tokens.get(1);
    if raw_key.len() > KEY_MAX_LENGTH {
        return client(errors::BAD_FORMAT);
    }
    if letter == b's' {
        return parse_meta_set(tokens, buf, consumed, limits);
    }
    if nt > MAX_META_TOKENS {
        return client(if letter == b'g' {
            "CLIENT_ERROR options flags are too long"
        } else {
            "CLIENT_ERROR options flags too long"
        });
    }
    let mut key = Cow::Borrowed(raw_key);
    let flags = match parse_flags(&tokens.words[2..tokens.len], &mut key) {
        Ok(f) => f,
        Err(e) => {
            return client(if letter == b'g' {
                e
            } else {
                "CLIENT_ERROR invalid or duplicate flag"
            })
        }
    };
    let request = match letter {
        b'g' => Request::MetaGet { key, flags },
        b'd' => Request::MetaDelete { key, flags },
        _ => {
            if let Some(m) = flags.mode {
                if !matches!(m, b'I' | b'+' | b'D' | b'-') {
                    return client("CLIENT_ERROR invalid mode for ma M token");
                }
            }
            Request::MetaArith { key, flags }
        }
    };
    done(request, consumed)
}

fn parse_meta_set<'a>(
    tokens: &Tokens<'a>,
    buf: &'a [u8],
    consumed: usize,
    limits: &Limits,
) -> Parsed<'a> {
    let nt = tokens.ntokens();
    let client = |s: &'static str| error(ErrorReply::Client(s), false, consumed);
    if nt == 3 {
        return client(errors::BAD_FORMAT);
    }
    if nt > MAX_META_TOKENS {
        return client("CLIENT_ERROR options flags too long");
    }
    let vlen = match parse_i32(tokens.get(2)) {
        Some(v) if (0..=i32::MAX - 2).contains(&v) => v as usize,
        _ => return client(errors::BAD_FORMAT),
    };
    let swallow = |reply: ErrorReply, key: Option<Cow<'a, [u8]>>| {
        let request = match key {
            Some(key) => Request::StoreRefused {
                key,
                classic: false,
                remove_existing: true,
                reply,
                noreply: false,
            },
            None => Request::Error {
                reply,
                noreply: false,
            },
        };
        Parsed::Swallow {
            request,
            consumed,
            skip: vlen + 2,
        }
    };
    let mut key = Cow::Borrowed(tokens.get(1));
    let flags = match parse_flags(&tokens.words[3..tokens.len], &mut key) {
        Ok(f) => f,
        Err(e) => return swallow(ErrorReply::Client(e), None),
    };
    if let Some(m) = flags.mode {
        if !matches!(m, b'E' | b'A' | b'P' | b'R' | b'S') {
            return swallow(
                ErrorReply::Client("CLIENT_ERROR invalid mode for ms M token"),
                None,
            );
        }
    }
    if limits.too_large(key.len(), flags.client_flags, vlen) {
        return swallow(ErrorReply::Server(errors::TOO_LARGE), Some(key));
    }
    let total = consumed + vlen + 2;
    if buf.len() < total {
        return Parsed::Incomplete { need: Some(total) };
    }
    if &buf[total - 2..total] != b"\r\n" {
        // Meta commands always report errors, even in quiet mode.
        return error(ErrorReply::Client(errors::BAD_CHUNK), false, total);
    }
    done(
        Request::MetaSet {
            key,
            data: &buf[consumed..consumed + vlen],
            flags,
        },
        total,
    )
}

fn base64_decode(input: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(input)
        .ok()
        .filter(|k| !k.is_empty())
}

#[inline]
fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    memchr::memchr(needle, haystack)
}

#[cfg(test)]
mod watch_tests {
    use super::*;
    use crate::request::watch::{CONNEVENTS, FETCHERS, MUTATIONS, SYSEVENTS};

    fn watch(line: &[u8]) -> Result<u8, &'static [u8]> {
        match parse(line, &Limits::default()) {
            Parsed::Request {
                request: Request::Watch { flags },
                consumed,
            } => {
                assert_eq!(consumed, line.len());
                Ok(flags)
            }
            Parsed::Request {
                request: Request::Error { reply, .. },
                ..
            } => Err(reply.line()),
            other => panic!("{other:?}"),
        }
    }

    /// memcached 1.6.18 (`process_watch_command`): `watch` alone is
    /// fetchers; every kind it has is taken, those it writes nothing of
    /// too; a name it does not have, `deletions` (a later version's) among
    /// them, is `ERROR`.
    #[test]
    fn kinds_are_memcached_1_6_18s() {
        assert_eq!(watch(b"watch\r\n"), Ok(FETCHERS));
        assert_eq!(
            watch(b"watch fetchers mutations connevents\r\n"),
            Ok(FETCHERS | MUTATIONS | CONNEVENTS)
        );
        assert_eq!(watch(b"watch sysevents\r\n"), Ok(SYSEVENTS));
        for silent in ["rawcmds", "proxyreqs", "proxyevents", "proxyuser"] {
            assert_eq!(watch(format!("watch {silent}\r\n").as_bytes()), Ok(0));
            assert_eq!(
                watch(format!("watch {silent} fetchers\r\n").as_bytes()),
                Ok(FETCHERS)
            );
        }
        assert_eq!(watch(b"watch deletions\r\n"), Err(&b"ERROR"[..]));
        assert_eq!(watch(b"watch fetchers bogus\r\n"), Err(&b"ERROR"[..]));
    }
}
