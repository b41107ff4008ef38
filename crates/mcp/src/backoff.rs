//! How long a crashed server waits before it may start again: core's backoff doubling
//! from a base up to a cap, with jitter so servers that crashed together don't restart
//! together.

use std::time::Duration;

use squidbot_core::backoff::{Backoff as Policy, Jitter};
use squidbot_core::random::SystemRandom;

/// Share of the delay added or taken away at random, in percent.
const JITTER_PERCENT: u32 = 10;

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
    /// Core's policy with these parameters: doubling, ±10 % jitter within the cap.
    fn policy(&self) -> Policy {
        Policy::doubling(self.base, self.cap).with_jitter(Jitter::WithinCap { percent: JITTER_PERCENT })
    }

    /// The delay before a restart after `failures` consecutive failures (1 for the first),
    /// without jitter.
    pub fn nominal(&self, failures: u32) -> Duration {
        self.policy().nominal(failures)
    }

    /// [`Backoff::nominal`] with ±10 % jitter, never above the cap.
    pub fn delay(&self, failures: u32) -> Duration {
        self.policy().delay(failures, &mut SystemRandom)
    }
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
