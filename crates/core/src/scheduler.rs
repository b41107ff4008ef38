//! The one scheduler: heartbeats, user jobs and system jobs from the `jobs` table, due
//! times kept in a next-due queue (never a poll over every job), runs handed to a
//! [`JobExecutor`], outcomes stored, changes made by other processes (the CLI) picked up
//! through the store's revision.

use std::time::Duration;

use crate::BoxFuture;
use crate::jobs::Job;

/// How the scheduler behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// Failed runs in a row after which a job is paused and its owner told.
    pub max_consecutive_failures: u32,
    /// How often the store's revision is checked for changes made elsewhere.
    pub poll: Duration,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self { max_consecutive_failures: 3, poll: Duration::from_millis(500) }
    }
}

/// Why a job runs now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunTrigger {
    /// Its schedule came due; `slot` is the due time (ms) it runs for. A run that makes
    /// up for slots missed while squidbot was down carries the earliest missed one.
    Scheduled {
        /// The due time (ms since the Unix epoch).
        slot: i64,
    },
    /// Someone asked for it (`squidbot cron run`, `cron.run`).
    Manual,
}

/// Runs jobs: the gateway's implementation starts the job's turn, delivers or drops the
/// reply, and runs system jobs' housekeeping.
pub trait JobExecutor: Send + Sync + 'static {
    /// Runs `job` once; `Err` carries why it failed (counted towards auto-pause).
    fn execute<'a>(&'a self, job: &'a Job, trigger: RunTrigger) -> BoxFuture<'a, Result<(), String>>;
    /// Tells the owner of `job` something about it (the auto-pause notice).
    fn notify_owner<'a>(&'a self, job: &'a Job, notice: &'a str) -> BoxFuture<'a, ()>;
}

/// Why [`JobControl::run_now`] did not start a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunNowError {
    /// No job has this id.
    #[error("can't find job {id}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The job's previous run is still going; runs never overlap.
    #[error("job {id} is running already")]
    AlreadyRunning {
        /// The id asked for.
        id: String,
    },
    /// The scheduler has stopped (the gateway is shutting down).
    #[error("the scheduler has stopped")]
    Stopped,
}

/// What front ends (the WebSocket `cron.*` methods, the web UI) may ask of a running
/// scheduler.
pub trait JobControl: Send + Sync {
    /// Re-reads the job table now, after a change made in this process.
    fn wake(&self);
    /// Starts a run of job `id` now, whatever its schedule or status; resolves once the
    /// run has started (not when it ends). Its outcome is recorded like any other run.
    fn run_now<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), RunNowError>>;
}
