//! One `STAT name value` line, the unit every `stats` reply is written in,
//! and the [`Sink`] the lines of the general `stats` go to: the reply's
//! bytes, or `/metrics`, which takes each line's kind from it. Below the
//! counters and the admin modules that write stats lines.

use std::fmt::Display;
pub use tiercache_engine::stat::{Kind, Stat};

/// Where stats lines go: each with its name, its declared kind and its
/// value.
pub trait Sink {
    fn put(&mut self, name: &str, kind: Kind, v: &dyn Display);
}

/// A `stats` reply: `STAT {name} {v}\r\n`.
impl Sink for Vec<u8> {
    fn put(&mut self, name: &str, _kind: Kind, v: &dyn Display) {
        use std::io::Write;
        let _ = write!(self, "STAT {name} {v}\r\n");
    }
}

/// A line that is a level (a gauge), or not a number.
pub(crate) fn stat(out: &mut (impl Sink + ?Sized), name: &str, v: impl Display) {
    out.put(name, Kind::Gauge, &v);
}

/// A line that only counts up (a counter).
pub(crate) fn counter(out: &mut (impl Sink + ?Sized), name: &str, v: impl Display) {
    out.put(name, Kind::Counter, &v);
}

/// A line of a declared figure, under its declared name and kind.
pub(crate) fn declared(out: &mut (impl Sink + ?Sized), s: &Stat, v: u64) {
    out.put(s.name, s.kind, &v);
}
