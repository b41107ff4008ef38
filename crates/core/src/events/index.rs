//! The event hub's subscribers, indexed by session key and run id so that publishing an
//! event touches only the subscribers that want it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use tokio::sync::mpsc;

use super::TurnEvent;

/// The part of a filter that is not a key the hub can look up.
pub(super) enum Broad {
    All,
    Custom(Arc<dyn Fn(&TurnEvent) -> bool + Send + Sync>),
}

pub(super) struct Subscriber {
    pub(super) broad: Option<Broad>,
    pub(super) sessions: HashSet<String>,
    pub(super) runs: HashSet<String>,
    pub(super) sender: mpsc::UnboundedSender<Arc<TurnEvent>>,
    pub(super) progress: Arc<Progress>,
}

impl Subscriber {
    pub(super) fn accepts(&self, event: &TurnEvent) -> bool {
        self.sessions.contains(&event.session_key)
            || self.runs.contains(&event.run_id)
            || match &self.broad {
                Some(Broad::All) => true,
                Some(Broad::Custom(predicate)) => predicate(event),
                None => false,
            }
    }
}

/// What the publisher knows of a subscriber's reading.
pub(super) struct Progress {
    pub(super) pending: AtomicUsize,
    pub(super) cut_off: AtomicBool,
    /// Milliseconds after the hub's start of the last event taken.
    pub(super) last_taken_ms: AtomicU64,
}

/// The subscribers, indexed so that publishing an event touches only those that want it:
/// with a thousand WebSocket clients each watching its own session, asking every
/// subscriber about every event made the fan-out most of the gateway's CPU.
#[derive(Default)]
pub(super) struct Subscribers {
    pub(super) all: HashMap<u64, Subscriber>,
    pub(super) by_session: HashMap<String, Vec<u64>>,
    pub(super) by_run: HashMap<String, Vec<u64>>,
    /// Subscribers with [`super::Filter::All`] or [`super::Filter::Custom`], asked about every event.
    pub(super) broad: Vec<u64>,
}

/// Which index a watched key lives in.
#[derive(Clone, Copy)]
pub(super) enum Index {
    Session,
    Run,
}

impl Subscribers {
    pub(super) fn insert(&mut self, id: u64, subscriber: Subscriber) {
        if subscriber.broad.is_some() {
            self.broad.push(id);
        }
        for key in &subscriber.sessions {
            self.by_session.entry(key.clone()).or_default().push(id);
        }
        for key in &subscriber.runs {
            self.by_run.entry(key.clone()).or_default().push(id);
        }
        self.all.insert(id, subscriber);
    }

    pub(super) fn remove(&mut self, id: u64) {
        let Some(subscriber) = self.all.remove(&id) else { return };
        if subscriber.broad.is_some() {
            self.broad.retain(|broad| *broad != id);
        }
        for key in &subscriber.sessions {
            unindex(&mut self.by_session, key, id);
        }
        for key in &subscriber.runs {
            unindex(&mut self.by_run, key, id);
        }
    }

    pub(super) fn watch(&mut self, id: u64, index: Index, key: &str) {
        let Some(subscriber) = self.all.get_mut(&id) else { return };
        let (keys, map) = match index {
            Index::Session => (&mut subscriber.sessions, &mut self.by_session),
            Index::Run => (&mut subscriber.runs, &mut self.by_run),
        };
        if !keys.contains(key) {
            keys.insert(key.to_owned());
            map.entry(key.to_owned()).or_default().push(id);
        }
    }

    pub(super) fn unwatch(&mut self, id: u64, index: Index, key: &str) {
        let Some(subscriber) = self.all.get_mut(&id) else { return };
        let (keys, map) = match index {
            Index::Session => (&mut subscriber.sessions, &mut self.by_session),
            Index::Run => (&mut subscriber.runs, &mut self.by_run),
        };
        if keys.remove(key) {
            unindex(map, key, id);
        }
    }

    /// The subscribers that may want `event`, each once.
    pub(super) fn candidates(&self, event: &TurnEvent) -> Vec<u64> {
        let by_session = self.by_session.get(&event.session_key).map_or(&[][..], Vec::as_slice);
        let by_run = self.by_run.get(&event.run_id).map_or(&[][..], Vec::as_slice);
        let mut candidates = Vec::with_capacity(by_session.len() + by_run.len() + self.broad.len());
        candidates.extend_from_slice(by_session);
        candidates.extend_from_slice(by_run);
        candidates.extend_from_slice(&self.broad);
        // A subscriber may be listed under the session, the run and as broad at once.
        let sources = [by_session.len(), by_run.len(), self.broad.len()].iter().filter(|length| **length > 0).count();
        if sources > 1 {
            candidates.sort_unstable();
            candidates.dedup();
        }
        candidates
    }
}

fn unindex(map: &mut HashMap<String, Vec<u64>>, key: &str, id: u64) {
    if let Some(ids) = map.get_mut(key) {
        ids.retain(|listed| *listed != id);
        if ids.is_empty() {
            map.remove(key);
        }
    }
}
