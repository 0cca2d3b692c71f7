//! RESP reply encoding, RESP2 or RESP3 (after `HELLO 3`): where the two
//! differ (nulls, maps, doubles, booleans, sets) the connection's version
//! picks the form; everything else is the same bytes.

/// A connection's output buffer and protocol version.
#[derive(Debug, Default)]
pub struct Out {
    pub buf: Vec<u8>,
    pub resp3: bool,
}

impl Out {
    fn line(&mut self, tag: u8, body: &[u8]) {
        self.buf.push(tag);
        self.buf.extend_from_slice(body);
        self.buf.extend_from_slice(b"\r\n");
    }
    /// `tag`, the decimal `n`, `\r\n` (every bulk and integer reply:
    /// digits by hand, not through `fmt`).
    fn len_line(&mut self, tag: u8, n: i64) {
        self.buf.push(tag);
        self.buf
            .extend_from_slice(tiercache_proto::number::Digits::signed(n).as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }
    /// `+text` (a status: OK, PONG, QUEUED...).
    pub fn simple(&mut self, s: &str) {
        self.line(b'+', s.as_bytes());
    }
    /// `-text`: `text` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn err(&mut self, s: &str) {
        self.line(b'-', s.as_bytes());
    }
    pub fn int(&mut self, n: i64) {
        self.len_line(b':', n);
    }
    pub fn bulk(&mut self, b: &[u8]) {
        self.len_line(b'$', b.len() as i64);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }
    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }
    /// A bulk or null.
    pub fn opt_bulk(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }
    /// A missing value: `$-1` (RESP2), `_` (RESP3).
    pub fn null(&mut self) {
        match self.resp3 {
            true => self.buf.extend_from_slice(b"_\r\n"),
            false => self.buf.extend_from_slice(b"$-1\r\n"),
        }
    }
    /// A missing array: `*-1` (RESP2), `_` (RESP3).
    pub fn null_array(&mut self) {
        match self.resp3 {
            true => self.buf.extend_from_slice(b"_\r\n"),
            false => self.buf.extend_from_slice(b"*-1\r\n"),
        }
    }
    pub fn array(&mut self, n: usize) {
        self.len_line(b'*', n as i64);
    }
    /// A map of `n` pairs: `%n` (RESP3), an array of 2n (RESP2).
    pub fn map(&mut self, n: usize) {
        match self.resp3 {
            true => self.len_line(b'%', n as i64),
            false => self.len_line(b'*', 2 * n as i64),
        }
    }
    /// A set: `~n` (RESP3), an array (RESP2).
    pub fn set(&mut self, n: usize) {
        self.len_line(if self.resp3 { b'~' } else { b'*' }, n as i64);
    }
    /// A double: `,` (RESP3), a bulk string (RESP2), written as Redis
    /// writes a human-readable double.
    pub fn double(&mut self, s: &str) {
        match self.resp3 {
            true => self.line(b',', s.as_bytes()),
            false => self.bulk_str(s),
        }
    }
    /// Text a human reads (INFO, CLIENT INFO): a verbatim string `=` in
    /// RESP3, a bulk string in RESP2.
    pub fn verbatim(&mut self, s: &str) {
        match self.resp3 {
            true => {
                self.len_line(b'=', s.len() as i64 + 4);
                self.buf.extend_from_slice(b"txt:");
                self.buf.extend_from_slice(s.as_bytes());
                self.buf.extend_from_slice(b"\r\n");
            }
            false => self.bulk_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_and_lengths() {
        let mut o = Out::default();
        for n in [0, 7, -1, 10, 12345, i64::MAX, i64::MIN] {
            o.int(n);
        }
        o.bulk(b"");
        o.array(100);
        let want = format!(
            ":0\r\n:7\r\n:-1\r\n:10\r\n:12345\r\n:{}\r\n:{}\r\n$0\r\n\r\n*100\r\n",
            i64::MAX,
            i64::MIN
        );
        assert_eq!(String::from_utf8(o.buf).unwrap(), want);
    }

    #[test]
    fn versions_differ_where_redis_does() {
        let mut o = Out::default();
        o.null();
        o.map(1);
        o.double("1.5");
        assert_eq!(o.buf, b"$-1\r\n*2\r\n$3\r\n1.5\r\n");
        let mut o = Out {
            resp3: true,
            ..Out::default()
        };
        o.null();
        o.map(1);
        o.double("1.5");
        assert_eq!(o.buf, b"_\r\n%1\r\n,1.5\r\n");
    }
}
