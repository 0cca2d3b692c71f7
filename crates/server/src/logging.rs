//! The log level, which `-v` sets at start and the `verbosity N` command
//! changes while the server runs (as memcached's does): 0 logs `info` and
//! above, 1 `debug`, 2 and more `trace`.
//!
//! The binary installs its subscriber with a reload handle and registers
//! it here ([`set_reloader`]); a server run in-process (tests) has none,
//! and `verbosity` then only changes what `stats settings` reports.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

static LEVEL: AtomicU32 = AtomicU32::new(0);

type Reloader = Box<dyn Fn(&str) -> Result<(), String> + Send + Sync>;
static RELOADER: OnceLock<Reloader> = OnceLock::new();

/// The tracing filter for a memcached verbosity level.
pub fn filter_for(level: u32) -> &'static str {
    match level {
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

/// Registers the function that replaces the log filter (once).
pub fn set_reloader(f: Reloader) {
    let _ = RELOADER.set(f);
}

/// The verbosity now.
pub fn verbosity() -> u32 {
    LEVEL.load(Ordering::Relaxed)
}

/// Records the verbosity set at start, without touching the filter (which
/// `RUST_LOG` may have chosen).
pub fn init(level: u32) {
    LEVEL.store(level, Ordering::Relaxed);
}

/// Applies `verbosity N`: the filter becomes the level's, whatever
/// `RUST_LOG` said at start.
pub fn set_verbosity(level: u32) {
    let old = LEVEL.swap(level, Ordering::Relaxed);
    if let Some(reload) = RELOADER.get() {
        match reload(filter_for(level)) {
            Ok(()) => tracing::info!(from = old, to = level, "verbosity changed"),
            Err(e) => tracing::warn!(error = %e, "cannot change the log level"),
        }
    }
}

/// `cache_memlimit N` with N other than `-m`: refused with memcached's
/// failure reply (`MEMLIMIT_ADJUST_FAILED`), and the log says why. The RAM
/// tier's segments, shards and index are sized from `-m` at start and
/// cannot be resized while it runs; restart with `-m N` instead.
pub fn memlimit_refused(asked_mb: u32, why: &tiercache_engine::ConfigError) {
    tracing::warn!(asked_mb, "cache_memlimit {asked_mb} refused: {why}");
}

/// `cache_memlimit` applied.
pub fn memlimit_set(mb: u32) {
    tracing::info!(
        mb,
        "cache_memlimit: the memory limit is now {mb} MiB (a lower one is reached as the cache evicts)"
    );
}
