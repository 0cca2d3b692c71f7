//! tiercache-proto: the memcached text protocol (classic and meta commands) as
//! pure functions on byte slices, shared by the server, the load generator and
//! the tests.
//!
//! - [`text::parse`] turns the front of a read buffer into a [`Request`]
//!   (borrowing from the buffer), reports how many bytes it used, or asks for
//!   more. It never panics on any input and never allocates for classic
//!   commands.
//! - [`reply`] holds every reply the server sends as a typed [`Reply`], one
//!   allocation-free encoder each, and [`reply::parse_reply`], which reads
//!   them back.
//! - [`response`] is the older set of small reply helpers, kept for the
//!   server until it moves to [`reply`]; its functions are written with the
//!   same encoders.
//! - [`client`] parses replies loosely (meta flags as raw words), for the
//!   load generator.
//!
//! The acceptance rules (tokenizing, numbers, error strings, which bad data
//! blocks are swallowed) follow memcached 1.6 byte for byte; the differential
//! test in `tests/interop` checks them against a real memcached.

pub mod binary;
pub mod client;
pub mod crawler;
pub mod error;
pub mod meta;
pub mod number;
pub mod reply;
pub mod request;
pub mod response;
pub mod text;

pub use meta::MetaFlags;
pub use reply::{FlagList, MetaCode, MetaFlag, MetaWriter, Reply};
pub use request::{ErrorReply, Get, Request, Store, StoreMode, KEY_MAX_LENGTH};
pub use text::{parse, Limits, Parsed};
