//! Typed replies: every reply tiercache sends, byte for byte as memcached
//! 1.6.18 sends it, with one encoder each and a parser that reads them back.
//!
//! - [`Reply`] names each reply; [`Reply::encode`] appends it to an output
//!   buffer. The free functions ([`value`], [`value_header`], [`stat`],
//!   [`meta`], [`MetaWriter`], ...) are the same encoders for callers that
//!   hold the parts rather than a `Reply`, such as the get hot path.
//! - Encoders append whole replies (`\r\n` included) and never allocate: the
//!   only memory they touch is the output buffer's growth. A binary key is
//!   base64-encoded straight into the buffer.
//! - Meta return flags ([`MetaFlag`]) are written in the order given, which is
//!   the order of the request's flags; the caller leaves out what a request
//!   did not ask for. Whether to reply at all (`noreply`, meta `q`) is the
//!   caller's decision.
//! - [`parse_reply`] reads one reply from the front of a buffer, its data
//!   block included, or asks for more bytes. Only it allocates: a base64 key
//!   (`k... b`) is decoded into an owned copy, and a meta reply's flags are
//!   collected into a `Vec`.

mod dump;
mod parse;

pub use dump::{cachedump_item, metadump_item, uri_encode, MetadumpItem};
pub use parse::parse_reply;
pub(crate) use parse::{frame, malformed};

use crate::request::ErrorReply;
use base64::Engine as _;
use std::borrow::{Borrow, Cow};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// The status of a meta reply that carries no value (`VA` is
/// [`Reply::MetaValue`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaCode {
    /// `HD`: success, no value (mg without `v`, ms stored, md deleted, ma).
    Hd,
    /// `EN`: mg or me miss.
    En,
    /// `NS`: ms not stored (add of an existing key, append to a missing one).
    Ns,
    /// `EX`: CAS mismatch (ms, md, ma).
    Ex,
    /// `NF`: not found (ms with CAS, md, ma).
    Nf,
    /// `MN`: the answer to `mn`, the end of a meta pipeline.
    Mn,
}

impl MetaCode {
    /// All codes, for parsing and tests.
    pub const ALL: [MetaCode; 6] = [
        MetaCode::Hd,
        MetaCode::En,
        MetaCode::Ns,
        MetaCode::Ex,
        MetaCode::Nf,
        MetaCode::Mn,
    ];

    /// The two letters on the wire.
    pub fn as_bytes(self) -> &'static [u8; 2] {
        match self {
            MetaCode::Hd => b"HD",
            MetaCode::En => b"EN",
            MetaCode::Ns => b"NS",
            MetaCode::Ex => b"EX",
            MetaCode::Nf => b"NF",
            MetaCode::Mn => b"MN",
        }
    }

    /// The code spelled by `b`, if any.
    pub fn from_bytes(b: &[u8]) -> Option<MetaCode> {
        MetaCode::ALL.into_iter().find(|c| &c.as_bytes()[..] == b)
    }
}

/// One return flag of a meta reply, written as ` <letter><value>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MetaFlag<'a> {
    /// `c<cas>`.
    Cas(u64),
    /// `f<client flags>`.
    Flags(u32),
    /// `s<value size>`.
    Size(u64),
    /// `t<seconds left>`, or `t-1` (`None`) for an item that never expires.
    Ttl(Option<u64>),
    /// `l<seconds since last access>`.
    LastAccess(u64),
    /// `h0` or `h1`: whether the item was fetched before.
    Hit(bool),
    /// `O<token>`: the request's opaque token echoed (without the `O`).
    Opaque(&'a [u8]),
    /// `k<key>`; a binary key is written base64-encoded followed by ` b`.
    /// `key` is always the raw key; the parser decodes into an owned copy.
    Key { key: Cow<'a, [u8]>, binary: bool },
    /// `W`: this client won the right to recache.
    Win,
    /// `X`: the item is stale.
    Stale,
    /// `Z`: a win token was already sent for this item.
    TokenSent,
}

impl<'a> MetaFlag<'a> {
    /// The `k` flag for a borrowed key.
    pub fn key(key: &'a [u8], binary: bool) -> MetaFlag<'a> {
        MetaFlag::Key {
            key: Cow::Borrowed(key),
            binary,
        }
    }

    /// The flag's letter.
    pub fn letter(&self) -> u8 {
        match self {
            MetaFlag::Cas(_) => b'c',
            MetaFlag::Flags(_) => b'f',
            MetaFlag::Size(_) => b's',
            MetaFlag::Ttl(_) => b't',
            MetaFlag::LastAccess(_) => b'l',
            MetaFlag::Hit(_) => b'h',
            MetaFlag::Opaque(_) => b'O',
            MetaFlag::Key { .. } => b'k',
            MetaFlag::Win => b'W',
            MetaFlag::Stale => b'X',
            MetaFlag::TokenSent => b'Z',
        }
    }

    /// Appends ` <letter><value>` (and ` b` after a binary key).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(b' ');
        out.push(self.letter());
        match self {
            MetaFlag::Cas(n) | MetaFlag::Size(n) | MetaFlag::LastAccess(n) => num(out, *n),
            MetaFlag::Flags(n) => num(out, u64::from(*n)),
            MetaFlag::Ttl(None) => out.extend_from_slice(b"-1"),
            MetaFlag::Ttl(Some(n)) => num(out, *n),
            MetaFlag::Hit(h) => out.push(if *h { b'1' } else { b'0' }),
            MetaFlag::Opaque(t) => out.extend_from_slice(t),
            MetaFlag::Key { key, binary } => {
                if *binary {
                    base64_into(out, key);
                    out.extend_from_slice(b" b");
                } else {
                    out.extend_from_slice(key);
                }
            }
            MetaFlag::Win | MetaFlag::Stale | MetaFlag::TokenSent => {}
        }
    }
}

/// The return flags of a typed meta reply: borrowed (a caller's array) or
/// owned (parsed). Like a `Cow`, but covariant in `'a`, so that replies
/// borrowing different buffers compare. Equality, hashing and `Deref` see
/// only the flags.
#[derive(Debug, Clone)]
pub enum FlagList<'a> {
    /// Flags in the caller's slice.
    Borrowed(&'a [MetaFlag<'a>]),
    /// Flags in a vector (the parser's).
    Owned(Vec<MetaFlag<'a>>),
}

impl<'a> std::ops::Deref for FlagList<'a> {
    type Target = [MetaFlag<'a>];
    fn deref(&self) -> &[MetaFlag<'a>] {
        match self {
            FlagList::Borrowed(f) => f,
            FlagList::Owned(f) => f,
        }
    }
}

impl PartialEq for FlagList<'_> {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl Eq for FlagList<'_> {}

impl std::hash::Hash for FlagList<'_> {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self[..].hash(h);
    }
}

impl<'a> From<&'a [MetaFlag<'a>]> for FlagList<'a> {
    fn from(f: &'a [MetaFlag<'a>]) -> Self {
        FlagList::Borrowed(f)
    }
}

impl<'a> From<Vec<MetaFlag<'a>>> for FlagList<'a> {
    fn from(f: Vec<MetaFlag<'a>>) -> Self {
        FlagList::Owned(f)
    }
}

/// The fields of an `me` (meta debug) hit:
/// `ME <key> exp=<exp> la=<la> cas=<cas> fetch=<yes|no> cls=<cls> size=<size>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MetaDebug<'a> {
    /// The raw key. A binary key is written base64-encoded (without ` b`), so
    /// the parser, which cannot tell, reads every key back as text.
    pub key: &'a [u8],
    /// Whether `key` is binary.
    pub binary: bool,
    /// `exp=`: seconds relative to now (memcached prints now minus the
    /// expiry time), `-1` for never.
    pub exp: i64,
    /// `la=`: seconds since the last access.
    pub la: u64,
    /// `cas=`.
    pub cas: u64,
    /// `fetch=yes|no`: fetched since it was stored.
    pub fetch: bool,
    /// `cls=`: the slab class (tiercache always says 1).
    pub cls: u32,
    /// `size=`: the item's total size.
    pub size: u64,
}

/// Every reply the server sends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Reply<'a> {
    /// `VALUE <key> <flags> <bytes>[ <cas>]` and the data block: one hit of
    /// a classic retrieval (`END` follows the last).
    Value {
        key: &'a [u8],
        flags: u32,
        /// Present for `gets` and `gats`.
        cas: Option<u64>,
        data: &'a [u8],
    },
    /// `END`.
    End,
    /// `STORED`.
    Stored,
    /// `NOT_STORED`.
    NotStored,
    /// `EXISTS`.
    Exists,
    /// `NOT_FOUND`.
    NotFound,
    /// `DELETED`.
    Deleted,
    /// `TOUCHED`.
    Touched,
    /// `OK`.
    Ok,
    /// `RESET` (`stats reset`).
    Reset,
    /// `ERROR`: unknown command.
    Error,
    /// `ERROR: shutdown not enabled`.
    ShutdownDisabled,
    /// `ERROR Too many open connections`, sent before closing.
    TooManyConnections,
    /// `MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m`.
    MemlimitTooSmall,
    /// `MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust`.
    MemlimitAdjustFailed,
    /// The new value after `incr`/`decr`.
    Number(u64),
    /// `VERSION <version>`.
    Version(&'a [u8]),
    /// `CLIENT_ERROR <message>`.
    ClientError(&'a [u8]),
    /// `SERVER_ERROR <message>`.
    ServerError(&'a [u8]),
    /// `STAT <name> <value>`.
    Stat { name: &'a [u8], value: &'a [u8] },
    /// `PREFIX <prefix> get <n> hit <n> set <n> del <n>` (`stats detail dump`).
    Prefix {
        prefix: &'a [u8],
        get: u64,
        hit: u64,
        set: u64,
        del: u64,
    },
    /// `HD`, `EN`, `NS`, `EX`, `NF` or `MN`, then the return flags.
    Meta { code: MetaCode, flags: FlagList<'a> },
    /// `VA <bytes>`, the return flags, then the data block.
    MetaValue { flags: FlagList<'a>, data: &'a [u8] },
    /// `ME ...`: an `me` hit.
    MetaDebug(MetaDebug<'a>),
}

/// Every reply that is one fixed line ([`Reply::fixed_line`]), for parsers
/// and tests.
pub fn fixed_replies<'a>() -> [Reply<'a>; 14] {
    [
        Reply::End,
        Reply::Stored,
        Reply::NotStored,
        Reply::Exists,
        Reply::NotFound,
        Reply::Deleted,
        Reply::Touched,
        Reply::Ok,
        Reply::Reset,
        Reply::Error,
        Reply::ShutdownDisabled,
        Reply::TooManyConnections,
        Reply::MemlimitTooSmall,
        Reply::MemlimitAdjustFailed,
    ]
}

impl<'a> Reply<'a> {
    /// A meta reply with borrowed flags.
    pub fn meta(code: MetaCode, flags: &'a [MetaFlag<'a>]) -> Reply<'a> {
        Reply::Meta {
            code,
            flags: FlagList::Borrowed(flags),
        }
    }

    /// The line of a reply that is always the same, without `\r\n`.
    pub fn fixed_line(&self) -> Option<&'static [u8]> {
        Some(match self {
            Reply::End => b"END",
            Reply::Stored => b"STORED",
            Reply::NotStored => b"NOT_STORED",
            Reply::Exists => b"EXISTS",
            Reply::NotFound => b"NOT_FOUND",
            Reply::Deleted => b"DELETED",
            Reply::Touched => b"TOUCHED",
            Reply::Ok => b"OK",
            Reply::Reset => b"RESET",
            Reply::Error => b"ERROR",
            Reply::ShutdownDisabled => b"ERROR: shutdown not enabled",
            Reply::TooManyConnections => b"ERROR Too many open connections",
            Reply::MemlimitTooSmall => b"MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
            Reply::MemlimitAdjustFailed => {
                b"MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust"
            }
            _ => return None,
        })
    }

    /// Appends the whole reply, `\r\n` and data block included.
    pub fn encode(&self, out: &mut Vec<u8>) {
        if let Some(l) = self.fixed_line() {
            return line(out, l);
        }
        match self {
            Reply::Value {
                key,
                flags,
                cas,
                data,
            } => value(out, key, *flags, *cas, data),
            Reply::Number(n) => number(out, *n),
            Reply::Version(v) => version(out, v),
            Reply::ClientError(m) => client_error(out, m),
            Reply::ServerError(m) => server_error(out, m),
            Reply::Stat { name, value } => stat(out, name, value),
            Reply::Prefix {
                prefix: p,
                get,
                hit,
                set,
                del,
            } => prefix(out, p, *get, *hit, *set, *del),
            Reply::Meta { code, flags } => meta(out, *code, flags.iter()),
            Reply::MetaValue { flags, data } => meta_value(out, flags.iter(), data),
            Reply::MetaDebug(d) => meta_debug(out, d),
            _ => unreachable!("fixed lines are written above"),
        }
    }
}

impl From<ErrorReply> for Reply<'static> {
    /// The typed form of a parser error line.
    fn from(e: ErrorReply) -> Reply<'static> {
        let l = e.line();
        match e {
            ErrorReply::Error => Reply::Error,
            ErrorReply::Client(_) => match l.strip_prefix(b"CLIENT_ERROR ") {
                Some(m) => Reply::ClientError(m),
                None => Reply::ClientError(l),
            },
            ErrorReply::Server(_) => match l.strip_prefix(b"SERVER_ERROR ") {
                Some(m) => Reply::ServerError(m),
                None => Reply::ServerError(l),
            },
        }
    }
}

#[inline]
fn num(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Base64 (standard, padded) of `bytes`, written into `out` without a
/// temporary buffer.
fn base64_into(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    let n = base64::encoded_len(bytes.len(), true).expect("a key's base64 length fits");
    out.resize(start + n, 0);
    let written = B64
        .encode_slice(bytes, &mut out[start..])
        .expect("sized above");
    out.truncate(start + written);
}

/// Appends `line\r\n`.
#[inline]
pub fn line(out: &mut Vec<u8>, line: &[u8]) {
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
}

/// Appends a data block: the bytes and `\r\n`.
#[inline]
pub fn data_block(out: &mut Vec<u8>, data: &[u8]) {
    line(out, data);
}

/// Appends the line of a classic hit, `VALUE <key> <flags> <len>[ <cas>]\r\n`;
/// the caller appends the data block ([`data_block`]).
#[inline]
pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    num(out, u64::from(flags));
    out.push(b' ');
    num(out, len as u64);
    if let Some(cas) = cas {
        out.push(b' ');
        num(out, cas);
    }
    out.extend_from_slice(b"\r\n");
}

/// [`Reply::Value`]: the `VALUE` line and the data block.
#[inline]
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, cas: Option<u64>, data: &[u8]) {
    value_header(out, key, flags, data.len(), cas);
    data_block(out, data);
}

/// [`Reply::Number`]: `<n>\r\n`, the answer to `incr`/`decr`.
#[inline]
pub fn number(out: &mut Vec<u8>, n: u64) {
    num(out, n);
    out.extend_from_slice(b"\r\n");
}

/// [`Reply::Version`]: `VERSION <v>\r\n`.
pub fn version(out: &mut Vec<u8>, v: &[u8]) {
    out.extend_from_slice(b"VERSION ");
    line(out, v);
}

/// [`Reply::ClientError`]: `CLIENT_ERROR <message>\r\n`.
pub fn client_error(out: &mut Vec<u8>, message: &[u8]) {
    out.extend_from_slice(b"CLIENT_ERROR ");
    line(out, message);
}

/// [`Reply::ServerError`]: `SERVER_ERROR <message>\r\n`.
pub fn server_error(out: &mut Vec<u8>, message: &[u8]) {
    out.extend_from_slice(b"SERVER_ERROR ");
    line(out, message);
}

/// [`Reply::Stat`]: `STAT <name> <value>\r\n`.
pub fn stat(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name);
    out.push(b' ');
    line(out, value);
}

/// [`Reply::Stat`] with a number, formatted without a temporary buffer.
pub fn stat_u64(out: &mut Vec<u8>, name: &[u8], value: u64) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name);
    out.push(b' ');
    number(out, value);
}

/// [`Reply::Prefix`]: `PREFIX <prefix> get <n> hit <n> set <n> del <n>\r\n`.
pub fn prefix(out: &mut Vec<u8>, prefix: &[u8], get: u64, hit: u64, set: u64, del: u64) {
    out.extend_from_slice(b"PREFIX ");
    out.extend_from_slice(prefix);
    for (word, n) in [
        (&b" get "[..], get),
        (b" hit ", hit),
        (b" set ", set),
        (b" del ", del),
    ] {
        out.extend_from_slice(word);
        num(out, n);
    }
    out.extend_from_slice(b"\r\n");
}

/// [`Reply::Meta`]: the code, the flags in the order given, `\r\n`.
pub fn meta<'f, I>(out: &mut Vec<u8>, code: MetaCode, flags: I)
where
    I: IntoIterator,
    I::Item: Borrow<MetaFlag<'f>>,
{
    let mut w = MetaWriter::new(out, code);
    for f in flags {
        w.flag(f.borrow());
    }
    w.finish();
}

/// [`Reply::MetaValue`]: `VA <len>`, the flags in the order given, `\r\n`,
/// then the data block.
pub fn meta_value<'f, I>(out: &mut Vec<u8>, flags: I, data: &[u8])
where
    I: IntoIterator,
    I::Item: Borrow<MetaFlag<'f>>,
{
    let mut w = MetaWriter::value(out, data.len());
    for f in flags {
        w.flag(f.borrow());
    }
    w.finish_value(data);
}

/// [`Reply::MetaDebug`]: `ME <key> exp=.. la=.. cas=.. fetch=.. cls=.. size=..\r\n`.
pub fn meta_debug(out: &mut Vec<u8>, d: &MetaDebug<'_>) {
    out.extend_from_slice(b"ME ");
    if d.binary {
        base64_into(out, d.key);
    } else {
        out.extend_from_slice(d.key);
    }
    out.extend_from_slice(b" exp=");
    out.extend_from_slice(itoa::Buffer::new().format(d.exp).as_bytes());
    out.extend_from_slice(b" la=");
    num(out, d.la);
    out.extend_from_slice(b" cas=");
    num(out, d.cas);
    out.extend_from_slice(if d.fetch {
        &b" fetch=yes"[..]
    } else {
        b" fetch=no"
    });
    out.extend_from_slice(b" cls=");
    num(out, u64::from(d.cls));
    out.extend_from_slice(b" size=");
    num(out, d.size);
    out.extend_from_slice(b"\r\n");
}

/// Writes a meta reply straight into the output buffer, one flag at a time,
/// for callers that decide the flags while walking the request's (mg, ma).
///
/// ```
/// use tiercache_proto::reply::{MetaCode, MetaFlag, MetaWriter};
/// let mut out = Vec::new();
/// let mut w = MetaWriter::value(&mut out, 2);
/// w.flag(&MetaFlag::Flags(5)).flag(&MetaFlag::Opaque(b"7"));
/// w.finish_value(b"hi");
/// MetaWriter::new(&mut out, MetaCode::En).finish();
/// assert_eq!(out, b"VA 2 f5 O7\r\nhi\r\nEN\r\n");
/// ```
#[must_use = "a meta reply is complete only after finish or finish_value"]
pub struct MetaWriter<'o> {
    out: &'o mut Vec<u8>,
    /// The length announced by `VA`, for the check in `finish_value`.
    value_len: Option<usize>,
}

impl<'o> MetaWriter<'o> {
    /// Starts a reply without a value: writes the code.
    pub fn new(out: &'o mut Vec<u8>, code: MetaCode) -> MetaWriter<'o> {
        out.extend_from_slice(code.as_bytes());
        MetaWriter {
            out,
            value_len: None,
        }
    }

    /// Starts a `VA` reply: writes `VA <len>`; end it with
    /// [`MetaWriter::finish_value`] (or [`MetaWriter::finish_header`] and a
    /// [`data_block`] of `len` bytes).
    pub fn value(out: &'o mut Vec<u8>, len: usize) -> MetaWriter<'o> {
        out.extend_from_slice(b"VA ");
        num(out, len as u64);
        MetaWriter {
            out,
            value_len: Some(len),
        }
    }

    /// Appends one return flag.
    pub fn flag(&mut self, f: &MetaFlag<'_>) -> &mut Self {
        f.encode(self.out);
        self
    }

    /// Ends a reply started with [`MetaWriter::new`].
    pub fn finish(self) {
        debug_assert!(self.value_len.is_none(), "a VA reply needs its value");
        self.out.extend_from_slice(b"\r\n");
    }

    /// Ends the line of a `VA` reply; the caller appends the data block.
    pub fn finish_header(self) {
        debug_assert!(self.value_len.is_some(), "not a VA reply");
        self.out.extend_from_slice(b"\r\n");
    }

    /// Ends a `VA` reply with its data block.
    pub fn finish_value(self, data: &[u8]) {
        debug_assert_eq!(self.value_len, Some(data.len()), "VA length");
        self.out.extend_from_slice(b"\r\n");
        data_block(self.out, data);
    }
}
