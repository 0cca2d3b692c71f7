//! Where each changed key's invalidation stands, per store: the state
//! [`super::invalidate`] sets, the store holds and the flusher's jobs
//! answer ([`super::flush`]). A floor below all three.

/// Where a key's invalidation stands ([`super::SmallStore::gate`]).
pub(super) struct Inval {
    pub(super) key: Vec<u8>,
    pub(super) state: InvalState,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InvalState {
    /// The invalidation job of this number will rewrite the key's set.
    Queued(u64),
    /// No copy of the key is left on flash (none was admitted since the
    /// job); `found`: the job's set held it, unexpired (until a change
    /// takes that answer).
    Done { found: bool },
}
