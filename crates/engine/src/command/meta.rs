//! Meta get and meta arithmetic: the item stays locked while the front end
//! writes the reply's flags in the client's order (memcached answers them
//! in one pass, so `t` after `T` shows the new TTL), through a handle
//! ([`MetaItem`]) whose every change goes through the engine: the crash
//! journal's gate, the win/stale/token-sent bits, the access record.

use super::{ItemView, Wait};
use crate::flash::Fetched;
use crate::index::Loc;
use crate::item;
use crate::ops::{self, Arith, ArithResult};
use crate::shard::{Allowed, InsertError, NewItem, Shard};
use crate::Engine;

/// What `mg` asks of the engine besides the lookup.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetaGet {
    /// `T`: the reply will set a new exptime ([`MetaItem::set_exptime`]).
    pub ttl: bool,
    /// `N`: create an empty item with this exptime (absolute) on a miss.
    pub vivify: Option<u32>,
    /// The key was given in base64 (`b`).
    pub binary_key: bool,
    /// `u`: do not record the access.
    pub no_update: bool,
}

/// What `ma` asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct MetaArith {
    pub incr: bool,
    pub delta: u64,
    /// `C`: only if the item's CAS is this one; 0 = none.
    pub compare_cas: u64,
    /// `N`: on a miss, create the item with this value (exptime 0 until the
    /// reply sets one).
    pub vivify: Option<u64>,
    pub binary_key: bool,
}

/// Why a meta arithmetic command did not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithFailed {
    NotFound,
    NonNumeric,
    CasMismatch,
    NoMemory,
    /// `N` could not allocate the new item.
    NoMemoryForNew,
}

/// The win-token state `mg` reports after its flags (`W`, `X`, `Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    /// `Z`: a win token was handed out already.
    pub sent_before: bool,
    /// `X`: the item is stale.
    pub stale: bool,
    /// `W`: this client won the token (now marked as handed out).
    pub won: bool,
}

/// A locked item a meta command reports on.
pub struct MetaItem<'a> {
    shard: &'a mut Shard,
    loc: Loc,
    ok: Option<Allowed>,
    created: bool,
    won: bool,
}

impl MetaItem<'_> {
    pub fn view(&self) -> ItemView<'_> {
        ItemView::new(self.shard.header(self.loc), self.shard.value(self.loc))
    }

    /// Whether the command created the item (`N` on a miss).
    pub fn created(&self) -> bool {
        self.created
    }

    /// A new exptime (`T`, or `N` on a created item). Applied when the
    /// command was allowed to change the key ([`MetaGet::ttl`], and every
    /// arithmetic that applied).
    pub fn set_exptime(&mut self, exptime: u32) {
        debug_assert!(
            self.ok.is_some(),
            "set_exptime without the gate's permission"
        );
        if let Some(ok) = &self.ok {
            self.shard.set_exptime(self.loc, exptime, ok);
        }
    }

    /// `R`: the client wins the recache token when none was handed out, the
    /// item was not just created and its TTL ends before `recache`.
    pub fn recache(&mut self, recache: u32) {
        let h = self.shard.header(self.loc);
        if h.bits & item::TOKEN_SENT == 0 && !self.created && h.exptime != 0 && h.exptime < recache
        {
            self.won = true;
        }
    }

    /// The token flags of the reply; a win is recorded on the item (a later
    /// `mg` says `Z`).
    pub fn token(&mut self) -> Token {
        let bits = self.shard.header(self.loc).bits;
        let sent_before = bits & item::TOKEN_SENT != 0;
        let stale = bits & item::STALE != 0;
        let won = self.won || (stale && !sent_before);
        if won {
            self.shard.mark_token_sent(self.loc);
        }
        Token {
            sent_before,
            stale,
            won,
        }
    }
}

impl Engine {
    /// `mg`: `f` with the key's item (created when `vivify` says so), its
    /// access recorded afterwards unless `no_update`. None on a miss. An
    /// item on flash is copied back to RAM from its record in `fetched`;
    /// `may_read` as for [`touch`](Engine::touch).
    pub fn meta_get<R>(
        &self,
        key: &[u8],
        now: u32,
        opts: &MetaGet,
        fetched: &Fetched,
        may_read: bool,
        f: impl FnOnce(&mut MetaItem<'_>) -> R,
    ) -> Result<Option<R>, Wait> {
        let (hash, mut s) = self.lock_key(key, now);
        let found = s.ram_item(key, hash, now, fetched, may_read)?;
        let ok = match opts.ttl {
            true => Some(s.journal_gate(key, hash).ok_or(Wait::Busy)?),
            false => None,
        };
        if let (None, Some(ok)) = (found, &ok) {
            s.drop_unreached(key, hash, fetched, ok);
        }
        let mut created = false;
        let loc = match (found, opts.vivify) {
            (Some(loc), _) => loc,
            (None, Some(exptime)) => {
                let new = NewItem {
                    exptime,
                    bits: key_bits(opts.binary_key),
                    ..Default::default()
                };
                match s.insert(key, hash, new, &[]) {
                    Ok(loc) => {
                        created = true;
                        loc
                    }
                    Err(InsertError::Busy) => return Err(Wait::Busy),
                    Err(_) => return Ok(None),
                }
            }
            (None, None) => return Ok(None),
        };
        let mut item = MetaItem {
            shard: &mut s,
            loc,
            ok,
            created,
            won: created,
        };
        let r = f(&mut item);
        if !opts.no_update {
            s.hit(hash, loc, now);
        }
        Ok(Some(r))
    }

    /// `ma`: applies the arithmetic (or creates the item), then `f` with the
    /// new value and the item, which it may give an exptime.
    /// `fetched`, `may_read`: as for [`touch`](Engine::touch).
    pub fn meta_arith<R>(
        &self,
        key: &[u8],
        now: u32,
        a: &MetaArith,
        fetched: &Fetched,
        may_read: bool,
        f: impl FnOnce(u64, &mut MetaItem<'_>) -> R,
    ) -> Result<Result<R, ArithFailed>, Wait> {
        let (hash, mut s) = self.lock_key(key, now);
        let found = s.settle_for_change(key, hash, now, fetched, may_read)?;
        let r = ops::arith(
            &mut s,
            key,
            hash,
            found,
            Arith::Unsigned {
                incr: a.incr,
                delta: a.delta,
            },
            a.compare_cas,
            now,
        );
        let (value, loc, created) = match r {
            ArithResult::Busy => return Err(Wait::Busy),
            ArithResult::Ok { value, loc, .. } => (value, loc, false),
            ArithResult::NotFound => match a.vivify {
                None => return Ok(Err(ArithFailed::NotFound)),
                Some(initial) => {
                    let digits = initial.to_string();
                    let new = NewItem {
                        bits: key_bits(a.binary_key),
                        ..Default::default()
                    };
                    match s.insert(key, hash, new, &[digits.as_bytes()]) {
                        Ok(loc) => (initial, loc, true),
                        Err(InsertError::Busy) => return Err(Wait::Busy),
                        Err(_) => return Ok(Err(ArithFailed::NoMemoryForNew)),
                    }
                }
            },
            ArithResult::NonNumeric | ArithResult::Overflow => {
                return Ok(Err(ArithFailed::NonNumeric))
            }
            ArithResult::NoMemory => return Ok(Err(ArithFailed::NoMemory)),
            ArithResult::CasMismatch => return Ok(Err(ArithFailed::CasMismatch)),
        };
        // The change above passed the journal gate in this lock hold, so
        // asking again is immediate (never a retry, which would apply the
        // change twice).
        let ok = s.journal_gate(key, hash);
        let mut item = MetaItem {
            shard: &mut s,
            loc,
            ok,
            created,
            won: false,
        };
        Ok(Ok(f(value, &mut item)))
    }
}

fn key_bits(binary: bool) -> u8 {
    if binary {
        item::KEY_BINARY
    } else {
        0
    }
}
