//! Runs turns for long-lived front ends (the gateway's protocols, channels, the scheduler):
//! keeps sessions open, one turn at a time per session and many sessions in parallel,
//! publishes every step to the [`EventHub`], lets any front end abort a run, and waits for
//! running turns on shutdown. Results of background sub-agents are appended to their
//! session and published as soon as the session is free.

mod branches;
mod open;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squidbot_types::{ImageRef, ToolCall};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::agent::{Agent, AgentError, AgentEvents, ModelCallReport, TurnInput, TurnStatus};
use crate::delegation::{BackgroundResult, BackgroundSink, Delegator};
use crate::events::{EventHub, Filter, RunEnd, Subscription, TurnEvent, TurnEventKind, tool_output_for_event};
use crate::session::Session;
use crate::store::Durability;
use crate::sync::lock;
use crate::tool::SharedFile;
use squidbot_types::people::Actor;

pub use branches::TreeError;
pub use open::OpenSessionLimits;
use open::OpenSessions;

/// A session shared between front ends.
pub type SharedSession = Arc<tokio::sync::Mutex<Session>>;

/// Longest accepted run id (clients may choose it, e.g. OpenClaw's idempotency key).
const MAX_RUN_ID_CHARS: usize = 128;

/// A turn to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// The session.
    pub session_key: String,
    /// The user's message.
    pub input: String,
    /// Images sent with it (saved files), shown to vision-capable models.
    pub images: Vec<ImageRef>,
    /// Who asks (`openai`, `openclaw`, `ui`, ...), for logs and events.
    pub origin: String,
    /// The run's id; a fresh one when `None`.
    pub run_id: Option<String>,
    /// The correlation id the turn carries into its tool calls, events, sub-agents, bus
    /// messages and log lines: the one of the bus message that started it, or `None` for
    /// a fresh one (every inbound user message).
    pub correlation_id: Option<String>,
    /// Who the turn acts for, as the front end established it (a linked channel
    /// identity, a gateway token's user); `None`: whoever the session's context belongs to.
    pub actor: Option<Actor>,
}

/// A message for the people of a session from an agent (the agent bus's `user` target).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserMessage {
    /// The session whose people get it.
    pub session_key: String,
    /// The bus message id.
    pub message_id: String,
    /// The sender's id (`assistant`, a worker's id).
    pub from: String,
    /// The sender's role.
    pub role: String,
    /// The priority's short name (`normal`, `urgent`, ...).
    pub priority: String,
    /// What they read: `(ROLE #N): [TAG] body`.
    pub text: String,
    /// The correlation id the message carries.
    pub correlation_id: String,
}

/// A started run: its id and its events from the very first.
#[derive(Debug)]
pub struct RunHandle {
    /// The run id.
    pub run_id: String,
    /// The session.
    pub session_key: String,
    /// This run's events, `Started` to a terminal one.
    pub events: Subscription,
}

/// Why a run was not started.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RunError {
    /// A run with this id is still going.
    #[error("run {0} is already running")]
    AlreadyRunning(String),
    /// The server is stopping.
    #[error("the gateway is shutting down")]
    ShuttingDown,
    /// The request makes no sense.
    #[error("{0}")]
    Invalid(String),
}

/// Origins of turns that are not someone writing: their sessions are not where the
/// people of a context are.
const MACHINE_ORIGINS: [&str; 3] = ["bus", "job", "background"];

/// Where the people of the runner's context last wrote from (the last-active tracker):
/// updated on every inbound message, read when a scheduled job's reply needs a home.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activity {
    /// The origin of the message (`openclaw`, `openai`, a channel name).
    pub origin: String,
    /// The session it went to.
    pub session_key: String,
    /// When (ms since the Unix epoch).
    pub at_ms: i64,
}

struct ActiveRun {
    session_key: String,
    cancel: CancellationToken,
}

/// Runs turns and owns the open sessions.
pub struct Runner {
    agent: Arc<Agent>,
    /// The agent's sub-agents, when it delegates.
    delegation: Option<Arc<Delegator>>,
    hub: Arc<EventHub>,
    /// Loaded sessions, bounded. One opened in another context than the agent's own
    /// ([`Runner::session_in`]) is marked foreign: its people are not the owner, so
    /// writing there is not the owner's activity.
    sessions: Mutex<OpenSessions>,
    active: Mutex<HashMap<String, ActiveRun>>,
    tracker: TaskTracker,
    last_active: Mutex<Option<Activity>>,
    /// Where the people of other contexts (users, groups) last wrote from, by context:
    /// their scheduled jobs' replies go there, never to the owner.
    last_active_elsewhere: Mutex<HashMap<String, Activity>>,
}

/// Most contexts whose last activity is remembered (the oldest is forgotten past it).
const MAX_REMEMBERED_CONTEXTS: usize = 4_096;

impl std::fmt::Debug for Runner {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Runner").field("open_sessions", &self.open_sessions()).finish()
    }
}

impl Runner {
    /// A runner for `agent` publishing to `hub`. When the agent delegates, the results of
    /// its background workers are delivered through this runner.
    pub fn new(agent: Arc<Agent>, hub: Arc<EventHub>) -> Arc<Self> {
        Self::with_limits(agent, hub, OpenSessionLimits::default())
    }

    /// The same runner keeping at most `limits` sessions loaded.
    pub fn with_limits(agent: Arc<Agent>, hub: Arc<EventHub>, limits: OpenSessionLimits) -> Arc<Self> {
        let now = agent.clock().now();
        let runner = Arc::new(Self {
            delegation: agent.delegation().cloned(),
            agent,
            hub,
            sessions: Mutex::new(OpenSessions::new(limits, now)),
            active: Mutex::new(HashMap::new()),
            tracker: TaskTracker::new(),
            last_active: Mutex::new(None),
            last_active_elsewhere: Mutex::new(HashMap::new()),
        });
        if let Some(delegation) = &runner.delegation {
            delegation.set_sink(Arc::new(RunnerSink(Arc::downgrade(&runner))));
        }
        runner
    }

    /// Appends the finished background results of `session_key` to the session (waiting
    /// for a running turn of it to end) and publishes each as a
    /// [`TurnEventKind::Background`] event. Results a turn took in first are not repeated.
    pub fn deliver_background_results(self: &Arc<Self>, session_key: &str) {
        let runner = self.clone();
        let session_key = session_key.to_owned();
        self.tracker.spawn(async move {
            let session = match runner.session(&session_key).await {
                Ok(session) => session,
                Err(error) => {
                    tracing::warn!(session = %session_key, %error, "can't deliver background results yet");
                    return;
                }
            };
            let mut session = session.lock().await;
            match runner.agent.take_background_results(&mut session).await {
                Ok(results) => {
                    for result in results {
                        runner.publish_background(&result);
                    }
                }
                Err(error) => tracing::warn!(session = %session_key, %error, "can't deliver background results yet"),
            }
        });
    }

    fn publish_background(&self, result: &BackgroundResult) {
        self.hub.publish(TurnEvent {
            run_id: format!("background:{}", result.worker_id),
            session_key: result.parent_session.clone(),
            seq: 1,
            at_ms: self.agent.clock().unix_millis(),
            correlation_id: result.correlation_id.clone(),
            kind: TurnEventKind::Background {
                worker_id: result.worker_id.clone(),
                agent: result.role.clone(),
                status: result.state.as_str().to_owned(),
                text: result.announcement(),
                worker_session: result.worker_session.clone(),
            },
        });
    }

    /// Shows `message` to the people of its session: published at once as a
    /// [`TurnEventKind::BusMessage`] event (a turn may be running: they see it now), and
    /// appended to the session as an assistant message of its own once no turn holds it.
    pub fn post_user_message(self: &Arc<Self>, message: UserMessage) {
        self.hub.publish(TurnEvent {
            run_id: format!("bus:{}", message.message_id),
            session_key: message.session_key.clone(),
            seq: 1,
            at_ms: self.agent.clock().unix_millis(),
            correlation_id: message.correlation_id.clone(),
            kind: TurnEventKind::BusMessage {
                message_id: message.message_id.clone(),
                from: message.from.clone(),
                role: message.role.clone(),
                priority: message.priority.clone(),
                text: message.text.clone(),
            },
        });
        let runner = self.clone();
        self.tracker.spawn(async move {
            let appended = async {
                let session = runner.session(&message.session_key).await?;
                let mut session = session.lock().await;
                let body = squidbot_types::session::EntryBody::Message {
                    role: squidbot_types::session::MessageRole::Assistant,
                    content: message.text.clone(),
                    images: Vec::new(),
                    model: None,
                    usage: None,
                    interrupted: false,
                };
                runner.agent.record(&mut session, vec![body], Durability::Synced).await.map_err(AgentError::from)
            };
            if let Err(error) = appended.await {
                tracing::warn!(session = %message.session_key, %error, "can't add a bus message to the session");
            }
        });
    }

    /// Where the people of this runner's context last wrote from; `None` before anyone did.
    pub fn last_active(&self) -> Option<Activity> {
        lock(&self.last_active).clone()
    }

    /// Where the people of `context` (another than the runner's own) last wrote from.
    pub fn last_active_in(&self, context: &str) -> Option<Activity> {
        lock(&self.last_active_elsewhere).get(context).cloned()
    }

    /// Records that someone of `context` (not the runner's own) wrote from `origin` into
    /// `session_key`. Machine origins are ignored.
    fn note_activity_in(&self, context: &str, origin: &str, session_key: &str) {
        if MACHINE_ORIGINS.contains(&origin) {
            return;
        }
        let at_ms = self.agent.clock().unix_millis();
        let mut known = lock(&self.last_active_elsewhere);
        if known.len() >= MAX_REMEMBERED_CONTEXTS
            && !known.contains_key(context)
            && let Some(oldest) = known.iter().min_by_key(|(_, activity)| activity.at_ms).map(|(key, _)| key.clone())
        {
            known.remove(&oldest);
        }
        known.insert(
            context.to_owned(),
            Activity { origin: origin.to_owned(), session_key: session_key.to_owned(), at_ms },
        );
    }

    /// Records that someone wrote from `origin` into `session_key` (turns started here
    /// do it themselves; a front end that takes messages without starting a turn calls
    /// it). Machine origins (`bus`, `job`, `background`) are ignored.
    pub fn note_activity(&self, origin: &str, session_key: &str) {
        if MACHINE_ORIGINS.contains(&origin) {
            return;
        }
        let at_ms = self.agent.clock().unix_millis();
        let mut last = lock(&self.last_active);
        match last.as_mut() {
            Some(known) if known.origin == origin && known.session_key == session_key => known.at_ms = at_ms,
            _ => *last = Some(Activity { origin: origin.to_owned(), session_key: session_key.to_owned(), at_ms }),
        }
    }

    /// The agent.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// The agent's sub-agents, when it delegates.
    pub fn delegation(&self) -> Option<&Arc<Delegator>> {
        self.delegation.as_ref()
    }

    /// The event stream.
    pub fn hub(&self) -> &Arc<EventHub> {
        &self.hub
    }

    /// Sessions loaded in memory.
    pub fn open_sessions(&self) -> usize {
        lock(&self.sessions).len()
    }

    /// Runs going on now, as (run id, session key).
    pub fn active_runs(&self) -> Vec<(String, String)> {
        lock(&self.active).iter().map(|(id, run)| (id.clone(), run.session_key.clone())).collect()
    }

    /// The session for `key`, loading it from the store on first use.
    pub async fn session(&self, key: &str) -> Result<SharedSession, AgentError> {
        self.session_in(key, &self.agent.settings().context).await
    }

    /// The session for `key`, created in `context` when it doesn't exist yet (a session
    /// keeps the context it was created in). Channels call this before [`Runner::start`]
    /// so a new conversation lands in the sender's or the room's context.
    pub async fn session_in(&self, key: &str, context: &str) -> Result<SharedSession, AgentError> {
        if let Some(session) = lock(&self.sessions).get(key, self.agent.clock().now()) {
            return Ok(session);
        }
        let (session, warnings) = self.agent.open_session_in(key, context).await?;
        let foreign = session.header().context != self.agent.settings().context;
        for warning in warnings {
            tracing::warn!(session = key, "{warning}");
        }
        let shared = Arc::new(tokio::sync::Mutex::new(session));
        Ok(lock(&self.sessions).insert(key, shared, foreign, self.agent.clock().now()))
    }

    /// Starts a fresh conversation in `key` (waits for a running turn of it to end).
    pub async fn reset(&self, key: &str) -> Result<(), AgentError> {
        let session = self.session(key).await?;
        session.lock().await.start_new_branch();
        Ok(())
    }

    /// Starts a turn in the background. Its events are subscribed before it begins, so the
    /// handle sees every one of them.
    pub fn start(self: &Arc<Self>, request: RunRequest) -> Result<RunHandle, RunError> {
        if self.tracker.is_closed() {
            return Err(RunError::ShuttingDown);
        }
        if request.input.trim().is_empty() && request.images.is_empty() {
            return Err(RunError::Invalid("the message is empty".into()));
        }
        if request.session_key.trim().is_empty() {
            return Err(RunError::Invalid("the session key is empty".into()));
        }
        let run_id = match request.run_id {
            Some(id) if id.is_empty() || id.chars().count() > MAX_RUN_ID_CHARS => {
                return Err(RunError::Invalid(format!("run ids are 1 to {MAX_RUN_ID_CHARS} characters")));
            }
            Some(id) => id,
            None => crate::ids::session_id(),
        };
        let cancel = CancellationToken::new();
        let foreign = {
            let mut sessions = lock(&self.sessions);
            sessions.make_room(self.agent.clock().now());
            sessions.is_foreign(&request.session_key)
        };
        if !foreign {
            self.note_activity(&request.origin, &request.session_key);
        }
        {
            let mut active = lock(&self.active);
            if active.contains_key(&run_id) {
                return Err(RunError::AlreadyRunning(run_id));
            }
            active
                .insert(run_id.clone(), ActiveRun { session_key: request.session_key.clone(), cancel: cancel.clone() });
        }
        let events = self.hub.subscribe(Filter::Run(run_id.clone()));
        let handle = RunHandle { run_id: run_id.clone(), session_key: request.session_key.clone(), events };
        let runner = self.clone();
        let correlation_id = request
            .correlation_id
            .clone()
            .filter(|id| !id.trim().is_empty())
            .unwrap_or_else(crate::ids::correlation_id);
        self.tracker.spawn(async move {
            let turn = Turn::new(&runner, run_id.clone(), request.session_key.clone(), correlation_id);
            let actor = request.actor.map(|actor| actor.in_session(request.session_key.clone()));
            let input = TurnInput { text: &request.input, images: &request.images, actor: actor.as_ref() };
            turn.run(input, &request.origin, &cancel).await;
            lock(&runner.active).remove(&run_id);
        });
        Ok(handle)
    }

    /// Stops the runs of `session_key` (only `run_id` when given); returns the ids stopped.
    pub fn abort(&self, session_key: &str, run_id: Option<&str>) -> Vec<String> {
        let active = lock(&self.active);
        active
            .iter()
            .filter(|(id, run)| run.session_key == session_key && run_id.is_none_or(|wanted| wanted == id.as_str()))
            .map(|(id, run)| {
                run.cancel.cancel();
                id.clone()
            })
            .collect()
    }

    /// Refuses new runs and waits until the running ones finish; then stops the
    /// background workers still running (their sessions record them as cancelled) and
    /// the agent's own background work (a compaction in progress is abandoned, leaving
    /// the session as it was).
    pub async fn drain(&self) {
        self.tracker.close();
        self.tracker.wait().await;
        if let Some(delegation) = &self.delegation {
            delegation.shutdown().await;
            self.tracker.wait().await;
        }
        self.agent.shutdown().await;
    }
}

/// Hands finished background work to the runner, which outlives none of its users.
struct RunnerSink(std::sync::Weak<Runner>);

impl BackgroundSink for RunnerSink {
    fn background_finished(&self, result: &BackgroundResult) {
        if let Some(runner) = self.0.upgrade() {
            runner.deliver_background_results(&result.parent_session);
        }
    }
}

/// One run in progress: publishes its events in order.
struct Turn<'a> {
    runner: &'a Runner,
    run_id: String,
    session_key: String,
    correlation_id: String,
    seq: AtomicU64,
    tools: Mutex<HashMap<String, Instant>>,
}

impl<'a> Turn<'a> {
    fn new(runner: &'a Runner, run_id: String, session_key: String, correlation_id: String) -> Self {
        Self { runner, run_id, session_key, correlation_id, seq: AtomicU64::new(0), tools: Mutex::new(HashMap::new()) }
    }

    fn publish(&self, kind: TurnEventKind) {
        if kind.is_terminal() {
            // Whoever sees the last event must no longer find the run active (a second
            // abort right after "aborted" stops nothing).
            lock(&self.runner.active).remove(&self.run_id);
        }
        self.runner.hub.publish(TurnEvent {
            run_id: self.run_id.clone(),
            session_key: self.session_key.clone(),
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            at_ms: self.runner.agent.clock().unix_millis(),
            correlation_id: self.correlation_id.clone(),
            kind,
        });
    }

    async fn run(&self, input: TurnInput<'_>, origin: &str, cancel: &CancellationToken) {
        let began = Instant::now();
        let agent = &self.runner.agent;
        let session = match self.runner.session(&self.session_key).await {
            Ok(session) => session,
            Err(error) => {
                self.fail(&error, began.elapsed());
                return;
            }
        };
        let mut session = session.lock().await;
        let context = &session.header().context;
        if context != &agent.settings().context {
            self.runner.note_activity_in(context, origin, &self.session_key);
        }
        tracing::debug!(run = %self.run_id, session = %self.session_key, correlation_id = %self.correlation_id, origin, "turn started");
        self.publish(TurnEventKind::Started {
            input: input.text.to_owned(),
            origin: origin.to_owned(),
            model: agent.settings().model.clone(),
        });
        if cancel.is_cancelled() {
            self.publish(TurnEventKind::Aborted { partial: String::new(), duration: began.elapsed() });
            return;
        }
        match agent.run_turn_correlated(&mut session, input, self, cancel, &self.correlation_id).await {
            Ok(outcome) => {
                let duration = began.elapsed();
                let end = match outcome.status {
                    TurnStatus::Cancelled => {
                        self.publish(TurnEventKind::Aborted { partial: outcome.reply, duration });
                        return;
                    }
                    TurnStatus::Completed | TurnStatus::Refused => RunEnd::Completed,
                    TurnStatus::MaxTurns => RunEnd::MaxTurns,
                };
                self.publish(TurnEventKind::Finished {
                    reply: outcome.reply,
                    end,
                    usage: outcome.usage,
                    model: outcome.model,
                    tool_calls: outcome.tool_calls,
                    duration,
                });
            }
            Err(error) => self.fail(&error, began.elapsed()),
        }
    }

    fn fail(&self, error: &AgentError, duration: Duration) {
        tracing::warn!(run = %self.run_id, session = %self.session_key, %error, "turn failed");
        self.publish(TurnEventKind::Failed { error: error.to_string(), duration });
    }
}

impl AgentEvents for Turn<'_> {
    fn text_delta(&self, text: &str) {
        self.publish(TurnEventKind::Delta { text: text.to_owned() });
    }

    fn stream_reset(&self) {
        self.publish(TurnEventKind::StreamReset);
    }

    fn tool_started(&self, call: &ToolCall) {
        lock(&self.tools).insert(call.id.clone(), Instant::now());
        self.publish(TurnEventKind::ToolStarted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
    }

    fn tool_finished(&self, call: &ToolCall, is_error: bool, output: &str) {
        let began = lock(&self.tools).remove(&call.id);
        self.publish(TurnEventKind::ToolFinished {
            call_id: call.id.clone(),
            name: call.name.clone(),
            is_error,
            duration: began.map(|began| began.elapsed()).unwrap_or_default(),
            output: tool_output_for_event(output),
        });
    }

    fn warning(&self, message: &str) {
        self.publish(TurnEventKind::Warning { message: message.to_owned() });
    }

    fn notice(&self, message: &str) {
        self.publish(TurnEventKind::Notice { message: message.to_owned() });
    }

    fn waiting(&self, message: &str) {
        self.publish(TurnEventKind::Waiting { message: message.to_owned() });
    }

    fn file_shared(&self, file: &SharedFile) {
        self.publish(TurnEventKind::File {
            path: file.path.to_string_lossy().into_owned(),
            name: file.name.clone(),
            mime: file.mime.clone(),
        });
    }

    fn model_call(&self, report: &ModelCallReport) {
        self.publish(TurnEventKind::ModelCall {
            model: report.model.clone(),
            duration: report.duration,
            usage: report.usage,
            ok: report.ok,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use squidbot_types::{ChatMessage, Usage};

    use super::*;
    use crate::agent::AgentSettings;
    use crate::clock::SystemClock;
    use crate::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};
    use crate::store::memory::MemorySessionStore;
    use crate::tool::ToolRegistry;
    use crate::workspace::MemoryWorkspace;

    /// Streams "echo: <last user message>" in two pieces; hangs on "hang".
    struct Echo;

    impl LlmProvider for Echo {
        async fn complete<'a>(
            &'a self,
            request: &'a CompletionRequest,
            sink: &'a dyn StreamSink,
        ) -> Result<Completion, ProviderError> {
            let last = match request.messages.last() {
                Some(squidbot_types::ChatMessage::User { content, .. }) => content.clone(),
                _ => String::new(),
            };
            sink.text_delta("echo: ");
            if last == "hang" {
                std::future::pending::<()>().await;
            }
            sink.text_delta(&last);
            Ok(Completion {
                content: format!("echo: {last}"),
                tool_calls: Vec::new(),
                usage: Usage { input_tokens: 7, output_tokens: 3, cached_input_tokens: 0, cache_write_tokens: 0 },
                stop_reason: StopReason::EndTurn,
                model: "fake/echo".into(),
            })
        }
    }

    fn runner() -> Arc<Runner> {
        runner_with(OpenSessionLimits::default())
    }

    fn runner_with(limits: OpenSessionLimits) -> Arc<Runner> {
        let settings = AgentSettings {
            model: "fake/echo".into(),
            max_turns: 4,
            max_tokens: 100,
            temperature: None,
            context_window: 10_000,
            stream: true,
            workspace: PathBuf::from("/nonexistent"),
            runtime: crate::context::RuntimeInfo::default(),
            context: "owner".into(),
        };
        let agent = Agent::new(
            Arc::new(Echo),
            ToolRegistry::default(),
            Arc::new(MemorySessionStore::default()),
            Arc::new(MemoryWorkspace::new()),
            Arc::new(SystemClock),
            settings,
        );
        Runner::with_limits(Arc::new(agent), EventHub::new(), limits)
    }

    async fn collect(handle: &mut RunHandle) -> Vec<Arc<TurnEvent>> {
        let mut events = Vec::new();
        while let Some(event) = handle.events.recv().await {
            let terminal = event.kind.is_terminal();
            events.push(event);
            if terminal {
                break;
            }
        }
        events
    }

    #[tokio::test]
    async fn a_run_publishes_its_steps_in_order_to_every_reader() {
        let runner = runner();
        let mut watcher = runner.hub().subscribe(Filter::Session("s".into()));
        let request = RunRequest {
            session_key: "s".into(),
            input: "hi".into(),
            images: Vec::new(),
            origin: "test".into(),
            run_id: Some("r1".into()),
            correlation_id: None,
            actor: None,
        };
        let mut handle = runner.start(request).unwrap();
        let events = collect(&mut handle).await;
        let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
        assert!(
            matches!(&events[0].kind, TurnEventKind::Started { input, origin, .. } if input == "hi" && origin == "test")
        );
        let deltas: String = events
            .iter()
            .filter_map(|event| match &event.kind {
                TurnEventKind::Delta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deltas, "echo: hi");
        assert!(events.iter().any(
            |event| matches!(&event.kind, TurnEventKind::ModelCall { model, ok: true, .. } if model == "fake/echo")
        ));
        match &events.last().unwrap().kind {
            TurnEventKind::Finished { reply, end: RunEnd::Completed, usage, .. } => {
                assert_eq!(reply, "echo: hi");
                assert_eq!(usage.input_tokens, 7);
            }
            other => panic!("unexpected end {other:?}"),
        }
        for expected in &events {
            assert_eq!(&watcher.recv().await.unwrap(), expected);
        }
        assert!(runner.active_runs().is_empty());
        let session = runner.session("s").await.unwrap();
        assert_eq!(session.lock().await.history().len(), 2);
    }

    #[tokio::test]
    async fn runs_can_be_aborted_by_session_and_ids_are_unique_while_running() {
        let runner = runner();
        let request = |id: &str, input: &str| RunRequest {
            session_key: "s".into(),
            input: input.into(),
            images: Vec::new(),
            origin: "test".into(),
            run_id: Some(id.into()),
            correlation_id: None,
            actor: None,
        };
        let mut hanging = runner.start(request("r1", "hang")).unwrap();
        while let Some(event) = hanging.events.recv().await {
            if matches!(event.kind, TurnEventKind::Delta { .. }) {
                break;
            }
        }
        assert_eq!(runner.start(request("r1", "again")).unwrap_err(), RunError::AlreadyRunning("r1".into()));
        assert!(matches!(runner.start(request("r2", "  ")), Err(RunError::Invalid(_))));
        // A photo without a caption is a message.
        let photo = RunRequest { images: vec![ImageRef::new("/tmp/photo.png")], ..request("r4", "") };
        assert!(runner.start(photo).is_ok());
        assert!(runner.abort("other", None).is_empty());
        assert_eq!(runner.abort("s", Some("r1")), ["r1"]);
        let events = collect(&mut hanging).await;
        assert!(matches!(&events.last().unwrap().kind, TurnEventKind::Aborted { partial, .. } if partial == "echo: "));
        runner.drain().await;
        assert_eq!(runner.start(request("r3", "late")).unwrap_err(), RunError::ShuttingDown);
    }

    #[tokio::test]
    async fn reset_starts_a_fresh_conversation() {
        let runner = runner();
        let request = RunRequest {
            session_key: "s".into(),
            input: "one".into(),
            images: Vec::new(),
            origin: "test".into(),
            run_id: None,
            correlation_id: None,
            actor: None,
        };
        let mut handle = runner.start(request).unwrap();
        collect(&mut handle).await;
        runner.reset("s").await.unwrap();
        let session = runner.session("s").await.unwrap();
        assert!(session.lock().await.history().is_empty());
    }

    #[tokio::test]
    async fn writing_in_another_context_is_not_the_owners_activity() {
        let runner = runner();
        let request = |key: &str, origin: &str| RunRequest {
            session_key: key.into(),
            input: "hi".into(),
            images: Vec::new(),
            origin: origin.into(),
            run_id: None,
            correlation_id: None,
            actor: None,
        };
        let mut own = runner.start(request("telegram:owner", "telegram")).unwrap();
        collect(&mut own).await;
        runner.session_in("telegram:stranger", "user:telegram:stranger").await.unwrap();
        let mut stranger = runner.start(request("telegram:stranger", "telegram")).unwrap();
        collect(&mut stranger).await;
        let session = runner.session("telegram:stranger").await.unwrap();
        assert_eq!(session.lock().await.header().context, "user:telegram:stranger");
        assert_eq!(runner.last_active().unwrap().session_key, "telegram:owner");
    }

    #[tokio::test]
    async fn a_stream_of_one_turn_sessions_keeps_a_bounded_number_loaded_and_each_one_intact() {
        let runner = runner_with(OpenSessionLimits { max_open: 8, idle: Duration::from_secs(3600) });
        for index in 0..200 {
            let request = RunRequest {
                session_key: format!("user-{index}"),
                input: format!("hi {index}"),
                images: Vec::new(),
                origin: "openai".into(),
                run_id: None,
                correlation_id: None,
                actor: None,
            };
            let mut handle = runner.start(request).unwrap();
            collect(&mut handle).await;
            assert!(runner.open_sessions() <= 8, "{} loaded after {index}", runner.open_sessions());
        }
        // A dropped session loads again from the store with its history.
        let first = runner.session("user-0").await.unwrap();
        let history = first.lock().await.history();
        assert_eq!(history.len(), 2, "{history:?}");
        assert!(matches!(&history[1], ChatMessage::Assistant { content, .. } if content == "echo: hi 0"));
    }
}
