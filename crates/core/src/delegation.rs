//! Delegation: the assistant hands tool work to sub-agents (roles such as `worker`,
//! `researcher`, `coder`) that run in sessions of their own, so the assistant's context
//! holds the request and the result, never the sub-agent's tool traces.
//!
//! A [`Delegator`] knows the roles and runs their workers in a [`WorkerPool`]; the tools
//! `delegate`, `spawn`, `cancel_worker` (assistant) and `set_status` (sub-agents) are
//! its front. Normal-priority work blocks only the delegating tool call; background work
//! runs as a tracked task whose result is kept for the owner session and announced through
//! a [`BackgroundSink`]. Every running worker has a [`WorkerInbox`] other agents reach it
//! through, and [`WorkerObserver`]s hear of workers starting and ending (the agent bus makes
//! each one a target while it runs; the gateway counts them).
//!
//! Delegation meets the agent through two ports: a worker runs its role's agent as a
//! [`WorkerAgent`], and the delegator serves the agent's turns as its
//! [`SubAgents`](crate::agent::SubAgents); the agent module does not know this one.

mod inbox;
mod pool;
pub mod roles;
mod run;
mod status;
mod sub_agents;
mod tools;
mod worker_agent;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use squidbot_types::session::EntryBody;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::context::PromptSection;
use crate::sync::lock;

pub use inbox::{InboxError, InboxMessage, WorkerInbox};
pub use pool::{
    NewWorker, Outcome, PoolError, Priority, WorkerPool, WorkerSnapshot, WorkerState, is_worker_session,
    worker_session_key,
};
pub use tools::{CancelWorkerTool, DelegateTool, SetStatusTool, SpawnTool};
pub use worker_agent::{DynWorkerAgent, WorkerAgent};

/// How long a stopped worker gets to wind down before its task is aborted.
pub const GRACE: Duration = Duration::from_secs(5);

/// Reminders a worker gets when a turn ends with no answer at all (a plain answer is its
/// result; `set_status` reports progress, an explicit failure or a structured result).
pub const MAX_REMINDERS: u32 = 1;

/// One role sub-agents can be started in.
#[derive(Debug, Clone)]
pub struct RoleAgent {
    /// The agent (model, tools with `set_status`, prompt, max turns) its workers run.
    pub agent: Arc<dyn DynWorkerAgent>,
    /// How long one worker may run.
    pub timeout: Duration,
    /// One line for the assistant about what the role is for.
    pub summary: String,
}

/// Work to hand to a sub-agent.
#[derive(Debug, Clone)]
pub struct DelegateRequest {
    /// Role name.
    pub role: String,
    /// What to do.
    pub task: String,
    /// What the sub-agent needs to know.
    pub context: Option<String>,
    /// What the result should look like.
    pub response_format: Option<String>,
    /// Whether the caller waits.
    pub priority: Priority,
}

/// Who delegates: the turn the work comes from.
#[derive(Debug, Clone)]
pub struct Parent {
    /// The delegating session (the worker's owner).
    pub session_key: String,
    /// Its context (user or group); the worker's session belongs to it too.
    pub context: String,
    /// The turn's correlation id.
    pub correlation_id: String,
    /// Cancelled when the turn is stopped: normal-priority workers stop with it.
    pub cancel: CancellationToken,
    /// Who the delegating turn acts for: the worker acts for them too.
    pub actor: Option<squidbot_types::people::Actor>,
}

/// How a worker ended, as handed back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerReport {
    /// The worker.
    pub worker: WorkerSnapshot,
    /// `Done`, `Failed` or `Cancelled`.
    pub state: WorkerState,
    /// The result, or why it failed.
    pub result: String,
}

impl WorkerReport {
    /// The text the delegating model gets back.
    pub fn render(&self) -> String {
        let worker = &self.worker;
        let head = format!("{} worker {} (its session: {})", worker.role, worker.id, worker.session_key);
        match self.state {
            WorkerState::Done => format!("[{head} finished]\n\n{}", self.result),
            WorkerState::Failed => format!("[{head} failed] {}", self.result),
            WorkerState::Cancelled => format!("[{head} was cancelled] {}", self.result),
            WorkerState::Running | WorkerState::WaitingForInput => format!("[{head} is {}]", self.state.as_str()),
        }
    }
}

/// What `delegate` led to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegated {
    /// Normal priority: the worker ended.
    Finished(WorkerReport),
    /// Background: the worker runs; its result arrives later.
    Started(WorkerSnapshot),
}

/// Why work was not handed over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DelegateError {
    /// No such role.
    #[error("can't delegate to {role:?}: there is no such role; the roles are {}", known.join(", "))]
    UnknownRole {
        /// The role asked for.
        role: String,
        /// The roles there are.
        known: Vec<String>,
    },
    /// The request is unusable.
    #[error("can't delegate: {0}")]
    Invalid(String),
    /// The pool refused (too many workers).
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The process is stopping.
    #[error("can't delegate: squidbot is shutting down")]
    ShuttingDown,
}

/// A background worker's end, kept for its owner session until delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackgroundResult {
    /// The worker.
    pub worker_id: String,
    /// Its role.
    pub role: String,
    /// Its task.
    pub task: String,
    /// How it ended.
    pub state: WorkerState,
    /// The result, or why it failed.
    pub result: String,
    /// The worker's own session.
    pub worker_session: String,
    /// The session it reports to.
    pub parent_session: String,
    /// Correlation id of the turn that delegated it.
    pub correlation_id: String,
}

impl BackgroundResult {
    /// The session entry that records it in the owner's session.
    pub fn entry(&self) -> EntryBody {
        EntryBody::Delegate {
            worker: self.worker_id.clone(),
            agent: self.role.clone(),
            task: self.task.clone(),
            status: self.state.as_str().to_owned(),
            result: self.result.clone(),
            session: self.worker_session.clone(),
        }
    }

    /// The message shown to the user: a marker line, then the result.
    pub fn announcement(&self) -> String {
        let verb = match self.state {
            WorkerState::Done => "finished",
            WorkerState::Failed => "failed",
            WorkerState::Cancelled => "was cancelled",
            WorkerState::Running | WorkerState::WaitingForInput => "is still running",
        };
        format!(
            "[background {} {} {verb}: {}]\n{}",
            self.role,
            self.worker_id,
            pool::one_line(&self.task, 80),
            self.result
        )
    }
}

/// How a worker ended, as metrics count it: its final state, with running out of time told
/// apart from other failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WorkerOutcome {
    /// It reported a result.
    Done,
    /// It gave up, broke or looped.
    Failed,
    /// It was stopped.
    Cancelled,
    /// It ran past its role's timeout.
    TimedOut,
}

impl WorkerOutcome {
    /// `done`, `failed`, `cancelled` or `timeout`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::TimedOut => "timeout",
        }
    }
}

/// Hears of every worker starting and ending. Both calls run on the delegating task:
/// keep them quick.
pub trait WorkerObserver: Send + Sync {
    /// `worker` was registered and is about to run; `inbox` reaches it while it runs.
    fn worker_started(&self, _worker: &WorkerSnapshot, _inbox: &WorkerInbox) {}
    /// `worker` ended (`worker.elapsed` is how long it ran); its inbox is closed.
    fn worker_ended(&self, _worker: &WorkerSnapshot, _outcome: WorkerOutcome) {}
}

/// Told when a background worker ended (its result waits in the delegator's inbox).
pub trait BackgroundSink: Send + Sync {
    /// `result` is ready for `result.parent_session`.
    fn background_finished(&self, result: &BackgroundResult);
}

/// The roles, the pool their workers run in, and the inbox of background results.
pub struct Delegator {
    roles: BTreeMap<String, RoleAgent>,
    pool: Arc<WorkerPool>,
    max_workers: usize,
    tracker: TaskTracker,
    shutdown: CancellationToken,
    inbox: Mutex<HashMap<String, Vec<BackgroundResult>>>,
    sink: Mutex<Option<Arc<dyn BackgroundSink>>>,
    observers: Mutex<Vec<Arc<dyn WorkerObserver>>>,
}

impl std::fmt::Debug for Delegator {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Delegator")
            .field("roles", &self.roles.keys().collect::<Vec<_>>())
            .field("max_workers", &self.max_workers)
            .finish()
    }
}

impl Delegator {
    /// A delegator without roles; `max_workers` bounds the workers one session runs at once.
    pub fn new(pool: Arc<WorkerPool>, max_workers: usize) -> Self {
        Self {
            roles: BTreeMap::new(),
            pool,
            max_workers: max_workers.max(1),
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            inbox: Mutex::new(HashMap::new()),
            sink: Mutex::new(None),
            observers: Mutex::new(Vec::new()),
        }
    }

    /// Adds (or replaces) a role.
    pub fn with_role(mut self, name: impl Into<String>, role: RoleAgent) -> Self {
        self.roles.insert(name.into(), role);
        self
    }

    /// The role names, sorted.
    pub fn role_names(&self) -> Vec<String> {
        self.roles.keys().cloned().collect()
    }

    /// One role.
    pub fn role(&self, name: &str) -> Option<&RoleAgent> {
        self.roles.get(name)
    }

    /// The roles as prompt lines: `- researcher: ...`.
    pub fn roles_prompt(&self) -> String {
        self.roles.iter().map(|(name, role)| format!("- `{name}`: {}", role.summary)).collect::<Vec<_>>().join("\n")
    }

    /// The worker registry.
    pub fn pool(&self) -> &Arc<WorkerPool> {
        &self.pool
    }

    /// The per-session limit.
    pub fn max_workers(&self) -> usize {
        self.max_workers
    }

    /// Where to announce finished background work (the gateway's runner, the REPL).
    pub fn set_sink(&self, sink: Arc<dyn BackgroundSink>) {
        *lock(&self.sink) = Some(sink);
    }

    /// Adds an observer of workers starting and ending.
    pub fn observe(&self, observer: Arc<dyn WorkerObserver>) {
        lock(&self.observers).push(observer);
    }

    fn observers(&self) -> Vec<Arc<dyn WorkerObserver>> {
        self.observers.lock().map(|observers| observers.clone()).unwrap_or_default()
    }

    /// Hands `request` to a sub-agent. Normal priority returns when the worker ended;
    /// background returns once it started.
    pub async fn delegate(
        self: &Arc<Self>,
        request: DelegateRequest,
        parent: &Parent,
    ) -> Result<Delegated, DelegateError> {
        if self.shutdown.is_cancelled() {
            return Err(DelegateError::ShuttingDown);
        }
        let Some(role) = self.roles.get(&request.role).cloned() else {
            return Err(DelegateError::UnknownRole { role: request.role, known: self.role_names() });
        };
        if request.task.trim().is_empty() {
            return Err(DelegateError::Invalid("the task is empty; say what the sub-agent should do".into()));
        }
        let cancel = match request.priority {
            Priority::Normal => parent.cancel.child_token(),
            Priority::Background => self.shutdown.child_token(),
        };
        let worker = self.pool.register(
            NewWorker {
                role: request.role.clone(),
                owner: parent.session_key.clone(),
                task: request.task.clone(),
                priority: request.priority,
                correlation_id: parent.correlation_id.clone(),
                cancel: cancel.clone(),
            },
            self.max_workers,
        )?;
        tracing::info!(
            correlation_id = %parent.correlation_id, worker = %worker.id, role = %worker.role,
            priority = request.priority.as_str(), "delegating"
        );
        let brief = run::brief(&request, &worker, parent);
        let inbox = WorkerInbox::new(worker.id.clone());
        for observer in self.observers() {
            observer.worker_started(&worker, &inbox);
        }
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let delegator = self.clone();
        let job = run::Job {
            worker: worker.clone(),
            role,
            brief,
            context: parent.context.clone(),
            cancel,
            inbox,
            actor: parent.actor.clone(),
        };
        self.tracker.spawn(async move {
            let report = delegator.complete(run::supervise(&delegator.pool, &delegator.tracker, job).await);
            // The receiver is gone when the delegating turn was stopped; the report is
            // recorded in the pool either way.
            if sender.send(report).is_err() {
                tracing::debug!("the delegating turn ended before its worker");
            }
        });
        match request.priority {
            Priority::Background => Ok(Delegated::Started(worker)),
            Priority::Normal => match receiver.await {
                Ok(report) => Ok(Delegated::Finished(report)),
                Err(_) => Err(DelegateError::ShuttingDown),
            },
        }
    }

    /// Records how a worker ended: a background result joins the inbox first, then the
    /// pool marks the worker ended (so nobody sees it ended without its result), then the
    /// sink hears of it.
    fn complete(&self, ending: run::Ending) -> WorkerReport {
        let run::Ending { worker, state, result, timed_out, inbox } = ending;
        let unread = inbox.close();
        if !unread.is_empty() {
            tracing::warn!(worker = %worker.id, unread = unread.len(), "the worker ended before reading its messages");
        }
        tracing::info!(
            correlation_id = %worker.correlation_id, worker = %worker.id, role = %worker.role,
            state = state.as_str(), "worker ended"
        );
        let background = (worker.priority == Priority::Background).then(|| BackgroundResult {
            worker_id: worker.id.clone(),
            role: worker.role.clone(),
            task: worker.task.clone(),
            state,
            result: result.clone(),
            worker_session: worker.session_key.clone(),
            parent_session: worker.owner.clone(),
            correlation_id: worker.correlation_id.clone(),
        });
        if let Some(background) = &background {
            self.return_results(&worker.owner, vec![background.clone()]);
        }
        if let Err(error) = self.pool.finish(&worker.id, state, &result) {
            tracing::warn!(worker = %worker.id, %error, "can't record how the worker ended");
        }
        let worker = self.pool.snapshot(&worker.id).unwrap_or(worker);
        let outcome = match state {
            WorkerState::Done => WorkerOutcome::Done,
            WorkerState::Failed if timed_out => WorkerOutcome::TimedOut,
            WorkerState::Failed | WorkerState::Running | WorkerState::WaitingForInput => WorkerOutcome::Failed,
            WorkerState::Cancelled => WorkerOutcome::Cancelled,
        };
        for observer in self.observers() {
            observer.worker_ended(&worker, outcome);
        }
        if let Some(background) = &background {
            let sink = lock(&self.sink).clone();
            if let Some(sink) = sink {
                sink.background_finished(background);
            }
        }
        WorkerReport { worker, state, result }
    }

    /// Takes the background results waiting for `session_key`, oldest first.
    pub fn take_results(&self, session_key: &str) -> Vec<BackgroundResult> {
        lock(&self.inbox).remove(session_key).unwrap_or_default()
    }

    /// Puts results back (delivery failed) or in (a worker ended), after those waiting.
    pub fn return_results(&self, session_key: &str, results: Vec<BackgroundResult>) {
        lock(&self.inbox).entry(session_key.to_owned()).or_default().extend(results);
    }

    /// Stops a worker (the assistant's `cancel_worker`, a person through the gateway).
    pub fn cancel(&self, id: &str) -> Result<WorkerSnapshot, PoolError> {
        self.pool.cancel(id)
    }

    /// The "Workers" section of `session_key`'s prompt, when it has any.
    pub fn status_section(&self, session_key: &str) -> Option<PromptSection> {
        status::section(&self.pool, session_key)
    }

    /// Waits until `session_key` has no background worker running (a one-shot command
    /// that must not exit before its background work is done), or `cancel` fires.
    pub async fn wait_for_background(&self, session_key: &str, cancel: &CancellationToken) {
        loop {
            let running = self
                .pool
                .owned_by(session_key)
                .iter()
                .any(|worker| worker.priority == Priority::Background && !worker.state.is_terminal());
            if !running {
                return;
            }
            tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    }

    /// Stops every worker and waits for their tasks to end.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.pool.cancel_all();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

#[cfg(test)]
mod tests;
