//! `stats detail`: per key-prefix counts of gets, hits, sets and deletes,
//! as memcached 1.6's `stats_prefix.c` keeps them. A key's prefix is what
//! comes before the first delimiter (`:` by default, `-D <char>`); keys
//! without the delimiter are not counted. Counted while enabled (`stats
//! detail on`, or `-D`): classic gets (each key, hit or miss), classic
//! stores (set, add, replace, append, prepend, cas; counted when their
//! command line is taken, refused too-large ones included) and classic
//! deletes (found or not); meta commands are not counted, as in memcached.
//! `stats detail dump` lists the prefixes in memcached's order (its hash
//! table's: MurmurHash3 of the prefix modulo 256, newest first in a bucket)
//! so the reply is the same bytes; `stats reset` forgets them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

const BUCKETS: usize = 256;

#[derive(Debug)]
struct Prefix {
    name: Vec<u8>,
    gets: u64,
    hits: u64,
    sets: u64,
    deletes: u64,
}

#[derive(Debug)]
pub struct Detail {
    enabled: AtomicBool,
    delimiter: u8,
    /// memcached's hash table: each bucket oldest first (dumped newest first).
    table: Mutex<Vec<Vec<Prefix>>>,
}

enum Op {
    Get { hit: bool },
    Set,
    Delete,
}

impl Detail {
    pub fn new(delimiter: u8, enabled: bool) -> Detail {
        Detail {
            enabled: AtomicBool::new(enabled),
            delimiter,
            table: Mutex::new((0..BUCKETS).map(|_| Vec::new()).collect()),
        }
    }

    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn record_get(&self, key: &[u8], hit: bool) {
        self.record(key, Op::Get { hit });
    }

    pub fn record_set(&self, key: &[u8]) {
        self.record(key, Op::Set);
    }

    pub fn record_delete(&self, key: &[u8]) {
        self.record(key, Op::Delete);
    }

    fn record(&self, key: &[u8], op: Op) {
        if !self.enabled() {
            return;
        }
        // memcached reads the key as a C string: a NUL ends it.
        let Some(len) = key
            .iter()
            .take_while(|&&b| b != 0)
            .position(|&b| b == self.delimiter)
        else {
            return;
        };
        let prefix = &key[..len];
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let bucket = &mut table[murmur3_32(prefix) as usize % BUCKETS];
        // memcached matches with strncmp(stored, prefix, len): a stored
        // prefix that starts with this one matches too.
        let i = match bucket
            .iter()
            .rposition(|p| p.name.len() >= len && &p.name[..len] == prefix)
        {
            Some(i) => i,
            None => {
                bucket.push(Prefix {
                    name: prefix.to_vec(),
                    gets: 0,
                    hits: 0,
                    sets: 0,
                    deletes: 0,
                });
                bucket.len() - 1
            }
        };
        let p = &mut bucket[i];
        match op {
            Op::Get { hit } => {
                p.gets += 1;
                p.hits += u64::from(hit);
            }
            Op::Set => p.sets += 1,
            Op::Delete => p.deletes += 1,
        }
    }

    /// The `stats detail dump` reply, `END` included.
    pub fn dump(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        for bucket in table.iter() {
            for p in bucket.iter().rev() {
                out.extend_from_slice(b"PREFIX ");
                out.extend_from_slice(&p.name);
                let _ = write!(
                    out,
                    " get {} hit {} set {} del {}\r\n",
                    p.gets, p.hits, p.sets, p.deletes
                );
            }
        }
        out.extend_from_slice(b"END\r\n");
    }

    /// Forgets every prefix (`stats reset`).
    pub fn clear(&self) {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        for bucket in table.iter_mut() {
            *bucket = Vec::new();
        }
    }
}

/// MurmurHash3_x86_32 with seed 0: memcached 1.6's default `hash`.
fn murmur3_32(data: &[u8]) -> u32 {
    const C1: u32 = 0xcc9e_2d51;
    const C2: u32 = 0x1b87_3593;
    let mut h: u32 = 0;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
        h ^= k;
        h = h.rotate_left(13).wrapping_mul(5).wrapping_add(0xe654_6b64);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        let mut k: u32 = 0;
        for (i, &b) in tail.iter().enumerate() {
            k |= u32::from(b) << (8 * i);
        }
        h ^= k.wrapping_mul(C1).rotate_left(15).wrapping_mul(C2);
    }
    h ^= data.len() as u32;
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur3_known_values() {
        // Reference values of MurmurHash3_x86_32, seed 0.
        assert_eq!(murmur3_32(b""), 0);
        assert_eq!(murmur3_32(b"hello"), 0x248b_fa47);
        assert_eq!(murmur3_32(b"Hello, world!"), 0xc036_3e43);
    }

    #[test]
    fn counts_by_prefix() {
        let d = Detail::new(b':', false);
        d.record_get(b"a:1", true);
        let mut out = Vec::new();
        d.dump(&mut out);
        assert_eq!(out, b"END\r\n", "nothing is counted while off");
        d.set_enabled(true);
        d.record_get(b"a:1", true);
        d.record_get(b"a:2", false);
        d.record_set(b"a:3");
        d.record_delete(b"a:");
        d.record_set(b"nodelimiter");
        let mut out = Vec::new();
        d.dump(&mut out);
        assert_eq!(out, b"PREFIX a get 2 hit 1 set 1 del 1\r\nEND\r\n");
        d.clear();
        let mut out = Vec::new();
        d.dump(&mut out);
        assert_eq!(out, b"END\r\n");
    }
}
