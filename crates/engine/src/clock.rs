//! Time: unix seconds, memcached's exptime rules, and the fast monotonic
//! clock of the per-request and per-hold timestamps.

use std::time::{SystemTime, UNIX_EPOCH};

/// memcached treats exptimes above 30 days as absolute unix times.
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// A monotonic instant for timestamps taken on every request: each
/// request's latency (its start and end) and each hold of a shard's lock.
/// Read from the CPU's time-stamp counter where it is invariant (quanta,
/// calibrated against the OS clock), else from the OS clock: 12-18 ns a read
/// on this project's VM against 31 for `std::time::Instant` (the vDSO's
/// clock_gettime), whose three or four reads a request took 9-11% of a
/// worker's CPU in pipelined GETs (perf; bench/RESULTS.md, 2026-12-08).
/// Durations between two of them are `std::time::Duration`s.
pub type Instant = quanta::Instant;

/// Calibrates the fast clock now (the engine's start), so that no
/// request pays for it.
pub fn calibrate() {
    let _ = Instant::now();
}

pub fn unix_now() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(0)
}

/// Converts a client exptime to an absolute unix time (0 = never expires):
/// negative means already expired, up to 30 days is relative, above is absolute.
pub fn absolute_exptime(exptime: i64, now: u32) -> u32 {
    if exptime == 0 {
        0
    } else if exptime < 0 {
        1
    } else if exptime > REALTIME_MAXDELTA {
        if exptime <= i64::from(now) {
            1
        } else {
            exptime.min(i64::from(u32::MAX)) as u32
        }
    } else {
        (i64::from(now) + exptime).min(i64::from(u32::MAX)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exptime_rules() {
        let now = 1_700_000_000;
        assert_eq!(absolute_exptime(0, now), 0);
        assert_eq!(absolute_exptime(-1, now), 1);
        assert_eq!(absolute_exptime(10, now), now + 10);
        assert_eq!(absolute_exptime(REALTIME_MAXDELTA + 1, now), 1);
        assert_eq!(absolute_exptime(i64::from(now) + 100, now), now + 100);
    }
}
