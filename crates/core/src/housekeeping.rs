//! What the system jobs do: TTL expiry of memories, archival of idle sessions (after a
//! memory extraction pass), pruning the sessions of old job runs, the memory bulletin,
//! and vector backfill. When they run is the scheduler's business: they are rows of the
//! job table ([`system_jobs`]).

mod system_jobs;

#[cfg(test)]
pub(crate) mod fakes;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use squidbot_types::ChatMessage;
use squidbot_types::memory::MemoryType;

use crate::clock::Clock;
use crate::compactor::{self, COMPACTION_PROMPT, Pressure};
use crate::memory::{BULLETIN_PROMPT, Bulletin, BulletinError, Bulletins, ListFilter, Memories, MemoryError};
use crate::provider::{CompletionRequest, DynLlmProvider, NoopSink, ProviderError};
use crate::session::Session;
use crate::store::index::{SessionIndex, SessionIndexError};
use crate::store::{DynSessionStore, StoreError};
use crate::workspace::WorkspaceFiles;

pub(crate) use system_jobs::run_system_job;
pub use system_jobs::{SYSTEM_CONTEXT, SystemJobs, install_system_jobs, run_system_jobs_now, system_jobs};

/// Characters of a transcript sent for extraction at archival (the most recent part).
const ARCHIVE_TRANSCRIPT_CHARS: usize = 60_000;

/// Job runs deleted in one pass at most (a first pass after an upgrade may find years).
const PRUNE_BATCH: usize = 1_000;

/// Memories without a vector embedded in one pass at most.
const BACKFILL_BATCH: usize = 256;

/// Why a system job, or archiving one session, failed.
#[derive(Debug, thiserror::Error)]
pub enum HousekeepingError {
    /// No system job has this name.
    #[error("there is no system job {name:?}")]
    UnknownJob {
        /// The name asked for.
        name: String,
    },
    /// The session to archive does not exist.
    #[error("can't find session {key}; `squidbot sessions list` shows the existing ones")]
    UnknownSession {
        /// Its key.
        key: String,
    },
    /// The model could not extract memories from a session; it stays active, so a later
    /// run retries it.
    #[error("can't extract memories from session {key}: {reason}")]
    Extraction {
        /// The session's key.
        key: String,
        /// The provider's error.
        reason: ProviderError,
    },
    /// The model could not write the memory bulletin.
    #[error("can't write the memory bulletin: {reason}")]
    BulletinWriting {
        /// The provider's error.
        reason: ProviderError,
    },
    /// The memory store failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The session transcripts failed.
    #[error(transparent)]
    Sessions(#[from] StoreError),
    /// The session index failed.
    #[error(transparent)]
    Index(#[from] SessionIndexError),
    /// The bulletin cache failed.
    #[error(transparent)]
    Bulletins(#[from] BulletinError),
}

/// Everything the system jobs need.
pub struct Housekeeping {
    /// Memory service.
    pub memories: Memories,
    /// Session index.
    pub index: Arc<dyn SessionIndex>,
    /// Session transcripts (without the index: housekeeping keeps it in step itself).
    pub sessions: Arc<dyn DynSessionStore>,
    /// Bulletin cache.
    pub bulletins: Arc<dyn Bulletins>,
    /// Model access.
    pub provider: Arc<dyn DynLlmProvider>,
    /// `provider/model` for extraction and bulletins.
    pub model: String,
    /// Prompt overrides.
    pub workspace: Arc<dyn WorkspaceFiles>,
    /// Where the time comes from.
    pub clock: Arc<dyn Clock>,
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
        self.run(name).await.map_err(|error| error.to_string())
    }

    /// Runs the system job `name` once; returns a line saying what it did.
    pub async fn run(&self, name: &str) -> Result<String, HousekeepingError> {
        match name {
            "ttl_expiry" => Ok(format!("{} expired memories deleted", self.memories.expire().await?)),
            "vector_backfill" => {
                Ok(format!("{} memories embedded", self.memories.backfill_vectors(BACKFILL_BATCH).await?))
            }
            "archive_idle" => Ok(format!("{} idle sessions archived", self.archive_idle().await?)),
            "prune_job_runs" => Ok(format!("{} finished job runs deleted", self.prune_job_runs().await?)),
            "memory_bulletin" => Ok(format!("{} bulletins refreshed", self.refresh_bulletins().await?)),
            other => Err(HousekeepingError::UnknownJob { name: other.to_owned() }),
        }
    }

    fn now(&self) -> i64 {
        self.clock.unix_seconds()
    }

    /// Archives every active session idle for longer than `archive_after`; one that fails
    /// is logged and stays active. Returns how many were archived.
    pub async fn archive_idle(&self) -> Result<usize, HousekeepingError> {
        let before = self.now() - i64::try_from(self.archive_after.as_secs()).unwrap_or(i64::MAX);
        let idle = self.index.idle(before)?;
        let mut archived = 0;
        for session in idle {
            match self.archive(&session.key).await {
                Ok(_) => archived += 1,
                Err(error) => tracing::warn!(session = %session.key, "can't archive: {error}"),
            }
        }
        Ok(archived)
    }

    /// Deletes the sessions of job runs last touched longer than `keep_job_runs` ago (a
    /// run's reply is already in the session it was delivered to), oldest first, at most
    /// a thousand a pass. Returns how many were deleted.
    pub async fn prune_job_runs(&self) -> Result<usize, HousekeepingError> {
        let before = self.now() - i64::try_from(self.keep_job_runs.as_secs()).unwrap_or(i64::MAX);
        let mut deleted = 0;
        for key in self.index.job_runs_before(before, PRUNE_BATCH)? {
            match self.sessions.remove_boxed(&key).await {
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
    pub async fn archive(&self, key: &str) -> Result<Archived, HousekeepingError> {
        let Some(loaded) = self.sessions.load_boxed(key).await? else {
            return Err(HousekeepingError::UnknownSession { key: key.to_owned() });
        };
        let context = loaded.header.context.clone();
        let session = Session::from_loaded(loaded);
        let mut transcript = compactor::transcript(&session.active_path());
        if transcript.len() > ARCHIVE_TRANSCRIPT_CHARS {
            let start = crate::text::ceil_char_boundary(&transcript, transcript.len() - ARCHIVE_TRANSCRIPT_CHARS);
            transcript = transcript[start..].to_owned();
        }
        let mut saved = 0;
        // A sub-agent's transcript is tool work whose result is already in its owner's
        // session (which is mined in turn), and a job run's reply is in the session it was
        // delivered to: archive those without another model call.
        let indexed = self.index.get(key)?;
        let mined_elsewhere =
            crate::delegation::is_worker_session(key) || indexed.as_ref().is_some_and(|entry| entry.job_id.is_some());
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
            .map_err(|reason| HousekeepingError::Extraction { key: key.to_owned(), reason })?;
            for memory in output.memories {
                self.memories.save(memory.into_new_memory(&context, "archive")).await?;
                saved += 1;
            }
        }
        if indexed.is_none() {
            self.index.record_activity(key, &context, self.now(), session.history().len() as u64)?;
        }
        self.index.set_archived(key, self.now())?;
        Ok(Archived { memories: saved })
    }

    /// Refreshes the bulletin of every context served; returns how many were rewritten.
    pub async fn refresh_bulletins(&self) -> Result<usize, HousekeepingError> {
        let mut refreshed = 0;
        for context in &self.contexts {
            if self.refresh_bulletin(context).await? {
                refreshed += 1;
            }
        }
        Ok(refreshed)
    }

    /// Rewrites the bulletin of `context` unless its memories are unchanged since the
    /// last one; returns whether it was rewritten. A context without memories gets an
    /// empty bulletin without a model call.
    pub async fn refresh_bulletin(&self, context: &str) -> Result<bool, HousekeepingError> {
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
            let completion = self
                .provider
                .complete_boxed(&request, &NoopSink)
                .await
                .map_err(|reason| HousekeepingError::BulletinWriting { reason })?;
            completion.content.trim().to_owned()
        };
        self.bulletins.put(context, &Bulletin { content, fingerprint, generated_at: self.now() })?;
        Ok(true)
    }
}
