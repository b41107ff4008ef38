//! Each channel's health as `status`, `/health` and `/metrics` report it: whether its
//! receive loop runs, why it last failed, and what went through it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use squidbot_core::clock::Clock;

/// Where a channel's receive loop is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelState {
    /// Not started yet.
    Starting,
    /// Its receive loop is running.
    Running,
    /// It failed and is restarted after `retry_in`.
    Restarting {
        /// Failures in a row.
        attempt: u32,
        /// The wait before the restart.
        retry_in: Duration,
    },
    /// It failed in a way a restart can't fix (credentials refused, bad settings).
    Failed,
    /// Stopped with the gateway.
    Stopped,
}

impl ChannelState {
    /// A one-word name: `starting`, `running`, `restarting`, `failed`, `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            ChannelState::Starting => "starting",
            ChannelState::Running => "running",
            ChannelState::Restarting { .. } => "restarting",
            ChannelState::Failed => "failed",
            ChannelState::Stopped => "stopped",
        }
    }
}

/// One channel's health and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelHealth {
    /// The channel's name.
    pub name: String,
    /// Where its receive loop is.
    pub state: ChannelState,
    /// The last failure, `can't …: …`.
    pub last_error: Option<String>,
    /// When the last failure happened.
    pub last_error_at: Option<SystemTime>,
    /// Restarts after failures since the gateway started.
    pub restarts: u32,
    /// Messages received (duplicates not counted).
    pub received: u64,
    /// Messages answered with a turn.
    pub answered: u64,
    /// Messages not answered under the access policy.
    pub denied: u64,
    /// Redelivered messages dropped.
    pub duplicates: u64,
    /// Messages and edits sent.
    pub sent: u64,
    /// Sends and edits that failed for good.
    pub send_failures: u64,
}

impl ChannelHealth {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            state: ChannelState::Starting,
            last_error: None,
            last_error_at: None,
            restarts: 0,
            received: 0,
            answered: 0,
            denied: 0,
            duplicates: 0,
            sent: 0,
            send_failures: 0,
        }
    }

    /// Whether the channel is up (its receive loop runs).
    pub fn is_up(&self) -> bool {
        self.state == ChannelState::Running
    }
}

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
    pub(super) fn new(names: &[String], clock: Arc<dyn Clock>) -> Self {
        let channels = names.iter().map(|name| (name.clone(), ChannelHealth::new(name))).collect();
        Self { channels: Mutex::new(channels), order: names.to_vec(), clock }
    }

    fn update(&self, name: &str, change: impl FnOnce(&mut ChannelHealth)) {
        let mut channels = self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
        let channels = self.channels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.order.iter().filter_map(|name| channels.get(name).cloned()).collect()
    }
}
