//! The channel manager: starts every enabled adapter, restarts a failed one with
//! [`RestartBackoff`] without touching the others, reports each one's health, and turns
//! inbound messages into turns of the [`Runner`] and their replies into platform messages.
//!
//! Per inbound message: de-duplicate, find out who wrote (under the people's policy, a
//! linked user is answered whatever the channel's policy and a disabled one never),
//! decide with the channel's [`AccessPolicy`], route to a context and session, handle the
//! commands (`/new`, `/stop`, `/status`, `/usage`, `/approve`, `/deny`), save attachments, then
//! run the turn while showing typing and, on channels that edit in place, streaming the
//! reply into one message; the final reply is rendered to the platform's format and split
//! at its limit; a turn waiting for an admin says so at once, in a message of its own.
//! Messages that agents post to a channel's session outside a turn (background results,
//! bus messages, scheduled jobs, notes about approvals) are sent to its conversation too.

mod commands;
mod health;
mod inbound;
mod notices;
mod outbound;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use squidbot_core::events::{Filter, Subscription, Watchlist};
use squidbot_core::random::RandomSource;
use squidbot_core::runs::Runner;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use squidbot_core::attachments::{AttachmentError, AttachmentStore};
pub use squidbot_types::channel::{ChannelHealth, ChannelState};

use self::health::HealthBook;
use crate::backoff::{BackoffSettings, Restart, RestartBackoff};
use crate::dedup::{DEFAULT_REMEMBERED_IDS, Deduplicator};
use crate::people::LastSessions;
use crate::policy::AccessPolicy;
use crate::port::{Conversation, DynChannel, InboundSink};

/// One adapter, its platform and its access policy.
pub struct ChannelEntry {
    /// The adapter.
    pub channel: Arc<dyn DynChannel>,
    /// Its platform (`telegram`, `webhook`, ...), as its health reports it.
    pub kind: String,
    /// Who it answers.
    pub policy: Arc<AccessPolicy>,
}

/// How the manager paces its work.
#[derive(Debug, Clone, Copy)]
pub struct ManagerSettings {
    /// Restart backoff of failed adapters.
    pub backoff: BackoffSettings,
    /// Shortest time between two edits of a streamed reply (platforms rate-limit edits).
    pub edit_interval: Duration,
    /// How often the typing indicator is renewed while a turn runs.
    pub typing_interval: Duration,
    /// Attempts at sending one message when the platform fails passingly.
    pub send_attempts: u32,
    /// Longest wait for a platform's `retry_after` while sending a reply.
    pub max_send_wait: Duration,
    /// Inbound messages waiting for the manager, per gateway.
    pub inbound_queue: usize,
    /// Longest inbound text handed to the model, in characters; the rest is cut with a note.
    pub max_input_chars: usize,
}

impl Default for ManagerSettings {
    fn default() -> Self {
        Self {
            backoff: BackoffSettings::default(),
            edit_interval: Duration::from_millis(1_000),
            typing_interval: Duration::from_secs(4),
            send_attempts: 4,
            max_send_wait: Duration::from_secs(60),
            inbound_queue: 256,
            max_input_chars: 32_000,
        }
    }
}

/// A conversation a channel session talks in, for messages sent outside a turn.
#[derive(Debug, Clone)]
struct Destination {
    channel: String,
    conversation: Conversation,
}

/// Runs the channels of one gateway.
pub struct ChannelManager {
    runner: Arc<Runner>,
    channels: HashMap<String, ChannelEntry>,
    order: Vec<String>,
    attachments: Arc<dyn AttachmentStore>,
    random: Mutex<Box<dyn RandomSource>>,
    settings: ManagerSettings,
    /// The models `/model` may choose from (the configured ones); empty: `/model` only
    /// names the one in use.
    models: Vec<String>,
    health: HealthBook,
    dedup: Mutex<Deduplicator>,
    destinations: Mutex<HashMap<String, Destination>>,
    /// The direct-message session each linked person (and the owner) last wrote from, by
    /// context: where notes for them go.
    last_sessions: Mutex<LastSessions>,
    watchlist: std::sync::OnceLock<Watchlist>,
    started: Instant,
    tracker: TaskTracker,
}

impl std::fmt::Debug for ChannelManager {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("ChannelManager").field("channels", &self.order).finish_non_exhaustive()
    }
}

impl ChannelManager {
    /// A manager for `entries` (names must be unique; a later duplicate is dropped with a
    /// log line) running turns on `runner`.
    pub fn new(
        runner: Arc<Runner>,
        entries: Vec<ChannelEntry>,
        attachments: Arc<dyn AttachmentStore>,
        random: Box<dyn RandomSource>,
        settings: ManagerSettings,
    ) -> Self {
        let mut channels = HashMap::new();
        let mut order = Vec::new();
        let mut kinds = Vec::new();
        for entry in entries {
            let name = entry.channel.name().to_owned();
            if channels.contains_key(&name) {
                tracing::error!(channel = %name, "two channels have the same name; the second is not started");
                continue;
            }
            order.push(name.clone());
            kinds.push(entry.kind.clone());
            channels.insert(name, entry);
        }
        let health = HealthBook::new(&order, &kinds, runner.agent().clock().clone());
        Self {
            runner,
            channels,
            order,
            attachments,
            random: Mutex::new(random),
            settings,
            models: Vec::new(),
            health,
            dedup: Mutex::new(Deduplicator::new(DEFAULT_REMEMBERED_IDS)),
            destinations: Mutex::new(HashMap::new()),
            last_sessions: Mutex::new(LastSessions::default()),
            watchlist: std::sync::OnceLock::new(),
            started: Instant::now(),
            tracker: TaskTracker::new(),
        }
    }

    /// The same manager letting `/model` choose from `models` (the configured ones).
    pub fn with_models(mut self, models: Vec<String>) -> Self {
        self.models = models;
        self
    }

    /// The channels' names, in configuration order.
    pub fn names(&self) -> &[String] {
        &self.order
    }

    /// Every channel's health now.
    pub fn health(&self) -> Vec<ChannelHealth> {
        self.health.snapshot()
    }

    /// Runs every adapter and answers their messages until `shutdown` is cancelled;
    /// then stops the adapters and waits for running replies to be sent.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let (sink, mut inbound) = InboundSink::bounded(self.settings.inbound_queue);
        for name in self.order.clone() {
            let manager = self.clone();
            let sink = sink.clone();
            let stop = shutdown.clone();
            self.tracker.spawn(async move { manager.supervise(&name, sink, stop).await });
        }
        drop(sink);
        let events = self.runner.hub().subscribe(Filter::Watched);
        if self.watchlist.set(events.watchlist()).is_err() {
            tracing::error!("the channel manager was run twice; messages outside turns go to the first run only");
        }
        let manager = self.clone();
        let stop = shutdown.clone();
        self.tracker.spawn(async move { manager.forward_session_messages(events, stop).await });
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                received = inbound.recv() => match received {
                    Some(message) => {
                        let manager = self.clone();
                        self.tracker.spawn(async move { manager.handle(message).await });
                    }
                    None => break,
                },
            }
        }
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Keeps one adapter's receive loop running, restarting it after failures.
    async fn supervise(&self, name: &str, sink: InboundSink, shutdown: CancellationToken) {
        let Some(entry) = self.channels.get(name) else { return };
        let mut backoff = RestartBackoff::new(self.settings.backoff);
        loop {
            self.health.running(name);
            let began = Instant::now();
            let result = entry.channel.run_boxed(sink.clone(), shutdown.child_token()).await;
            if shutdown.is_cancelled() {
                self.health.stopped(name);
                return;
            }
            let error = match result {
                Ok(()) => crate::port::ChannelError::transient(format!(
                    "can't keep {name} running: its receive loop ended without being asked to"
                )),
                Err(error) => error,
            };
            let restart = {
                let mut random = squidbot_core::sync::lock(&self.random);
                backoff.after_failure(&error, began.elapsed(), random.as_mut())
            };
            match restart {
                Restart::Never => {
                    tracing::error!(channel = %name, %error, "channel stopped: fix its configuration and restart the gateway");
                    self.health.failed(name, &error.to_string());
                    return;
                }
                Restart::After(wait) => {
                    tracing::warn!(channel = %name, %error, retry_in_ms = wait.as_millis() as u64, "channel failed; restarting after a backoff");
                    self.health.restarting(name, &error.to_string(), wait, backoff.failures());
                    tokio::select! {
                        () = shutdown.cancelled() => {
                            self.health.stopped(name);
                            return;
                        }
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            }
        }
    }

    /// Remembers where a channel session talks, so messages posted to it outside a turn
    /// reach the conversation.
    fn remember_destination(&self, session_key: &str, channel: &str, conversation: &Conversation) {
        let mut destinations = squidbot_core::sync::lock(&self.destinations);
        let fresh = destinations
            .insert(
                session_key.to_owned(),
                Destination { channel: channel.to_owned(), conversation: conversation.clone() },
            )
            .is_none();
        if fresh && let Some(watchlist) = self.watchlist.get() {
            watchlist.watch_session(session_key);
        }
    }

    fn destination(&self, session_key: &str) -> Option<Destination> {
        let destinations = squidbot_core::sync::lock(&self.destinations);
        destinations.get(session_key).cloned()
    }

    /// Sends background results and bus messages of channel sessions to their
    /// conversations.
    async fn forward_session_messages(&self, mut events: Subscription, shutdown: CancellationToken) {
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = events.recv() => match event {
                    Some(event) => event,
                    None => return,
                },
            };
            let text = match &event.kind {
                squidbot_core::events::TurnEventKind::Background { text, .. }
                | squidbot_core::events::TurnEventKind::BusMessage { text, .. } => text.clone(),
                _ => continue,
            };
            let Some(destination) = self.destination(&event.session_key) else { continue };
            let Some(entry) = self.channels.get(&destination.channel) else { continue };
            self.send_reply(entry, &destination.conversation, None, &text).await;
        }
    }

    /// Seconds since the manager was made.
    fn uptime(&self) -> Duration {
        self.started.elapsed()
    }
}
