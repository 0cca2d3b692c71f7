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
}
