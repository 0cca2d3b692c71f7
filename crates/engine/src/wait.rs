//! Why a command must run again later: a floor module, so the shard and the
//! stores below RAM can say it without importing the command layer.

/// Why a command changed nothing and must run again later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The flash tier is behind: a tombstone for the key's flash records
    /// is not durable yet, or RAM for the change waits for the writer.
    Busy,
    /// The key has flash entries whose records were not read: read them
    /// (the key moved to flash since), then run the command again.
    Reads,
}
