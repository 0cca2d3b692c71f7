//! Key dump replies: `lru_crawler metadump`'s item lines and `stats
//! cachedump`'s, byte for byte as memcached 1.6.18 writes them.

use super::num;

/// One item of `lru_crawler metadump`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetadumpItem<'a> {
    pub key: &'a [u8],
    /// Absolute unix seconds; None: never expires (`exp=-1`).
    pub exptime: Option<u32>,
    /// Last access, absolute unix seconds.
    pub last_access: u32,
    pub cas: u64,
    pub fetched: bool,
    pub class: u32,
    pub size: u64,
}

/// `key=<uri-encoded> exp=<-1|abs> la=<abs> cas=<n> fetch=<yes|no> cls=<n> size=<n>\n`
/// (memcached ends these lines with `\n` alone; the dump ends with `END\r\n`).
pub fn metadump_item(out: &mut Vec<u8>, it: &MetadumpItem<'_>) {
    out.extend_from_slice(b"key=");
    uri_encode(out, it.key);
    out.extend_from_slice(b" exp=");
    match it.exptime {
        Some(t) => num(out, u64::from(t)),
        None => out.extend_from_slice(b"-1"),
    }
    out.extend_from_slice(b" la=");
    num(out, u64::from(it.last_access));
    out.extend_from_slice(b" cas=");
    num(out, it.cas);
    out.extend_from_slice(if it.fetched {
        b" fetch=yes cls="
    } else {
        b" fetch=no cls="
    });
    num(out, u64::from(it.class));
    out.extend_from_slice(b" size=");
    num(out, it.size);
    out.push(b'\n');
}

/// memcached's `uriencode`: letters, digits and `-._~` stay, every other
/// byte is `%XX` (upper-case hex).
pub fn uri_encode(out: &mut Vec<u8>, key: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in key {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

/// One item of `stats cachedump`: `ITEM <key> [<bytes> b; <exptime> s]\r\n`
/// (exptime absolute, 0 = never).
pub fn cachedump_item(out: &mut Vec<u8>, key: &[u8], value_len: u32, exptime: u32) {
    out.extend_from_slice(b"ITEM ");
    out.extend_from_slice(key);
    out.extend_from_slice(b" [");
    num(out, u64::from(value_len));
    out.extend_from_slice(b" b; ");
    num(out, u64::from(exptime));
    out.extend_from_slice(b" s]\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_as_memcached_writes_them() {
        let mut out = Vec::new();
        let mut it = MetadumpItem {
            key: b"sp%ce",
            exptime: Some(1795517219),
            last_access: 1795517119,
            cas: 2,
            fetched: false,
            class: 1,
            size: 69,
        };
        metadump_item(&mut out, &it);
        it.key = b"foo";
        it.exptime = None;
        it.fetched = true;
        metadump_item(&mut out, &it);
        assert_eq!(
            out,
            b"key=sp%25ce exp=1795517219 la=1795517119 cas=2 fetch=no cls=1 size=69\n\
              key=foo exp=-1 la=1795517119 cas=2 fetch=yes cls=1 size=69\n"
        );
        out.clear();
        uri_encode(&mut out, b"a-b.c_d~e f/\xff");
        assert_eq!(out, b"a-b.c_d~e%20f%2F%FF");
        out.clear();
        cachedump_item(&mut out, b"sp%ce", 1, 1795517219);
        cachedump_item(&mut out, b"foo", 3, 0);
        assert_eq!(
            out,
            b"ITEM sp%ce [1 b; 1795517219 s]\r\nITEM foo [3 b; 0 s]\r\n"
        );
    }
}
