//! `[flash]`: the flash tier's settings (memcached's `ext_*` options and
//! tiercache's own), as the TOML file and `--print-config` spell them: one
//! section, most of it the engine's own settings types, and
//! [`Config::engine_flash`], what the engine gets of it.

use super::*;
use tiercache_engine::flash::TierParams;
use tiercache_engine::FlashConfig;

/// The `[flash]` section (memcached's `ext_*` options): the settings given
/// by a name or a spelling that this front end parses and checks at start
/// (with the words of its `-o` options), and the engine's own
/// [`FlashConfig`] for the rest, read into it as they are (its serde names
/// are the TOML keys). [`Config::engine_flash`] fills in what the first
/// part names.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlashSection {
    /// Devices as `path:size` or `path:size:class` (`ext_path`,
    /// repeatable); size like 64G, and may be left out for a block device;
    /// class `fast` (default; memcached's `default`, `lowttl`) or
    /// `capacity` (memcached's `compact`, `coldcompact`, `old`). Empty = no
    /// flash tier.
    pub paths: Vec<String>,
    /// Flash segment size in bytes (`ext_page_size`, in MB as memcached;
    /// 0 = 4 MiB, or more for large RAM segments).
    pub page_size: usize,
    /// Which flash hits copy the item back to RAM: never, second, always (`ext_promote`).
    pub promote: String,
    /// Flash reader (`ext_io`): auto (io_uring where it works, else the
    /// pread pool), uring (or a start-up error) or pool.
    pub io: String,
    /// What the scheduler's feedback measures (`ext_nhc_feedback`):
    /// `balance` (the classes' read latencies, the default) or `throughput`
    /// (flash reads served per second). docs/CLASSES.md.
    pub nhc_feedback: String,
    /// Copies of hot fast items on the capacity class (`ext_nhc_copies`):
    /// `auto` (the default: while the scheduler finds the fast class queued
    /// and the capacity class with headroom), `always` or `never`.
    /// docs/CLASSES.md, "Copies where they pay".
    pub nhc_copies: String,
    /// The flash log's settings as the engine takes them: `wbuf_count`,
    /// `item_size`, `reinsert`, `write_budget`, `max_write_wait` (ms),
    /// `wipe`, `low_ttl`, `crash_safe`, `nhc` (documented on the fields of
    /// [`TierParams`]).
    #[serde(flatten)]
    pub tier: TierParams,
    /// The rest of the engine's flash settings as it takes them:
    /// `threads`, `avg_item_size` and the `small_*` settings (documented on
    /// the fields of [`FlashConfig`]).
    #[serde(flatten)]
    pub engine: FlashConfig,
}

impl Default for FlashSection {
    fn default() -> Self {
        FlashSection {
            paths: Vec::new(),
            page_size: 0,
            promote: "second".into(),
            io: "auto".into(),
            nhc_feedback: "balance".into(),
            nhc_copies: "auto".into(),
            tier: TierParams::default(),
            engine: FlashConfig::default(),
        }
    }
}

impl Config {
    /// The engine's flash settings: the section's own, with the devices,
    /// the segment size, the promotion rule, the reader, the scheduler's
    /// choices, the snapshot and the journal's mark files that the spelled
    /// settings name. None without a flash device.
    pub fn engine_flash(&self) -> Result<Option<FlashConfig>> {
        if self.flash.paths.is_empty() {
            return Ok(None);
        }
        let mut f = FlashConfig {
            params: self.flash.tier.clone(),
            ..self.flash.engine.clone()
        };
        f.paths = self.flash_paths()?;
        f.io = self.io_mode()?;
        f.readers = self.server.threads;
        f.snapshot = self.snapshot_path()?;
        f.untrusted_marks = f
            .paths
            .first()
            .map(|(p, _)| tiercache_engine::flash::distrust::default_files(p))
            .unwrap_or_default();
        let t = &mut f.params;
        t.segment_size = self.flash_page_size();
        t.promote = Promote::parse(&self.flash.promote).unwrap_or(Promote::Second);
        t.classes = self.flash_classes()?;
        t.nhc_feedback = self.nhc_feedback()?;
        t.nhc_copies = self.nhc_copies()?;
        Ok(Some(f))
    }
}

/// The largest RAM segment (an index entry addresses 8 MiB), and with a
/// flash tier (a flash segment of at most 8 MiB holds two). Items larger
/// than the segment size (`-I` above it) get a jumbo segment each.
pub const MAX_SEGMENT: usize = tiercache_engine::MAX_SEGMENT_BYTES;
pub const MAX_SEGMENT_WITH_FLASH: usize = 3 << 20;

/// The flash file the binary uses when nothing else is configured.
pub const DEFAULT_FLASH: &str = "tiercache.flash:1G";
/// The largest `ext_small_max`: one object (20 bytes of header) in a 4 KiB
/// set after its 32-byte header.
pub const SMALL_MAX_LIMIT: usize = 4096 - 32 - 20;
