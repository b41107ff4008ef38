//! The `Clock` port: where time comes from, so tests can pin it.

use std::time::SystemTime;

/// Source of the current time.
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    fn now(&self) -> SystemTime;
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
