//! What the system jobs do: TTL expiry of memories, archival of idle sessions (after a
//! memory extraction pass), the memory bulletin, and vector backfill. When they run is
//! the scheduler's business: they are rows of the job table (see `crate::jobs`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use squidbot_core::compactor::{self, COMPACTION_PROMPT, Pressure};
use squidbot_core::memory::{BULLETIN_PROMPT, ListFilter, Memories};
use squidbot_core::provider::{CompletionRequest, DynLlmProvider, NoopSink};
use squidbot_core::session::Session;
use squidbot_core::store::SessionStore;
use squidbot_core::workspace::WorkspaceFiles;
use squidbot_store::{Bulletin, BulletinCache, JsonlSessionStore, SqliteSessionIndex};
use squidbot_types::ChatMessage;
use squidbot_types::memory::MemoryType;

use crate::indexed_sessions::unix_now;

/// Characters of a transcript sent for extraction at archival (the most recent part).
const ARCHIVE_TRANSCRIPT_CHARS: usize = 60_000;

/// Job runs deleted in one pass at most (a first pass after an upgrade may find years).
const PRUNE_BATCH: usize = 1_000;

/// Everything the jobs need.
pub struct Housekeeping {
    /// Memory service.
    pub memories: Memories,
    /// Session index.
    pub index: SqliteSessionIndex,
    /// Session transcripts.
    pub sessions: JsonlSessionStore,
    /// Bulletin cache.
    pub bulletins: BulletinCache,
    /// Model access.
    pub provider: Arc<dyn DynLlmProvider>,
    /// `provider/model` for extraction and bulletins.
    pub model: String,
    /// Prompt overrides.
    pub workspace: Arc<dyn WorkspaceFiles>,
    /// Idle time before archival.
    pub archive_after: Duration,
    /// Age after which the sessions of job runs are deleted.
    pub keep_job_runs: Duration,
    /// Contexts served (the owner for now).
    pub contexts: Vec<String>,
}

/// What archiving one session did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Archived {
    /// Memories extracted and saved (new or merged).
    pub memories: usize,
}

impl Housekeeping {
    /// Runs the system job `name` once; returns a line saying what it did, or why it
    /// failed (for the scheduler's failure count).
    pub async fn run_job(&self, name: &str) -> Result<String, String> {
        self.run(name).await.map_err(|error| format!("{error:#}"))
    }

    async fn run(&self, name: &str) -> Result<String> {
        match name {
            "ttl_expiry" => Ok(format!("{} expired memories deleted", self.memories.expire().await?)),
            "vector_backfill" => Ok(format!("{} memories embedded", self.memories.backfill_vectors(256).await?)),
            "archive_idle" => Ok(format!("{} idle sessions archived", self.archive_idle().await?)),
            "prune_job_runs" => Ok(format!("{} finished job runs deleted", self.prune_job_runs().await?)),
            "memory_bulletin" => Ok(format!("{} bulletins refreshed", self.refresh_bulletins().await?)),
            other => bail!("there is no system job {other:?}"),
        }
    }

    async fn archive_idle(&self) -> Result<usize> {
        let before = unix_now() - self.archive_after.as_secs() as i64;
        let idle = self.index.idle(before)?;
        let mut archived = 0;
        for session in idle {
            match self.archive(&session.key).await {
                Ok(_) => archived += 1,
                Err(error) => tracing::warn!(session = %session.key, "can't archive: {error:#}"),
            }
        }
        Ok(archived)
    }

    /// Deletes the sessions of job runs last touched longer than `keep_job_runs` ago (a
    /// run's reply is already in the session it was delivered to), oldest first, at most
    /// a thousand a pass. Returns how many were deleted.
    async fn prune_job_runs(&self) -> Result<usize> {
        let before = unix_now() - i64::try_from(self.keep_job_runs.as_secs()).unwrap_or(i64::MAX);
        let mut deleted = 0;
        for key in self.index.job_runs_before(before, PRUNE_BATCH)? {
            match self.sessions.remove(&key).await {
                Ok(_) => {
                    self.index.remove(&key)?;
                    deleted += 1;
                }
                Err(error) => tracing::warn!(session = %key, "can't delete a finished job run: {error}"),
            }
        }
        Ok(deleted)
    }

    /// Extracts memories from a session and marks it archived. A failed extraction
    /// leaves the session active so a later run retries it.
    pub async fn archive(&self, key: &str) -> Result<Archived> {
        let Some(loaded) = self.sessions.load(key).await? else {
            bail!("can't find session {key}; `squidbot sessions list` shows the existing ones");
        };
        let context = loaded.header.context.clone();
        let session = Session::from_loaded(loaded);
        let mut transcript = compactor::transcript(&session.active_path());
        if transcript.len() > ARCHIVE_TRANSCRIPT_CHARS {
            let start =
                squidbot_core::text::ceil_char_boundary(&transcript, transcript.len() - ARCHIVE_TRANSCRIPT_CHARS);
            transcript = transcript[start..].to_owned();
        }
        let mut saved = 0;
        // A sub-agent's transcript is tool work whose result is already in its owner's
        // session (which is mined in turn), and a job run's reply is in the session it was
        // delivered to: archive those without another model call.
        let indexed = self.index.get(key)?;
        let mined_elsewhere = squidbot_core::delegation::is_worker_session(key)
            || indexed.as_ref().is_some_and(|entry| entry.job_id.is_some());
        if !transcript.trim().is_empty() && !mined_elsewhere {
            let instructions = COMPACTION_PROMPT.load(self.workspace.as_ref());
            let output = compactor::summarize(
                self.provider.as_ref(),
                &self.model,
                &instructions,
                session.current_summary().as_deref(),
                &transcript,
                Pressure::Compact,
            )
            .await
            .with_context(|| format!("can't extract memories from session {key}"))?;
            for memory in output.memories {
                self.memories.save(memory.into_new_memory(&context, "archive")).await?;
                saved += 1;
            }
        }
        if indexed.is_none() {
            self.index.record_activity(key, &context, unix_now(), session.history().len() as u64)?;
        }
        self.index.set_archived(key, unix_now())?;
        Ok(Archived { memories: saved })
    }

    async fn refresh_bulletins(&self) -> Result<usize> {
        let mut refreshed = 0;
        for context in &self.contexts {
            if self.refresh_bulletin(context).await? {
                refreshed += 1;
            }
        }
        Ok(refreshed)
    }

    /// Rewrites the bulletin of `context` unless its memories are unchanged since the
    /// last one; returns whether it was rewritten.
    pub async fn refresh_bulletin(&self, context: &str) -> Result<bool> {
        let fingerprint = self.memories.fingerprint(context).await?;
        if let Some(cached) = self.bulletins.get(context)?
            && cached.fingerprint == fingerprint
        {
            return Ok(false);
        }
        let mut lines = Vec::new();
        for kind in
            [MemoryType::Identity, MemoryType::Preference, MemoryType::Decision, MemoryType::Todo, MemoryType::Fact]
        {
            let filter = ListFilter { types: vec![kind], limit: 12, offset: 0 };
            for memory in self.memories.list(context, filter).await? {
                lines.push(format!("- [{} {:.1}] {}", kind.as_str(), memory.importance, memory.content));
            }
        }
        let content = if lines.is_empty() {
            String::new()
        } else {
            let request = CompletionRequest {
                model: self.model.clone(),
                system: BULLETIN_PROMPT.load(self.workspace.as_ref()),
                messages: vec![ChatMessage::user(format!("Memories:\n{}", lines.join("\n")))],
                tools: Default::default(),
                max_tokens: 400,
                temperature: Some(0.2),
                stream: false,
            };
            let completion =
                self.provider.complete_boxed(&request, &NoopSink).await.context("can't write the memory bulletin")?;
            completion.content.trim().to_owned()
        };
        self.bulletins.put(context, &Bulletin { content, fingerprint, generated_at: unix_now() })?;
        Ok(true)
    }
}
