//! One `STAT name value` line, the unit every `stats` reply is written in.
//! Below the counters and the admin modules that write stats lines.

/// Appends `STAT {name} {v}\r\n`.
pub(crate) fn stat(out: &mut Vec<u8>, name: &str, v: impl std::fmt::Display) {
    use std::io::Write;
    let _ = write!(out, "STAT {name} {v}\r\n");
}
