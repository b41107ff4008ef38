//! The one internal stream of turn progress. Every turn run through the [`crate::runs::Runner`]
//! publishes its events here; the OpenClaw protocol, the OpenAI-compatible API, the web UI
//! and the metrics all read them, so they cannot disagree about what happened.
//!
//! Subscribers choose what they see with a [`Filter`]. Queues are unbounded but watched:
//! a subscriber more than [`MAX_PENDING`] events behind that has not taken an event for
//! [`MAX_IDLE`] is cut off (its subscription ends and reports
//! [`Subscription::was_cut_off`]), and so is any subscriber [`HARD_MAX_PENDING`] behind,
//! so a client that never reads cannot hurt the others while a busy one survives a burst
//! of tiny deltas from a fast model.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squidbot_types::Usage;
use tokio::sync::mpsc;

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
}

impl TurnEventKind {
    /// True for the last event of a run.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Finished { .. } | Self::Aborted { .. } | Self::Failed { .. })
    }
}

/// Which events a subscriber receives.
#[derive(Clone)]
pub enum Filter {
    /// Every event.
    All,
    /// Events of one session.
    Session(String),
    /// Events of one run.
    Run(String),
    /// Events the predicate accepts (it runs on the publisher's thread: keep it cheap).
    Custom(Arc<dyn Fn(&TurnEvent) -> bool + Send + Sync>),
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => formatter.write_str("All"),
            Self::Session(key) => write!(formatter, "Session({key})"),
            Self::Run(id) => write!(formatter, "Run({id})"),
            Self::Custom(_) => formatter.write_str("Custom"),
        }
    }
}

impl Filter {
    fn accepts(&self, event: &TurnEvent) -> bool {
        match self {
            Self::All => true,
            Self::Session(key) => event.session_key == *key,
            Self::Run(id) => event.run_id == *id,
            Self::Custom(predicate) => predicate(event),
        }
    }
}

struct Subscriber {
    filter: Filter,
    sender: mpsc::UnboundedSender<Arc<TurnEvent>>,
    progress: Arc<Progress>,
}

/// What the publisher knows of a subscriber's reading.
struct Progress {
    pending: AtomicUsize,
    cut_off: AtomicBool,
    /// Milliseconds after the hub's start of the last event taken.
    last_taken_ms: AtomicU64,
}

/// The publish side, shared by everything that runs turns.
pub struct EventHub {
    subscribers: Mutex<HashMap<u64, Subscriber>>,
    next_id: AtomicU64,
    started: Instant,
    max_idle: Duration,
}

impl Default for EventHub {
    fn default() -> Self {
        Self {
            subscribers: Mutex::new(HashMap::new()),
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

    /// Receives the events `filter` accepts from now on.
    pub fn subscribe(self: &Arc<Self>, filter: Filter) -> Subscription {
        let (sender, receiver) = mpsc::unbounded_channel();
        let progress = Arc::new(Progress {
            pending: AtomicUsize::new(0),
            cut_off: AtomicBool::new(false),
            last_taken_ms: AtomicU64::new(self.elapsed_ms()),
        });
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let subscriber = Subscriber { filter, sender, progress: progress.clone() };
        if let Ok(mut subscribers) = self.subscribers.lock() {
            subscribers.insert(id, subscriber);
        }
        Subscription { id, hub: Arc::downgrade(self), receiver, progress, started: self.started }
    }

    /// Current subscribers.
    pub fn subscriber_count(&self) -> usize {
        self.subscribers.lock().map_or(0, |subscribers| subscribers.len())
    }

    /// Hands `event` to every subscriber that wants it. Never blocks.
    pub fn publish(&self, event: TurnEvent) {
        let event = Arc::new(event);
        let now_ms = self.elapsed_ms();
        let max_idle_ms = self.max_idle.as_millis() as u64;
        let Ok(mut subscribers) = self.subscribers.lock() else { return };
        subscribers.retain(|_, subscriber| {
            if !subscriber.filter.accepts(&event) {
                return !subscriber.sender.is_closed();
            }
            let progress = &subscriber.progress;
            let pending = progress.pending.load(Ordering::Relaxed);
            let idle_ms = now_ms.saturating_sub(progress.last_taken_ms.load(Ordering::Relaxed));
            if pending >= HARD_MAX_PENDING || (pending >= MAX_PENDING && idle_ms >= max_idle_ms) {
                progress.cut_off.store(true, Ordering::Relaxed);
                return false;
            }
            progress.pending.fetch_add(1, Ordering::Relaxed);
            subscriber.sender.send(event.clone()).is_ok()
        });
    }

    fn unsubscribe(&self, id: u64) {
        if let Ok(mut subscribers) = self.subscribers.lock() {
            subscribers.remove(&id);
        }
    }
}

/// The receive side; unsubscribes when dropped.
pub struct Subscription {
    id: u64,
    hub: std::sync::Weak<EventHub>,
    receiver: mpsc::UnboundedReceiver<Arc<TurnEvent>>,
    progress: Arc<Progress>,
    started: Instant,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Subscription").field("id", &self.id).finish()
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
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(hub) = self.hub.upgrade() {
            hub.unsubscribe(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(run: &str, session: &str, seq: u64) -> TurnEvent {
        TurnEvent {
            run_id: run.into(),
            session_key: session.into(),
            seq,
            at_ms: 0,
            correlation_id: String::new(),
            kind: TurnEventKind::Delta { text: format!("{seq}") },
        }
    }

    #[tokio::test]
    async fn filters_choose_what_each_subscriber_sees() {
        let hub = EventHub::new();
        let mut all = hub.subscribe(Filter::All);
        let mut session = hub.subscribe(Filter::Session("s1".into()));
        let mut run = hub.subscribe(Filter::Run("r2".into()));
        let mut custom = hub.subscribe(Filter::Custom(Arc::new(|event: &TurnEvent| event.seq == 3)));
        hub.publish(event("r1", "s1", 1));
        hub.publish(event("r2", "s2", 2));
        hub.publish(event("r3", "s1", 3));
        let mut got = Vec::new();
        for _ in 0..3 {
            got.push(all.recv().await.unwrap().seq);
        }
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(session.recv().await.unwrap().seq, 1);
        assert_eq!(session.recv().await.unwrap().seq, 3);
        assert_eq!(run.recv().await.unwrap().seq, 2);
        assert_eq!(custom.recv().await.unwrap().seq, 3);
        assert_eq!(hub.subscriber_count(), 4);
        drop(run);
        assert_eq!(hub.subscriber_count(), 3);
    }

    #[tokio::test]
    async fn a_subscriber_that_never_reads_is_cut_off_and_others_go_on() {
        let hub = EventHub::with_max_idle(Duration::ZERO);
        let mut idle = hub.subscribe(Filter::All);
        let mut busy = hub.subscribe(Filter::All);
        for seq in 0..(MAX_PENDING as u64 + 5) {
            hub.publish(event("r", "s", seq));
            assert_eq!(busy.recv().await.unwrap().seq, seq);
        }
        assert_eq!(hub.subscriber_count(), 1);
        assert!(idle.was_cut_off());
        let mut drained = 0;
        while idle.recv().await.is_some() {
            drained += 1;
        }
        assert_eq!(drained, MAX_PENDING);
        assert!(!busy.was_cut_off());
    }

    #[tokio::test]
    async fn a_busy_reader_survives_a_burst_beyond_the_soft_limit() {
        let hub = EventHub::new();
        let mut busy = hub.subscribe(Filter::All);
        let burst = |from: u64| {
            for seq in from..from + MAX_PENDING as u64 + 100 {
                hub.publish(event("r", "s", seq));
            }
        };
        burst(0);
        assert_eq!(busy.recv().await.unwrap().seq, 0, "it took an event just now");
        burst(MAX_PENDING as u64 + 100);
        let mut received = 1;
        while busy.try_recv().is_some() {
            received += 1;
        }
        assert_eq!(received, 2 * (MAX_PENDING + 100));
        assert!(!busy.was_cut_off());
    }
}
