//! Hash commands over one item per hash. The item's memcached flags are
//! [`HASH_FLAGS`](crate::protocol::resp::db::HASH_FLAGS); its value is
//! [`MAGIC`] then, per field in insertion order (Redis's order for small
//! hashes), the field's and the value's lengths (u32, little-endian) and
//! bytes. A hash is as large as an item may be (`-I`, 1 MiB by default);
//! a change that outgrows it fails with the item-size error and changes
//! nothing. A hash whose last field is deleted is deleted.

use super::args::{int, NOT_INT, OVERFLOW, WRONGTYPE};
use super::Call;
use crate::protocol::resp::db::{Change, Item, Kind};

/// The start of every hash value: a memcached client that reads a hash's
/// key sees what it is.
pub const MAGIC: &[u8] = b"TCHASH1\n";

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The fields of a hash value, None if it is not one.
pub fn decode(v: &[u8]) -> Option<Fields> {
    let mut b = v.strip_prefix(MAGIC)?;
    let mut out = Vec::new();
    let take = |b: &mut &[u8]| -> Option<Vec<u8>> {
        let n = u32::from_le_bytes(b.get(..4)?.try_into().ok()?) as usize;
        let s = b.get(4..4 + n)?.to_vec();
        *b = &b[4 + n..];
        Some(s)
    };
    while !b.is_empty() {
        let f = take(&mut b)?;
        let v = take(&mut b)?;
        out.push((f, v));
    }
    Some(out)
}

pub fn encode(fields: &Fields) -> Vec<u8> {
    let len = fields
        .iter()
        .map(|(f, v)| 8 + f.len() + v.len())
        .sum::<usize>();
    let mut out = Vec::with_capacity(MAGIC.len() + len);
    out.extend_from_slice(MAGIC);
    for (f, v) in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

/// The fields of the key's item: empty if missing, WRONGTYPE if a string.
fn fields(old: Option<&Item>) -> Result<Fields, &'static str> {
    match old {
        None => Ok(Vec::new()),
        Some(i) if i.kind() != Kind::Hash => Err(WRONGTYPE),
        Some(i) => decode(&i.value).ok_or("ERR corrupt hash value"),
    }
}

fn put(f: &Fields, old: Option<&Item>) -> Change {
    match f.is_empty() {
        true => Change::Delete,
        false => Change::Put {
            value: encode(f),
            kind: Kind::Hash,
            exptime: old.map_or(0, |o| o.exptime),
        },
    }
}

/// HSET (new fields counted), HMSET (+OK), HSETNX (1 if set).
pub fn hset(c: &mut Call<'_>) {
    let name = c.name();
    if name != "hsetnx" && !c.args.len().is_multiple_of(2) {
        return c.arity_error();
    }
    let pairs = &c.args[2..];
    let r = c.db.update(c.args[1], |old| {
        let mut f = match fields(old) {
            Ok(f) => f,
            Err(e) => return (Change::Keep, Err(e)),
        };
        let mut added = 0;
        for kv in pairs.chunks(2) {
            match f.iter_mut().find(|(k, _)| k == kv[0]) {
                Some(_) if name == "hsetnx" => return (Change::Keep, Ok(0)),
                Some((_, v)) => *v = kv[1].to_vec(),
                None => {
                    f.push((kv[0].to_vec(), kv[1].to_vec()));
                    added += 1;
                }
            }
        }
        (put(&f, old), Ok(added))
    });
    match (name, r) {
        ("hmset", Ok(Ok(_))) => c.out.ok(),
        (_, r) => c.int_reply(r),
    }
}

/// HGET, HMGET, HEXISTS.
pub fn hget(c: &mut Call<'_>) {
    let f = match fields(c.db.get(c.args[1]).as_ref()) {
        Ok(f) => f,
        Err(e) => return c.out.err(e),
    };
    let find = |k: &[u8]| f.iter().find(|(f, _)| f == k).map(|(_, v)| v.as_slice());
    match c.name() {
        "hget" => c.out.opt_bulk(find(c.args[2])),
        "hexists" => c.out.int(i64::from(find(c.args[2]).is_some())),
        _ => {
            c.out.array(c.args.len() - 2);
            for k in &c.args[2..] {
                c.out.opt_bulk(find(k));
            }
        }
    }
}

pub fn hdel(c: &mut Call<'_>) {
    let del = &c.args[2..];
    let r = c.db.update(c.args[1], |old| {
        let mut f = match fields(old) {
            Ok(f) => f,
            Err(e) => return (Change::Keep, Err(e)),
        };
        let before = f.len();
        f.retain(|(k, _)| !del.contains(&k.as_slice()));
        match before - f.len() {
            0 => (Change::Keep, Ok(0)),
            n => (put(&f, old), Ok(n)),
        }
    });
    c.int_reply(r);
}

/// HGETALL (a map in RESP3), HKEYS, HVALS, HLEN.
pub fn hgetall(c: &mut Call<'_>) {
    let f = match fields(c.db.get(c.args[1]).as_ref()) {
        Ok(f) => f,
        Err(e) => return c.out.err(e),
    };
    match c.name() {
        "hlen" => c.out.int(f.len() as i64),
        "hgetall" => {
            c.out.map(f.len());
            for (k, v) in &f {
                c.out.bulk(k);
                c.out.bulk(v);
            }
        }
        name => {
            c.out.array(f.len());
            for (k, v) in &f {
                c.out.bulk(if name == "hkeys" { k } else { v });
            }
        }
    }
}

pub fn hincrby(c: &mut Call<'_>) {
    let Some(by) = int(c.args[3]) else {
        return c.out.err(NOT_INT);
    };
    let field = c.args[2];
    let r = c.db.update(c.args[1], |old| {
        let mut f = match fields(old) {
            Ok(f) => f,
            Err(e) => return (Change::Keep, Err(e)),
        };
        let at = match f.iter().position(|(k, _)| k == field) {
            Some(i) => i,
            None => {
                f.push((field.to_vec(), b"0".to_vec()));
                f.len() - 1
            }
        };
        let Some(cur) = int(&f[at].1) else {
            return (Change::Keep, Err("ERR hash value is not an integer"));
        };
        let Some(n) = cur.checked_add(by) else {
            return (Change::Keep, Err(OVERFLOW));
        };
        f[at].1 = n.to_string().into_bytes();
        (put(&f, old), Ok(n))
    });
    c.int_reply(r);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let f = vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"".to_vec(), b"x\0y".to_vec()),
        ];
        assert_eq!(decode(&encode(&f)), Some(f));
        assert_eq!(decode(b"plain string"), None);
        assert_eq!(decode(b"TCHASH1\n\x05\0\0\0ab"), None);
    }
}
