//! The one internal stream of turn progress. Every turn run through the [`crate::runs::Runner`]
//! publishes its events here; the OpenClaw protocol, the OpenAI-compatible API, the web UI
//! and the metrics all read them, so they cannot disagree about what happened.
//!
//! Subscribers choose what they see with a [`Filter`] and a [`Watchlist`] of sessions and
//! runs, which the hub indexes, so an event costs only the subscribers that want it.
//! Queues are unbounded but watched: a subscriber more than [`MAX_PENDING`] events behind
//! that has not taken an event for [`MAX_IDLE`] is cut off (its subscription ends and
//! reports [`Subscription::was_cut_off`]), and so is any subscriber [`HARD_MAX_PENDING`]
//! behind, so a client that never reads cannot hurt the others while a busy one survives a
//! burst of tiny deltas from a fast model.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squidbot_types::Usage;
use tokio::sync::mpsc;

mod index;

use index::{Broad, Index, Progress, Subscriber, Subscribers};

/// Events a subscriber may have queued before it is cut off, unless it is still reading.
pub const MAX_PENDING: usize = 10_000;

/// How long a subscriber over [`MAX_PENDING`] may go without taking an event.
pub const MAX_IDLE: Duration = Duration::from_secs(5);

/// Events queued at which any subscriber is cut off.
pub const HARD_MAX_PENDING: usize = 500_000;

/// One step of a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnEvent {
    /// The run this belongs to.
    pub run_id: String,
    /// The session the run works on.
    pub session_key: String,
    /// 1, 2, 3, ... within the run.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The id shared by everything the inbound message that started the run caused
    /// (tool calls, sub-agents, log lines); for a background result, the id of the turn
    /// that delegated the work.
    pub correlation_id: String,
    /// What happened.
    pub kind: TurnEventKind,
}

/// How a finished run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The model gave its final answer.
    Completed,
    /// Stopped at `max_turns` model calls.
    MaxTurns,
}

/// What happened in a turn.
#[derive(Debug, Clone, PartialEq)]
pub enum TurnEventKind {
    /// The run began (it may have waited for an earlier turn of the same session).
    Started {
        /// The user's message.
        input: String,
        /// Who asked: `openai`, `openclaw`, `ui`, a channel name.
        origin: String,
        /// The model the turn starts with (`provider/model`).
        model: String,
    },
    /// Streamed reply text.
    Delta {
        /// The new piece.
        text: String,
    },
    /// The text streamed so far is void (retry or fallback).
    StreamReset,
    /// A model call finished.
    ModelCall {
        /// The model that answered (or was asked, when it failed).
        model: String,
        /// How long the call took.
        duration: Duration,
        /// Tokens it used.
        usage: Usage,
        /// False when it failed.
        ok: bool,
    },
    /// A tool call is starting.
    ToolStarted {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// Raw JSON arguments.
        arguments: String,
    },
    /// A tool call finished.
    ToolFinished {
        /// The call id.
        call_id: String,
        /// The tool.
        name: String,
        /// True when the tool reported an error.
        is_error: bool,
        /// How long it ran.
        duration: Duration,
        /// What it returned (or its error), secrets redacted, cut to
        /// [`TOOL_OUTPUT_EVENT_CHARS`] characters with a note saying so.
        output: String,
    },
    /// Something the user should know that is not part of the reply.
    Warning {
        /// The text.
        message: String,
    },
    /// Housekeeping worth showing (compaction).
    Notice {
        /// The text.
        message: String,
    },
    /// The turn waits for someone else (an admin's approval); every front end shows it to
    /// the person, chat channels as a message of its own.
    Waiting {
        /// The text.
        message: String,
    },
    /// A tool handed the people of the conversation a file (chat channels send it with
    /// the reply).
    File {
        /// Where it is.
        path: String,
        /// The name it is sent under.
        name: String,
        /// Its media type.
        mime: String,
    },
    /// The run finished with a reply.
    Finished {
        /// The reply.
        reply: String,
        /// How it ended.
        end: RunEnd,
        /// Tokens of all model calls.
        usage: Usage,
        /// The model of the last answer.
        model: String,
        /// Tool calls run.
        tool_calls: u32,
        /// Wall time of the run, waiting for the session included.
        duration: Duration,
    },
    /// The run was stopped; `partial` is what had streamed.
    Aborted {
        /// Text streamed before the stop.
        partial: String,
        /// Wall time of the run.
        duration: Duration,
    },
    /// The run failed.
    Failed {
        /// Why.
        error: String,
        /// Wall time of the run.
        duration: Duration,
    },
    /// A background sub-agent finished and its result was added to the session as a
    /// distinct message. Published on its own (run id `background:<worker>`), outside any
    /// turn; front ends show `text` to the user as a message of its own.
    Background {
        /// The worker's id.
        worker_id: String,
        /// Its role.
        agent: String,
        /// `done`, `failed` or `cancelled`.
        status: String,
        /// What to show: a marker line, then the result or the reason it failed.
        text: String,
        /// Key of the worker's own session.
        worker_session: String,
    },
    /// An agent sent the people of the session a message over the agent bus (`send` to
    /// `user`). Published on its own (run id `bus:<message id>`), outside any turn; front
    /// ends show `text` to the user as a message of its own.
    BusMessage {
        /// The bus message id.
        message_id: String,
        /// The sender's id (`assistant`, a worker's id).
        from: String,
        /// The sender's role.
        role: String,
        /// The priority's short name (`normal`, `urgent`, ...).
        priority: String,
        /// The envelope, `(ROLE #N): [TAG] body`.
        text: String,
    },
}

/// How much of a tool's output its finish event carries: enough to show, small enough that
/// a chatty tool does not flood every client (the session file keeps it whole).
pub const TOOL_OUTPUT_EVENT_CHARS: usize = 4_000;

/// `output` as a tool's finish event carries it: at most [`TOOL_OUTPUT_EVENT_CHARS`]
/// characters, then a note of what was left out.
pub fn tool_output_for_event(output: &str) -> String {
    match output.char_indices().nth(TOOL_OUTPUT_EVENT_CHARS) {
        None => output.to_owned(),
        Some((cut, _)) => {
            let left_out = output[cut..].chars().count();
            format!("{}\n[… {left_out} more characters; the session keeps the whole output]", &output[..cut])
        }
    }
}

impl TurnEventKind {
    /// True for the last event of a run.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Finished { .. } | Self::Aborted { .. } | Self::Failed { .. })
    }
}

/// Which events a subscriber receives. Sessions and runs added later through a
/// [`Watchlist`] are received as well.
#[derive(Clone)]
pub enum Filter {
    /// Every event.
    All,
    /// Events of one session.
    Session(String),
    /// Events of one run.
    Run(String),
    /// Only the sessions and runs added through the subscription's [`Watchlist`]; none at
    /// first.
    Watched,
    /// Events the predicate accepts (it runs on the publisher's thread for every event:
    /// keep it cheap, and prefer [`Filter::Watched`], which the hub looks up by key).
    Custom(Arc<dyn Fn(&TurnEvent) -> bool + Send + Sync>),
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => formatter.write_str("All"),
            Self::Session(key) => write!(formatter, "Session({key})"),
            Self::Run(id) => write!(formatter, "Run({id})"),
            Self::Watched => formatter.write_str("Watched"),
            Self::Custom(_) => formatter.write_str("Custom"),
        }
    }
}

/// The publish side, shared by everything that runs turns.
pub struct EventHub {
    subscribers: Mutex<Subscribers>,
    next_id: AtomicU64,
    started: Instant,
    max_idle: Duration,
}

impl Default for EventHub {
    fn default() -> Self {
        Self {
            subscribers: Mutex::new(Subscribers::default()),
            next_id: AtomicU64::new(0),
            started: Instant::now(),
            max_idle: MAX_IDLE,
        }
    }
}

impl std::fmt::Debug for EventHub {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("EventHub").field("subscribers", &self.subscriber_count()).finish()
    }
}

impl EventHub {
    /// A hub without subscribers.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// A hub that cuts off a lagging subscriber after `max_idle` without reading.
    pub fn with_max_idle(max_idle: Duration) -> Arc<Self> {
        Arc::new(Self { max_idle, ..Self::default() })
    }

    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Subscribers> {
        crate::sync::lock(&self.subscribers)
    }

    /// Receives the events `filter` accepts from now on.
    pub fn subscribe(self: &Arc<Self>, filter: Filter) -> Subscription {
        let (sender, receiver) = mpsc::unbounded_channel();
        let progress = Arc::new(Progress {
            pending: AtomicUsize::new(0),
            cut_off: AtomicBool::new(false),
            last_taken_ms: AtomicU64::new(self.elapsed_ms()),
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut subscriber = Subscriber {
            broad: None,
            sessions: HashSet::new(),
            runs: HashSet::new(),
            sender,
            progress: progress.clone(),
        };
        match filter {
            Filter::All => subscriber.broad = Some(Broad::All),
            Filter::Session(key) => {
                subscriber.sessions.insert(key);
            }
            Filter::Run(id) => {
                subscriber.runs.insert(id);
            }
            Filter::Watched => {}
            Filter::Custom(predicate) => subscriber.broad = Some(Broad::Custom(predicate)),
        }
        self.lock().insert(id, subscriber);
        Subscription {
            watchlist: Watchlist { id, hub: Arc::downgrade(self) },
            receiver,
            progress,
            started: self.started,
        }
    }

    /// Current subscribers.
    pub fn subscriber_count(&self) -> usize {
        self.lock().all.len()
    }

    /// Hands `event` to every subscriber that wants it. Never blocks; the work grows with
    /// the subscribers that want the event, not with all of them.
    pub fn publish(&self, event: TurnEvent) {
        let event = Arc::new(event);
        let now_ms = self.elapsed_ms();
        let max_idle_ms = self.max_idle.as_millis() as u64;
        let mut subscribers = self.lock();
        let mut gone = Vec::new();
        for id in subscribers.candidates(&event) {
            let Some(subscriber) = subscribers.all.get(&id) else { continue };
            if !subscriber.accepts(&event) {
                continue;
            }
            let progress = &subscriber.progress;
            let pending = progress.pending.load(Ordering::Relaxed);
            let idle_ms = now_ms.saturating_sub(progress.last_taken_ms.load(Ordering::Relaxed));
            if pending >= HARD_MAX_PENDING || (pending >= MAX_PENDING && idle_ms >= max_idle_ms) {
                progress.cut_off.store(true, Ordering::Relaxed);
                gone.push(id);
                continue;
            }
            progress.pending.fetch_add(1, Ordering::Relaxed);
            if subscriber.sender.send(event.clone()).is_err() {
                gone.push(id);
            }
        }
        for id in gone {
            subscribers.remove(id);
        }
    }

    fn unsubscribe(&self, id: u64) {
        self.lock().remove(id);
    }
}

/// Adds sessions and runs to a subscription, or takes them away; a cheap handle that
/// can be kept apart from the [`Subscription`] it belongs to. Does nothing once the
/// subscription is gone.
#[derive(Clone)]
pub struct Watchlist {
    id: u64,
    hub: std::sync::Weak<EventHub>,
}

impl std::fmt::Debug for Watchlist {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Watchlist").field("id", &self.id).finish()
    }
}

impl Watchlist {
    fn change(&self, change: impl FnOnce(&mut Subscribers)) {
        if let Some(hub) = self.hub.upgrade() {
            change(&mut hub.lock());
        }
    }

    /// Receives the events of session `key` from now on.
    pub fn watch_session(&self, key: &str) {
        self.change(|subscribers| subscribers.watch(self.id, Index::Session, key));
    }

    /// Stops receiving the events of session `key` (an `All` or `Custom` filter may still
    /// accept them).
    pub fn unwatch_session(&self, key: &str) {
        self.change(|subscribers| subscribers.unwatch(self.id, Index::Session, key));
    }

    /// Receives the events of run `id` from now on.
    pub fn watch_run(&self, id: &str) {
        self.change(|subscribers| subscribers.watch(self.id, Index::Run, id));
    }

    /// Stops receiving the events of run `id` (an `All` or `Custom` filter may still accept
    /// them).
    pub fn unwatch_run(&self, id: &str) {
        self.change(|subscribers| subscribers.unwatch(self.id, Index::Run, id));
    }
}

/// The receive side; unsubscribes when dropped.
pub struct Subscription {
    watchlist: Watchlist,
    receiver: mpsc::UnboundedReceiver<Arc<TurnEvent>>,
    progress: Arc<Progress>,
    started: Instant,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Subscription").field("id", &self.watchlist.id).finish()
    }
}

impl Subscription {
    /// The next event; `None` once the subscriber was cut off or the hub is gone.
    pub async fn recv(&mut self) -> Option<Arc<TurnEvent>> {
        let event = self.receiver.recv().await?;
        self.taken();
        Some(event)
    }

    /// The next event if one is queued, without waiting.
    pub fn try_recv(&mut self) -> Option<Arc<TurnEvent>> {
        let event = self.receiver.try_recv().ok()?;
        self.taken();
        Some(event)
    }

    fn taken(&self) {
        self.progress.pending.fetch_sub(1, Ordering::Relaxed);
        self.progress.last_taken_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// True when the hub dropped this subscriber for falling too far behind.
    pub fn was_cut_off(&self) -> bool {
        self.progress.cut_off.load(Ordering::Relaxed)
    }

    /// The handle that changes which sessions and runs this subscription receives.
    pub fn watchlist(&self) -> Watchlist {
        self.watchlist.clone()
    }

    /// Receives the events of session `key` from now on.
    pub fn watch_session(&self, key: &str) {
        self.watchlist.watch_session(key);
    }

    /// Stops receiving the events of session `key` (an `All` or `Custom` filter may still
    /// accept them).
    pub fn unwatch_session(&self, key: &str) {
        self.watchlist.unwatch_session(key);
    }

    /// Receives the events of run `id` from now on.
    pub fn watch_run(&self, id: &str) {
        self.watchlist.watch_run(id);
    }

    /// Stops receiving the events of run `id` (an `All` or `Custom` filter may still accept
    /// them).
    pub fn unwatch_run(&self, id: &str) {
        self.watchlist.unwatch_run(id);
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(hub) = self.watchlist.hub.upgrade() {
            hub.unsubscribe(self.watchlist.id);
        }
    }
}

#[cfg(test)]
mod tests;
