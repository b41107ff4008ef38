//! Wiring of the scheduler in this process: the job table with the system jobs installed,
//! core's job runner over the SQLite and filesystem adapters, the loop that keeps
//! HEARTBEAT.md and its jobs in step (the owner's, and every person's and group's), and
//! the foreground runs of `squidbot cron run` and `squidbot maintenance`.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use squidbot_core::clock::SystemClock;
use squidbot_core::housekeeping::{SystemJobs, install_system_jobs};
use squidbot_core::jobs::{
    ContextHeartbeatSyncs, Delivery, DynJobStore, HeartbeatSettings, HeartbeatSync, Job, JobConsole, JobKind,
    JobRunner, LastActiveTracker,
};
use squidbot_core::runs::Runner;
use squidbot_core::scheduler::{JobControl, Scheduler, SchedulerHandle, SchedulerSettings};
use squidbot_store::{ContextHeartbeats, FsWatchedFile, SqliteJobStore, SqliteLastActive, SqliteSessionIndex};
use tokio_util::sync::CancellationToken;

use crate::wiring::{Environment, OWNER_CONTEXT};

/// How often HEARTBEAT.md is looked at (a `stat`; read only when it changed).
const HEARTBEAT_FILE_POLL: Duration = Duration::from_secs(1);

/// Looks at the HEARTBEAT.md files (one a second) between two scans of `users/*/` and
/// `groups/*/` for files that appeared or went (a directory listing each): a scan every
/// 10 seconds.
const CONTEXT_HEARTBEAT_SCAN_EVERY: u32 = 10;

/// The terminal as the console of a job run in the foreground: replies on standard
/// output, notices on standard error.
struct Terminal;

impl JobConsole for Terminal {
    fn reply(&self, text: &str) {
        println!("{text}");
    }

    fn notice(&self, text: &str) {
        eprintln!("{text}");
    }
}

/// The scheduler settings of `[scheduler]`.
fn scheduler_settings(environment: &Environment) -> SchedulerSettings {
    SchedulerSettings {
        max_consecutive_failures: environment.config().scheduler.max_consecutive_failures,
        ..SchedulerSettings::default()
    }
}

/// The job table of `environment`'s database with the system jobs installed.
async fn job_table(environment: &Environment) -> Result<SqliteJobStore> {
    let store = SqliteJobStore::new(environment.database()?);
    let bulletin_every = Duration::from_secs(environment.config().memory.bulletin_interval_secs);
    install_system_jobs(&store, bulletin_every, &SystemClock).await.context("can't install the system jobs")?;
    Ok(store)
}

/// Where the job runner marks the sessions of its runs.
fn run_index(environment: &Environment) -> Result<Arc<SqliteSessionIndex>> {
    Ok(Arc::new(SqliteSessionIndex::new(environment.database()?)))
}

/// Starts a scheduler of the system jobs alone, for a process that is not the gateway
/// (the interactive REPL): housekeeping runs while someone chats without a gateway, and
/// claims keep it from running a slot the gateway runs too.
pub async fn start_system_jobs(environment: &Environment, shutdown: CancellationToken) -> Result<RunningScheduler> {
    let store: Arc<dyn DynJobStore> = Arc::new(job_table(environment).await?);
    let executor = Arc::new(SystemJobs(Arc::new(environment.housekeeping()?)));
    let settings = SchedulerSettings { only: Some(JobKind::System), ..scheduler_settings(environment) };
    let scheduler = Scheduler::new(store.clone(), executor, Arc::new(SystemClock), settings);
    let handle = scheduler.handle();
    Ok(RunningScheduler { handle, store, tasks: vec![tokio::spawn(scheduler.run(shutdown))] })
}

/// Runs every active system job now (`squidbot maintenance`), recording each outcome;
/// returns a line per job.
pub async fn run_system_jobs_now(environment: &Environment) -> Result<Vec<String>> {
    let store = job_table(environment).await?;
    let housekeeping = environment.housekeeping()?;
    Ok(squidbot_core::housekeeping::run_system_jobs_now(&store, &housekeeping, &SystemClock).await?)
}

/// Runs `job` once in this process (no gateway runs): replies are printed, the outcome
/// is recorded and counted like a scheduled run's, and the job is paused after too many
/// failures in a row.
pub async fn run_here(environment: &Environment, store: &SqliteJobStore, job: &Job) -> Result<()> {
    let agent = environment.ready_assistant(None, false, "cli")?;
    let runner = Runner::new(Arc::new(agent), squidbot_core::events::EventHub::new());
    let housekeeping = match job.kind {
        JobKind::System => Some(Arc::new(environment.housekeeping()?)),
        JobKind::User | JobKind::Heartbeat => None,
    };
    let delivery = Delivery { main_session: squidbot_server::MAIN_SESSION.to_owned(), ..Delivery::default() };
    let executor = JobRunner::new(runner, housekeeping, delivery)
        .printing_to(Arc::new(Terminal))
        .marking_runs_in(run_index(environment)?);
    executor.run_once(job, store, &scheduler_settings(environment)).await?;
    Ok(())
}

/// The scheduler running in the gateway, with the loop keeping the HEARTBEAT.md files
/// and their jobs in step.
pub struct RunningScheduler {
    /// What the gateway's `cron.*` methods use.
    pub handle: SchedulerHandle,
    /// The job table.
    pub store: Arc<dyn DynJobStore>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningScheduler {
    /// Waits until the scheduler and the sync loop have stopped (after `shutdown`).
    pub async fn stopped(self) {
        for task in self.tasks {
            if let Err(error) = task.await {
                tracing::warn!(%error, "a scheduler task failed");
            }
        }
    }
}

/// Starts the scheduler for the gateway (`None` when `scheduler.enabled` is false): the
/// system jobs are installed, the owner's HEARTBEAT.md and every `users/<id>/` and
/// `groups/<id>/` HEARTBEAT.md are read (each one's heartbeats owned by its context), and
/// jobs run through `runner` until `shutdown`.
pub async fn start(
    environment: &Environment,
    runner: &Arc<Runner>,
    shutdown: CancellationToken,
) -> Result<Option<RunningScheduler>> {
    let config = &environment.config().scheduler;
    if !config.enabled {
        tracing::info!("the scheduler is off (scheduler.enabled = false): no job runs");
        return Ok(None);
    }
    let store: Arc<dyn DynJobStore> = Arc::new(job_table(environment).await?);
    let housekeeping = match environment.housekeeping() {
        Ok(housekeeping) => Some(Arc::new(housekeeping)),
        Err(error) => {
            tracing::warn!("system jobs will fail: {error:#}");
            None
        }
    };
    let chat_channels = environment
        .config()
        .channels
        .iter()
        .filter(|(_, channel)| channel.enabled)
        .map(|(name, _)| name.clone())
        .collect();
    let delivery = Delivery {
        main_session: squidbot_server::MAIN_SESSION.to_owned(),
        preferred_channel: config.preferred_channel.clone(),
        chat_channels,
    };
    let executor =
        Arc::new(JobRunner::new(runner.clone(), housekeeping, delivery).marking_runs_in(run_index(environment)?));
    let heartbeat = Arc::new(FsWatchedFile::new(environment.workspace().join("HEARTBEAT.md")));
    let settings = HeartbeatSettings::from_config(&config.heartbeat, environment.job_zone());
    let mut sync = HeartbeatSync::new(store.clone(), heartbeat, OWNER_CONTEXT, settings.clone(), Arc::new(SystemClock));
    sync.check().await;
    let mut context_syncs = ContextHeartbeatSyncs::new(
        store.clone(),
        Arc::new(ContextHeartbeats::new(&environment.paths.home)),
        settings,
        Arc::new(SystemClock),
        CONTEXT_HEARTBEAT_SCAN_EVERY,
    );
    context_syncs.check().await;
    let scheduler = Scheduler::new(store.clone(), executor, Arc::new(SystemClock), scheduler_settings(environment));
    let handle = scheduler.handle();
    let mut tasks = vec![tokio::spawn(scheduler.run(shutdown.clone()))];
    let waker = handle.clone();
    let mut tracker = LastActiveTracker::restore(Arc::new(SqliteLastActive::new(environment.database()?)), runner);
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(HEARTBEAT_FILE_POLL) => {
                    let owner_changed = sync.check().await;
                    if context_syncs.check().await || owner_changed {
                        waker.wake();
                    }
                    tracker.save_if_changed();
                }
            }
        }
        tracker.save_if_changed();
    }));
    Ok(Some(RunningScheduler { handle, store, tasks }))
}
