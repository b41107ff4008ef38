//! The `Clock` port: where time comes from, so tests can pin it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Source of the current time.
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;

    /// The current time in milliseconds since the Unix epoch (see [`unix_millis`]).
    fn unix_millis(&self) -> i64 {
        unix_millis(self.now())
    }

    /// The current time in whole seconds since the Unix epoch (see [`unix_seconds`]).
    fn unix_seconds(&self) -> i64 {
        unix_seconds(self.now())
    }
}

/// Milliseconds from the Unix epoch to `time`: 0 for times before it, `i64::MAX` past
/// the year 292 million.
pub fn unix_millis(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |elapsed| i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX))
}

/// Whole seconds from the Unix epoch to `time`: 0 for times before it.
pub fn unix_seconds(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).map_or(0, |elapsed| i64::try_from(elapsed.as_secs()).unwrap_or(i64::MAX))
}

/// The time `millis` milliseconds after the Unix epoch; the epoch for negative values.
pub fn from_unix_millis(millis: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Formats a time as RFC 3339 in UTC with second precision.
pub fn rfc3339(time: SystemTime) -> String {
    match jiff::Timestamp::try_from(time) {
        Ok(timestamp) => timestamp.round(jiff::Unit::Second).unwrap_or(timestamp).to_string(),
        Err(_) => "1970-01-01T00:00:00Z".to_owned(),
    }
}

/// A clock that always returns the same instant (tests, snapshots).
#[derive(Debug, Clone, Copy)]
pub struct FixedClock(pub SystemTime);

impl Clock for FixedClock {
    fn now(&self) -> SystemTime {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_times_round_trip_and_clamp_before_the_epoch() {
        let time = UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        assert_eq!(unix_millis(time), 1_700_000_000_123);
        assert_eq!(unix_seconds(time), 1_700_000_000);
        assert_eq!(from_unix_millis(1_700_000_000_123), time);
        assert_eq!(unix_millis(UNIX_EPOCH - Duration::from_secs(1)), 0);
        assert_eq!(from_unix_millis(-5), UNIX_EPOCH);
        assert_eq!(FixedClock(time).unix_millis(), 1_700_000_000_123);
        assert_eq!(FixedClock(time).unix_seconds(), 1_700_000_000);
    }
}
