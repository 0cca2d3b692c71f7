//! Decoded requests: what a client asked for, independent of the wire format.
//! Slices borrow from the connection's read buffer; nothing is copied.

pub use crate::error::{errors, ErrorReply};
use crate::meta::MetaFlags;
use std::borrow::Cow;

/// The longest key memcached accepts.
pub const KEY_MAX_LENGTH: usize = 250;

/// Which classic storage command a data block belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    /// `cas`: store only if the item's CAS still equals the given one.
    Cas,
}

/// A storage request with its data block (without the trailing `\r\n`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store<'a> {
    pub mode: StoreMode,
    pub key: &'a [u8],
    pub flags: u32,
    /// Raw exptime as sent (relative seconds, absolute unix time or negative).
    pub exptime: i32,
    pub data: &'a [u8],
    pub cas: u64,
    pub noreply: bool,
}

/// Retrieval: `get`, `gets`, `gat`, `gats`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Get<'a> {
    /// Space-separated keys, already checked for length; iterate with [`Get::keys`].
    pub keys: &'a [u8],
    pub return_cas: bool,
    /// For `gat`/`gats`: the new exptime.
    pub touch: Option<i32>,
}

impl<'a> Get<'a> {
    /// The requested keys in order.
    pub fn keys(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.keys.split(|&b| b == b' ').filter(|k| !k.is_empty())
    }
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    Get(Get<'a>),
    Store(Store<'a>),
    Delete {
        key: &'a [u8],
        noreply: bool,
    },
    Arith {
        incr: bool,
        key: &'a [u8],
        delta: u64,
        noreply: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: i32,
        noreply: bool,
    },
    FlushAll {
        delay: i32,
        noreply: bool,
    },
    Version,
    Verbosity {
        /// The level asked for (memcached: 0 quiet, 1 `-v`, 2 `-vv`, ...).
        level: u32,
        noreply: bool,
    },
    Quit,
    /// `stats [args...]`: the argument words, possibly empty.
    Stats(&'a [u8]),
    Shutdown {
        graceful: bool,
    },
    CacheMemlimit {
        megabytes: u32,
        noreply: bool,
    },
    MetaGet {
        key: Cow<'a, [u8]>,
        flags: MetaFlags<'a>,
    },
    MetaSet {
        key: Cow<'a, [u8]>,
        data: &'a [u8],
        flags: MetaFlags<'a>,
    },
    MetaDelete {
        key: Cow<'a, [u8]>,
        flags: MetaFlags<'a>,
    },
    MetaArith {
        key: Cow<'a, [u8]>,
        flags: MetaFlags<'a>,
    },
    MetaNoop,
    /// `lru_crawler ...` (see [`crate::crawler`]).
    LruCrawler(crate::crawler::Crawler),
    MetaDebug {
        key: Cow<'a, [u8]>,
    },
    /// `watch [fetchers|mutations ...]`: the connection becomes a
    /// log stream of the [`watch`] kinds in `flags` (fetchers when none is
    /// named, as memcached 1.6.18; 0 when it names only kinds that make no
    /// lines).
    Watch {
        flags: u8,
    },
    /// `refresh_certs`: read the TLS certificate and key files again.
    RefreshCerts {
        noreply: bool,
    },
    /// A retrieval with a key over 250 bytes: memcached answers
    /// `CLIENT_ERROR bad command line format` and drops the replies of the
    /// connection that are not yet due (see [`Request::drops_pending`]).
    GetKeyTooLong,
    /// An unknown command whose last word starts with `HTTP/` (`GET /
    /// HTTP/1.0`): memcached hangs up at once, without a reply, dropping
    /// the replies that are not yet due.
    HttpHangup,
    /// A storage request whose data block is refused (too large): the data is
    /// swallowed, and an existing item under the key is removed so that a
    /// stale value does not outlive a failed overwrite, as memcached does.
    StoreRefused {
        key: Cow<'a, [u8]>,
        /// From a classic storage command (not `ms`): `stats detail`
        /// counts it as a set, as memcached does.
        classic: bool,
        remove_existing: bool,
        reply: ErrorReply,
        noreply: bool,
    },
    /// The request is answered with a fixed error line; nothing else happens.
    /// `noreply` suppresses it, as memcached's `out_string` does.
    Error {
        reply: ErrorReply,
        noreply: bool,
    },
}

impl Request<'_> {
    /// Whether memcached writes out every reply so far once this request
    /// has run: it does after a classic retrieval (`get`, `gets`, `gat`,
    /// `gats`, `bget`) and after `mn`, and whenever its input holds no
    /// complete request. Replies not yet written out at that point are
    /// "not yet due".
    pub fn makes_replies_due(&self) -> bool {
        matches!(self, Request::Get(_) | Request::MetaNoop)
    }

    /// Whether memcached drops the connection's replies that are not yet
    /// due (see [`Request::makes_replies_due`]) before it handles this
    /// request; replies already due are written all the same.
    pub fn drops_pending(&self) -> bool {
        matches!(self, Request::GetKeyTooLong | Request::HttpHangup)
    }
}

/// The kinds of log lines a `watch` asks for, as bits.
pub mod watch {
    /// `item_get` lines: every key a command looked up.
    pub const FETCHERS: u8 = 1;
    /// `item_store` lines: every store, with its outcome.
    pub const MUTATIONS: u8 = 1 << 1;
    /// `eviction` lines: every item evicted from RAM for room.
    pub const EVICTIONS: u8 = 1 << 2;
    /// `conn_new` and `conn_close` lines: every client connection.
    pub const CONNEVENTS: u8 = 1 << 3;
    /// memcached's system events: here `lru_crawler` lines, one per expiry
    /// sweep.
    pub const SYSEVENTS: u8 = 1 << 4;

    /// The bit of a kind's name; None for a name memcached 1.6.18 does not
    /// know (`ERROR`, `deletions` among them: it came in a later version),
    /// Some(0) for a kind memcached 1.6.18 accepts and never writes a line
    /// of: `rawcmds` (its only call site went before memcached's first
    /// release with a logger) and the proxy's three (a build without the
    /// proxy, as Debian's, accepts them and logs nothing).
    pub fn kind(word: &[u8]) -> Option<u8> {
        match word {
            b"fetchers" => Some(FETCHERS),
            b"mutations" => Some(MUTATIONS),
            b"evictions" => Some(EVICTIONS),
            b"connevents" => Some(CONNEVENTS),
            b"sysevents" => Some(SYSEVENTS),
            b"rawcmds" | b"proxyreqs" | b"proxyevents" | b"proxyuser" => Some(0),
            _ => None,
        }
    }
}
