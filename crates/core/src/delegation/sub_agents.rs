//! The delegator as the agent's [`SubAgents`] (its background results recorded before a
//! turn, its workers listed in the prompt), and the agent's delegation front: how callers
//! attach a delegator to an agent and find it again.

use std::any::Any;
use std::sync::Arc;

use super::{BackgroundResult, Delegator};
use crate::agent::{Agent, AgentError, SubAgents};
use crate::context::PromptSection;
use crate::session::Session;
use crate::store::Durability;

impl SubAgents for Arc<Delegator> {
    async fn record_finished<'a>(&'a self, agent: &'a Agent, session: &'a mut Session) -> Result<(), AgentError> {
        self.record_results(agent, session).await.map(drop)
    }

    fn workers_section(&self, session_key: &str) -> Option<PromptSection> {
        self.status_section(session_key)
    }
}

impl Delegator {
    /// Appends the results of background workers of `session` that finished since its last
    /// turn, each as a distinct `delegate` entry recorded by `agent`; returns them (in
    /// finishing order). Results that can't be recorded go back to the inbox.
    pub async fn record_results(
        &self,
        agent: &Agent,
        session: &mut Session,
    ) -> Result<Vec<BackgroundResult>, AgentError> {
        let results = self.take_results(session.key());
        if results.is_empty() {
            return Ok(results);
        }
        let bodies = results.iter().map(BackgroundResult::entry).collect();
        if let Err(error) = agent.record(session, bodies, Durability::Synced).await {
            // Not lost: they go back to the inbox for the next attempt.
            self.return_results(session.key(), results);
            return Err(error.into());
        }
        Ok(results)
    }
}

impl Agent {
    /// Lets the agent hand work to the sub-agents of `delegation`: each turn first records
    /// the results of background workers that finished since, and the prompt lists the
    /// session's workers.
    pub fn with_delegation(self, delegation: Arc<Delegator>) -> Self {
        self.with_sub_agents(delegation)
    }

    /// The delegator attached with [`Agent::with_delegation`], if any. Prefer handing the
    /// delegator to whoever needs it at wiring time over reaching for it through the agent.
    pub fn delegation(&self) -> Option<&Arc<Delegator>> {
        let sub_agents: &dyn Any = self.sub_agents()?;
        sub_agents.downcast_ref::<Arc<Delegator>>()
    }

    /// Appends the results of background sub-agents of this session that finished since
    /// its last turn, each as a distinct `delegate` entry; returns them (in finishing order).
    pub async fn take_background_results(&self, session: &mut Session) -> Result<Vec<BackgroundResult>, AgentError> {
        match self.delegation() {
            Some(delegation) => delegation.record_results(self, session).await,
            None => Ok(Vec::new()),
        }
    }
}
