//! How long to wait before retrying the same provider.

use std::time::Duration;

use squidbot_core::backoff::{Backoff, Jitter, RetryAfter, ServerWait};
use squidbot_core::provider::ProviderError;
use squidbot_core::random::SystemRandom;

/// First backoff delay; each retry doubles it.
pub(crate) const BASE_DELAY: Duration = Duration::from_millis(500);

/// Longest backoff delay.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(30);

/// Longest `retry-after` we honour; a provider asking for more gets this much.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Delays between retries: [`BASE_DELAY`] doubling to [`MAX_DELAY`], ±20 % jitter (never
/// above [`MAX_DELAY`]) so clients don't retry in step, and a provider's `retry-after`
/// used instead, up to [`MAX_RETRY_AFTER`].
const BACKOFF: Backoff = Backoff::doubling(BASE_DELAY, MAX_DELAY)
    .with_jitter(Jitter::WithinCap { percent: 20 })
    .with_retry_after(RetryAfter { rule: ServerWait::Replaces, longest: MAX_RETRY_AFTER });

/// Runs `call` until it succeeds, fails with an error that is not retriable, or has been
/// retried `max_retries` times, sleeping [`retry_delay`] between tries and logging each
/// retry of `what` (e.g. "model call") for `model`.
pub(crate) async fn with_retries<T, Call, Attempt>(
    max_retries: u32,
    model: &str,
    what: &str,
    mut call: Call,
) -> Result<T, ProviderError>
where
    Call: FnMut() -> Attempt,
    Attempt: std::future::Future<Output = Result<T, ProviderError>>,
{
    let mut attempt = 0;
    loop {
        let error = match call().await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        if !error.is_retriable() || attempt >= max_retries {
            return Err(error);
        }
        let delay = retry_delay(attempt, requested_delay(&error));
        attempt += 1;
        tracing::warn!(
            model,
            attempt,
            max_retries,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            %error,
            "retrying {what}"
        );
        tokio::time::sleep(delay).await;
    }
}

/// The delay before retry number `attempt` (0 for the first): `retry-after` when given,
/// else exponential backoff with jitter.
pub(crate) fn retry_delay(attempt: u32, retry_after: Option<Duration>) -> Duration {
    BACKOFF.wait(attempt.saturating_add(1), retry_after, &mut SystemRandom)
}

/// The delay the provider asked for, when the error carries one (rate limits).
pub(crate) fn requested_delay(error: &ProviderError) -> Option<Duration> {
    match error {
        ProviderError::RateLimited { retry_after, .. } => *retry_after,
        ProviderError::Auth { .. }
        | ProviderError::ContextOverflow { .. }
        | ProviderError::Transient { .. }
        | ProviderError::InvalidResponse { .. }
        | ProviderError::Rejected { .. }
        | ProviderError::Config { .. }
        | ProviderError::Cancelled => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        for _ in 0..100 {
            let first = retry_delay(0, None);
            assert!(first >= Duration::from_millis(400) && first <= Duration::from_millis(600));
            let third = retry_delay(2, None);
            assert!(third >= Duration::from_millis(1600) && third <= Duration::from_millis(2400));
            assert!(retry_delay(10, None) <= MAX_DELAY);
            assert!(retry_delay(u32::MAX, None) >= Duration::from_secs(24));
        }
    }

    #[test]
    fn jitter_varies() {
        let delays: std::collections::BTreeSet<_> = (0..20).map(|_| retry_delay(1, None)).collect();
        assert!(delays.len() > 1);
    }

    #[test]
    fn retry_after_is_honoured_up_to_a_minute() {
        assert_eq!(retry_delay(0, Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(retry_delay(5, Some(Duration::ZERO)), Duration::ZERO);
        assert_eq!(retry_delay(0, Some(Duration::from_secs(3600))), MAX_RETRY_AFTER);
    }
}
