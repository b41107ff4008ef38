//! How long a crashed server waits before it may start again: doubling from a base up to a
//! cap, with jitter so servers that crashed together don't restart together.

use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

/// Share of the delay added or taken away at random.
const JITTER: f64 = 0.1;

/// Exponential backoff between restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay after the first crash.
    pub base: Duration,
    /// Longest delay.
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { base: Duration::from_secs(1), cap: Duration::from_secs(60) }
    }
}

impl Backoff {
    /// The delay before a restart after `failures` consecutive failures (1 for the first),
    /// without jitter.
    pub fn nominal(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(30);
        self.base.saturating_mul(1 << doublings).min(self.cap)
    }

    /// [`Backoff::nominal`] with ±10 % jitter, never above the cap.
    pub fn delay(&self, failures: u32) -> Duration {
        let nominal = self.nominal(failures).as_secs_f64();
        let spread = (random_unit() * 2.0 - 1.0) * JITTER;
        Duration::from_secs_f64((nominal * (1.0 + spread)).max(0.0)).min(self.cap)
    }
}

/// A number in [0, 1) that differs between calls: the standard library's randomly keyed
/// hasher is enough for jitter and needs no random-number crate.
fn random_unit() -> f64 {
    let bits = std::collections::hash_map::RandomState::new().build_hasher().finish();
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_one_second_up_to_a_minute() {
        let backoff = Backoff::default();
        let nominal: Vec<u64> = (1..=8).map(|failures| backoff.nominal(failures).as_secs()).collect();
        assert_eq!(nominal, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff.nominal(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn jitter_stays_within_ten_percent() {
        let backoff = Backoff::default();
        let delays: Vec<Duration> = (0..50).map(|_| backoff.delay(3)).collect();
        assert!(delays.iter().all(|delay| (3.6..=4.4).contains(&delay.as_secs_f64())), "{delays:?}");
        assert!(delays.iter().any(|delay| *delay != delays[0]), "jitter varies");
        assert!(backoff.delay(100) <= backoff.cap);
    }
}
