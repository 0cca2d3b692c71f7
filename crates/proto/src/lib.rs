//! tiercache-proto: the memcached text protocol (classic and meta commands) as
//! pure functions on byte slices, shared by the server, the load generator and
//! the tests.
//!
//! - [`text::parse`] turns the front of a read buffer into a [`Request`]
//!   (borrowing from the buffer), reports how many bytes it used, or asks for
//!   more. It never panics on any input and never allocates for classic
//!   commands.
//! - [`response`] appends replies to an output buffer.
//! - [`client`] parses replies, for clients.
//!
//! The acceptance rules (tokenizing, numbers, error strings, which bad data
//! blocks are swallowed) follow memcached 1.6 byte for byte; the differential
//! test in `tests/interop` checks them against a real memcached.

pub mod client;
pub mod meta;
pub mod number;
pub mod request;
pub mod response;
pub mod text;

pub use meta::MetaFlags;
pub use request::{ErrorReply, Get, Request, Store, StoreMode, KEY_MAX_LENGTH};
pub use text::{parse, Limits, Parsed};
