//! A multiget's keys taken a chunk at a time (the connection answers a long
//! multiget from the first key not answered yet), and the test for a
//! multiget line that is too long.

use tiercache_proto::Get;

/// The `n` keys of a multiget from offset `at` of its keys, the offset
/// they start at, and the offset of the key after them when there is one.
pub(super) fn get_chunk<'a>(g: &Get<'a>, at: usize, n: usize) -> (Get<'a>, usize, Option<usize>) {
    let keys = g.keys;
    if n == usize::MAX {
        let sub = Get {
            keys: &keys[at..],
            ..g.clone()
        };
        return (sub, at, None);
    }
    let skip = |mut i: usize, space: bool| {
        while i < keys.len() && (keys[i] == b' ') == space {
            i += 1;
        }
        i
    };
    let start = skip(at, true);
    let mut end = start;
    for _ in 0..n {
        if end == keys.len() {
            break;
        }
        end = skip(skip(end, false), true);
    }
    let sub = Get {
        keys: &keys[start..end],
        return_cas: g.return_cas,
        touch: g.touch,
    };
    (sub, start, (end < keys.len()).then_some(end))
}

/// Whether a line is a multiget (`get ` or `gets ` after leading spaces).
pub(super) fn is_get_line(buf: &[u8]) -> bool {
    let lead = buf.iter().take_while(|&&b| b == b' ').count();
    buf[lead..].starts_with(b"get ") || buf[lead..].starts_with(b"gets ")
}
