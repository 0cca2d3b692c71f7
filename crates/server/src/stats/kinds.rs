//! The metric name and unit each `stats` line is exported under in
//! `/metrics`, from its name and its declared kind (counter or gauge: each
//! line declares it where it is written, [`super::line`], or beside the
//! figure it shows, [`tiercache_engine::stat`]), so that `/metrics` types
//! every stat the way Prometheus expects (`promtool check metrics`:
//! counters end in `_total`, units are base units, no `_sum` outside
//! histograms).

use super::line::Kind;

/// How a stat is exported: its metric name (without the `tiercache_`
/// prefix), the factor from the stat's unit to the metric's base unit, and
/// whether it is a counter.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    pub name: String,
    pub scale: f64,
    pub counter: bool,
}

/// A stat's export, given the length of an SLA-view "minute" in seconds.
/// Counters get `_total`; microseconds and minutes become seconds
/// (`_us_sum`, `_us`, `_minutes` → `_seconds`); `rusage_*` are seconds.
pub fn export(stat: &str, kind: Kind, minute_secs: f64) -> Export {
    let counter = kind == Kind::Counter;
    let clean: String = stat
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let (base, scale) = if let Some(b) = clean.strip_suffix("_us_sum") {
        (format!("{b}_seconds"), 1e-6)
    } else if let Some(b) = clean.strip_suffix("_us") {
        (format!("{b}_seconds"), 1e-6)
    } else if let Some(b) = clean.strip_suffix("_minutes") {
        (format!("{b}_seconds"), minute_secs)
    } else if clean.starts_with("rusage_") && counter {
        (format!("{clean}_seconds"), 1.0)
    } else {
        (clean, 1.0)
    };
    let name = if counter {
        format!("{base}_total")
    } else {
        base
    };
    Export {
        name,
        scale,
        counter,
    }
}

/// The gauge name `/metrics` used for a counter before counters were typed
/// (0.1): still served, marked deprecated in its help, so dashboards keep
/// working while they move to the `_total` name. `None` for the stats whose
/// old name was not a valid metric (`_us_sum`) and for gauges.
pub fn legacy_gauge(stat: &str, kind: Kind, minute_secs: f64) -> Option<Export> {
    if kind != Kind::Counter || stat.ends_with("_us_sum") {
        return None;
    }
    let mut e = export(stat, kind, minute_secs);
    e.name.truncate(e.name.len() - "_total".len());
    if stat.starts_with("rusage_") {
        e.name.truncate(e.name.len() - "_seconds".len());
    }
    e.counter = false;
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use Kind::{Counter, Gauge};

    #[test]
    fn counters_get_total_and_base_units() {
        let e = export("get_hits", Counter, 60.0);
        assert_eq!(
            (e.name.as_str(), e.scale, e.counter),
            ("get_hits_total", 1.0, true)
        );
        let e = export("flash_fast_device_us_sum", Counter, 60.0);
        assert_eq!(e.name, "flash_fast_device_seconds_total");
        assert_eq!(e.scale, 1e-6);
        let e = export("segment_evacuate_us", Counter, 60.0);
        assert_eq!(e.name, "segment_evacuate_seconds_total");
        let e = export("rusage_user", Counter, 60.0);
        assert_eq!(e.name, "rusage_user_seconds_total");
    }

    #[test]
    fn levels_stay_gauges() {
        for s in [
            "curr_items",
            "bytes",
            "flash_fast_queue_depth",
            "flash_fast_segments",
        ] {
            let e = export(s, Gauge, 60.0);
            assert!(!e.counter, "{s}");
            assert_eq!(e.name, s);
        }
        let e = export("segment_evacuate_max_us", Gauge, 60.0);
        assert_eq!(
            (e.name.as_str(), e.counter),
            ("segment_evacuate_max_seconds", false)
        );
        let e = export("sla_unavailable_minutes", Gauge, 60.0);
        assert_eq!(
            (e.name.as_str(), e.scale),
            ("sla_unavailable_seconds", 60.0)
        );
    }

    #[test]
    fn legacy_names_are_the_old_gauges() {
        assert_eq!(
            legacy_gauge("get_hits", Counter, 60.0).unwrap().name,
            "get_hits"
        );
        assert_eq!(
            legacy_gauge("rusage_user", Counter, 60.0).unwrap().name,
            "rusage_user"
        );
        let e = legacy_gauge("time_in_listen_disabled_us", Counter, 60.0).unwrap();
        assert_eq!(
            (e.name.as_str(), e.scale),
            ("time_in_listen_disabled_seconds", 1e-6)
        );
        assert!(legacy_gauge("flash_fast_device_us_sum", Counter, 60.0).is_none());
        assert!(legacy_gauge("curr_items", Gauge, 60.0).is_none());
    }
}
