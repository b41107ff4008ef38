//! The port through which a worker runs the agent of its role ([`WorkerAgent`]), and the
//! agent as that port: the only place delegation reaches into the agent to run one.

use std::future::Future;

use tokio_util::sync::CancellationToken;

use crate::BoxFuture;
use crate::agent::{Agent, AgentError, AgentEvents, TurnInput, TurnOutcome};
use crate::context::WORKER_NUDGE_PROMPT;
use crate::session::Session;

/// What a worker needs of the agent it runs.
pub trait WorkerAgent: std::fmt::Debug + Send + Sync {
    /// Loads the worker's session `key`, or prepares a new one belonging to `context`.
    fn open_session<'a>(
        &'a self,
        key: &'a str,
        context: &'a str,
    ) -> impl Future<Output = Result<Session, AgentError>> + Send + 'a;

    /// Runs one turn of the worker on `input` under `correlation_id`.
    fn run_turn<'a>(
        &'a self,
        session: &'a mut Session,
        input: TurnInput<'a>,
        events: &'a dyn AgentEvents,
        cancel: &'a CancellationToken,
        correlation_id: &'a str,
    ) -> impl Future<Output = Result<TurnOutcome, AgentError>> + Send + 'a;

    /// The model calls one turn may make (a worker that used them all may be looping).
    fn max_turns(&self) -> u32;

    /// The reminder a worker gets when a turn ends with no answer.
    fn reminder(&self) -> String;
}

/// Object-safe companion of [`WorkerAgent`].
pub trait DynWorkerAgent: std::fmt::Debug + Send + Sync {
    /// See [`WorkerAgent::open_session`].
    fn open_session_boxed<'a>(&'a self, key: &'a str, context: &'a str) -> BoxFuture<'a, Result<Session, AgentError>>;

    /// See [`WorkerAgent::run_turn`].
    fn run_turn_boxed<'a>(
        &'a self,
        session: &'a mut Session,
        input: TurnInput<'a>,
        events: &'a dyn AgentEvents,
        cancel: &'a CancellationToken,
        correlation_id: &'a str,
    ) -> BoxFuture<'a, Result<TurnOutcome, AgentError>>;

    /// See [`WorkerAgent::max_turns`].
    fn turn_limit(&self) -> u32;

    /// See [`WorkerAgent::reminder`].
    fn reminder_text(&self) -> String;
}

impl<T: WorkerAgent> DynWorkerAgent for T {
    fn open_session_boxed<'a>(&'a self, key: &'a str, context: &'a str) -> BoxFuture<'a, Result<Session, AgentError>> {
        Box::pin(self.open_session(key, context))
    }

    fn run_turn_boxed<'a>(
        &'a self,
        session: &'a mut Session,
        input: TurnInput<'a>,
        events: &'a dyn AgentEvents,
        cancel: &'a CancellationToken,
        correlation_id: &'a str,
    ) -> BoxFuture<'a, Result<TurnOutcome, AgentError>> {
        Box::pin(self.run_turn(session, input, events, cancel, correlation_id))
    }

    fn turn_limit(&self) -> u32 {
        self.max_turns()
    }

    fn reminder_text(&self) -> String {
        self.reminder()
    }
}

impl WorkerAgent for Agent {
    async fn open_session<'a>(&'a self, key: &'a str, context: &'a str) -> Result<Session, AgentError> {
        let (session, _warnings) = self.open_session_in(key, context).await?;
        Ok(session)
    }

    async fn run_turn<'a>(
        &'a self,
        session: &'a mut Session,
        input: TurnInput<'a>,
        events: &'a dyn AgentEvents,
        cancel: &'a CancellationToken,
        correlation_id: &'a str,
    ) -> Result<TurnOutcome, AgentError> {
        self.run_turn_correlated(session, input, events, cancel, correlation_id).await
    }

    fn max_turns(&self) -> u32 {
        self.settings().max_turns
    }

    fn reminder(&self) -> String {
        WORKER_NUDGE_PROMPT.load(self.workspace().as_ref())
    }
}
