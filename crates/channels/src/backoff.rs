//! When to restart a channel adapter whose receive loop failed: core's exponential
//! backoff with jitter, reset once the adapter has run well for a while, and platform
//! rate limits honoured.

use std::time::Duration;

use squidbot_core::backoff::{Backoff, Jitter, RetryAfter, ServerWait};
use squidbot_core::random::RandomSource;

use crate::port::{ChannelError, ChannelErrorKind};

/// The backoff's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffSettings {
    /// Wait after the first failure.
    pub base: Duration,
    /// Longest wait before jitter; the wait doubles up to it.
    pub cap: Duration,
    /// Each wait is moved by up to this percentage either way (at most 100), so
    /// adapters that failed together don't all retry at the same instant.
    pub jitter_percent: u32,
    /// A run at least this long counts as healthy: the next failure starts again from
    /// `base`.
    pub healthy_after: Duration,
    /// Longest `retry_after` honoured; a malformed header must not park the adapter
    /// for days.
    pub max_retry_after: Duration,
}

impl BackoffSettings {
    /// Core's backoff with these parameters: doubling, jitter around the cap, a rate
    /// limit's wait honoured when longer (up to `max_retry_after`).
    pub fn backoff(&self) -> Backoff {
        Backoff::doubling(self.base, self.cap)
            .with_jitter(Jitter::AroundCap { percent: self.jitter_percent })
            .with_retry_after(RetryAfter { rule: ServerWait::AtLeast, longest: self.max_retry_after })
    }
}

impl Default for BackoffSettings {
    /// 5 s doubling to 5 min, ±10 %, reset after 60 s of running, rate limits up to 1 h.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(5 * 60),
            jitter_percent: 10,
            healthy_after: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(60 * 60),
        }
    }
}

/// What to do with a failed adapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Run it again after this wait.
    After(Duration),
    /// Leave it stopped: its error was [`ChannelErrorKind::Fatal`] (report it unhealthy).
    Never,
}

/// One adapter's restart backoff; the manager keeps one per adapter.
#[derive(Debug, Clone)]
pub struct RestartBackoff {
    settings: BackoffSettings,
    failures: u32,
}

impl Default for RestartBackoff {
    fn default() -> Self {
        Self::new(BackoffSettings::default())
    }
}

impl RestartBackoff {
    /// A backoff with no failures yet.
    pub fn new(settings: BackoffSettings) -> Self {
        Self { settings, failures: 0 }
    }

    /// Failures since the adapter last ran healthily.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// Forgets past failures.
    pub fn reset(&mut self) {
        self.failures = 0;
    }

    /// The adapter's receive loop failed with `error` after running for `ran_for`; how
    /// long to wait before running it again. Jitter is drawn from `random`.
    pub fn after_failure(&mut self, error: &ChannelError, ran_for: Duration, random: &mut dyn RandomSource) -> Restart {
        if ran_for >= self.settings.healthy_after {
            self.failures = 0;
        }
        let requested = match error.kind {
            ChannelErrorKind::Fatal => return Restart::Never,
            ChannelErrorKind::RateLimited { retry_after } => Some(retry_after),
            ChannelErrorKind::Transient | ChannelErrorKind::Rejected => None,
        };
        self.failures = self.failures.saturating_add(1);
        Restart::After(self.settings.backoff().wait(self.failures, requested, random))
    }
}

#[cfg(test)]
mod tests {
    use squidbot_core::random::SeededRandom;

    use super::*;

    fn no_jitter() -> RestartBackoff {
        RestartBackoff::new(BackoffSettings { jitter_percent: 0, ..BackoffSettings::default() })
    }

    fn transient() -> ChannelError {
        ChannelError::transient("can't read the socket: reset by peer")
    }

    fn wait(restart: Restart) -> Duration {
        match restart {
            Restart::After(wait) => wait,
            Restart::Never => panic!("not restarted"),
        }
    }

    #[test]
    fn waits_double_from_five_seconds_up_to_five_minutes() {
        let mut backoff = no_jitter();
        let mut random = SeededRandom::new(1);
        let waits: Vec<u64> = (0..9)
            .map(|_| wait(backoff.after_failure(&transient(), Duration::from_secs(1), &mut random)).as_secs())
            .collect();
        assert_eq!(waits, vec![5, 10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(backoff.failures(), 9);
    }

    #[test]
    fn jitter_stays_within_ten_percent_and_varies() {
        let mut random = SeededRandom::new(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..1000 {
            let mut backoff = RestartBackoff::default();
            let first = wait(backoff.after_failure(&transient(), Duration::ZERO, &mut random));
            assert!(first >= Duration::from_millis(4500) && first <= Duration::from_millis(5500), "{first:?}");
            seen.insert(first);
        }
        assert!(seen.len() > 100, "{}", seen.len());
        let mut backoff = RestartBackoff::default();
        for _ in 0..20 {
            let capped = wait(backoff.after_failure(&transient(), Duration::ZERO, &mut random));
            assert!(capped <= Duration::from_secs(330), "{capped:?}");
        }
    }

    #[test]
    fn a_healthy_run_resets_the_backoff() {
        let mut backoff = no_jitter();
        let mut random = SeededRandom::new(1);
        for _ in 0..4 {
            backoff.after_failure(&transient(), Duration::from_secs(59), &mut random);
        }
        assert_eq!(wait(backoff.after_failure(&transient(), Duration::from_secs(59), &mut random)).as_secs(), 80);
        assert_eq!(wait(backoff.after_failure(&transient(), Duration::from_secs(60), &mut random)).as_secs(), 5);
        assert_eq!(backoff.failures(), 1);
        backoff.reset();
        assert_eq!(backoff.failures(), 0);
    }

    #[test]
    fn rate_limits_wait_at_least_retry_after() {
        let mut backoff = no_jitter();
        let mut random = SeededRandom::new(1);
        let limited = ChannelError::rate_limited(Duration::from_secs(30), "can't poll: 429");
        assert_eq!(wait(backoff.after_failure(&limited, Duration::ZERO, &mut random)), Duration::from_secs(30));
        let short = ChannelError::rate_limited(Duration::from_secs(1), "can't poll: 429");
        assert_eq!(wait(backoff.after_failure(&short, Duration::ZERO, &mut random)), Duration::from_secs(10));
        let absurd = ChannelError::rate_limited(Duration::from_secs(u64::MAX), "can't poll: 429");
        assert_eq!(wait(backoff.after_failure(&absurd, Duration::ZERO, &mut random)), Duration::from_secs(3600));
    }

    #[test]
    fn fatal_errors_are_not_restarted() {
        let mut backoff = RestartBackoff::default();
        let fatal = ChannelError::fatal("can't log in: the token was refused");
        assert_eq!(backoff.after_failure(&fatal, Duration::ZERO, &mut SeededRandom::new(1)), Restart::Never);
    }

    #[test]
    fn many_failures_and_extreme_settings_do_not_overflow() {
        let mut backoff = RestartBackoff::new(BackoffSettings {
            base: Duration::from_secs(u64::MAX),
            cap: Duration::MAX,
            jitter_percent: 1000,
            ..BackoffSettings::default()
        });
        let mut random = || u64::MAX;
        for _ in 0..200 {
            backoff.after_failure(&transient(), Duration::ZERO, &mut random);
        }
        assert_eq!(backoff.failures(), 200);
    }
}
