//! `SqliteSessionIndex`: which sessions exist, their context, whether they are active
//! or archived, and when they last saw activity — for the idle-archiving job and listings.

use rusqlite::{OptionalExtension, Row, TransactionBehavior, params};
use squidbot_core::store::index::{SessionIndex, SessionIndexError};
pub use squidbot_core::store::index::{SessionIndexEntry, SessionStatus};

use crate::database::{Database, DatabaseError};

/// What recording activity did to a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// The session was not indexed yet.
    Started,
    /// The session was active.
    Continued,
    /// The session was archived and is active again.
    Resumed,
}

/// The result of [`SqliteSessionIndex::record_activity`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedActivity {
    /// What happened to the session.
    pub activity: Activity,
    /// The session after the change.
    pub entry: SessionIndexEntry,
}

/// Activity of one session for [`SqliteSessionIndex::record_activities`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityUpdate {
    /// Session key.
    pub key: String,
    /// The session's context; `None` takes it from the index (nothing is recorded for a
    /// session the index does not know yet).
    pub context: Option<String>,
    /// When (Unix seconds).
    pub at_unix: i64,
    /// Messages added.
    pub messages_added: u64,
}

/// The session index in the shared database. Calls block.
#[derive(Debug, Clone)]
pub struct SqliteSessionIndex {
    database: Database,
}

const COLUMNS: &str = "key, context, status, created_at, updated_at, archived_at, message_count, job_id";

fn entry_from_row(row: &Row<'_>) -> rusqlite::Result<SessionIndexEntry> {
    let status: String = row.get(2)?;
    let status = SessionStatus::parse(&status).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            2,
            rusqlite::types::Type::Text,
            format!("unknown status {status:?}").into(),
        )
    })?;
    let message_count: i64 = row.get(6)?;
    Ok(SessionIndexEntry {
        key: row.get(0)?,
        context: row.get(1)?,
        status,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        archived_at: row.get(5)?,
        message_count: u64::try_from(message_count).unwrap_or(0),
        job_id: row.get(7)?,
    })
}

impl SqliteSessionIndex {
    /// An index over `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// Records `messages_added` messages in session `key` at `at_unix`: indexes a new
    /// session as active, and makes an archived one active again.
    pub fn record_activity(
        &self,
        key: &str,
        context: &str,
        at_unix: i64,
        messages_added: u64,
    ) -> Result<RecordedActivity, DatabaseError> {
        let action = "record session activity";
        let added = i64::try_from(messages_added).unwrap_or(i64::MAX);
        self.database.with_connection(|connection| {
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(DatabaseError::query(action))?;
            let previous: Option<String> = transaction
                .prepare_cached("SELECT status FROM sessions WHERE key = ?1")
                .and_then(|mut statement| statement.query_row([key], |row| row.get(0)).optional())
                .map_err(DatabaseError::query(action))?;
            let activity = match previous.as_deref().and_then(SessionStatus::parse) {
                None => Activity::Started,
                Some(SessionStatus::Active) => Activity::Continued,
                Some(SessionStatus::Archived) => Activity::Resumed,
            };
            let entry = transaction
                .prepare_cached(&format!(
                    "INSERT INTO sessions (key, context, status, created_at, updated_at, archived_at, message_count) \
                     VALUES (?1, ?2, 'active', ?3, ?3, NULL, ?4) \
                     ON CONFLICT (key) DO UPDATE SET status = 'active', archived_at = NULL, \
                     updated_at = max(updated_at, excluded.updated_at), \
                     message_count = message_count + excluded.message_count \
                     RETURNING {COLUMNS}"
                ))
                .and_then(|mut statement| statement.query_row(params![key, context, at_unix, added], entry_from_row))
                .map_err(DatabaseError::query(action))?;
            transaction.commit().map_err(DatabaseError::query(action))?;
            Ok(RecordedActivity { activity, entry })
        })
    }

    /// Records many sessions' activity in one transaction (one commit instead of one per
    /// update, for turns finishing together), as [`Self::record_activity`] would each.
    /// Says for each update whether it was recorded: false for one without a context
    /// whose session is not indexed.
    pub fn record_activities(&self, updates: &[ActivityUpdate]) -> Result<Vec<bool>, DatabaseError> {
        let action = "record session activity";
        self.database.with_connection(|connection| {
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(DatabaseError::query(action))?;
            let mut recorded = Vec::with_capacity(updates.len());
            {
                let mut context_of = transaction
                    .prepare_cached("SELECT context FROM sessions WHERE key = ?1")
                    .map_err(DatabaseError::query(action))?;
                let mut upsert = transaction
                    .prepare_cached(
                        "INSERT INTO sessions (key, context, status, created_at, updated_at, archived_at, message_count) \
                         VALUES (?1, ?2, 'active', ?3, ?3, NULL, ?4) \
                         ON CONFLICT (key) DO UPDATE SET status = 'active', archived_at = NULL, \
                         updated_at = max(updated_at, excluded.updated_at), \
                         message_count = message_count + excluded.message_count",
                    )
                    .map_err(DatabaseError::query(action))?;
                for update in updates {
                    let context = match &update.context {
                        Some(context) => Some(context.clone()),
                        None => context_of
                            .query_row([&update.key], |row| row.get::<_, String>(0))
                            .optional()
                            .map_err(DatabaseError::query(action))?,
                    };
                    let Some(context) = context else {
                        recorded.push(false);
                        continue;
                    };
                    let added = i64::try_from(update.messages_added).unwrap_or(i64::MAX);
                    upsert
                        .execute(params![update.key, context, update.at_unix, added])
                        .map_err(DatabaseError::query(action))?;
                    recorded.push(true);
                }
            }
            transaction.commit().map_err(DatabaseError::query(action))?;
            Ok(recorded)
        })
    }

    /// Marks session `key` archived at `at_unix`; false when it is not indexed.
    pub fn set_archived(&self, key: &str, at_unix: i64) -> Result<bool, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "UPDATE sessions SET status = 'archived', archived_at = ?2, \
                         updated_at = max(updated_at, ?2) WHERE key = ?1",
                    )?
                    .execute(params![key, at_unix])
            })
            .map(|changed| changed > 0)
            .map_err(DatabaseError::query("archive a session"))
    }

    /// Marks session `key` (of `context`) as made by a run of job `job_id`, indexing it
    /// now if its first activity is not recorded yet.
    pub fn mark_job_run(&self, key: &str, context: &str, job_id: &str, at_unix: i64) -> Result<(), DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO sessions \
                         (key, context, status, created_at, updated_at, archived_at, message_count, job_id) \
                         VALUES (?1, ?2, 'active', ?3, ?3, NULL, 0, ?4) \
                         ON CONFLICT (key) DO UPDATE SET job_id = excluded.job_id",
                    )?
                    .execute(params![key, context, at_unix, job_id])
            })
            .map(|_| ())
            .map_err(DatabaseError::query("mark a job run's session"))
    }

    /// Up to `limit` sessions of job runs last updated before `before_unix`, oldest first.
    pub fn job_runs_before(&self, before_unix: i64, limit: usize) -> Result<Vec<String>, DatabaseError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(
                    "SELECT key FROM sessions WHERE job_id IS NOT NULL AND updated_at < ?1 \
                     ORDER BY updated_at, key LIMIT ?2",
                )?;
                let rows = statement.query_map(params![before_unix, limit], |row| row.get(0))?;
                rows.collect::<rusqlite::Result<Vec<String>>>()
            })
            .map_err(DatabaseError::query("list old job runs"))
    }

    /// Forgets session `key`; false when it was not indexed.
    pub fn remove(&self, key: &str) -> Result<bool, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection.prepare_cached("DELETE FROM sessions WHERE key = ?1")?.execute([key])
            })
            .map(|removed| removed > 0)
            .map_err(DatabaseError::query("forget a session"))
    }

    /// The session `key`, if indexed.
    pub fn get(&self, key: &str) -> Result<Option<SessionIndexEntry>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE key = ?1"))?
                    .query_row([key], entry_from_row)
                    .optional()
            })
            .map_err(DatabaseError::query("read a session"))
    }

    /// Every indexed session, most recently updated first.
    pub fn list(&self) -> Result<Vec<SessionIndexEntry>, DatabaseError> {
        self.query("list sessions", &format!("SELECT {COLUMNS} FROM sessions ORDER BY updated_at DESC, key"), [])
    }

    /// Active sessions last updated before `before_unix`, least recently updated first.
    pub fn idle(&self, before_unix: i64) -> Result<Vec<SessionIndexEntry>, DatabaseError> {
        self.query(
            "list idle sessions",
            &format!(
                "SELECT {COLUMNS} FROM sessions WHERE status = 'active' AND updated_at < ?1 ORDER BY updated_at, key"
            ),
            [before_unix],
        )
    }

    fn query(
        &self,
        action: &'static str,
        sql: &str,
        parameters: impl rusqlite::Params,
    ) -> Result<Vec<SessionIndexEntry>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(sql)?;
                let rows = statement.query_map(parameters, entry_from_row)?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(DatabaseError::query(action))
    }
}

/// What a database error says was attempted and why, for a port's error: a failed
/// statement keeps its own action, anything else gets `fallback`.
pub(crate) fn action_and_reason(error: DatabaseError, fallback: &'static str) -> (&'static str, String) {
    if let DatabaseError::Query { action, reason } = error {
        return (action, reason);
    }
    (fallback, error.to_string())
}

/// The port's error for a database error.
fn index_error(error: DatabaseError) -> SessionIndexError {
    let (action, reason) = action_and_reason(error, "use the session index");
    SessionIndexError::Storage { action, reason }
}

impl SessionIndex for SqliteSessionIndex {
    fn get(&self, key: &str) -> Result<Option<SessionIndexEntry>, SessionIndexError> {
        SqliteSessionIndex::get(self, key).map_err(index_error)
    }

    fn idle(&self, before_unix: i64) -> Result<Vec<SessionIndexEntry>, SessionIndexError> {
        SqliteSessionIndex::idle(self, before_unix).map_err(index_error)
    }

    fn record_activity(
        &self,
        key: &str,
        context: &str,
        at_unix: i64,
        messages_added: u64,
    ) -> Result<(), SessionIndexError> {
        SqliteSessionIndex::record_activity(self, key, context, at_unix, messages_added).map(drop).map_err(index_error)
    }

    fn set_archived(&self, key: &str, at_unix: i64) -> Result<bool, SessionIndexError> {
        SqliteSessionIndex::set_archived(self, key, at_unix).map_err(index_error)
    }

    fn mark_job_run(&self, key: &str, context: &str, job_id: &str, at_unix: i64) -> Result<(), SessionIndexError> {
        SqliteSessionIndex::mark_job_run(self, key, context, job_id, at_unix).map_err(index_error)
    }

    fn job_runs_before(&self, before_unix: i64, limit: usize) -> Result<Vec<String>, SessionIndexError> {
        SqliteSessionIndex::job_runs_before(self, before_unix, limit).map_err(index_error)
    }

    fn remove(&self, key: &str) -> Result<bool, SessionIndexError> {
        SqliteSessionIndex::remove(self, key).map_err(index_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_runs_are_marked_listed_by_age_and_forgotten_and_activity_keeps_the_mark() {
        let directory = tempfile::tempdir().unwrap();
        let index = SqliteSessionIndex::new(Database::open(&directory.path().join("squidbot.db")).unwrap());
        // Marked before its first activity is recorded, and after.
        index.mark_job_run("worker:heartbeat:a1", "owner", "hb-1", 100).unwrap();
        index.record_activity("worker:heartbeat:a1", "owner", 110, 2).unwrap();
        index.record_activity("job:rep:1", "owner", 200, 2).unwrap();
        index.mark_job_run("job:rep:1", "owner", "rep", 200).unwrap();
        index.record_activity("cli:local", "owner", 50, 4).unwrap();
        let job_of = |key: &str| index.get(key).unwrap().and_then(|entry| entry.job_id);
        assert_eq!(
            (job_of("worker:heartbeat:a1").as_deref(), job_of("job:rep:1").as_deref()),
            (Some("hb-1"), Some("rep"))
        );
        assert_eq!((job_of("cli:local"), job_of("nowhere")), (None, None));
        let entry = index.get("worker:heartbeat:a1").unwrap().unwrap();
        assert_eq!((entry.message_count, entry.updated_at), (2, 110), "{entry:?}");

        assert_eq!(index.job_runs_before(150, 10).unwrap(), ["worker:heartbeat:a1"]);
        assert_eq!(index.job_runs_before(1_000, 10).unwrap(), ["worker:heartbeat:a1", "job:rep:1"]);
        assert_eq!(index.job_runs_before(1_000, 1).unwrap(), ["worker:heartbeat:a1"]);
        assert!(index.remove("worker:heartbeat:a1").unwrap());
        assert!(!index.remove("worker:heartbeat:a1").unwrap());
        assert_eq!(index.job_runs_before(1_000, 10).unwrap(), ["job:rep:1"]);
        assert!(index.get("cli:local").unwrap().is_some(), "other sessions stay");
    }
}
