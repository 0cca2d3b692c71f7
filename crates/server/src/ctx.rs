//! What every request runs with: the per-batch [`Ctx`] (shared state, the
//! worker's counters, the time, the flash reader), how this run of a
//! request goes ([`Attempt`]) and what the connection does after it
//! ([`Outcome`]). Below both the data and the admin commands.

use crate::shared::Shared;
use crate::stats::WorkerStats;
use std::cell::{Cell, RefCell};
use tiercache_engine::clock::absolute_exptime;
use tiercache_engine::command::Wait;
use tiercache_engine::device::io::Reader;
use tiercache_engine::flash::Fetched;
use tiercache_engine::Engine;

/// What the connection does after a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Continue,
    /// Close once pending output is written (`quit`).
    Close,
    /// Stop the server (`shutdown`, when enabled).
    Shutdown,
    /// The request changed nothing: drop whatever it wrote and run it again
    /// once the flash tier has caught up ([`Wait::Busy`]) or once its keys'
    /// flash records are read ([`Wait::Reads`]).
    Wait(Wait),
    /// A multiget answered its keys before offset `at` of its key list (its
    /// replies stay; it wrote no `END`). The rest runs from `at` after
    /// `wait`, or, with none, once the output has drained.
    Stopped {
        at: usize,
        wait: Option<Wait>,
    },
    /// `watch`: the connection becomes a log stream of these kinds
    /// (`watch.rs`), unless replies are pending.
    Watch(u8),
}

/// Per-batch context: what every request of a worker's event needs.
pub struct Ctx<'a> {
    pub shared: &'a Shared,
    pub stats: &'a WorkerStats,
    pub now: u32,
    /// The worker's flash reader, when there is a flash tier.
    pub reader: Option<&'a RefCell<Box<dyn Reader>>>,
    /// Set when a request parks for back-pressure ([`Wait::Busy`]): the
    /// worker then looks at its connections again within a millisecond
    /// (with no flash tier, nothing else would wake them: an insert told
    /// to wait while the evacuator catches up).
    pub parked: &'a Cell<bool>,
}

/// How the connection runs a request this time.
#[derive(Debug, Clone, Copy)]
pub struct Attempt<'f> {
    /// Flash records of the request's keys read so far.
    pub fetched: &'f Fetched,
    /// The request may ask for its keys' flash records ([`Wait::Reads`])
    /// instead of answering a miss: a get or plain set on its first run, a
    /// delete while its re-reads last.
    pub may_read: bool,
    /// Output length at which a multiget stops after the key it is at
    /// (the connection's output bound; `usize::MAX`: never).
    pub out_limit: usize,
    /// Where a request that stopped at the output bound resumes (a key
    /// dump's cursor; 0: from the start).
    pub resume: usize,
}

impl Attempt<'_> {
    /// A request with nothing read and no output bound (requests that never
    /// touch flash, refused data blocks).
    pub fn plain() -> Attempt<'static> {
        static NONE: std::sync::OnceLock<Fetched> = std::sync::OnceLock::new();
        Attempt {
            fetched: NONE.get_or_init(Fetched::default),
            may_read: false,
            out_limit: usize::MAX,
            resume: 0,
        }
    }
}

impl Ctx<'_> {
    pub fn engine(&self) -> &Engine {
        &self.shared.engine
    }
    pub fn exptime(&self, e: i32) -> u32 {
        absolute_exptime(i64::from(e), self.now)
    }
}
