//! `JobLedger`: when each system job (memory expiry, session archiving, …) last ran
//! and how it ended, so schedules survive restarts.

use rusqlite::{OptionalExtension, params};

use crate::database::{Database, DatabaseError};

/// The last run of a system job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRun {
    /// When it ran, Unix seconds.
    pub at: i64,
    /// Why it failed, `None` when it succeeded.
    pub error: Option<String>,
}

/// System job runs in the shared database. Calls block.
#[derive(Debug, Clone)]
pub struct JobLedger {
    database: Database,
}

impl JobLedger {
    /// A ledger over `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// When job `name` last ran, `None` if never.
    pub fn last_run(&self, name: &str) -> Result<Option<i64>, DatabaseError> {
        Ok(self.last(name)?.map(|run| run.at))
    }

    /// The last run of job `name`, `None` if never.
    pub fn last(&self, name: &str) -> Result<Option<JobRun>, DatabaseError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached("SELECT last_run, last_error FROM system_jobs WHERE name = ?1")?
                    .query_row([name], |row| Ok(JobRun { at: row.get(0)?, error: row.get(1)? }))
                    .optional()
            })
            .map_err(DatabaseError::query("read the system job ledger"))
    }

    /// Records that job `name` ran at `at_unix` and how it ended
    /// (`Ok(())` or `Err(reason)`).
    pub fn record(&self, name: &str, at_unix: i64, outcome: Result<(), &str>) -> Result<(), DatabaseError> {
        let error = outcome.err();
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO system_jobs (name, last_run, last_error) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (name) DO UPDATE SET last_run = excluded.last_run, \
                         last_error = excluded.last_error",
                    )?
                    .execute(params![name, at_unix, error])
            })
            .map(drop)
            .map_err(DatabaseError::query("record a system job run"))
    }
}
