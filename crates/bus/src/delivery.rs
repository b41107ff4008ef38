//! The `Bus`: resolves targets, numbers and checks messages, hands them to live routes
//! with an acknowledgement timeout, falls back to trigger files, delivers trigger files
//! once a route is there, and journals every attempt.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use squidbot_core::clock::Clock;
use squidbot_core::sync::lock;
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;

use crate::envelope::{Priority, Sequences};
use crate::journal::{DynBusJournal, JournalEntry};
use crate::message::{BusMessage, Sender, new_id};
use crate::routes::{Ack, Delivery, DynRoute, Health, HealthReport, RouteError, RouteHandle, Routes, route_health};
use crate::targets::{Directory, DirectoryError, normalize};
use crate::triggers::TriggerFiles;

mod ingest;

pub use ingest::IngestReport;

/// Largest message body, in bytes.
pub const MAX_BODY_BYTES: usize = 32 * 1024;

/// Tunables of a bus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusSettings {
    /// A route not seen for longer than this is `stale` (default 60 s).
    pub stale_after: Duration,
    /// How long a send waits for the route's acknowledgement before answering
    /// `accepted.unverified` (default 2 s).
    pub ack_timeout: Duration,
    /// Largest body in bytes (default [`MAX_BODY_BYTES`]).
    pub max_body_bytes: usize,
}

impl Default for BusSettings {
    fn default() -> Self {
        Self {
            stale_after: Duration::from_secs(60),
            ack_timeout: Duration::from_secs(2),
            max_body_bytes: MAX_BODY_BYTES,
        }
    }
}

/// How a message was delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// The target's runtime acknowledged it.
    Verified,
    /// A route has it but did not acknowledge within the timeout.
    Unverified,
    /// No live route took it: it waits in the target's trigger file.
    Fallback,
}

impl DeliveryStatus {
    /// `delivered.verified`, `accepted.unverified` or `fallback.triggered`.
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Verified => "delivered.verified",
            DeliveryStatus::Unverified => "accepted.unverified",
            DeliveryStatus::Fallback => "fallback.triggered",
        }
    }
}

/// What became of a sent message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryResult {
    /// The outcome.
    pub status: DeliveryStatus,
    /// The message as sent (canonical target, sequence number, ids).
    pub message: BusMessage,
    /// More: the run the target started, why it fell back, the trigger file.
    pub detail: Option<String>,
}

impl DeliveryResult {
    /// The result as JSON (`status`, `target`, `from`, `seq`, `priority`, `envelope`,
    /// `messageId`, `correlationId`, `detail`), as `bus.send` and `squidbot send --json` print it.
    pub fn to_json(&self) -> serde_json::Value {
        let message = &self.message;
        serde_json::json!({
            "status": self.status.as_str(),
            "target": message.target,
            "from": message.from,
            "seq": message.seq,
            "priority": message.priority.as_str(),
            "envelope": message.envelope(),
            "messageId": message.id,
            "correlationId": message.correlation_id,
            "detail": self.detail,
        })
    }
}

/// Why a message was not sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// No such target.
    #[error("no target named {target:?}")]
    InvalidTarget {
        /// The name as given.
        target: String,
    },
    /// A background worker tried to message someone other than its owner.
    #[error("{sender} may message only {owner}, not {target}")]
    OwnerBindingViolation {
        /// The worker.
        sender: String,
        /// The agent that spawned it.
        owner: String,
        /// The target it asked for.
        target: String,
    },
    /// Nothing to send.
    #[error("the message is empty")]
    EmptyMessage,
    /// The body is over the limit.
    #[error("the message is {bytes} bytes; the limit is {limit}")]
    TooLong {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The target's runtime refused the message for good.
    #[error("{target} rejected the message: {reason}")]
    Rejected {
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// The target is a running agent's own name or alias (a worker) and no route took
    /// it: such targets are live routes only (the protocol's background aliases), and an
    /// ended agent never reads a trigger file, so the sender is told instead.
    #[error("{target} is not running ({reason}); nothing was queued")]
    NoRoute {
        /// The target.
        target: String,
        /// Why the route did not take it.
        reason: String,
    },
    /// No route took it and the trigger file could not be written either.
    #[error("can't deliver the message: {reason}")]
    Undeliverable {
        /// Why.
        reason: String,
    },
}

impl SendError {
    /// The result code: `invalid_target`, `owner_binding_violation`, `empty_message`,
    /// `message_too_long`, `rejected`, `no_route`, `undeliverable`.
    pub fn code(&self) -> &'static str {
        match self {
            SendError::InvalidTarget { .. } => "invalid_target",
            SendError::OwnerBindingViolation { .. } => "owner_binding_violation",
            SendError::EmptyMessage => "empty_message",
            SendError::TooLong { .. } => "message_too_long",
            SendError::Rejected { .. } => "rejected",
            SendError::NoRoute { .. } => "no_route",
            SendError::Undeliverable { .. } => "undeliverable",
        }
    }
}

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendRequest {
    /// Target name or alias.
    pub target: String,
    /// The text.
    pub body: String,
    /// The tag.
    pub priority: Priority,
    /// The inbound message this traces back to; a fresh id when `None`.
    pub correlation_id: Option<String>,
    /// The conversation the sender works in (see [`BusMessage::session`]).
    pub session: Option<String>,
}

/// What a route did with a message within the acknowledgement timeout.
enum HandOver {
    Acked(Ack),
    NoAckYet,
    Unavailable(String),
    Rejected(String),
}

/// Where a message came from, for the journal.
#[derive(Clone, Copy)]
enum Source {
    Live,
    TriggerFile,
}

/// The agent bus of one process.
pub struct Bus {
    directory: Directory,
    routes: Arc<Routes>,
    sequences: Sequences,
    triggers: TriggerFiles,
    journal: Arc<dyn DynBusJournal>,
    clock: Arc<dyn Clock>,
    settings: BusSettings,
    tasks: TaskTracker,
    delivered: Mutex<ingest::RecentIds>,
    /// Journal entries by result, for metrics.
    results: Mutex<BTreeMap<String, u64>>,
}

impl std::fmt::Debug for Bus {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Bus")
            .field("routes", &self.routes.targets())
            .field("triggers", &self.triggers.directory())
            .finish()
    }
}

impl Bus {
    /// A bus over `directory`'s targets, falling back to `triggers` and journaling to `journal`.
    pub fn new(
        directory: Directory,
        triggers: TriggerFiles,
        journal: Arc<dyn DynBusJournal>,
        clock: Arc<dyn Clock>,
        settings: BusSettings,
    ) -> Arc<Self> {
        Arc::new(Self {
            directory,
            routes: Arc::new(Routes::default()),
            sequences: Sequences::new(),
            triggers,
            journal,
            clock,
            settings,
            tasks: TaskTracker::new(),
            delivered: Mutex::new(ingest::RecentIds::default()),
            results: Mutex::new(BTreeMap::new()),
        })
    }

    /// The configured targets.
    pub fn directory(&self) -> &Directory {
        &self.directory
    }

    /// The trigger files.
    pub fn triggers(&self) -> &TriggerFiles {
        &self.triggers
    }

    /// Targets with a live route, sorted.
    pub fn live_targets(&self) -> Vec<String> {
        self.routes.targets()
    }

    /// Aliases of running agents (`coder-bg-1`) and the agent each stands for, sorted.
    pub fn live_aliases(&self) -> Vec<(String, String)> {
        self.routes.live_aliases()
    }

    /// The canonical target `name` stands for: a role, `user`, a configured alias, a
    /// running agent's own name or alias, or the name or alias of an agent that ran
    /// earlier in this process (still a target, with no route).
    pub fn resolve(&self, name: &str) -> Option<String> {
        if let Some(canonical) = self.directory.canonical(name) {
            return Some(canonical);
        }
        let name = normalize(name).ok()?;
        if let Some(target) = self.routes.alias(&name) {
            return Some(target);
        }
        self.routes.is_known(&name).then_some(name)
    }

    /// A bus of the built-in roles with default settings, the system clock, trigger files
    /// under `trigger_directory` and a journal kept in memory (returned, to read back):
    /// for tests and tools that have no database.
    pub fn in_memory(trigger_directory: &std::path::Path) -> (Arc<Self>, Arc<crate::journal::MemoryJournal>) {
        let journal = Arc::new(crate::journal::MemoryJournal::new());
        let bus = Self::new(
            Directory::default(),
            TriggerFiles::new(trigger_directory),
            journal.clone(),
            Arc::new(squidbot_core::clock::SystemClock),
            BusSettings::default(),
        );
        (bus, journal)
    }

    /// Registers `route` as the live route of `target` (a role, alias, `user`, or the own
    /// name of a running agent such as a worker's id, which is a target while registered).
    /// A newer registration of the same target replaces this one.
    pub fn register(&self, target: &str, route: Arc<dyn DynRoute>) -> Result<RouteHandle, DirectoryError> {
        self.register_agent(target, &[], route)
    }

    /// Registers `route` for a running agent under its own name and `aliases` (which may
    /// not be roles or configured names). Dropping the handle unregisters all of them;
    /// the names stay valid targets with no route for the rest of the run: health says
    /// `no_route` and a send is refused with `no_route` (never queued in a trigger file
    /// nobody would read).
    pub fn register_agent(
        &self,
        target: &str,
        aliases: &[String],
        route: Arc<dyn DynRoute>,
    ) -> Result<RouteHandle, DirectoryError> {
        let canonical = match self.directory.canonical(target) {
            Some(canonical) => canonical,
            None => {
                let name = normalize(target)?;
                self.routes.remember([name.clone()]);
                name
            }
        };
        let mut own_aliases = Vec::new();
        for alias in aliases {
            let alias = normalize(alias)?;
            if self.directory.canonical(&alias).is_some() {
                return Err(DirectoryError::AliasShadowsRole { alias });
            }
            own_aliases.push(alias);
        }
        self.routes.remember(own_aliases.iter().cloned());
        let generation = self.routes.insert(&canonical, &own_aliases, route, self.clock.now());
        tracing::debug!(target_name = %canonical, aliases = ?own_aliases, "bus route registered");
        Ok(RouteHandle {
            routes: Arc::downgrade(&self.routes),
            target: canonical,
            generation,
            clock: self.clock.clone(),
        })
    }

    /// How many attempts were journaled with each result (`delivered.verified`,
    /// `owner_binding_violation`, ...) since the bus started, sorted by result.
    pub fn result_counts(&self) -> Vec<(String, u64)> {
        let results = lock(&self.results);
        results.iter().map(|(result, count)| (result.clone(), *count)).collect()
    }

    /// How `name` is doing.
    pub fn health(&self, name: &str) -> HealthReport {
        let Some(canonical) = self.resolve(name) else {
            return HealthReport {
                target: name.to_owned(),
                canonical: None,
                health: Health::InvalidTarget,
                last_seen_ms: None,
            };
        };
        let (health, last_seen_ms) = match self.routes.last_seen(&canonical) {
            Some(seen) => {
                let (health, age) = route_health(seen, self.clock.now(), self.settings.stale_after);
                (health, Some(age))
            }
            None => (Health::NoRoute, None),
        };
        HealthReport { target: name.to_owned(), canonical: Some(canonical), health, last_seen_ms }
    }

    fn now(&self) -> jiff::Timestamp {
        jiff::Timestamp::try_from(self.clock.now()).unwrap_or(jiff::Timestamp::UNIX_EPOCH)
    }

    fn check_body(&self, body: &str) -> Result<(), SendError> {
        if body.trim().is_empty() {
            return Err(SendError::EmptyMessage);
        }
        if body.len() > self.settings.max_body_bytes {
            return Err(SendError::TooLong { bytes: body.len(), limit: self.settings.max_body_bytes });
        }
        Ok(())
    }

    /// The canonical target of a send, after the body, target and owner checks.
    fn check(&self, from: &Sender, request: &SendRequest) -> Result<String, SendError> {
        self.check_body(&request.body)?;
        let target =
            self.resolve(&request.target).ok_or_else(|| SendError::InvalidTarget { target: request.target.clone() })?;
        if let Some(owner) = &from.owner {
            let owner = self.resolve(owner).unwrap_or_else(|| owner.clone());
            if owner != target {
                return Err(SendError::OwnerBindingViolation { sender: from.id.clone(), owner, target });
            }
        }
        Ok(target)
    }

    /// Sends a message from `from`: to the target's live route when there is one, else to
    /// its trigger file. Refusals and outcomes alike are journaled.
    pub async fn send(self: &Arc<Self>, from: &Sender, request: SendRequest) -> Result<DeliveryResult, SendError> {
        let correlation_id = request.correlation_id.clone().filter(|id| !id.trim().is_empty()).unwrap_or_else(new_id);
        let target = match self.check(from, &request) {
            Ok(target) => target,
            Err(error) => {
                let to = self.resolve(&request.target).unwrap_or_else(|| request.target.clone());
                self.record(JournalEntry {
                    time_ms: self.now().as_millisecond(),
                    from: from.id.clone(),
                    to,
                    seq: None,
                    priority: request.priority,
                    body: request.body.clone(),
                    correlation_id,
                    result: error.code().to_owned(),
                    detail: Some(error.to_string()),
                })
                .await;
                return Err(error);
            }
        };
        let message = BusMessage {
            id: new_id(),
            from: from.id.clone(),
            role: from.role.clone(),
            target,
            seq: self.sequences.next(&from.id),
            priority: request.priority,
            body: request.body,
            correlation_id,
            time: self.now(),
            session: request.session.filter(|session| !session.trim().is_empty()),
        };
        let (status, detail) = match self.hand_over(&message, Source::Live).await {
            HandOver::Acked(ack) => (DeliveryStatus::Verified, ack.detail),
            HandOver::NoAckYet => (DeliveryStatus::Unverified, Some("no acknowledgement yet".to_owned())),
            HandOver::Unavailable(reason) if self.directory.canonical(&message.target).is_none() => {
                let error = SendError::NoRoute { target: message.target.clone(), reason };
                self.record(self.entry(&message, error.code(), Some(error.to_string()))).await;
                return Err(error);
            }
            HandOver::Unavailable(reason) => {
                let detail = self.fall_back(&message, &reason).await?;
                (DeliveryStatus::Fallback, Some(detail))
            }
            HandOver::Rejected(reason) => {
                let error = SendError::Rejected { target: message.target.clone(), reason };
                self.record(self.entry(&message, error.code(), Some(error.to_string()))).await;
                return Err(error);
            }
        };
        self.record(self.entry(&message, status.as_str(), detail.clone())).await;
        Ok(DeliveryResult { status, message, detail })
    }

    /// Writes `message` to its trigger file; the detail to journal, or why that failed too.
    async fn fall_back(&self, message: &BusMessage, reason: &str) -> Result<String, SendError> {
        let triggers = self.triggers.clone();
        let line = message.clone();
        let written = tokio::task::spawn_blocking(move || triggers.append(&line)).await;
        match written {
            Ok(Ok(path)) => Ok(format!("{reason}; waiting in {}", path.display())),
            Ok(Err(error)) => {
                let error = SendError::Undeliverable { reason: format!("{reason}, and {error}") };
                tracing::error!(target_name = %message.target, %error, "bus message lost its fallback");
                self.record(self.entry(message, error.code(), Some(error.to_string()))).await;
                Err(error)
            }
            Err(join) => {
                let error = SendError::Undeliverable { reason: format!("{reason}, and the writer failed: {join}") };
                self.record(self.entry(message, error.code(), Some(error.to_string()))).await;
                Err(error)
            }
        }
    }

    /// Offers `message` to its target's route and waits for the acknowledgement up to the
    /// timeout. The route keeps going past the timeout; what it does then is journaled, and
    /// a message it finally can't take goes to the trigger file.
    async fn hand_over(self: &Arc<Self>, message: &BusMessage, source: Source) -> HandOver {
        let Some(route) = self.routes.get(&message.target) else {
            return HandOver::Unavailable("no live route".to_owned());
        };
        let delivery = Delivery { text: message.envelope(), message: message.clone() };
        let (answer, answered) = oneshot::channel();
        let bus = self.clone();
        self.tasks.spawn(async move {
            let outcome = route.deliver_boxed(&delivery).await;
            if outcome.is_ok() {
                bus.routes.seen(&delivery.message.target, None, bus.clock.now());
            }
            if let Err(outcome) = answer.send(outcome) {
                bus.late(&delivery.message, outcome, source).await;
            }
        });
        match tokio::time::timeout(self.settings.ack_timeout, answered).await {
            Ok(Ok(Ok(ack))) => HandOver::Acked(ack),
            Ok(Ok(Err(RouteError::Unavailable(reason)))) => HandOver::Unavailable(reason),
            Ok(Ok(Err(RouteError::Rejected(reason)))) => HandOver::Rejected(reason),
            Ok(Err(_)) => HandOver::Unavailable("the route failed while delivering".to_owned()),
            Err(_) => HandOver::NoAckYet,
        }
    }

    /// Journals what a route did after the sender stopped waiting.
    async fn late(&self, message: &BusMessage, outcome: Result<Ack, RouteError>, source: Source) {
        let via = match source {
            Source::Live => "",
            Source::TriggerFile => " (from the trigger file)",
        };
        match outcome {
            Ok(ack) => {
                let detail =
                    format!("acknowledged late{via}{}", ack.detail.map(|run| format!(": {run}")).unwrap_or_default());
                self.record(self.entry(message, DeliveryStatus::Verified.as_str(), Some(detail))).await;
            }
            Err(RouteError::Unavailable(reason)) => {
                if let Ok(detail) = self.fall_back(message, &reason).await {
                    self.record(self.entry(message, DeliveryStatus::Fallback.as_str(), Some(detail))).await;
                }
            }
            Err(RouteError::Rejected(reason)) => {
                self.record(self.entry(message, "rejected", Some(format!("rejected late{via}: {reason}")))).await;
            }
        }
    }

    fn entry(&self, message: &BusMessage, result: &str, detail: Option<String>) -> JournalEntry {
        entry_at(self.now().as_millisecond(), message, result, detail)
    }

    async fn record(&self, entry: JournalEntry) {
        *lock(&self.results).entry(entry.result.clone()).or_default() += 1;
        if let Err(error) = self.journal.record_boxed(&entry).await {
            tracing::warn!(%error, from = %entry.from, to = %entry.to, result = %entry.result, "bus journal failed");
        }
    }

    /// Waits for deliveries still running past their acknowledgement timeout.
    pub async fn drain(&self) {
        self.tasks.close();
        self.tasks.wait().await;
        self.tasks.reopen();
    }
}

/// A journal entry for an attempt at `message` happening now.
fn entry_at(time_ms: i64, message: &BusMessage, result: &str, detail: Option<String>) -> JournalEntry {
    JournalEntry {
        time_ms,
        from: message.from.clone(),
        to: message.target.clone(),
        seq: Some(message.seq),
        priority: message.priority,
        body: message.body.clone(),
        correlation_id: message.correlation_id.clone(),
        result: result.to_owned(),
        detail,
    }
}

#[cfg(test)]
mod tests;
