//! The flash tier's settings and its promotion policy's names (the device
//! classes are in `flash/class.rs`).
//!
//! [`TierParams`] is part of the server's `[flash]` section as it is: a
//! setting a TOML file (or `-o`) gives as a number or a flag has its serde
//! name here (the `ext_` option without `ext_`); a setting given by a name
//! the front end parses and checks (`promote`, the classes from
//! `ext_path`, the NHC choices, the segment size that `0` leaves to the
//! RAM segments) is skipped by serde and set from it at start.

pub use crate::flash::class::DeviceClass;
use serde::{Deserialize, Serialize};
pub use tiercache_policy::nhc::Objective;

/// Settings of the flash tier.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct TierParams {
    /// Bytes per segment (a multiple of 4 KiB, at most 8 MiB; from
    /// `ext_page_size`, where 0 means as the RAM segments need).
    #[serde(skip)]
    pub segment_size: usize,
    /// Write buffers (each `segment_size` of RAM): one open, the rest
    /// queued or in flight (`ext_wbuf_count`).
    #[serde(rename = "wbuf_count")]
    pub write_buffers: usize,
    /// Items with fewer value bytes stay in RAM only (memcached's ext_item_size).
    #[serde(rename = "item_size")]
    pub min_value_size: usize,
    /// Reinsert items that were read while on flash when their segment is
    /// reclaimed (`ext_reinsert`).
    #[serde(rename = "reinsert")]
    pub reinsert_hits: bool,
    /// When a get served from flash copies the item back to RAM (`ext_promote`).
    #[serde(skip)]
    pub promote: Promote,
    /// Items that expire within this many seconds go to their own segments
    /// (memcached's ext_low_ttl), so that expiry frees whole segments; 0 =
    /// one stream for all. Needs at least 3 write buffers.
    pub low_ttl: u32,
    /// Device write budget in bytes per second (0 = none): admission
    /// drops past it (`ext_write_budget`).
    pub write_budget: u64,
    /// How long a RAM evacuation waits for write-buffer room (its shard's
    /// sets told to retry meanwhile) before it goes on without, evicting
    /// what it cannot write (`ext_max_write_wait`, in milliseconds; zero:
    /// as long as the device needs, sets throttled to its speed and
    /// nothing evicted).
    #[serde(with = "millis")]
    pub max_write_wait: std::time::Duration,
    /// Overwrite devices that hold something other than our format (`ext_wipe`).
    pub wipe: bool,
    /// Keep the crash journal (tombstones before changes, the floor before
    /// reclaims), so that a crash can be recovered from (`ext_crash_safe`).
    /// Off: changes never wait for tombstones, and the devices are marked
    /// so that no later run recovers from them until its floor covers
    /// everything on them (docs/CRASH.md).
    #[serde(rename = "crash_safe")]
    pub crash_journal: bool,
    /// Each device's class, in the order of the devices (missing = fast;
    /// from `ext_path=PATH:SIZE:CLASS`).
    #[serde(skip)]
    pub classes: Vec<DeviceClass>,
    /// Non-hierarchical caching between the classes (`ext_nhc`): hits on
    /// items with a copy on both classes are shared by the scheduler's
    /// `load_admit`, and capacity hits are promoted only while it admits.
    /// Off: classic caching (every capacity hit is promoted, every
    /// dual-copy hit read from the fast class). Only with both classes.
    pub nhc: bool,
    /// What the scheduler's feedback measures (`ext_nhc_feedback`): the
    /// classes' read latencies ([`Objective::Balance`], the default) or
    /// the flash reads served per second ([`Objective::Throughput`]).
    #[serde(skip)]
    pub nhc_feedback: Objective,
    /// Copies of fast hits on the capacity class (`ext_nhc_copies`): None
    /// (`auto`, the default) while the scheduler finds that they pay,
    /// `Some(true)` always (tests), `Some(false)` never. Only with NHC.
    #[serde(skip)]
    pub nhc_copies: Option<bool>,
}

/// A [`Duration`](std::time::Duration) as whole milliseconds.
mod millis {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(d.as_millis() as u64)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

impl Default for TierParams {
    fn default() -> Self {
        TierParams {
            segment_size: 4 << 20,
            write_buffers: 4,
            min_value_size: 0,
            reinsert_hits: true,
            promote: Promote::Second,
            low_ttl: 3600,
            write_budget: 0,
            max_write_wait: std::time::Duration::from_millis(10),
            wipe: false,
            crash_journal: true,
            classes: Vec::new(),
            nhc: true,
            nhc_feedback: Objective::Balance,
            nhc_copies: None,
        }
    }
}

/// Which flash hits copy the item back to RAM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Promote {
    /// Never: flash items stay on flash (fewest device writes).
    Never,
    /// On the second hit while on flash (the first sets the entry's hit
    /// bit), while promoted items keep getting hit in RAM before they leave
    /// it; when they mostly leave unhit (reuse too far apart for RAM to
    /// keep them, as under uniform reads of a set much larger than RAM),
    /// only one second hit in 64 is promoted, sparing the copy and the
    /// later flash write.
    Second,
    /// On every hit.
    Always,
}

impl Promote {
    pub fn parse(s: &str) -> Option<Promote> {
        match s {
            "never" => Some(Promote::Never),
            "second" | "hit" => Some(Promote::Second),
            "always" => Some(Promote::Always),
            _ => None,
        }
    }
}

impl TierParams {
    /// The class of device number `dev`.
    pub fn class_of_device(&self, dev: usize) -> DeviceClass {
        self.classes.get(dev).copied().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcached_bucket_names_map_to_classes() {
        for (name, class) in [
            ("fast", DeviceClass::Fast),
            ("default", DeviceClass::Fast),
            ("lowttl", DeviceClass::Fast),
            ("capacity", DeviceClass::Capacity),
            ("compact", DeviceClass::Capacity),
            ("coldcompact", DeviceClass::Capacity),
            ("old", DeviceClass::Capacity),
        ] {
            assert_eq!(DeviceClass::parse(name), Some(class), "{name}");
        }
        assert_eq!(DeviceClass::parse("slow"), None);
        let p = TierParams {
            classes: vec![DeviceClass::Capacity],
            ..TierParams::default()
        };
        assert_eq!(p.class_of_device(0), DeviceClass::Capacity);
        assert_eq!(p.class_of_device(1), DeviceClass::Fast);
    }
}
