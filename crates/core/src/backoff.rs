//! How long to wait before trying again: exponential growth from a first delay up to a
//! cap, jitter, and a server's requested wait (`Retry-After`) honoured. The one place
//! that knows this arithmetic; each caller states its own parameters.

use std::time::Duration;

use crate::random::RandomSource;

/// A retry or restart policy: the wait after the n-th failure in a row is
/// `first × factor^(n − 1)`, at most `cap`, then moved by [`Jitter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Wait after the first failure.
    pub first: Duration,
    /// Growth per further failure (2 doubles).
    pub factor: u32,
    /// Longest wait before jitter.
    pub cap: Duration,
    /// Random movement of each wait, so clients that failed together don't retry in step.
    pub jitter: Jitter,
    /// What a server's requested wait does to the computed one.
    pub retry_after: RetryAfter,
}

/// Random movement of a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Waits are exact.
    None,
    /// Moved uniformly by up to `percent` % (at most 100) either way, after the cap: a
    /// capped wait may end up that much longer than the cap.
    AroundCap {
        /// Largest movement, in percent of the wait.
        percent: u32,
    },
    /// Moved uniformly by up to `percent` % (at most 100) either way, then capped again:
    /// never longer than the cap.
    WithinCap {
        /// Largest movement, in percent of the wait.
        percent: u32,
    },
}

/// How a server's requested wait (`Retry-After`, a rate limit's `retry_after`) combines
/// with the computed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter {
    /// Whether the server's wait replaces the computed one or only lengthens it.
    pub rule: ServerWait,
    /// Longest server wait honoured; a malformed or hostile header must not park a
    /// client for days.
    pub longest: Duration,
}

/// Whether a server's requested wait replaces the computed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerWait {
    /// The server knows when it will take requests again: its wait is used, even when
    /// shorter than the computed one.
    Replaces,
    /// The longer of the two: a short hint does not cut a backoff short.
    AtLeast,
}

impl RetryAfter {
    /// The server's wait, whole, replacing the computed one.
    pub const REPLACES: Self = Self { rule: ServerWait::Replaces, longest: Duration::MAX };
}

impl Backoff {
    /// `first` doubling up to `cap`, exact waits, a server's wait used as given.
    pub const fn doubling(first: Duration, cap: Duration) -> Self {
        Self { first, factor: 2, cap, jitter: Jitter::None, retry_after: RetryAfter::REPLACES }
    }

    /// The same backoff with `jitter`.
    #[must_use]
    pub const fn with_jitter(self, jitter: Jitter) -> Self {
        Self { jitter, ..self }
    }

    /// The same backoff honouring a server's wait as `retry_after` says.
    #[must_use]
    pub const fn with_retry_after(self, retry_after: RetryAfter) -> Self {
        Self { retry_after, ..self }
    }

    /// The wait after `failures` failures in a row (1 for the first; 0 counts as 1),
    /// without jitter.
    pub fn nominal(&self, failures: u32) -> Duration {
        let first = self.first.as_nanos();
        let cap = self.cap.as_nanos();
        let grown = u128::from(self.factor)
            .checked_pow(failures.saturating_sub(1))
            .and_then(|growth| first.checked_mul(growth))
            .unwrap_or(if first == 0 { 0 } else { u128::MAX });
        from_nanos(grown.min(cap))
    }

    /// The wait after `failures` failures in a row, with jitter drawn from `random`.
    pub fn delay(&self, failures: u32, random: &mut dyn RandomSource) -> Duration {
        let nominal = self.nominal(failures);
        match self.jitter {
            Jitter::None => nominal,
            Jitter::AroundCap { percent } => jittered(nominal, percent, random),
            Jitter::WithinCap { percent } => jittered(nominal, percent, random).min(self.cap),
        }
    }

    /// The wait after `failures` failures in a row when the server asked for
    /// `requested` (if it did), as [`Backoff::retry_after`] says.
    pub fn wait(&self, failures: u32, requested: Option<Duration>, random: &mut dyn RandomSource) -> Duration {
        let Some(requested) = requested else { return self.delay(failures, random) };
        let requested = requested.min(self.retry_after.longest);
        match self.retry_after.rule {
            ServerWait::Replaces => requested,
            ServerWait::AtLeast => self.delay(failures, random).max(requested),
        }
    }
}

/// `wait` moved uniformly within `percent` % either way, to the millisecond.
fn jittered(wait: Duration, percent: u32, random: &mut dyn RandomSource) -> Duration {
    let millis = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    let spread = millis.saturating_mul(u64::from(percent.min(100))) / 100;
    let offset = match spread.checked_mul(2).and_then(|width| width.checked_add(1)) {
        Some(width) => random.next_u64() % width,
        None => random.next_u64(),
    };
    Duration::from_millis(millis.saturating_sub(spread).saturating_add(offset))
}

/// A duration of `nanos` nanoseconds, [`Duration::MAX`] when longer.
fn from_nanos(nanos: u128) -> Duration {
    const NANOS_PER_SECOND: u128 = 1_000_000_000;
    match u64::try_from(nanos / NANOS_PER_SECOND) {
        Ok(seconds) => Duration::new(seconds, (nanos % NANOS_PER_SECOND) as u32),
        Err(_) => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SeededRandom;

    const SECOND: Duration = Duration::from_secs(1);

    fn seconds(backoff: &Backoff, failures: std::ops::RangeInclusive<u32>) -> Vec<u64> {
        failures.map(|failures| backoff.nominal(failures).as_secs()).collect()
    }

    #[test]
    fn waits_grow_by_the_factor_up_to_the_cap() {
        let doubling = Backoff::doubling(SECOND, Duration::from_secs(30));
        assert_eq!(seconds(&doubling, 1..=7), [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(doubling.nominal(0), SECOND, "no failure yet counts as the first");
        let tripling = Backoff { factor: 3, ..doubling };
        assert_eq!(seconds(&tripling, 1..=5), [1, 3, 9, 27, 30]);
        let steady = Backoff { factor: 1, ..doubling };
        assert_eq!(seconds(&steady, 1..=3), [1, 1, 1]);
    }

    #[test]
    fn huge_counts_and_settings_saturate_at_the_cap() {
        let doubling = Backoff::doubling(Duration::from_millis(500), Duration::from_secs(30));
        assert_eq!(doubling.nominal(u32::MAX), Duration::from_secs(30));
        let endless = Backoff::doubling(Duration::from_secs(u64::MAX), Duration::MAX);
        assert_eq!(endless.nominal(2), Duration::MAX);
        assert_eq!(endless.nominal(u32::MAX), Duration::MAX);
        let nothing = Backoff::doubling(Duration::ZERO, Duration::from_secs(30));
        assert_eq!(nothing.nominal(u32::MAX), Duration::ZERO);
        let jittered = endless.with_jitter(Jitter::AroundCap { percent: 1000 });
        assert!(jittered.delay(200, &mut || u64::MAX) > Duration::from_secs(1));
    }

    #[test]
    fn exact_waits_ignore_the_random_source() {
        let backoff = Backoff::doubling(SECOND, Duration::from_secs(30));
        assert_eq!(backoff.delay(3, &mut || u64::MAX), Duration::from_secs(4));
    }

    #[test]
    fn jitter_stays_within_its_percentage_and_varies() {
        let backoff = Backoff::doubling(Duration::from_secs(5), Duration::from_secs(300))
            .with_jitter(Jitter::AroundCap { percent: 10 });
        let mut random = SeededRandom::new(7);
        let firsts: std::collections::HashSet<Duration> = (0..1000).map(|_| backoff.delay(1, &mut random)).collect();
        assert!(firsts.iter().all(|wait| (Duration::from_millis(4500)..=Duration::from_millis(5500)).contains(wait)));
        assert!(firsts.len() > 100, "{}", firsts.len());
        assert_eq!(backoff.delay(1, &mut || 0_u64), Duration::from_millis(4500), "the lowest draw");
        assert_eq!(backoff.delay(1, &mut || 1000_u64), Duration::from_millis(5500), "the highest draw");
    }

    #[test]
    fn jitter_around_the_cap_may_pass_it_but_within_the_cap_may_not() {
        let around = Backoff::doubling(SECOND, Duration::from_secs(60)).with_jitter(Jitter::AroundCap { percent: 10 });
        let within = around.with_jitter(Jitter::WithinCap { percent: 10 });
        let highest = &mut || 12_000_u64;
        assert_eq!(around.delay(20, highest), Duration::from_secs(66));
        assert_eq!(within.delay(20, highest), Duration::from_secs(60));
        assert_eq!(within.delay(20, &mut || 0_u64), Duration::from_secs(54));
    }

    #[test]
    fn a_server_wait_replaces_the_computed_one_up_to_its_longest() {
        let backoff = Backoff::doubling(Duration::from_millis(500), Duration::from_secs(30))
            .with_retry_after(RetryAfter { rule: ServerWait::Replaces, longest: Duration::from_secs(60) });
        let random = &mut || 0_u64;
        assert_eq!(backoff.wait(1, Some(Duration::from_secs(3)), random), Duration::from_secs(3));
        assert_eq!(backoff.wait(6, Some(Duration::ZERO), random), Duration::ZERO);
        assert_eq!(backoff.wait(1, Some(Duration::from_secs(3600)), random), Duration::from_secs(60));
        assert_eq!(backoff.wait(2, None, random), SECOND);
    }

    #[test]
    fn a_server_wait_wins_over_the_computed_one_when_longer() {
        let backoff = Backoff::doubling(Duration::from_secs(5), Duration::from_secs(300))
            .with_retry_after(RetryAfter { rule: ServerWait::AtLeast, longest: Duration::from_secs(3600) });
        let random = &mut || 0_u64;
        assert_eq!(backoff.wait(1, Some(Duration::from_secs(30)), random), Duration::from_secs(30));
        assert_eq!(backoff.wait(2, Some(SECOND), random), Duration::from_secs(10));
        assert_eq!(backoff.wait(1, Some(Duration::MAX), random), Duration::from_secs(3600));
    }

    #[tokio::test(start_paused = true)]
    async fn sleeping_the_waits_takes_their_sum() {
        let backoff = Backoff::doubling(SECOND, Duration::from_secs(4));
        let started = tokio::time::Instant::now();
        for failures in 1..=4 {
            tokio::time::sleep(backoff.nominal(failures)).await;
        }
        assert_eq!(started.elapsed(), Duration::from_secs(1 + 2 + 4 + 4));
    }
}
