//! The start log's line about where the data goes: the flash devices with
//! their sizes and classes, the shutdown snapshot's path, and the memory
//! for RAM items; or that there is no flash tier.

use super::Config;
use std::path::Path;

/// `1 GiB`, `64 MiB`, `512 KiB`: the largest unit that divides `bytes`
/// (else in MiB with a decimal).
pub fn human(bytes: u64) -> String {
    for (unit, size) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{} {unit}", bytes / size);
        }
    }
    if bytes >= 1 << 20 {
        return format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20));
    }
    format!("{bytes} bytes")
}

/// A path as given, with its absolute form when it is relative.
fn shown(p: &Path) -> String {
    match std::path::absolute(p) {
        Ok(a) if a != p => format!("{} ({})", p.display(), a.display()),
        _ => p.display().to_string(),
    }
}

impl Config {
    /// One line: where the data goes and how large.
    pub fn data_summary(&self) -> String {
        let ram = format!("RAM {} MiB (-m, index included)", self.cache.memory_mb);
        let (Ok(paths), Ok(classes)) = (self.flash_paths(), self.flash_classes()) else {
            return ram;
        };
        if paths.is_empty() {
            return format!(
                "data: {ram}; no flash tier (ext_path=none): nothing is kept across a restart"
            );
        }
        let devices: Vec<String> = paths
            .iter()
            .zip(classes)
            .map(|((p, size), class)| {
                let size = match size {
                    0 => "the whole device".to_string(),
                    s => human(*s),
                };
                format!("{} {size} {}", shown(p), class.name())
            })
            .collect();
        let snapshot = match self.snapshot_path() {
            Ok(Some(s)) => shown(&s),
            _ => "none".into(),
        };
        format!(
            "data: {ram}; flash {}; shutdown snapshot {snapshot}",
            devices.join(", ")
        )
    }
}
