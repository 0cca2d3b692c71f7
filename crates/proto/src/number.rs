//! Number parsing with the exact acceptance rules memcached uses (`safe_strto*`
//! over C's `strtol` family), so that odd inputs such as `+5`, `007` or a
//! trailing tab are accepted or refused exactly as memcached does.

/// C `isspace` in the "C" locale.
#[inline]
pub fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Parses like `strtoull`/`strtoll`: optional leading whitespace, optional sign,
/// decimal digits. Returns (negative, magnitude, overflowed) or None when no
/// digits were found or the rest of the token is not whitespace-led.
fn scan(s: &[u8]) -> Option<(bool, u64, bool)> {
    let mut i = 0;
    while i < s.len() && is_c_space(s[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < s.len() && (s[i] == b'+' || s[i] == b'-') {
        neg = s[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < s.len() && s[i].is_ascii_digit() {
        let d = u64::from(s[i] - b'0');
        match v.checked_mul(10).and_then(|x| x.checked_add(d)) {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        return None;
    }
    // memcached accepts the number when the next character is a space or the end.
    if i < s.len() && !is_c_space(s[i]) {
        return None;
    }
    Some((neg, v, overflow))
}

/// `safe_strtoull`: unsigned 64-bit; a value that only parses through a minus
/// sign wrapping around is refused.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    let (neg, v, overflow) = scan(s)?;
    if overflow {
        return None;
    }
    if neg {
        // strtoull negates; memcached refuses results that look negative as signed.
        let r = v.wrapping_neg();
        if (r as i64) < 0 {
            return None;
        }
        return Some(r);
    }
    Some(v)
}

/// `safe_strtoul` into 32 bits (client flags, verbosity): memcached parses
/// 64 bits and truncates, so `4294967296` is accepted as 0.
pub fn parse_u32(s: &[u8]) -> Option<u32> {
    parse_u64(s).map(|v| v as u32)
}

/// `safe_strtol` into 32 bits (exptime, lengths): memcached parses a 64-bit
/// long and truncates it, so `2147483648` becomes negative.
pub fn parse_i32(s: &[u8]) -> Option<i32> {
    let (neg, v, overflow) = scan(s)?;
    if overflow {
        return None;
    }
    let signed: i64 = if neg {
        if v > (i64::MAX as u64) + 1 {
            return None;
        }
        (v as i64).wrapping_neg()
    } else {
        i64::try_from(v).ok()?
    };
    Some(signed as i32)
}

/// Redis's `string2ll`: a signed 64-bit integer written exactly as Redis
/// writes one (no sign but `-`, no leading zeros, no spaces, `0` alone),
/// so that INCR reads what it would print.
pub fn parse_i64_exact(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    if b == b"0" {
        return Some(0);
    }
    let (neg, digits) = match b.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, b),
    };
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    // Accumulated negative for `-`, so that i64::MIN fits.
    let mut n: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        n = n.checked_mul(10)?;
        n = if neg {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

/// A number's decimal digits in a buffer of their own (no allocation).
#[derive(Clone, Copy)]
pub struct Digits {
    buf: [u8; 21],
    start: u8,
}

impl Digits {
    /// `v` in decimal.
    pub fn unsigned(v: u64) -> Digits {
        Digits::of(false, v)
    }

    /// `v` in decimal, `-` before a negative one.
    pub fn signed(v: i64) -> Digits {
        Digits::of(v < 0, v.unsigned_abs())
    }

    fn of(neg: bool, mut v: u64) -> Digits {
        let mut buf = [0u8; 21];
        let mut i = buf.len();
        loop {
            i -= 1;
            buf[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        if neg {
            i -= 1;
            buf[i] = b'-';
        }
        Digits {
            buf,
            start: i as u8,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start as usize..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_rules() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"+5"), Some(5));
        assert_eq!(parse_u64(b"007"), Some(7));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"12abc"), None);
        assert_eq!(parse_u64(b"12\t"), Some(12));
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"abc"), None);
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), Some(0));
    }

    #[test]
    fn signed_rules() {
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"2147483647"), Some(i32::MAX));
        assert_eq!(parse_i32(b"2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"4294967296"), Some(0));
        assert_eq!(parse_i32(b"9223372036854775808"), None);
        assert_eq!(parse_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"x"), None);
    }

    #[test]
    fn redis_integers_and_digits() {
        assert_eq!(parse_i64_exact(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64_exact(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64_exact(b"9223372036854775808"), None);
        for bad in [&b""[..], b"-", b"-0", b"007", b"+5", b" 5", b"5 ", b"1e3"] {
            assert_eq!(parse_i64_exact(bad), None, "{:?}", bad);
        }
        for v in [0, 7, -7, 10, -100, i64::MAX, i64::MIN] {
            assert_eq!(Digits::signed(v).as_bytes(), v.to_string().as_bytes());
        }
        assert_eq!(
            Digits::unsigned(u64::MAX).as_bytes(),
            u64::MAX.to_string().as_bytes()
        );
        assert_eq!(Digits::unsigned(0).as_bytes(), b"0");
    }
}
