//! Time: unix seconds, and memcached's exptime rules.

use std::time::{SystemTime, UNIX_EPOCH};

/// memcached treats exptimes above 30 days as absolute unix times.
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

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
