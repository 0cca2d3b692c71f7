//! Key commands: DEL, UNLINK, EXISTS, TOUCH, TYPE, the EXPIRE family with
//! NX/XX/GT/LT, TTL and its variants, PERSIST, DBSIZE, SCAN, RANDOMKEY.

use super::args::{int, is, NOT_INT, SYNTAX};
use super::Call;
use crate::protocol::resp::db::{exptime_at, now_ms, Change, Kind};
use tiercache_engine::command::DumpCursor;

pub fn del(c: &mut Call<'_>) {
    let n = c.args[1..].iter().filter(|k| c.db.delete(k)).count();
    c.out.int(n as i64);
}

/// EXISTS and TOUCH: how many of the keys are there (repeats count).
pub fn exists(c: &mut Call<'_>) {
    let n = c.args[1..]
        .iter()
        .filter(|k| c.db.len_kind(k).is_some())
        .count();
    c.out.int(n as i64);
}

pub fn type_(c: &mut Call<'_>) {
    c.out.simple(match c.db.len_kind(c.args[1]) {
        None => "none",
        Some((_, Kind::String, _)) => "string",
        Some((_, Kind::Hash, _)) => "hash",
    });
}

/// EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT [NX|XX|GT|LT].
pub fn expire(c: &mut Call<'_>) {
    let name = c.name();
    let Some(t) = int(c.args[2]) else {
        return c.out.err(NOT_INT);
    };
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for a in &c.args[3..] {
        match () {
            _ if is(a, "NX") => nx = true,
            _ if is(a, "XX") => xx = true,
            _ if is(a, "GT") => gt = true,
            _ if is(a, "LT") => lt = true,
            _ => {
                let a = String::from_utf8_lossy(a);
                return c.out.err(&format!("ERR Unsupported option {a}"));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return c
            .out
            .err("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return c
            .out
            .err("ERR GT and LT options at the same time are not compatible");
    }
    let now = now_ms() as i64;
    let ms = match name {
        "expire" => t.checked_mul(1000).and_then(|m| m.checked_add(now)),
        "pexpire" => t.checked_add(now),
        "expireat" => t.checked_mul(1000),
        _ => Some(t),
    };
    let Some(ms) = ms else {
        return c
            .out
            .err(&format!("ERR invalid expire time in '{name}' command"));
    };
    let new = exptime_at(ms.max(0) as u64, now as u64);
    let r = c.db.update(c.args[1], |old| {
        let Some(o) = old else {
            return (Change::Keep, 0);
        };
        // No expiry counts as an infinite one.
        let cur = match o.exptime {
            0 => i64::MAX,
            e => i64::from(e) * 1000,
        };
        let skip = (nx && o.exptime != 0)
            || (xx && o.exptime == 0)
            || (gt && ms <= cur)
            || (lt && ms >= cur);
        match (skip, new) {
            (true, _) => (Change::Keep, 0),
            (false, None) => (Change::Delete, 1),
            (false, Some(e)) if e == o.exptime => (Change::Keep, 1),
            (false, Some(e)) => (
                Change::Put {
                    value: o.value.clone(),
                    kind: o.kind(),
                    exptime: e,
                },
                1,
            ),
        }
    });
    c.int_reply(r.map(Ok::<i64, &str>));
}

/// TTL, PTTL, EXPIRETIME, PEXPIRETIME.
pub fn ttl(c: &mut Call<'_>) {
    let Some((_, _, e)) = c.db.len_kind(c.args[1]) else {
        return c.out.int(-2);
    };
    if e == 0 {
        return c.out.int(-1);
    }
    let at = i64::from(e) * 1000;
    let left = (at - now_ms() as i64).max(0);
    c.out.int(match c.name() {
        // The deadline was rounded up to a second: its floor is the TTL
        // Redis would report right after the same SET.
        "ttl" => left / 1000,
        "pttl" => left,
        "expiretime" => i64::from(e),
        _ => at,
    });
}

pub fn persist(c: &mut Call<'_>) {
    let r = c.db.update(c.args[1], |old| match old {
        Some(o) if o.exptime != 0 => (
            Change::Put {
                value: o.value.clone(),
                kind: o.kind(),
                exptime: 0,
            },
            1,
        ),
        _ => (Change::Keep, 0),
    });
    c.int_reply(r.map(Ok::<i64, &str>));
}

pub fn dbsize(c: &mut Call<'_>) {
    let now = tiercache_engine::clock::unix_now();
    c.out.int(c.db.engine.stats(now).shard.curr_items as i64);
}

/// Redis's glob (`stringmatchlen`): `*`, `?`, `[...]` with `^` and
/// ranges, `\` escapes.
pub fn glob(p: &[u8], s: &[u8]) -> bool {
    match p.first() {
        None => s.is_empty(),
        Some(b'*') => (0..=s.len()).any(|i| glob(&p[1..], &s[i..])),
        Some(b'?') => !s.is_empty() && glob(&p[1..], &s[1..]),
        Some(b'[') => {
            let Some(&ch) = s.first() else { return false };
            let mut i = 1;
            let not = p.get(1) == Some(&b'^');
            if not {
                i += 1;
            }
            let mut hit = false;
            while i < p.len() && p[i] != b']' {
                if p[i] == b'\\' && i + 1 < p.len() {
                    hit |= p[i + 1] == ch;
                    i += 2;
                } else if i + 2 < p.len() && p[i + 1] == b'-' && p[i + 2] != b']' {
                    let (a, b) = (p[i].min(p[i + 2]), p[i].max(p[i + 2]));
                    hit |= (a..=b).contains(&ch);
                    i += 3;
                } else {
                    hit |= p[i] == ch;
                    i += 1;
                }
            }
            let rest = p.get(i + 1..).unwrap_or_default();
            hit != not && glob(rest, &s[1..])
        }
        Some(b'\\') if p.len() > 1 => s.first() == Some(&p[1]) && glob(&p[2..], &s[1..]),
        Some(&c) => s.first() == Some(&c) && glob(&p[1..], &s[1..]),
    }
}

/// SCAN cursor [MATCH p] [COUNT n] [TYPE t]: walks the keys in RAM a
/// segment at a time (keys only on flash are not listed).
pub fn scan(c: &mut Call<'_>) {
    let Some(cursor) = std::str::from_utf8(c.args[1])
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return c.out.err("ERR invalid cursor");
    };
    let (mut pat, mut count, mut kind) = (None, 10usize, None);
    let mut i = 2;
    while i < c.args.len() {
        let Some(v) = c.args.get(i + 1) else {
            return c.out.err(SYNTAX);
        };
        match () {
            _ if is(c.args[i], "MATCH") => pat = Some(*v),
            _ if is(c.args[i], "COUNT") => match int(v) {
                Some(n) if n >= 1 => count = n as usize,
                Some(_) => return c.out.err(SYNTAX),
                None => return c.out.err(NOT_INT),
            },
            _ if is(c.args[i], "TYPE") => kind = Some(*v),
            _ => return c.out.err(SYNTAX),
        }
        i += 2;
    }
    let now = tiercache_engine::clock::unix_now();
    let mut keys: Vec<Vec<u8>> = Vec::new();
    let mut at = Some(DumpCursor::from_raw(cursor));
    while let Some(from) = at {
        if keys.len() >= count {
            break;
        }
        at = c.db.engine.dump_keys(from, now, |k| {
            if pat.is_none_or(|p| glob(p, k.key())) {
                keys.push(k.key().to_vec());
            }
        });
    }
    if let Some(t) = kind {
        keys.retain(|k| {
            let name: &[u8] = match c.db.len_kind(k) {
                Some((_, Kind::Hash, _)) => b"hash",
                Some(_) => b"string",
                None => b"none",
            };
            t.eq_ignore_ascii_case(name)
        });
    }
    c.out.array(2);
    c.out
        .bulk_str(&at.map_or(0, DumpCursor::to_raw).to_string());
    c.out.array(keys.len());
    for k in &keys {
        c.out.bulk(k);
    }
}

pub fn randomkey(c: &mut Call<'_>) {
    let now = tiercache_engine::clock::unix_now();
    let shards = c.db.engine.stats(now).shards.max(1);
    let start = (now_ms() ^ (now_ms() >> 7)) % shards;
    let mut found = None;
    for s in 0..shards {
        let mut at = Some(DumpCursor::from_raw(((start + s) % shards) << 32));
        while let Some(from) = at {
            at = c.db.engine.dump_keys(from, now, |k| {
                found.get_or_insert_with(|| k.key().to_vec());
            });
            if found.is_some() || at.is_some_and(|a| a.to_raw() >> 32 != (start + s) % shards) {
                break;
            }
        }
        if found.is_some() {
            break;
        }
    }
    c.out.opt_bulk(found.as_deref());
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob(b"user:*", b"user:1"));
        assert!(!glob(b"user:?", b"user:12"));
        assert!(glob(b"h[ae]llo", b"hallo"));
        assert!(!glob(b"h[^e]llo", b"hello"));
        assert!(glob(b"h[a-c]llo", b"hbllo"));
        assert!(glob(b"a\\*", b"a*"));
    }
}
