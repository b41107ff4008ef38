//! Per-address brake on failed authentication. Only failing attempts are slowed and then
//! refused: a right credential is always let in at once, from the attacked address too,
//! so a guesser can't lock the owner out. Failures are forgotten after a quiet window.

use squidbot_core::sync::lock;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures answered at once before failing attempts are slowed down.
pub const FREE_FAILURES: u32 = 3;

/// Failures after which failing attempts are refused outright (429) until the address
/// has been quiet for a [`WINDOW`].
pub const MAX_FAILURES: u32 = 10;

/// Delay of the first slowed failure; each next one waits twice as long.
const FIRST_DELAY: Duration = Duration::from_millis(25);

/// Longest delay of one failing attempt.
const MAX_DELAY: Duration = Duration::from_secs(2);

/// Quiet time after which an address's failures are forgotten.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Addresses tracked before old entries are pruned (bounds memory under a spray of
/// addresses).
const MAX_PEERS: usize = 10_000;

/// What happens to a failing attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Penalty {
    /// Answer "unauthorized" after this delay (zero for the first few).
    Delay(Duration),
    /// Refuse as rate limited; the address is quiet long enough after this.
    Refuse(Duration),
}

/// Failures per address: the count and when the last one was.
#[derive(Debug, Default)]
pub struct FailureLimiter {
    peers: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl FailureLimiter {
    /// Counts one failed attempt of `peer` and says how to answer it.
    pub fn record_failure(&self, peer: IpAddr, now: Instant) -> (u32, Penalty) {
        let key = key_of(peer);
        let mut peers = lock(&self.peers);
        if peers.len() >= MAX_PEERS {
            peers.retain(|_, (_, last)| now.saturating_duration_since(*last) < WINDOW);
        }
        let entry = peers.entry(key).or_insert((0, now));
        if now.saturating_duration_since(entry.1) >= WINDOW {
            entry.0 = 0;
        }
        entry.0 = entry.0.saturating_add(1);
        entry.1 = now;
        let failures = entry.0;
        (failures, penalty(failures))
    }

    /// Failures of `peer` still remembered at `now`.
    #[cfg(test)]
    pub fn failures(&self, peer: IpAddr, now: Instant) -> u32 {
        let peers = lock(&self.peers);
        peers
            .get(&key_of(peer))
            .filter(|(_, last)| now.saturating_duration_since(*last) < WINDOW)
            .map_or(0, |entry| entry.0)
    }
}

/// How to answer the `failures`th failure in a row.
fn penalty(failures: u32) -> Penalty {
    if failures > MAX_FAILURES {
        return Penalty::Refuse(WINDOW);
    }
    let Some(slowed) = failures.checked_sub(FREE_FAILURES + 1) else { return Penalty::Delay(Duration::ZERO) };
    let delay = FIRST_DELAY.saturating_mul(2_u32.saturating_pow(slowed));
    Penalty::Delay(delay.min(MAX_DELAY))
}

/// The address failures count against: IPv4 (also when mapped into IPv6) as is, IPv6 by
/// its /64, which one host usually holds whole.
fn key_of(peer: IpAddr) -> IpAddr {
    match peer.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let segments = v6.segments();
            IpAddr::from([segments[0], segments[1], segments[2], segments[3], 0, 0, 0, 0])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_answered_then_slowed_then_refused_until_a_quiet_window() {
        let limiter = FailureLimiter::default();
        let peer: IpAddr = "10.1.2.3".parse().unwrap();
        let other: IpAddr = "10.1.2.4".parse().unwrap();
        let start = Instant::now();
        let mut penalties = Vec::new();
        for _ in 0..MAX_FAILURES + 2 {
            penalties.push(limiter.record_failure(peer, start).1);
        }
        let delay = |millis| Penalty::Delay(Duration::from_millis(millis));
        assert_eq!(
            penalties,
            [
                delay(0),
                delay(0),
                delay(0),
                delay(25),
                delay(50),
                delay(100),
                delay(200),
                delay(400),
                delay(800),
                delay(1600),
                Penalty::Refuse(WINDOW),
                Penalty::Refuse(WINDOW),
            ]
        );
        assert_eq!(limiter.record_failure(other, start), (1, delay(0)), "other addresses are unaffected");
        let later = start + WINDOW - Duration::from_secs(1);
        assert_eq!(limiter.record_failure(peer, later).1, Penalty::Refuse(WINDOW), "hammering keeps it refused");
        assert_eq!(limiter.failures(peer, later + WINDOW), 0, "a quiet window forgets");
        assert_eq!(limiter.record_failure(peer, later + WINDOW), (1, delay(0)));
    }

    #[test]
    fn the_delay_is_capped() {
        assert_eq!(penalty(MAX_FAILURES), Penalty::Delay(Duration::from_millis(1600)));
        assert!((1..=MAX_FAILURES).all(|failures| match penalty(failures) {
            Penalty::Delay(delay) => delay <= MAX_DELAY,
            Penalty::Refuse(_) => false,
        }));
    }

    #[test]
    fn an_ipv6_host_counts_as_its_slash_64() {
        let limiter = FailureLimiter::default();
        let start = Instant::now();
        limiter.record_failure("2001:db8:1:2::1".parse().unwrap(), start);
        limiter.record_failure("2001:db8:1:2::ffff".parse().unwrap(), start);
        assert_eq!(limiter.failures("2001:db8:1:2:aaaa::9".parse().unwrap(), start), 2);
        assert_eq!(limiter.failures("2001:db8:1:3::1".parse().unwrap(), start), 0);
        limiter.record_failure("::ffff:10.0.0.1".parse().unwrap(), start);
        assert_eq!(limiter.failures("10.0.0.1".parse().unwrap(), start), 1);
    }
}
