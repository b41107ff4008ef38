//! The one scheduler: heartbeats, user jobs and system jobs from the `jobs` table, due
//! times kept in a next-due queue (never a poll over every job), runs handed to a
//! [`JobExecutor`], outcomes stored, changes made by other processes (the CLI) picked up
//! through the store's revision.

mod completion;
mod engine;
mod entry;
mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::BoxFuture;
use crate::clock::Clock;
use crate::jobs::{DynJobStore, Job, JobKind};

/// Run-now requests waiting for the loop; senders wait when it is full.
const REQUEST_QUEUE: usize = 32;

/// How the scheduler behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// Failed runs in a row after which a job is paused and its owner told; 0 never
    /// pauses.
    pub max_consecutive_failures: u32,
    /// How often the store's revision is checked for changes made elsewhere, and the
    /// longest the loop sleeps without reading the clock (so a clock jump is noticed).
    /// At least 10 ms is used.
    pub poll: Duration,
    /// Only jobs of this kind are scheduled (the interactive REPL runs the system jobs
    /// alone); `None` schedules every job.
    pub only: Option<JobKind>,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self { max_consecutive_failures: 3, poll: Duration::from_millis(500), only: None }
    }
}

impl SchedulerSettings {
    /// Whether a job that has failed `failures` times in a row is to be paused.
    pub fn pauses_after(&self, failures: u32) -> bool {
        self.max_consecutive_failures > 0 && failures >= self.max_consecutive_failures
    }
}

/// What the owner of `job` is told when it is paused after `failures` failed runs in a
/// row, the last with `error`.
pub fn pause_notice(job: &Job, failures: u32, error: &str) -> String {
    format!(
        "Your scheduled job \"{}\" ({}) failed {failures} times in a row and is now paused. Last error: {error}. \
         Once the cause is fixed, resume it with `squidbot cron resume {}`.",
        job.name, job.id, job.id
    )
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

/// Why a run of a job failed. Every kind counts towards the auto-pause: a model that
/// answered is never one of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobRunError {
    /// The run could not start in this process (the turn was refused, what runs this
    /// kind of job is not here).
    #[error("{0}")]
    NotStarted(String),
    /// The turn failed: the provider erred or timed out, a tool broke, the turn was
    /// stopped.
    #[error("{0}")]
    Turn(String),
    /// The sub-agent the job went to gave up, looped, timed out or answered nothing.
    #[error("{0}")]
    Worker(String),
    /// A system job's own work failed.
    #[error("{0}")]
    Housekeeping(String),
    /// The executor panicked.
    #[error("the run ended without a result (the executor panicked)")]
    Panicked,
}

/// Runs jobs: the gateway's implementation starts the job's turn, delivers or drops the
/// reply, and runs system jobs' housekeeping.
pub trait JobExecutor: Send + Sync + 'static {
    /// Runs `job` once; `Err` says why it failed (counted towards auto-pause).
    fn execute<'a>(&'a self, job: &'a Job, trigger: RunTrigger) -> BoxFuture<'a, Result<(), JobRunError>>;
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

/// A snapshot of a running scheduler, for `status` and the web UI. Cheap to read: the
/// loop publishes it when something changes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerStatus {
    /// Whether the job table has been read since start-up.
    pub loaded: bool,
    /// Jobs known, active or paused.
    pub jobs: usize,
    /// Active jobs.
    pub active: usize,
    /// Ids of the jobs running now, sorted.
    pub running: Vec<String>,
    /// The earliest next due time (ms) of an active job; `None` when nothing is due.
    pub next_run: Option<i64>,
}

/// A `run_now` request on its way to the loop.
#[derive(Debug)]
struct RunNowRequest {
    id: String,
    reply: oneshot::Sender<Result<(), RunNowError>>,
}

/// The scheduler engine: keeps the jobs of the store in a next-due queue and runs each
/// at its due time through the executor. Build it, take [`Scheduler::handle`]s for the
/// front ends, then spawn [`Scheduler::run`].
pub struct Scheduler {
    store: Arc<dyn DynJobStore>,
    executor: Arc<dyn JobExecutor>,
    clock: Arc<dyn Clock>,
    settings: SchedulerSettings,
    requests: mpsc::Receiver<RunNowRequest>,
    status: watch::Sender<SchedulerStatus>,
    handle: SchedulerHandle,
}

impl Scheduler {
    /// A scheduler over the jobs of `store`, running them with `executor` at the times
    /// `clock` tells.
    pub fn new(
        store: Arc<dyn DynJobStore>,
        executor: Arc<dyn JobExecutor>,
        clock: Arc<dyn Clock>,
        settings: SchedulerSettings,
    ) -> Self {
        let (requests_sender, requests) = mpsc::channel(REQUEST_QUEUE);
        let (status, status_receiver) = watch::channel(SchedulerStatus::default());
        let handle =
            SchedulerHandle { requests: requests_sender, wake: Arc::new(Notify::new()), status: status_receiver };
        Self { store, executor, clock, settings, requests, status, handle }
    }

    /// A handle for asking things of the running scheduler.
    pub fn handle(&self) -> SchedulerHandle {
        self.handle.clone()
    }

    /// Runs jobs until `shutdown` is cancelled, then waits for the runs still going
    /// (cancelling them is the executor's business) and records their outcomes.
    pub async fn run(self, shutdown: CancellationToken) {
        let Scheduler { store, executor, clock, settings, requests, status, handle } = self;
        let wake = Arc::clone(&handle.wake);
        // The loop's own handle must not keep the request channel open once it stops.
        drop(handle);
        let (engine, finished) = engine::Engine::new(store, executor, clock, settings, status);
        engine.run(finished, requests, wake, shutdown).await;
    }
}

/// What front ends hold to talk to a running [`Scheduler`]. Cloning is cheap.
#[derive(Debug, Clone)]
pub struct SchedulerHandle {
    requests: mpsc::Sender<RunNowRequest>,
    wake: Arc<Notify>,
    status: watch::Receiver<SchedulerStatus>,
}

impl SchedulerHandle {
    /// The latest snapshot the loop published.
    pub fn status(&self) -> SchedulerStatus {
        self.status.borrow().clone()
    }
}

impl JobControl for SchedulerHandle {
    fn wake(&self) {
        self.wake.notify_one();
    }

    fn run_now<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), RunNowError>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let request = RunNowRequest { id: id.to_owned(), reply };
            self.requests.send(request).await.map_err(|_| RunNowError::Stopped)?;
            answer.await.unwrap_or(Err(RunNowError::Stopped))
        })
    }
}
