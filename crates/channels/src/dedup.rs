//! Dropping redelivered inbound events: platforms deliver at least once (webhook
//! retries, gateway resumes, Socket Mode re-sends), and a message must never be
//! answered twice.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::session::fingerprint;

/// Message ids remembered per channel by default.
pub const DEFAULT_REMEMBERED_IDS: usize = 4096;

/// Ids longer than this are remembered by their fingerprint, so oversized ids from a
/// malformed payload can't make the memory large.
const MAX_KEPT_ID_BYTES: usize = 128;

/// The ids seen recently on one channel, oldest first.
#[derive(Debug, Default)]
struct Seen {
    ids: HashSet<Arc<str>>,
    order: VecDeque<Arc<str>>,
}

/// Remembers the last platform message ids of each channel (first in, first out) and
/// tells whether an event is new.
#[derive(Debug)]
pub struct Deduplicator {
    capacity: usize,
    channels: HashMap<String, Seen>,
}

impl Default for Deduplicator {
    fn default() -> Self {
        Self::new(DEFAULT_REMEMBERED_IDS)
    }
}

impl Deduplicator {
    /// Remembers up to `capacity` ids per channel (at least one).
    pub fn new(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), channels: HashMap::new() }
    }

    /// Records the event `platform_message_id` on `channel`; true the first time it is
    /// seen, false for a redelivery (which must be dropped).
    pub fn first_time(&mut self, channel: &str, platform_message_id: &str) -> bool {
        let id = stored_id(platform_message_id);
        let seen = match self.channels.get_mut(channel) {
            Some(seen) => seen,
            None => self.channels.entry(channel.to_owned()).or_default(),
        };
        if seen.ids.contains(id.as_str()) {
            return false;
        }
        while seen.order.len() >= self.capacity {
            if let Some(oldest) = seen.order.pop_front() {
                seen.ids.remove(&oldest);
            }
        }
        let id: Arc<str> = Arc::from(id);
        seen.ids.insert(Arc::clone(&id));
        seen.order.push_back(id);
        true
    }

    /// Whether `platform_message_id` on `channel` is remembered, without recording it.
    pub fn contains(&self, channel: &str, platform_message_id: &str) -> bool {
        self.channels.get(channel).is_some_and(|seen| seen.ids.contains(stored_id(platform_message_id).as_str()))
    }

    /// How many ids are remembered for `channel`.
    pub fn remembered(&self, channel: &str) -> usize {
        self.channels.get(channel).map_or(0, |seen| seen.order.len())
    }
}

/// The id as kept: a short id behind `=`, a long one as `#` and its fingerprint, so an
/// id can never pass for another's fingerprint.
fn stored_id(id: &str) -> String {
    if id.len() <= MAX_KEPT_ID_BYTES { format!("={id}") } else { format!("#{}", fingerprint(id)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redelivered_event_is_seen_once() {
        let mut dedup = Deduplicator::default();
        assert!(dedup.first_time("telegram", "100"));
        assert!(!dedup.first_time("telegram", "100"));
        assert!(dedup.first_time("telegram", "101"));
        assert!(dedup.contains("telegram", "100"));
    }

    #[test]
    fn channels_are_separate() {
        let mut dedup = Deduplicator::default();
        assert!(dedup.first_time("telegram", "1"));
        assert!(dedup.first_time("discord", "1"));
        assert!(!dedup.contains("slack", "1"));
    }

    #[test]
    fn the_oldest_ids_are_forgotten_first() {
        let mut dedup = Deduplicator::new(3);
        for id in ["a", "b", "c", "d"] {
            assert!(dedup.first_time("matrix", id));
        }
        assert_eq!(dedup.remembered("matrix"), 3);
        assert!(!dedup.contains("matrix", "a"));
        assert!(!dedup.first_time("matrix", "b"));
        assert!(!dedup.first_time("matrix", "d"));
        // "a" was evicted, so it counts as new again; it evicts "b".
        assert!(dedup.first_time("matrix", "a"));
        assert!(!dedup.contains("matrix", "b"));
        assert!(dedup.contains("matrix", "c"));
    }

    #[test]
    fn the_default_remembers_four_thousand_ninety_six_ids() {
        let mut dedup = Deduplicator::default();
        for number in 0..5000 {
            dedup.first_time("slack", &number.to_string());
        }
        assert_eq!(dedup.remembered("slack"), DEFAULT_REMEMBERED_IDS);
        assert!(!dedup.contains("slack", "903"));
        assert!(dedup.contains("slack", "904"));
        assert!(!dedup.first_time("slack", "4999"));
    }

    #[test]
    fn oversized_ids_are_remembered_by_fingerprint() {
        let mut dedup = Deduplicator::new(10);
        let huge = "x".repeat(1_000_000);
        let other = format!("{huge}y");
        assert!(dedup.first_time("email", &huge));
        assert!(!dedup.first_time("email", &huge));
        assert!(dedup.first_time("email", &other));
        let fingerprint_like = format!("#{}", fingerprint(&huge));
        assert!(dedup.first_time("email", &fingerprint_like));
    }

    #[test]
    fn a_capacity_of_zero_remembers_one() {
        let mut dedup = Deduplicator::new(0);
        assert!(dedup.first_time("c", "1"));
        assert!(!dedup.first_time("c", "1"));
        assert!(dedup.first_time("c", "2"));
        assert!(dedup.first_time("c", "1"));
    }
}
