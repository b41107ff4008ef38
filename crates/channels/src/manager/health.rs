//! The book of each channel's health ([`ChannelHealth`]) as `status`, `/health` and
//! `/metrics` report it: whether its receive loop runs, why it last failed, and what
//! went through it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use squidbot_core::clock::Clock;
use squidbot_types::channel::{ChannelHealth, ChannelState};

/// What happened to a message, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Count {
    Received,
    Answered,
    Denied,
    Duplicate,
    Sent,
    SendFailure,
}

/// The health of every channel, updated by the manager's tasks.
pub(super) struct HealthBook {
    channels: Mutex<HashMap<String, ChannelHealth>>,
    order: Vec<String>,
    /// Where the time of an error comes from.
    clock: Arc<dyn Clock>,
}

impl HealthBook {
    /// The book of channels `names`, whose platforms are `kinds` (in the same order).
    pub(super) fn new(names: &[String], kinds: &[String], clock: Arc<dyn Clock>) -> Self {
        let channels =
            names.iter().zip(kinds).map(|(name, kind)| (name.clone(), ChannelHealth::new(name, kind))).collect();
        Self { channels: Mutex::new(channels), order: names.to_vec(), clock }
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut ChannelHealth)) {
        let mut channels = squidbot_core::sync::lock(&self.channels);
        if let Some(health) = channels.get_mut(name) {
            change(health);
        }
    }

    pub(super) fn running(&self, name: &str) {
        self.update(name, |health| health.state = ChannelState::Running);
    }

    pub(super) fn stopped(&self, name: &str) {
        self.update(name, |health| health.state = ChannelState::Stopped);
    }

    pub(super) fn failed(&self, name: &str, error: &str) {
        let now = self.clock.now();
        self.update(name, |health| {
            health.state = ChannelState::Failed;
            health.last_error = Some(error.to_owned());
            health.last_error_at = Some(now);
        });
    }

    pub(super) fn restarting(&self, name: &str, error: &str, retry_in: Duration, attempt: u32) {
        let now = self.clock.now();
        self.update(name, |health| {
            health.state = ChannelState::Restarting { attempt, retry_in };
            health.last_error = Some(error.to_owned());
            health.last_error_at = Some(now);
            health.restarts += 1;
        });
    }

    pub(super) fn count(&self, name: &str, what: Count) {
        self.update(name, |health| {
            let counter = match what {
                Count::Received => &mut health.received,
                Count::Answered => &mut health.answered,
                Count::Denied => &mut health.denied,
                Count::Duplicate => &mut health.duplicates,
                Count::Sent => &mut health.sent,
                Count::SendFailure => &mut health.send_failures,
            };
            *counter += 1;
        });
    }

    pub(super) fn snapshot(&self) -> Vec<ChannelHealth> {
        let channels = squidbot_core::sync::lock(&self.channels);
        self.order.iter().filter_map(|name| channels.get(name).cloned()).collect()
    }
}
