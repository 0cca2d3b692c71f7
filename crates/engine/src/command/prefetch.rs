//! Which keys of a request need their flash records read before it runs,
//! decided here once for every front end: keys whose items are on flash are
//! probed; records still in write buffers are copied at once, others become
//! reads for the caller to issue. Plain gets are served straight from the
//! verified records; a command that works on the item in RAM (a change,
//! `mg`) copies it back from them itself, in the same shard lock hold as its
//! work, so nothing can push it back to flash in between.

use crate::device::aligned::AlignedBuf;
use crate::flash::{Fetched, ReadReq};
use crate::Engine;
use std::borrow::Cow;
use tiercache_proto::{Request, StoreMode};

/// Whether the request can run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prep {
    Ready,
    /// Reads were added to the list: run it when they complete.
    Wait,
}

/// The key of a plain set (`set`, or `ms` in set mode without a CAS; `I`
/// without a CAS changes nothing, as [`Store::is_plain_set`](super::Store)
/// says): it replaces the key's item whatever it was, so it need not
/// promote it, only keep other keys' flash records.
fn plain_set_key<'a>(req: &'a Request<'a>) -> Option<&'a [u8]> {
    match req {
        Request::Store(s) if s.mode == StoreMode::Set => Some(s.key),
        Request::MetaSet { key, flags, .. }
            if matches!(flags.mode, None | Some(b'S') | Some(b's'))
                && flags.compare_cas.is_none() =>
        {
            Some(&key[..])
        }
        _ => None,
    }
}

/// Whether a request may ask for its keys' flash records when it runs
/// ([`Wait::Reads`](super::Wait::Reads)): every command on keys (a record can move between its
/// probe and its run). Only those are kept to run again.
pub fn asks_for_reads(req: &Request<'_>) -> bool {
    matches!(
        req,
        Request::Get(_)
            | Request::Store(_)
            | Request::Delete { .. }
            | Request::Arith { .. }
            | Request::Touch { .. }
            | Request::MetaGet { .. }
            | Request::MetaSet { .. }
            | Request::MetaDelete { .. }
            | Request::MetaArith { .. }
            | Request::MetaDebug { .. }
    )
}

/// The keys a request touches whose flash records it needs. Plain gets and
/// plain sets run first (`first_run`) and are probed only when the run asks
/// for it (a get missed in RAM, a set found its tag on flash or the small
/// store's filter said maybe; a set asks again when a block it read
/// changed, so its retries are probed too), so requests
/// on keys that are not on flash cost nothing extra; the others are probed
/// before their first run.
fn keys_of<'a>(req: &'a Request<'a>, first_run: bool) -> Vec<Cow<'a, [u8]>> {
    if let Some(key) = plain_set_key(req) {
        let keys = if first_run {
            Vec::new()
        } else {
            vec![Cow::Borrowed(key)]
        };
        return keys;
    }
    match req {
        Request::Get(g) if g.touch.is_none() && first_run => Vec::new(),
        Request::Get(g) => g.keys().map(Cow::Borrowed).collect(),
        Request::Store(s) => vec![Cow::Borrowed(s.key)],
        Request::Delete { key, .. } | Request::Arith { key, .. } | Request::Touch { key, .. } => {
            vec![Cow::Borrowed(*key)]
        }
        Request::MetaSet { key, .. }
        | Request::MetaGet { key, .. }
        | Request::MetaDelete { key, .. }
        | Request::MetaArith { key, .. }
        | Request::MetaDebug { key } => vec![Cow::Borrowed(&key[..])],
        _ => Vec::new(),
    }
}

impl Engine {
    /// Probes the keys of `req` that need their flash records; adds the
    /// reads it must wait for to `reads`. `after_miss`: a plain get or set
    /// ran and asked for its keys' flash records ([`Wait::Reads`](super::Wait::Reads)); probe
    /// them now.
    pub fn prefetch(
        &self,
        req: &Request<'_>,
        now: u32,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
        after_miss: bool,
    ) -> Prep {
        if self.flash().is_none() {
            return Prep::Ready;
        }
        let keys = keys_of(req, !after_miss);
        let plain_set = plain_set_key(req).is_some();
        for key in &keys {
            self.probe(key, now, fetched, reads);
            if plain_set {
                // The small store's blocks its check needs, in this round.
                let hash = Engine::hash(key);
                self.lock(hash, now).small_check_reads(key, fetched, reads);
            }
        }
        if reads.is_empty() {
            Prep::Ready
        } else {
            Prep::Wait
        }
    }

    /// A get queued behind a request that waits for flash: reads the
    /// records of its keys that are on flash now (no promotion, nothing
    /// changed), adding the reads to `reads`. Other requests read nothing
    /// ahead.
    pub fn read_ahead(
        &self,
        req: &Request<'_>,
        now: u32,
        fetched: &mut Fetched,
        reads: &mut Vec<ReadReq>,
    ) {
        let mut probe = |key: &[u8]| self.probe(key, now, fetched, reads);
        match req {
            Request::Get(g) => g.keys().for_each(&mut probe),
            Request::MetaGet { key, .. } => probe(key),
            _ => {}
        }
    }

    /// A flash read for `fetched`'s entry `slot` finished, after
    /// `queued_us` waiting for a reader: its record is checked and kept.
    /// `Some` is a further read the record needs (issue it); None when the
    /// entry is done (or there is no flash tier).
    pub fn complete_read(
        &self,
        fetched: &mut Fetched,
        slot: usize,
        result: std::io::Result<(AlignedBuf, usize)>,
        queued_us: u64,
    ) -> Option<ReadReq> {
        let flash = self.flash()?;
        fetched.complete(slot, result, queued_us, flash.segment_size(), &flash.stats)
    }
}
