//! The `JobStore` port: the scheduler's persisted jobs (user, heartbeat and system) and
//! the plain data they are made of; running a due job ([`JobRunner`]), keeping
//! HEARTBEAT.md's jobs in step ([`HeartbeatSync`]) and remembering where the owner last
//! wrote ([`LastActiveTracker`]).

use std::fmt;
use std::future::Future;

use jiff::Timestamp;

use crate::BoxFuture;
use crate::schedule::{Cadence, Schedule, ScheduleError};

mod heartbeat_sync;
mod last_active;
mod runner;
mod user_jobs;

pub use heartbeat_sync::{ContextHeartbeatSyncs, HeartbeatSettings, HeartbeatSync, HeartbeatSyncError};
pub use last_active::{LastActive, LastActiveError, LastActiveStore, LastActiveTracker};
pub use runner::{Delivery, Destination, GATEWAY_CHANNEL, JobConsole, JobRunner, ManualRunError, channel_of};
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
    /// `HH:MM-HH:MM` window, in the job's zone, outside which runs are skipped
    /// ([`crate::heartbeat::ActiveHours`]); `None` means any time.
    pub active_hours: Option<String>,
}

impl Job {
    /// The parsed schedule, with `every` intervals counted from the job's creation: the
    /// CLI and the runtime must agree on due times, and the stored text alone would
    /// anchor them at the Unix epoch. A bare cadence name (`daily`, `weekly`, …) with a
    /// seed, as heartbeat jobs store it, is the cadence's jittered slot for that seed.
    pub fn parsed_schedule(&self) -> Result<Schedule, ScheduleError> {
        if let Some(seed) = self.seed
            && let Ok(cadence) = Cadence::parse(&self.schedule)
        {
            // The seed is stored as SQLite's signed integer; its bits are the u64 seed.
            return Ok(Schedule::Cadence(cadence.choose_slot(u64::from_ne_bytes(seed.to_ne_bytes()))));
        }
        let created = Timestamp::from_millisecond(self.created).unwrap_or(Timestamp::UNIX_EPOCH);
        Schedule::parse(&self.schedule).map(|schedule| anchor_at(schedule, created))
    }

    /// The schedule as people should read it: a heartbeat's concrete slot (`daily at
    /// 09:17`) rather than its bare cadence, otherwise the stored schedule.
    pub fn describe_schedule(&self) -> String {
        match self.parsed_schedule() {
            Ok(Schedule::Cadence(slot)) => slot.to_string(),
            Ok(_) | Err(_) => self.schedule.clone(),
        }
    }

    /// Takes over what `old`, the same job as stored before, has lived through: its
    /// status, next and last run, last error, failure count and creation time. Used when
    /// generated jobs (heartbeats, system jobs) are rewritten and stay the same job.
    pub fn keep_state_of(&mut self, old: &Job) {
        self.status = old.status;
        self.next_run = old.next_run;
        self.last_run = old.last_run;
        self.last_error.clone_from(&old.last_error);
        self.consecutive_failures = old.consecutive_failures;
        self.created = old.created;
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

impl RunOutcome {
    /// The outcome of a run that ended with `result` (its error text is the reason).
    pub fn of<T, E: std::fmt::Display>(result: &Result<T, E>) -> Self {
        match result {
            Ok(_) => RunOutcome::Succeeded,
            Err(reason) => RunOutcome::Failed { reason: reason.to_string() },
        }
    }
}

/// A finished run, as [`JobStore::record_run`] stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRecord {
    /// When it ran (ms).
    pub at: i64,
    /// How it ended.
    pub outcome: RunOutcome,
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
    /// Stores a finished run (last run, last error, failure count; never the next run,
    /// which [`JobStore::claim`] set before the run, so a pause made during the run
    /// stands) and returns the failures since the last success, which the runtime
    /// compares with its auto-pause limit.
    fn record_run<'a>(
        &'a self,
        id: &'a str,
        run: &'a RunRecord,
    ) -> impl Future<Output = Result<u32, JobStoreError>> + Send + 'a;
    /// A number that grows by exactly one for every row of the job table inserted,
    /// updated or deleted, by any process. A scheduler compares it with the value it
    /// last saw plus its own writes to tell whether someone else (the CLI) changed jobs.
    fn revision(&self) -> impl Future<Output = Result<i64, JobStoreError>> + Send + '_;
    /// Compare-and-set of an active job's next due time: sets it to `next_run` only if
    /// the job is active and its next due time is still `expected_next_run`. `false`
    /// means someone else got there first (another scheduler claimed the slot, or the
    /// job was paused, edited or removed), and the slot must not run here.
    fn claim<'a>(
        &'a self,
        id: &'a str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> impl Future<Output = Result<bool, JobStoreError>> + Send + 'a;
    /// Pauses the job `id` and stores `reason` as its last error, keeping its next due
    /// time for display: for a job that can't be scheduled any more (a schedule or zone
    /// that no longer parses). [`JobStoreError::NotFound`] when there is none.
    fn pause_with_error<'a>(
        &'a self,
        id: &'a str,
        reason: &'a str,
    ) -> impl Future<Output = Result<(), JobStoreError>> + Send + 'a;
    /// In one transaction, deletes every job of `kind` acting for `owner_context` and
    /// inserts `jobs` (which should be of that kind and context): regenerating the
    /// heartbeat jobs of a changed HEARTBEAT.md, installing system jobs. Nothing changes
    /// when it fails ([`JobStoreError::AlreadyExists`] if an id is taken by another job).
    fn replace_generated<'a>(
        &'a self,
        kind: JobKind,
        owner_context: &'a str,
        jobs: &'a [Job],
    ) -> impl Future<Output = Result<(), JobStoreError>> + Send + 'a;
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
    /// See [`JobStore::revision`].
    fn revision_boxed(&self) -> BoxFuture<'_, Result<i64, JobStoreError>>;
    /// See [`JobStore::claim`].
    fn claim_boxed<'a>(
        &'a self,
        id: &'a str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> BoxFuture<'a, Result<bool, JobStoreError>>;
    /// See [`JobStore::pause_with_error`].
    fn pause_with_error_boxed<'a>(&'a self, id: &'a str, reason: &'a str) -> BoxFuture<'a, Result<(), JobStoreError>>;
    /// See [`JobStore::replace_generated`].
    fn replace_generated_boxed<'a>(
        &'a self,
        kind: JobKind,
        owner_context: &'a str,
        jobs: &'a [Job],
    ) -> BoxFuture<'a, Result<(), JobStoreError>>;
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

    fn revision_boxed(&self) -> BoxFuture<'_, Result<i64, JobStoreError>> {
        Box::pin(self.revision())
    }

    fn claim_boxed<'a>(
        &'a self,
        id: &'a str,
        expected_next_run: Option<i64>,
        next_run: Option<i64>,
    ) -> BoxFuture<'a, Result<bool, JobStoreError>> {
        Box::pin(self.claim(id, expected_next_run, next_run))
    }

    fn pause_with_error_boxed<'a>(&'a self, id: &'a str, reason: &'a str) -> BoxFuture<'a, Result<(), JobStoreError>> {
        Box::pin(self.pause_with_error(id, reason))
    }

    fn replace_generated_boxed<'a>(
        &'a self,
        kind: JobKind,
        owner_context: &'a str,
        jobs: &'a [Job],
    ) -> BoxFuture<'a, Result<(), JobStoreError>> {
        Box::pin(self.replace_generated(kind, owner_context, jobs))
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

    fn heartbeat(schedule: &str, seed: Option<i64>) -> Job {
        let mut job = crate::jobs::new_user_job(
            &JobRequest {
                name: "beat",
                schedule: "every 30m",
                message: "check in",
                channel: None,
                timezone: Some("UTC"),
                default_zone: "UTC",
                owner_context: "owner",
            },
            "beat0001".to_owned(),
            "2026-03-01T10:00:00Z".parse().unwrap(),
        )
        .unwrap();
        job.kind = JobKind::Heartbeat;
        job.schedule = schedule.to_owned();
        job.seed = seed;
        job
    }

    #[test]
    fn a_heartbeat_cadence_with_a_seed_is_its_jittered_slot() {
        for (seed, unsigned) in [(42_i64, 42_u64), (-7, u64::MAX - 6)] {
            let job = heartbeat("daily", Some(seed));
            let slot = crate::schedule::Cadence::Daily.choose_slot(unsigned);
            assert_eq!(job.parsed_schedule().unwrap(), Schedule::Cadence(slot));
            assert_eq!(job.describe_schedule(), slot.to_string());
            assert!(job.describe_schedule().starts_with("daily at "), "{}", job.describe_schedule());
        }
        // A checklist heartbeat runs on an ordinary schedule string.
        let checklist = heartbeat("every 30m", Some(3));
        assert_eq!(checklist.parsed_schedule().unwrap().to_string(), "every 30m");
        assert_eq!(checklist.describe_schedule(), "every 30m");
        // A cadence without a seed has no slot: the schedule string's own error.
        assert!(matches!(heartbeat("daily", None).parsed_schedule(), Err(ScheduleError::Parse { .. })));
        assert_eq!(heartbeat("garbage", None).describe_schedule(), "garbage");
    }
}
