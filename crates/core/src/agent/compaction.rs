//! The agent's compaction hooks: applying a finished background summary before a
//! turn, and checking the context pressure after one (which may start a summary as a
//! tracked task that stops on shutdown).

use std::sync::Arc;

use squidbot_types::session::EntryBody;

use super::{Agent, AgentError, AgentEvents, estimate_message_tokens};
use crate::compactor::{self, COMPACTION_PROMPT, CompactionOutput, CompactionPlan, Pressure};
use crate::memory::Memories;
use crate::provider::DynLlmProvider;
use crate::session::Session;
use crate::store::Durability;
use crate::sync::lock;

impl Agent {
    pub(super) async fn apply_finished_compaction(
        &self,
        session: &mut Session,
        events: &dyn AgentEvents,
        wait: bool,
    ) -> Result<(), AgentError> {
        let job = {
            let mut jobs = lock(&self.jobs);
            match jobs.get(session.key()) {
                Some(job) if wait || job.is_finished() => jobs.remove(session.key()),
                _ => None,
            }
        };
        let Some(job) = job else { return Ok(()) };
        let Ok(Some((plan, output))) = job.await else { return Ok(()) };
        if !session.turn_starts().iter().any(|(_, id)| *id == plan.first_kept) {
            return Ok(()); // the branch moved on (new conversation, or already compacted)
        }
        let body = if output.summary.is_empty() {
            compactor::truncation(&plan)
        } else {
            EntryBody::Compaction {
                summary: output.summary,
                first_kept: plan.first_kept.clone(),
                condensed: plan.condensed,
                method: plan.pressure.method().to_owned(),
            }
        };
        self.record(session, vec![body], Durability::Synced).await?;
        session.release_compacted();
        events.notice(&format!("condensed {} older messages into a summary", plan.condensed));
        Ok(())
    }

    /// Compacts now (`/compact`): every turn of the active branch but the last is
    /// summarised by the compaction model, waiting for it. Returns how many messages were
    /// condensed, `None` when there is nothing before the last turn or compaction is off.
    pub async fn compact_now(
        &self,
        session: &mut Session,
        events: &dyn AgentEvents,
    ) -> Result<Option<usize>, AgentError> {
        let Some(compaction) = &self.compaction else { return Ok(None) };
        // A background summary of this session would race this one: apply it first.
        self.apply_finished_compaction(session, events, true).await?;
        // A window of nothing keeps only the last turn.
        let Some(plan) = compactor::plan(session, 0, 0, Pressure::Compact) else { return Ok(None) };
        let summary = Summary {
            provider: self.provider.clone(),
            model: compaction.model.clone(),
            memories: compaction.memories.clone(),
            instructions: COMPACTION_PROMPT.load(self.workspace.as_ref()),
            context: session.header().context.clone(),
            session_key: session.key().to_owned(),
        };
        let Some((plan, output)) = summary.write(plan).await else {
            return Err(AgentError::Tool("the compaction model did not answer; nothing was condensed".into()));
        };
        let body = EntryBody::Compaction {
            summary: output.summary,
            first_kept: plan.first_kept.clone(),
            condensed: plan.condensed,
            method: plan.pressure.method().to_owned(),
        };
        self.record(session, vec![body], Durability::Synced).await?;
        session.release_compacted();
        Ok(Some(plan.condensed))
    }

    pub(super) async fn check_pressure(
        &self,
        session: &mut Session,
        prompt_tokens: u64,
        events: &dyn AgentEvents,
    ) -> Result<(), AgentError> {
        let Some(compaction) = &self.compaction else { return Ok(()) };
        let window = self.settings.context_window;
        let pressure = compaction.policy.pressure(prompt_tokens, window);
        if pressure == Pressure::Low {
            return Ok(());
        }
        let estimated = estimate_message_tokens(&session.history()) as u64;
        let overhead = prompt_tokens.saturating_sub(estimated);
        let Some(plan) = compactor::plan(session, window, overhead, pressure) else { return Ok(()) };
        if pressure == Pressure::Emergency {
            self.record(session, vec![compactor::truncation(&plan)], Durability::Synced).await?;
            session.release_compacted();
            events.notice(&format!(
                "the conversation filled the context window; {} older messages were dropped from what the model sees",
                plan.condensed
            ));
            return Ok(());
        }
        if self.shutdown.is_cancelled() {
            return Ok(()); // the agent is stopping: no new background work
        }
        let mut jobs = lock(&self.jobs);
        if jobs.get(session.key()).is_some_and(|job| !job.is_finished()) {
            return Ok(());
        }
        let summary = Summary {
            provider: self.provider.clone(),
            model: compaction.model.clone(),
            memories: compaction.memories.clone(),
            instructions: COMPACTION_PROMPT.load(self.workspace.as_ref()),
            context: session.header().context.clone(),
            session_key: session.key().to_owned(),
        };
        events.notice("condensing older messages in the background");
        let shutdown = self.shutdown.clone();
        let job = self.tasks.spawn(async move {
            tokio::select! {
                biased;
                () = shutdown.cancelled() => None,
                written = summary.write(plan) => written,
            }
        });
        jobs.insert(session.key().to_owned(), job);
        Ok(())
    }
}

/// What a background compaction needs, taken from the agent and the session when it starts.
struct Summary {
    provider: Arc<dyn DynLlmProvider>,
    model: String,
    memories: Option<Memories>,
    instructions: String,
    context: String,
    session_key: String,
}

impl Summary {
    /// Summarizes the turns `plan` condenses and saves the memories extracted on the way;
    /// `None` when the model could not (the next turn tries again).
    async fn write(self, plan: CompactionPlan) -> Option<(CompactionPlan, CompactionOutput)> {
        let Self { provider, model, memories, instructions, context, session_key } = self;
        let output = compactor::summarize(
            provider.as_ref(),
            &model,
            &instructions,
            plan.previous_summary.as_deref(),
            &plan.transcript,
            plan.pressure,
        )
        .await;
        match output {
            Ok(output) => {
                if let Some(memories) = memories {
                    for memory in output.memories.clone() {
                        if let Err(error) = memories.save(memory.into_new_memory(&context, "compaction")).await {
                            tracing::warn!(%error, session = %session_key, "can't save an extracted memory");
                        }
                    }
                }
                Some((plan, output))
            }
            Err(error) => {
                tracing::warn!(%error, session = %session_key, "background compaction failed; will retry after the next turn");
                None
            }
        }
    }
}
