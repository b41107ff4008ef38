//! `SqliteJobStore`: the scheduler's jobs (`jobs` table) in the shared database.

use rusqlite::{Connection, ErrorCode, OptionalExtension, Row, params};
use squidbot_core::jobs::{ContextMode, Job, JobKind, JobStatus, JobStore, JobStoreError, RunOutcome, RunRecord};

use crate::database::Database;

const COLUMNS: &str = "id, kind, name, schedule, timezone, message, channel, context_mode, owner_context, status, \
                       next_run, last_run, last_error, consecutive_failures, created, source_hash, seed, active_hours";

/// Jobs in the shared database. The blocking methods suit the CLI; the [`JobStore`]
/// implementation runs them on blocking threads.
#[derive(Debug, Clone)]
pub struct SqliteJobStore {
    database: Database,
}

impl SqliteJobStore {
    /// A store over `database`.
    pub fn new(database: Database) -> Self {
        Self { database }
    }

    /// See [`JobStore::insert`].
    pub fn insert_blocking(&self, job: &Job) -> Result<(), JobStoreError> {
        self.database.with_connection(|connection| insert_row(connection, job)).map_err(inserting(job))
    }

    /// See [`JobStore::list`].
    pub fn list_blocking(&self) -> Result<Vec<Job>, JobStoreError> {
        self.select(&format!("SELECT {COLUMNS} FROM jobs ORDER BY created, id"), [], "list jobs")
    }

    /// See [`JobStore::get`].
    pub fn get_blocking(&self, id: &str) -> Result<Option<Job>, JobStoreError> {
        let row = self
            .database
            .with_connection(|connection| {
                connection
                    .prepare_cached(&format!("SELECT {COLUMNS} FROM jobs WHERE id = ?1"))?
                    .query_row([id], read_row)
                    .optional()
            })
            .map_err(storage("read a job"))?;
        row.map(RawJob::into_job).transpose()
    }

    /// See [`JobStore::remove`].
    pub fn remove_blocking(&self, id: &str) -> Result<(), JobStoreError> {
        let changed = self
            .database
            .with_connection(|connection| connection.prepare_cached("DELETE FROM jobs WHERE id = ?1")?.execute([id]))
            .map_err(storage("remove a job"))?;
        found(changed, id)
    }

    /// See [`JobStore::set_status`].
    pub fn set_status_blocking(&self, id: &str, status: JobStatus, next_run: Option<i64>) -> Result<(), JobStoreError> {
        let changed =
            self.database
                .with_connection(|connection| {
                    connection
                        .prepare_cached("UPDATE jobs SET status = ?2, next_run = ?3 WHERE id = ?1")?
                        .execute(params![id, status.as_str(), next_run])
                })
                .map_err(storage("change a job's status"))?;
        found(changed, id)
    }

    /// See [`JobStore::due`].
    pub fn due_blocking(&self, now: i64) -> Result<Vec<Job>, JobStoreError> {
        self.select(
            &format!(
                "SELECT {COLUMNS} FROM jobs WHERE status = 'active' AND next_run IS NOT NULL AND next_run <= ?1 \
                 ORDER BY next_run, id"
            ),
            [now],
            "read due jobs",
        )
    }

    /// See [`JobStore::record_run`].
    pub fn record_run_blocking(&self, id: &str, run: &RunRecord) -> Result<u32, JobStoreError> {
        let error = match &run.outcome {
            RunOutcome::Succeeded => None,
            RunOutcome::Failed { reason } => Some(reason.as_str()),
        };
        let failures: Option<i64> = self
            .database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "UPDATE jobs SET last_run = ?2, last_error = ?3, \
                         consecutive_failures = CASE WHEN ?3 IS NULL THEN 0 ELSE consecutive_failures + 1 END \
                         WHERE id = ?1 RETURNING consecutive_failures",
                    )?
                    .query_row(params![id, run.at, error], |row| row.get(0))
                    .optional()
            })
            .map_err(storage("record a job run"))?;
        let failures = failures.ok_or_else(|| JobStoreError::NotFound { id: id.to_owned() })?;
        Ok(u32::try_from(failures).unwrap_or(u32::MAX))
    }

    /// See [`JobStore::revision`].
    pub fn revision_blocking(&self) -> Result<i64, JobStoreError> {
        self.database
            .with_connection(|connection| {
                connection
                    .prepare_cached("SELECT revision FROM job_revision WHERE id = 1")?
                    .query_row([], |row| row.get(0))
            })
            .map_err(storage("read the job table's revision"))
    }

    /// See [`JobStore::claim`].
    pub fn claim_blocking(
        &self,
        id: &str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> Result<bool, JobStoreError> {
        let changed = self
            .database
            .with_connection(|connection| {
                connection
                    .prepare_cached(
                        "UPDATE jobs SET next_run = ?3 WHERE id = ?1 AND status = 'active' AND next_run IS ?2",
                    )?
                    .execute(params![id, expected_next_run, next_run])
            })
            .map_err(storage("claim a job's slot"))?;
        Ok(changed == 1)
    }

    /// See [`JobStore::pause_with_error`].
    pub fn pause_with_error_blocking(&self, id: &str, reason: &str) -> Result<(), JobStoreError> {
        let changed = self
            .database
            .with_connection(|connection| {
                connection
                    .prepare_cached("UPDATE jobs SET status = 'paused', last_error = ?2 WHERE id = ?1")?
                    .execute(params![id, reason])
            })
            .map_err(storage("pause a job"))?;
        found(changed, id)
    }

    /// See [`JobStore::replace_generated`].
    pub fn replace_generated_blocking(
        &self,
        kind: JobKind,
        owner_context: &str,
        jobs: &[Job],
    ) -> Result<(), JobStoreError> {
        self.database.with_connection(|connection| {
            let transaction = connection.transaction().map_err(storage("replace generated jobs"))?;
            transaction
                .prepare_cached("DELETE FROM jobs WHERE kind = ?1 AND owner_context = ?2")
                .and_then(|mut statement| statement.execute(params![kind.as_str(), owner_context]))
                .map_err(storage("replace generated jobs"))?;
            for job in jobs {
                insert_row(&transaction, job).map_err(inserting(job))?;
            }
            // Dropping the transaction on an error above rolls everything back.
            transaction.commit().map_err(storage("replace generated jobs"))
        })
    }

    fn select(
        &self,
        sql: &str,
        parameters: impl rusqlite::Params,
        action: &'static str,
    ) -> Result<Vec<Job>, JobStoreError> {
        let rows = self
            .database
            .with_connection(|connection| {
                let mut statement = connection.prepare_cached(sql)?;
                let rows = statement.query_map(parameters, read_row)?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .map_err(storage(action))?;
        rows.into_iter().map(RawJob::into_job).collect()
    }

    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&SqliteJobStore) -> Result<T, JobStoreError> + Send + 'static,
    ) -> Result<T, JobStoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || work(&store)).await.unwrap_or_else(|error| {
            Err(JobStoreError::Storage {
                action: "use the job table",
                reason: format!("the database thread failed: {error}"),
            })
        })
    }
}

impl JobStore for SqliteJobStore {
    async fn insert(&self, job: &Job) -> Result<(), JobStoreError> {
        let job = job.clone();
        self.blocking(move |store| store.insert_blocking(&job)).await
    }

    async fn list(&self) -> Result<Vec<Job>, JobStoreError> {
        self.blocking(SqliteJobStore::list_blocking).await
    }

    async fn get(&self, id: &str) -> Result<Option<Job>, JobStoreError> {
        let id = id.to_owned();
        self.blocking(move |store| store.get_blocking(&id)).await
    }

    async fn remove(&self, id: &str) -> Result<(), JobStoreError> {
        let id = id.to_owned();
        self.blocking(move |store| store.remove_blocking(&id)).await
    }

    async fn set_status(&self, id: &str, status: JobStatus, next_run: Option<i64>) -> Result<(), JobStoreError> {
        let id = id.to_owned();
        self.blocking(move |store| store.set_status_blocking(&id, status, next_run)).await
    }

    async fn due(&self, now: i64) -> Result<Vec<Job>, JobStoreError> {
        self.blocking(move |store| store.due_blocking(now)).await
    }

    async fn record_run(&self, id: &str, run: &RunRecord) -> Result<u32, JobStoreError> {
        let id = id.to_owned();
        let run = run.clone();
        self.blocking(move |store| store.record_run_blocking(&id, &run)).await
    }

    async fn revision(&self) -> Result<i64, JobStoreError> {
        self.blocking(SqliteJobStore::revision_blocking).await
    }

    async fn claim(
        &self,
        id: &str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> Result<bool, JobStoreError> {
        let id = id.to_owned();
        self.blocking(move |store| store.claim_blocking(&id, expected_next_run, next_run)).await
    }

    async fn pause_with_error(&self, id: &str, reason: &str) -> Result<(), JobStoreError> {
        let (id, reason) = (id.to_owned(), reason.to_owned());
        self.blocking(move |store| store.pause_with_error_blocking(&id, &reason)).await
    }

    async fn replace_generated(&self, kind: JobKind, owner_context: &str, jobs: &[Job]) -> Result<(), JobStoreError> {
        let (owner_context, jobs) = (owner_context.to_owned(), jobs.to_vec());
        self.blocking(move |store| store.replace_generated_blocking(kind, &owner_context, &jobs)).await
    }
}

/// A row as stored, before its names are checked: a hand-edited or newer row becomes
/// a clear error instead of a panic.
struct RawJob {
    job: Job,
    kind: String,
    context_mode: String,
    status: String,
    consecutive_failures: i64,
}

impl RawJob {
    fn into_job(self) -> Result<Job, JobStoreError> {
        let unreadable = |field: &str, value: &str| JobStoreError::Storage {
            action: "read a job",
            reason: format!("job {} has an unknown {field} {value:?}", self.job.id),
        };
        let kind = JobKind::parse(&self.kind).ok_or_else(|| unreadable("kind", &self.kind))?;
        let context_mode =
            ContextMode::parse(&self.context_mode).ok_or_else(|| unreadable("context mode", &self.context_mode))?;
        let status = JobStatus::parse(&self.status).ok_or_else(|| unreadable("status", &self.status))?;
        let consecutive_failures = u32::try_from(self.consecutive_failures).unwrap_or(0);
        Ok(Job { kind, context_mode, status, consecutive_failures, ..self.job })
    }
}

fn read_row(row: &Row<'_>) -> rusqlite::Result<RawJob> {
    Ok(RawJob {
        job: Job {
            id: row.get("id")?,
            kind: JobKind::User,
            name: row.get("name")?,
            schedule: row.get("schedule")?,
            timezone: row.get("timezone")?,
            message: row.get("message")?,
            channel: row.get("channel")?,
            context_mode: ContextMode::default(),
            owner_context: row.get("owner_context")?,
            status: JobStatus::Active,
            next_run: row.get("next_run")?,
            last_run: row.get("last_run")?,
            last_error: row.get("last_error")?,
            consecutive_failures: 0,
            created: row.get("created")?,
            source_hash: row.get("source_hash")?,
            seed: row.get("seed")?,
            active_hours: row.get("active_hours")?,
        },
        kind: row.get("kind")?,
        context_mode: row.get("context_mode")?,
        status: row.get("status")?,
        consecutive_failures: row.get("consecutive_failures")?,
    })
}

/// Inserts `job` as a new row.
fn insert_row(connection: &Connection, job: &Job) -> rusqlite::Result<()> {
    connection
        .prepare_cached(&format!(
            "INSERT INTO jobs ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, \
             ?16, ?17, ?18)"
        ))?
        .execute(params![
            job.id,
            job.kind.as_str(),
            job.name,
            job.schedule,
            job.timezone,
            job.message,
            job.channel,
            job.context_mode.as_str(),
            job.owner_context,
            job.status.as_str(),
            job.next_run,
            job.last_run,
            job.last_error,
            job.consecutive_failures,
            job.created,
            job.source_hash,
            job.seed,
            job.active_hours,
        ])?;
    Ok(())
}

/// Names the failure of inserting `job`: the table's only constraint a typed [`Job`] can
/// break is its primary key, so a constraint violation means the id is taken.
fn inserting(job: &Job) -> impl FnOnce(rusqlite::Error) -> JobStoreError + '_ {
    move |error| {
        if error.sqlite_error_code() == Some(ErrorCode::ConstraintViolation) {
            JobStoreError::AlreadyExists { id: job.id.clone() }
        } else {
            storage("add a job")(error)
        }
    }
}

fn storage(action: &'static str) -> impl FnOnce(rusqlite::Error) -> JobStoreError {
    move |error| JobStoreError::Storage { action, reason: error.to_string() }
}

fn found(changed: usize, id: &str) -> Result<(), JobStoreError> {
    if changed == 0 { Err(JobStoreError::NotFound { id: id.to_owned() }) } else { Ok(()) }
}
