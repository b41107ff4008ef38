//! squidbot's own housekeeping as rows of the job table: the list of system jobs and how
//! often they run, installing them, running them (by the scheduler outside the gateway,
//! or all at once for `squidbot maintenance`).

use std::time::Duration;

use jiff::Timestamp;

use super::Housekeeping;
use crate::BoxFuture;
use crate::clock::Clock;
use crate::jobs::{ContextMode, DynJobStore, Job, JobKind, JobStatus, JobStoreError, RunOutcome, RunRecord};
use crate::schedule::{Interval, Schedule};
use crate::scheduler::{JobExecutor, JobRunError, RunTrigger};

/// The owner of system jobs.
pub const SYSTEM_CONTEXT: &str = "system";

/// The system jobs and how often they run; the bulletin is refreshed every
/// `bulletin_every` (at least a minute), the rest on fixed intervals. Made at `now`.
pub fn system_jobs(bulletin_every: Duration, now: Timestamp) -> Vec<Job> {
    let bulletin = Interval::new(bulletin_every.as_secs().max(60))
        .map_or_else(|| "every 1h".to_owned(), |interval| Schedule::Every(interval).to_string());
    [
        ("ttl_expiry", "every 10m", "Delete memories past their time to live."),
        ("vector_backfill", "every 10m", "Embed memories saved without a vector."),
        ("archive_idle", "every 10m", "Archive idle sessions after extracting their memories."),
        ("prune_job_runs", "every 1h", "Delete the sessions of job runs older than sessions.keep_job_runs."),
        ("memory_bulletin", bulletin.as_str(), "Refresh the memory bulletin."),
    ]
    .into_iter()
    .map(|(name, schedule, message)| Job {
        id: format!("sys-{}", name.replace('_', "-")),
        kind: JobKind::System,
        name: name.to_owned(),
        schedule: schedule.to_owned(),
        timezone: "UTC".to_owned(),
        message: message.to_owned(),
        channel: None,
        context_mode: ContextMode::Silent,
        owner_context: SYSTEM_CONTEXT.to_owned(),
        status: JobStatus::Active,
        next_run: None,
        last_run: None,
        last_error: None,
        consecutive_failures: 0,
        created: now.as_millisecond(),
        source_hash: None,
        seed: None,
        active_hours: None,
    })
    .collect()
}

/// Writes the system jobs into the table, keeping the state (status, runs, failures) of
/// those already there with the same schedule; a new one is first due a minute from now.
pub async fn install_system_jobs(
    store: &dyn DynJobStore,
    bulletin_every: Duration,
    clock: &dyn Clock,
) -> Result<(), JobStoreError> {
    let now = Timestamp::from_millisecond(clock.unix_millis()).unwrap_or(Timestamp::UNIX_EPOCH);
    let existing = store.list_boxed().await?;
    let mut jobs = system_jobs(bulletin_every, now);
    for job in &mut jobs {
        match existing.iter().find(|old| old.id == job.id && old.schedule == job.schedule) {
            Some(old) => job.keep_state_of(old),
            None => job.next_run = Some(now.as_millisecond() + 60_000),
        }
    }
    store.replace_generated_boxed(JobKind::System, SYSTEM_CONTEXT, &jobs).await
}

/// Runs system job `job` with `housekeeping`, which a process may not have.
pub(crate) async fn run_system_job(housekeeping: Option<&Housekeeping>, job: &Job) -> Result<(), JobRunError> {
    let Some(housekeeping) = housekeeping else {
        return Err(JobRunError::NotStarted("housekeeping is not available in this process".to_owned()));
    };
    let line = housekeeping.run_job(&job.name).await.map_err(JobRunError::Housekeeping)?;
    tracing::info!(job = %job.id, name = %job.name, "{line}");
    Ok(())
}

/// Runs system jobs only: the executor of a scheduler outside the gateway (the
/// interactive REPL), where no turn can be delivered.
pub struct SystemJobs(pub std::sync::Arc<Housekeeping>);

impl JobExecutor for SystemJobs {
    fn execute<'a>(&'a self, job: &'a Job, _trigger: RunTrigger) -> BoxFuture<'a, Result<(), JobRunError>> {
        Box::pin(async move {
            match job.kind {
                JobKind::System => run_system_job(Some(&self.0), job).await,
                JobKind::User | JobKind::Heartbeat => {
                    Err(JobRunError::NotStarted("only system jobs run outside the gateway".to_owned()))
                }
            }
        })
    }

    fn notify_owner<'a>(&'a self, job: &'a Job, notice: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move { tracing::warn!(job = %job.id, name = %job.name, "{notice}") })
    }
}

/// Runs every active system job of `store` now (`squidbot maintenance`), recording each
/// outcome like a scheduled run's; returns a line per job (a paused one says how to
/// resume it).
pub async fn run_system_jobs_now(
    store: &dyn DynJobStore,
    housekeeping: &Housekeeping,
    clock: &dyn Clock,
) -> Result<Vec<String>, JobStoreError> {
    let mut lines = Vec::new();
    for job in store.list_boxed().await?.into_iter().filter(|job| job.kind == JobKind::System) {
        if job.status == JobStatus::Paused {
            lines.push(format!("{}: paused (`squidbot cron resume {}`)", job.name, job.id));
            continue;
        }
        let outcome = housekeeping.run_job(&job.name).await;
        let record = RunRecord { at: clock.unix_millis(), outcome: RunOutcome::of(&outcome) };
        store.record_run_boxed(&job.id, &record).await?;
        lines.push(match outcome {
            Ok(line) => format!("{}: {line}", job.name),
            Err(reason) => format!("{}: failed: {reason}", job.name),
        });
    }
    Ok(lines)
}
