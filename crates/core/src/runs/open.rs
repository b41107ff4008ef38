//! The sessions a runner keeps loaded, bounded: a session nobody holds is dropped once it
//! has been idle for a while, and the least recently used ones go first when there are too
//! many. Dropping one loses nothing (every step is already in the store); the next use
//! loads it again.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use super::SharedSession;

/// How many sessions stay loaded and for how long (`[sessions]` `max_open` and
/// `evict_idle_after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenSessionLimits {
    /// Sessions kept loaded at most (more only while all of them are in use).
    pub max_open: usize,
    /// Idle time after which a loaded session nobody uses is dropped.
    pub idle: Duration,
}

impl Default for OpenSessionLimits {
    fn default() -> Self {
        Self { max_open: 256, idle: Duration::from_secs(15 * 60) }
    }
}

/// One loaded session.
struct Entry {
    session: SharedSession,
    /// Opened in another context than the runner's own: its people are not the owner.
    foreign: bool,
    last_used: SystemTime,
}

/// The loaded sessions by key.
pub(super) struct OpenSessions {
    entries: HashMap<String, Entry>,
    limits: OpenSessionLimits,
    /// When idle sessions were last looked for.
    swept: SystemTime,
}

impl OpenSessions {
    pub(super) fn new(limits: OpenSessionLimits, now: SystemTime) -> Self {
        Self { entries: HashMap::new(), limits, swept: now }
    }

    pub(super) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The loaded session `key`, marked used now.
    pub(super) fn get(&mut self, key: &str, now: SystemTime) -> Option<SharedSession> {
        let entry = self.entries.get_mut(key)?;
        entry.last_used = now;
        Some(entry.session.clone())
    }

    /// Whether `key` is loaded and belongs to another context.
    pub(super) fn is_foreign(&self, key: &str) -> bool {
        self.entries.get(key).is_some_and(|entry| entry.foreign)
    }

    /// Keeps `session` as `key` unless another caller loaded it meanwhile (then that one
    /// is returned), making room first.
    pub(super) fn insert(
        &mut self,
        key: &str,
        session: SharedSession,
        foreign: bool,
        now: SystemTime,
    ) -> SharedSession {
        if let Some(existing) = self.get(key, now) {
            return existing;
        }
        self.make_room(now);
        self.entries.insert(key.to_owned(), Entry { session: session.clone(), foreign, last_used: now });
        session
    }

    /// Drops sessions idle past the limit (looked for at most every quarter of it), then,
    /// while there are too many, the least recently used. A session someone holds (a turn
    /// runs in it, a front end reads it) is never dropped: two copies of one session would
    /// write diverging branches.
    pub(super) fn make_room(&mut self, now: SystemTime) {
        let idle = self.limits.idle;
        if now.duration_since(self.swept).unwrap_or_default() >= idle / 4 {
            self.swept = now;
            self.entries
                .retain(|_, entry| in_use(entry) || now.duration_since(entry.last_used).unwrap_or_default() < idle);
        }
        if self.entries.len() < self.limits.max_open {
            return;
        }
        let mut unused: Vec<(SystemTime, String)> = self
            .entries
            .iter()
            .filter(|(_, entry)| !in_use(entry))
            .map(|(key, entry)| (entry.last_used, key.clone()))
            .collect();
        unused.sort_unstable();
        // Down to three quarters with the new one, so a stream of new sessions doesn't
        // sort on every insert.
        let target = (self.limits.max_open - self.limits.max_open / 4).saturating_sub(1);
        let excess = self.entries.len().saturating_sub(target);
        for (_, key) in unused.into_iter().take(excess) {
            self.entries.remove(&key);
        }
    }
}

/// Whether anyone but the map holds the session.
fn in_use(entry: &Entry) -> bool {
    std::sync::Arc::strong_count(&entry.session) > 1
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use squidbot_types::session::{HeaderTag, SessionHeader};

    use super::*;
    use crate::session::Session;

    fn session(key: &str) -> SharedSession {
        let header = SessionHeader {
            kind: HeaderTag::Header,
            version: 1,
            id: format!("id-{key}"),
            key: key.to_owned(),
            context: "owner".into(),
            created: "2026-11-27T00:00:00Z".into(),
        };
        Arc::new(tokio::sync::Mutex::new(Session::new(header)))
    }

    fn at(seconds: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + seconds)
    }

    #[test]
    fn idle_sessions_are_dropped_and_held_ones_kept() {
        let limits = OpenSessionLimits { max_open: 100, idle: Duration::from_secs(60) };
        let mut open = OpenSessions::new(limits, at(0));
        open.insert("a", session("a"), false, at(0));
        let held = open.insert("b", session("b"), true, at(0));
        open.insert("c", session("c"), false, at(50));
        assert!(open.get("a", at(10)).is_some(), "used again at 10 s");
        // At 80 s: `a` was last used 70 s ago, `b` 80 s ago but held, `c` 30 s ago.
        open.insert("d", session("d"), false, at(80));
        let mut keys: Vec<&str> = open.entries.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["b", "c", "d"]);
        assert!(open.is_foreign("b") && !open.is_foreign("c") && !open.is_foreign("a"));
        drop(held);
        open.make_room(at(200));
        assert_eq!(open.len(), 0, "nothing is held and everything is idle");
    }

    #[test]
    fn too_many_sessions_drop_the_least_recently_used_unheld_ones() {
        let limits = OpenSessionLimits { max_open: 8, idle: Duration::from_secs(3600) };
        let mut open = OpenSessions::new(limits, at(0));
        let held = open.insert("s0", session("s0"), false, at(0));
        for index in 1..8 {
            open.insert(&format!("s{index}"), session("x"), false, at(index));
        }
        assert_eq!(open.len(), 8);
        open.insert("s8", session("s8"), false, at(8));
        // Down to three quarters with the new one: s0 is held, so s1, s2 and s3 went.
        let mut keys: Vec<&str> = open.entries.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["s0", "s4", "s5", "s6", "s7", "s8"]);
        drop(held);
        for index in 9..10_000 {
            open.insert(&format!("s{index}"), session("x"), false, at(index));
            assert!(open.len() <= 8, "bounded at {index}");
        }
    }

    #[test]
    fn a_session_loaded_twice_is_kept_once() {
        let mut open = OpenSessions::new(OpenSessionLimits::default(), at(0));
        let first = open.insert("a", session("a"), false, at(0));
        let second = open.insert("a", session("a"), false, at(1));
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(open.len(), 1);
    }
}
