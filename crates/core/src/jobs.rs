//! The `JobStore` port: the scheduler's persisted jobs (user, heartbeat and system) and
//! the plain data they are made of.

use std::fmt;
use std::future::Future;

use jiff::Timestamp;

use crate::BoxFuture;
use crate::schedule::{Schedule, ScheduleError};

mod user_jobs;

pub use user_jobs::{JobRequest, JobRequestError, job_row, job_time, job_zone, new_user_job, resumed_next_run};

/// Who made a job, which decides how it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobKind {
    /// Made by the user (`squidbot cron add`, the cron tools).
    User,
    /// Generated from HEARTBEAT.md.
    Heartbeat,
    /// squidbot's own housekeeping.
    System,
}

impl JobKind {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::User => "user",
            JobKind::Heartbeat => "heartbeat",
            JobKind::System => "system",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [JobKind::User, JobKind::Heartbeat, JobKind::System].into_iter().find(|kind| kind.as_str() == name)
    }
}

/// Which conversation a job's turn runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContextMode {
    /// The most recent session on the preferred channel.
    Session,
    /// A fresh session each run; the default for user jobs, so a reminder does not drag
    /// the day's conversation into its prompt.
    #[default]
    Isolated,
    /// A fresh session whose reply is not delivered.
    Silent,
}

impl ContextMode {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            ContextMode::Session => "session",
            ContextMode::Isolated => "isolated",
            ContextMode::Silent => "silent",
        }
    }

    /// The mode named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [ContextMode::Session, ContextMode::Isolated, ContextMode::Silent]
            .into_iter()
            .find(|mode| mode.as_str() == name)
    }
}

/// Whether a job is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobStatus {
    /// Runs when due.
    Active,
    /// Kept but never due, by the user's choice or after repeated failures.
    Paused,
}

impl JobStatus {
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Active => "active",
            JobStatus::Paused => "paused",
        }
    }

    /// The status named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        [JobStatus::Active, JobStatus::Paused].into_iter().find(|status| status.as_str() == name)
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// One scheduled job. Times are milliseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Short random id (see [`crate::ids::job_id`]).
    pub id: String,
    /// Who made it.
    pub kind: JobKind,
    /// A name for people.
    pub name: String,
    /// The schedule as `--schedule` reads it ([`Schedule`]'s `Display`).
    pub schedule: String,
    /// IANA zone the schedule's wall-clock times are read in.
    pub timezone: String,
    /// The prompt the job's turn starts with.
    pub message: String,
    /// Where replies go; `None` means the owner's preferred or last active channel.
    pub channel: Option<String>,
    /// Which conversation the turn runs in.
    pub context_mode: ContextMode,
    /// The memory and session context the job acts for.
    pub owner_context: String,
    /// Whether it is scheduled.
    pub status: JobStatus,
    /// When it is next due; `None` once a one-shot has run.
    pub next_run: Option<i64>,
    /// When it last ran.
    pub last_run: Option<i64>,
    /// Why the last run failed; `None` after a success or before any run.
    pub last_error: Option<String>,
    /// Failed runs since the last success.
    pub consecutive_failures: u32,
    /// When it was made.
    pub created: i64,
    /// Hash of the HEARTBEAT.md content a heartbeat job came from.
    pub source_hash: Option<String>,
    /// Seed of a heartbeat cadence's jittered slot.
    pub seed: Option<i64>,
}

impl Job {
    /// The parsed schedule of a user or system job, with `every` intervals counted from
    /// the job's creation: the CLI and the runtime must agree on due times, and the
    /// stored text alone would anchor them at the Unix epoch.
    pub fn parsed_schedule(&self) -> Result<Schedule, ScheduleError> {
        let created = Timestamp::from_millisecond(self.created).unwrap_or(Timestamp::UNIX_EPOCH);
        Schedule::parse(&self.schedule).map(|schedule| anchor_at(schedule, created))
    }
}

/// `schedule` with its `every` interval counted from `created`; other kinds unchanged.
pub fn anchor_at(schedule: Schedule, created: Timestamp) -> Schedule {
    match schedule {
        Schedule::Every(interval) => Schedule::Every(interval.anchored_at(created)),
        other @ (Schedule::Cron(_)
        | Schedule::At(_)
        | Schedule::Daily(_)
        | Schedule::Weekly { .. }
        | Schedule::Cadence(_)) => other,
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunOutcome {
    /// It ran; the failure count resets.
    Succeeded,
    /// It failed; the failure count grows.
    Failed {
        /// Why, for `cron list` and the owner's notice.
        reason: String,
    },
}

/// A finished run, as [`JobStore::record_run`] stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// When it ran (ms).
    pub at: i64,
    /// How it ended.
    pub outcome: RunOutcome,
    /// When it is next due; `None` for a one-shot that is done.
    pub next_run: Option<i64>,
}

/// Why a job store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum JobStoreError {
    /// No job has this id.
    #[error("can't find job {id}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A job with this id exists already.
    #[error("can't add job {id}: a job with that id exists")]
    AlreadyExists {
        /// The id.
        id: String,
    },
    /// The storage failed or holds a row this build can't read.
    #[error("can't {action}: {reason}")]
    Storage {
        /// What was attempted.
        action: &'static str,
        /// The underlying error.
        reason: String,
    },
}

/// Durable storage of the scheduler's jobs.
pub trait JobStore: Send + Sync {
    /// Adds a job; fails if its id is taken.
    fn insert<'a>(&'a self, job: &'a Job) -> impl Future<Output = Result<(), JobStoreError>> + Send + 'a;
    /// Every job, oldest first.
    fn list(&self) -> impl Future<Output = Result<Vec<Job>, JobStoreError>> + Send + '_;
    /// The job `id`, `Ok(None)` when there is none.
    fn get<'a>(&'a self, id: &'a str) -> impl Future<Output = Result<Option<Job>, JobStoreError>> + Send + 'a;
    /// Deletes the job `id`; [`JobStoreError::NotFound`] when there is none.
    fn remove<'a>(&'a self, id: &'a str) -> impl Future<Output = Result<(), JobStoreError>> + Send + 'a;
    /// Pauses or resumes the job `id` and sets its next due time (resuming recomputes
    /// it from now; pausing keeps it for display).
    fn set_status<'a>(
        &'a self,
        id: &'a str,
        status: JobStatus,
        next_run: Option<i64>,
    ) -> impl Future<Output = Result<(), JobStoreError>> + Send + 'a;
    /// Active jobs due at or before `now` (ms), earliest first.
    fn due(&self, now: i64) -> impl Future<Output = Result<Vec<Job>, JobStoreError>> + Send + '_;
    /// Stores a finished run and returns the failures since the last success, which
    /// the runtime compares with its auto-pause limit.
    fn record_run<'a>(
        &'a self,
        id: &'a str,
        run: &'a RunRecord,
    ) -> impl Future<Output = Result<u32, JobStoreError>> + Send + 'a;
}

/// Object-safe companion of [`JobStore`].
pub trait DynJobStore: Send + Sync {
    /// See [`JobStore::insert`].
    fn insert_boxed<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), JobStoreError>>;
    /// See [`JobStore::list`].
    fn list_boxed(&self) -> BoxFuture<'_, Result<Vec<Job>, JobStoreError>>;
    /// See [`JobStore::get`].
    fn get_boxed<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Job>, JobStoreError>>;
    /// See [`JobStore::remove`].
    fn remove_boxed<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), JobStoreError>>;
    /// See [`JobStore::set_status`].
    fn set_status_boxed<'a>(
        &'a self,
        id: &'a str,
        status: JobStatus,
        next_run: Option<i64>,
    ) -> BoxFuture<'a, Result<(), JobStoreError>>;
    /// See [`JobStore::due`].
    fn due_boxed(&self, now: i64) -> BoxFuture<'_, Result<Vec<Job>, JobStoreError>>;
    /// See [`JobStore::record_run`].
    fn record_run_boxed<'a>(&'a self, id: &'a str, run: &'a RunRecord) -> BoxFuture<'a, Result<u32, JobStoreError>>;
}

impl<T: JobStore> DynJobStore for T {
    fn insert_boxed<'a>(&'a self, job: &'a Job) -> BoxFuture<'a, Result<(), JobStoreError>> {
        Box::pin(self.insert(job))
    }

    fn list_boxed(&self) -> BoxFuture<'_, Result<Vec<Job>, JobStoreError>> {
        Box::pin(self.list())
    }

    fn get_boxed<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<Job>, JobStoreError>> {
        Box::pin(self.get(id))
    }

    fn remove_boxed<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), JobStoreError>> {
        Box::pin(self.remove(id))
    }

    fn set_status_boxed<'a>(
        &'a self,
        id: &'a str,
        status: JobStatus,
        next_run: Option<i64>,
    ) -> BoxFuture<'a, Result<(), JobStoreError>> {
        Box::pin(self.set_status(id, status, next_run))
    }

    fn due_boxed(&self, now: i64) -> BoxFuture<'_, Result<Vec<Job>, JobStoreError>> {
        Box::pin(self.due(now))
    }

    fn record_run_boxed<'a>(&'a self, id: &'a str, run: &'a RunRecord) -> BoxFuture<'a, Result<u32, JobStoreError>> {
        Box::pin(self.record_run(id, run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in [JobKind::User, JobKind::Heartbeat, JobKind::System] {
            assert_eq!(JobKind::parse(kind.as_str()), Some(kind));
        }
        for mode in [ContextMode::Session, ContextMode::Isolated, ContextMode::Silent] {
            assert_eq!(ContextMode::parse(mode.as_str()), Some(mode));
        }
        for status in [JobStatus::Active, JobStatus::Paused] {
            assert_eq!(JobStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(JobKind::parse("User"), None);
        assert_eq!(ContextMode::default(), ContextMode::Isolated);
    }

    #[test]
    fn every_intervals_count_from_the_jobs_creation() {
        let created: Timestamp = "2026-03-01T10:02:30Z".parse().unwrap();
        let schedule = anchor_at(Schedule::parse("every 5m").unwrap(), created);
        let zone = jiff::tz::TimeZone::UTC;
        assert_eq!(schedule.next_after(created, &zone), Some("2026-03-01T10:07:30Z".parse().unwrap()));
        assert_eq!(schedule.to_string(), "every 5m");
    }
}
