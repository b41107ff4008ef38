//! The `SessionIndex` port: which sessions exist, their context, whether they are active
//! or archived, when they last saw activity and which job run made them; what
//! housekeeping archives and prunes by, and where the job runner marks its runs.

/// Whether a session is in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionStatus {
    /// Receiving messages.
    Active,
    /// Idle long enough to have been archived; new activity resumes it.
    Archived,
}

impl SessionStatus {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Archived => "archived",
        }
    }

    /// The status named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::Active, Self::Archived].into_iter().find(|status| status.as_str() == name)
    }
}

/// One session of the index. Times are Unix seconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionIndexEntry {
    /// Session key.
    pub key: String,
    /// Context the session belongs to.
    pub context: String,
    /// Active or archived.
    pub status: SessionStatus,
    /// First activity.
    pub created_at: i64,
    /// Last activity (or archiving).
    pub updated_at: i64,
    /// When it was archived, while it is.
    pub archived_at: Option<i64>,
    /// Messages recorded so far.
    pub message_count: u64,
    /// The job whose run made the session, for the sessions of job runs.
    pub job_id: Option<String>,
}

/// Why a session index operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionIndexError {
    /// The storage failed or holds a row this build can't read.
    #[error("can't {action}: {reason}")]
    Storage {
        /// What was attempted.
        action: &'static str,
        /// The underlying error.
        reason: String,
    },
}

/// The index of sessions beside their transcripts. Calls block (a database); callers on
/// async workers keep them short.
pub trait SessionIndex: Send + Sync + 'static {
    /// The session `key`, `Ok(None)` when it is not indexed.
    fn get(&self, key: &str) -> Result<Option<SessionIndexEntry>, SessionIndexError>;
    /// Active sessions last updated before `before_unix`, least recently updated first.
    fn idle(&self, before_unix: i64) -> Result<Vec<SessionIndexEntry>, SessionIndexError>;
    /// Records `messages_added` messages in session `key` of `context` at `at_unix`:
    /// indexes a new session as active, and makes an archived one active again.
    fn record_activity(
        &self,
        key: &str,
        context: &str,
        at_unix: i64,
        messages_added: u64,
    ) -> Result<(), SessionIndexError>;
    /// Marks session `key` archived at `at_unix`; `Ok(false)` when it is not indexed.
    fn set_archived(&self, key: &str, at_unix: i64) -> Result<bool, SessionIndexError>;
    /// Marks session `key` (of `context`) as made by a run of job `job_id`, indexing it
    /// now if its first activity is not recorded yet.
    fn mark_job_run(&self, key: &str, context: &str, job_id: &str, at_unix: i64) -> Result<(), SessionIndexError>;
    /// Up to `limit` sessions of job runs last updated before `before_unix`, oldest first.
    fn job_runs_before(&self, before_unix: i64, limit: usize) -> Result<Vec<String>, SessionIndexError>;
    /// Forgets session `key`; `Ok(false)` when it was not indexed.
    fn remove(&self, key: &str) -> Result<bool, SessionIndexError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_their_names() {
        for status in [SessionStatus::Active, SessionStatus::Archived] {
            assert_eq!(SessionStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(SessionStatus::parse("deleted"), None);
    }
}
