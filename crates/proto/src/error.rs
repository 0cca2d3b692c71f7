//! The error lines memcached sends, byte for byte: what every parser
//! (requests, `lru_crawler`) answers bad input with.

/// Error lines memcached sends, byte for byte (without `\r\n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorReply {
    /// `ERROR`: unknown command or wrong number of tokens.
    Error,
    Client(&'static str),
    Server(&'static str),
}

impl ErrorReply {
    /// The full line without the terminator.
    pub fn line(&self) -> &'static [u8] {
        match self {
            ErrorReply::Error => b"ERROR",
            ErrorReply::Client(s) | ErrorReply::Server(s) => s.as_bytes(),
        }
    }
}

/// Common error strings.
pub mod errors {
    pub const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";
    pub const BAD_CHUNK: &str = "CLIENT_ERROR bad data chunk";
    pub const TOO_LARGE: &str = "SERVER_ERROR object too large for cache";
    pub const OUT_OF_MEMORY: &str = "SERVER_ERROR out of memory storing object";
    pub const INVALID_EXPTIME: &str = "CLIENT_ERROR invalid exptime argument";
    pub const INVALID_DELTA: &str = "CLIENT_ERROR invalid numeric delta argument";
    pub const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";
    pub const DELETE_USAGE: &str =
        "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
}
