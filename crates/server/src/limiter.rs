//! Per-peer limit on failed authentication: after too many failures in a window, every
//! request from that address is refused until the window ends.

use squidbot_core::sync::lock;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failed attempts allowed per window.
pub const MAX_FAILURES: u32 = 10;

/// Length of the window.
pub const WINDOW: Duration = Duration::from_secs(60);

/// Peers tracked before old entries are pruned (bounds memory under a spray of addresses).
const MAX_PEERS: usize = 10_000;

/// Failures per peer address.
#[derive(Debug, Default)]
pub struct FailureLimiter {
    peers: Mutex<HashMap<IpAddr, (u32, Instant)>>,
}

impl FailureLimiter {
    /// Seconds the peer must wait, or `None` when it may try.
    pub fn blocked_for(&self, peer: IpAddr, now: Instant) -> Option<Duration> {
        let peers = lock(&self.peers);
        let (failures, since) = peers.get(&peer)?;
        let elapsed = now.saturating_duration_since(*since);
        (*failures >= MAX_FAILURES && elapsed < WINDOW).then(|| WINDOW - elapsed)
    }

    /// Counts one failed attempt.
    pub fn record_failure(&self, peer: IpAddr, now: Instant) {
        let mut peers = lock(&self.peers);
        if peers.len() >= MAX_PEERS {
            peers.retain(|_, (_, since)| now.saturating_duration_since(*since) < WINDOW);
        }
        let entry = peers.entry(peer).or_insert((0, now));
        if now.saturating_duration_since(entry.1) >= WINDOW {
            *entry = (0, now);
        }
        entry.0 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_is_locked_out_after_too_many_failures_until_the_window_ends() {
        let limiter = FailureLimiter::default();
        let peer: IpAddr = "10.1.2.3".parse().unwrap();
        let other: IpAddr = "10.1.2.4".parse().unwrap();
        let start = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            limiter.record_failure(peer, start);
        }
        assert_eq!(limiter.blocked_for(peer, start), None);
        limiter.record_failure(peer, start);
        assert_eq!(limiter.blocked_for(peer, start + Duration::from_secs(10)), Some(Duration::from_secs(50)));
        assert_eq!(limiter.blocked_for(other, start), None, "other peers are unaffected");
        assert_eq!(limiter.blocked_for(peer, start + WINDOW), None, "the lockout ends with the window");
        limiter.record_failure(peer, start + WINDOW);
        assert_eq!(limiter.blocked_for(peer, start + WINDOW), None, "a new window starts counting afresh");
    }
}
