//! Argument parsing as Redis does it (`string2ll`, `strtold`-like floats,
//! case-insensitive options) and Redis's common error texts.

pub const SYNTAX: &str = "ERR syntax error";
pub const NOT_INT: &str = "ERR value is not an integer or out of range";
pub const NOT_FLOAT: &str = "ERR value is not a valid float";
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
pub const OVERFLOW: &str = "ERR increment or decrement would overflow";

/// Redis's `string2ll`: an optional `-`, no `+`, no spaces, no leading
/// zeros, within i64.
pub fn int(b: &[u8]) -> Option<i64> {
    tiercache_proto::number::parse_i64_exact(b)
}

/// A float as INCRBYFLOAT and the expiry commands accept it: no spaces,
/// not NaN; None if it does not parse.
pub fn float(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.trim() != s {
        return None;
    }
    let v: f64 = match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => f64::INFINITY,
        "-inf" | "-infinity" => f64::NEG_INFINITY,
        l if l.contains("nan") => return None,
        _ => s.parse().ok()?,
    };
    Some(v)
}

/// A double as Redis prints a human-readable one (INCRBYFLOAT): shortest
/// round-trip digits, no exponent.
pub fn fmt_float(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    format!("{v}")
}

/// Whether `a` is the option `opt` (case-insensitive).
pub fn is(a: &[u8], opt: &str) -> bool {
    a.eq_ignore_ascii_case(opt.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ints_as_redis() {
        assert_eq!(int(b"12"), Some(12));
        assert_eq!(int(b"-12"), Some(-12));
        assert_eq!(int(b"0"), Some(0));
        for bad in [
            &b"012"[..],
            b"+1",
            b" 1",
            b"-0",
            b"",
            b"1.0",
            b"99999999999999999999",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"1x",
            b"-",
        ] {
            assert_eq!(int(bad), None, "{bad:?}");
        }
        assert_eq!(int(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(int(b"9223372036854775807"), Some(i64::MAX));
    }

    #[test]
    fn floats() {
        assert_eq!(float(b"1.5"), Some(1.5));
        assert_eq!(float(b" 1"), None);
        assert_eq!(float(b"nan"), None);
        assert_eq!(fmt_float(10.5 + 0.1), "10.6");
        assert_eq!(fmt_float(3.0), "3");
    }
}
