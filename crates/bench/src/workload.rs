//! The workload: which operation comes next (get / multiget / set, which keys,
//! what value size) and its encoding as classic or meta protocol bytes.

use std::sync::Arc;

use anyhow::{bail, Result};
use tiercache_policy::rng::Rng;
use tiercache_proto::response::number;

use crate::dist::{KeyChooser, KeyDist, SizeDist};

/// Which command family to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// `get k1 k2 ...` / `set k 0 0 n`
    Classic,
    /// `mg k v` (one per key) / `ms k n`
    Meta,
}

/// The kind of a request, as much as the reply reader needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Get,
    Set,
}

/// One request on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    pub kind: OpKind,
    /// Keys asked for (gets) or stored (sets: 1).
    pub nkeys: u32,
}

/// Everything that defines the requests; shared by all workers.
#[derive(Debug)]
pub struct Workload {
    pub keys: u64,
    pub key_prefix: String,
    pub sizes: SizeDist,
    pub get_ratio: f64,
    pub multiget: u32,
    pub protocol: Protocol,
    pub chooser: KeyChooser,
    /// Random bytes; values are slices of it.
    pub value_pool: Vec<u8>,
}

/// Largest value the pool can serve; bigger ones are refused up front.
pub const MAX_VALUE: usize = 64 << 20;

impl Workload {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        keys: u64,
        key_prefix: String,
        key_dist: KeyDist,
        sizes: SizeDist,
        get_ratio: f64,
        multiget: u32,
        protocol: Protocol,
        seed: u64,
    ) -> Result<Self> {
        if keys == 0 {
            bail!("--keys must be at least 1");
        }
        if !(0.0..=1.0).contains(&get_ratio) {
            bail!("--get-ratio must be within 0..=1");
        }
        if multiget == 0 {
            bail!("--multiget must be at least 1");
        }
        if sizes.max() > MAX_VALUE {
            bail!("values above {MAX_VALUE} bytes are not supported");
        }
        if key_prefix.len() + 20 > tiercache_proto::KEY_MAX_LENGTH
            || key_prefix.bytes().any(|b| b <= b' ' || b == 0x7f)
        {
            bail!("--key-prefix must be short and free of spaces and control characters");
        }
        let mut rng = Rng::wyrand(seed ^ 0x5EED_0F0A_1E00);
        let mut value_pool = vec![0u8; sizes.max() + 65_536];
        rng.fill(&mut value_pool);
        Ok(Workload {
            chooser: KeyChooser::new(keys, key_dist),
            keys,
            key_prefix,
            sizes,
            get_ratio,
            multiget,
            protocol,
            value_pool,
        })
    }

    /// Appends the key with index `k`.
    #[inline]
    pub fn push_key(&self, out: &mut Vec<u8>, k: u64) {
        out.extend_from_slice(self.key_prefix.as_bytes());
        number(out, k);
    }

    /// Appends a set of key `k` with a value of `len` bytes taken at `off`.
    pub fn encode_set(&self, out: &mut Vec<u8>, k: u64, len: usize, off: usize) -> Op {
        match self.protocol {
            Protocol::Classic => {
                out.extend_from_slice(b"set ");
                self.push_key(out, k);
                out.extend_from_slice(b" 0 0 ");
                number(out, len as u64);
            }
            Protocol::Meta => {
                out.extend_from_slice(b"ms ");
                self.push_key(out, k);
                out.push(b' ');
                number(out, len as u64);
            }
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.value_pool[off..off + len]);
        out.extend_from_slice(b"\r\n");
        Op {
            kind: OpKind::Set,
            nkeys: 1,
        }
    }

    /// Appends a (multi)get of `keys`.
    pub fn encode_get(&self, out: &mut Vec<u8>, keys: &[u64]) -> Op {
        match self.protocol {
            Protocol::Classic => {
                out.extend_from_slice(b"get");
                for &k in keys {
                    out.push(b' ');
                    self.push_key(out, k);
                }
                out.extend_from_slice(b"\r\n");
            }
            Protocol::Meta => {
                for &k in keys {
                    out.extend_from_slice(b"mg ");
                    self.push_key(out, k);
                    out.extend_from_slice(b" v\r\n");
                }
            }
        }
        Op {
            kind: OpKind::Get,
            nkeys: keys.len() as u32,
        }
    }
}

/// Where requests come from: a random workload, or a preload sweep.
pub trait Source {
    /// Appends the next request to `out`, or `None` when exhausted.
    fn next_op(&mut self, out: &mut Vec<u8>) -> Option<Op>;
}

/// The measured workload: random gets and sets.
pub struct Generator {
    wl: Arc<Workload>,
    rng: Rng,
    keybuf: Vec<u64>,
}

impl Generator {
    pub fn new(wl: Arc<Workload>, seed: u64) -> Self {
        let keybuf = Vec::with_capacity(wl.multiget as usize);
        Generator {
            wl,
            rng: Rng::wyrand(seed),
            keybuf,
        }
    }
}

impl Source for Generator {
    #[inline]
    fn next_op(&mut self, out: &mut Vec<u8>) -> Option<Op> {
        let wl = &*self.wl;
        let is_get = wl.get_ratio >= 1.0 || (wl.get_ratio > 0.0 && self.rng.unit() < wl.get_ratio);
        if is_get {
            self.keybuf.clear();
            for _ in 0..wl.multiget {
                self.keybuf.push(wl.chooser.next(&mut self.rng));
            }
            Some(wl.encode_get(out, &self.keybuf))
        } else {
            let k = wl.chooser.next(&mut self.rng);
            let len = wl.sizes.sample(&mut self.rng);
            let off = self.rng.below_mul((wl.value_pool.len() - len) as u64) as usize;
            Some(wl.encode_set(out, k, len, off))
        }
    }
}

/// Preload: sets every key in `[next, end)` once, in order.
pub struct Preload {
    wl: Arc<Workload>,
    rng: Rng,
    next: u64,
    end: u64,
}

impl Preload {
    pub fn new(wl: Arc<Workload>, start: u64, end: u64, seed: u64) -> Self {
        Preload {
            wl,
            rng: Rng::wyrand(seed),
            next: start,
            end,
        }
    }
}

impl Source for Preload {
    fn next_op(&mut self, out: &mut Vec<u8>) -> Option<Op> {
        if self.next >= self.end {
            return None;
        }
        let k = self.next;
        self.next += 1;
        let len = self.wl.sizes.sample(&mut self.rng);
        let off = self.rng.below_mul((self.wl.value_pool.len() - len) as u64) as usize;
        Some(self.wl.encode_set(out, k, len, off))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(protocol: Protocol, get_ratio: f64, multiget: u32) -> Arc<Workload> {
        Arc::new(
            Workload::new(
                100,
                "key:".into(),
                KeyDist::Uniform,
                SizeDist::Fixed(5),
                get_ratio,
                multiget,
                protocol,
                1,
            )
            .unwrap(),
        )
    }

    /// Every request we send must be accepted by the server-side parser.
    fn check_against_parser(protocol: Protocol) {
        use tiercache_proto::{parse, Limits, Parsed, Request};
        let w = wl(protocol, 0.5, 3);
        let mut g = Generator::new(w, 9);
        let mut out = Vec::new();
        let mut ops = Vec::new();
        for _ in 0..200 {
            ops.push(g.next_op(&mut out).unwrap());
        }
        let limits = Limits::default();
        let (mut pos, mut i, mut keys_in_op) = (0, 0, 0);
        while pos < out.len() {
            let Parsed::Request { request, consumed } = parse(&out[pos..], &limits) else {
                panic!("unparsable request at {pos}");
            };
            pos += consumed;
            match (request, ops[i].kind) {
                (Request::Get(g), OpKind::Get) => {
                    assert_eq!(g.keys().count(), 3);
                    i += 1;
                }
                (Request::MetaGet { .. }, OpKind::Get) => {
                    keys_in_op += 1;
                    if keys_in_op == 3 {
                        keys_in_op = 0;
                        i += 1;
                    }
                }
                (Request::Store(s), OpKind::Set) => {
                    assert_eq!(s.data.len(), 5);
                    i += 1;
                }
                (Request::MetaSet { data, .. }, OpKind::Set) => {
                    assert_eq!(data.len(), 5);
                    i += 1;
                }
                (r, k) => panic!("op {i}: {k:?} encoded as {r:?}"),
            }
        }
        assert_eq!(i, ops.len());
        let gets = ops.iter().filter(|o| o.kind == OpKind::Get).count();
        assert!((60..140).contains(&gets), "gets {gets}");
    }

    #[test]
    fn encodings_parse_as_requests() {
        check_against_parser(Protocol::Classic);
        check_against_parser(Protocol::Meta);
    }

    #[test]
    fn meta_encoding() {
        let w = wl(Protocol::Meta, 1.0, 2);
        let mut out = Vec::new();
        let op = w.encode_get(&mut out, &[1, 22]);
        assert_eq!(out, b"mg key:1 v\r\nmg key:22 v\r\n");
        assert_eq!(op.nkeys, 2);
        out.clear();
        w.encode_set(&mut out, 7, 3, 0);
        assert!(out.starts_with(b"ms key:7 3\r\n"));
        assert_eq!(out.len(), b"ms key:7 3\r\n".len() + 5);
    }

    #[test]
    fn preload_covers_range_once() {
        let w = wl(Protocol::Classic, 1.0, 1);
        let mut p = Preload::new(w, 10, 20, 3);
        let mut out = Vec::new();
        let mut n = 0;
        while p.next_op(&mut out).is_some() {
            n += 1;
        }
        assert_eq!(n, 10);
        assert!(out.starts_with(b"set key:10 0 0 5\r\n"));
    }
}
