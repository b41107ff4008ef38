//! The port through which the agent's turns reach the sub-agents working for its sessions:
//! their finished background work, recorded before a turn, and their status for the
//! prompt. The delegation module implements it; the agent knows nothing more of it.

use std::any::Any;
use std::future::Future;

use super::{Agent, AgentError};
use crate::BoxFuture;
use crate::context::PromptSection;
use crate::session::Session;

/// The sub-agents working for an agent's sessions, as its turns see them.
pub trait SubAgents: Send + Sync {
    /// Records in `session`, through `agent`, the background work of its sub-agents that
    /// finished since its last turn; what can't be recorded is kept for the next attempt.
    fn record_finished<'a>(
        &'a self,
        agent: &'a Agent,
        session: &'a mut Session,
    ) -> impl Future<Output = Result<(), AgentError>> + Send + 'a;

    /// The prompt section listing the sub-agents of `session_key`, when it has any.
    fn workers_section(&self, session_key: &str) -> Option<PromptSection>;
}

/// Object-safe companion of [`SubAgents`]. It is `Any` so that whoever attached the sub-agents
/// can find them again by their type (the delegation front does, for its callers).
pub trait DynSubAgents: Any + Send + Sync {
    /// See [`SubAgents::record_finished`].
    fn record_finished_boxed<'a>(
        &'a self,
        agent: &'a Agent,
        session: &'a mut Session,
    ) -> BoxFuture<'a, Result<(), AgentError>>;

    /// See [`SubAgents::workers_section`].
    fn workers_section_of(&self, session_key: &str) -> Option<PromptSection>;
}

impl<T: SubAgents + 'static> DynSubAgents for T {
    fn record_finished_boxed<'a>(
        &'a self,
        agent: &'a Agent,
        session: &'a mut Session,
    ) -> BoxFuture<'a, Result<(), AgentError>> {
        Box::pin(self.record_finished(agent, session))
    }

    fn workers_section_of(&self, session_key: &str) -> Option<PromptSection> {
        self.workers_section(session_key)
    }
}
