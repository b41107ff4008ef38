//! Running scheduled jobs in this process: the [`JobExecutor`] that turns a due job into
//! a turn (the assistant for user jobs, the heartbeat role for heartbeats, housekeeping
//! for system jobs) and delivers or drops the reply; HEARTBEAT.md kept in step with its
//! heartbeat jobs; squidbot's own housekeeping installed as system jobs.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use jiff::Timestamp;
use squidbot_core::BoxFuture;
use squidbot_core::clock::{Clock as _, SystemClock};
use squidbot_core::delegation::{DelegateRequest, Delegated, Parent, Priority, WorkerState};
use squidbot_core::events::TurnEventKind;
use squidbot_core::heartbeat::{HeartbeatDefaults, heartbeat_jobs, heartbeat_task, is_heartbeat_ok};
use squidbot_core::jobs::{ContextMode, DynJobStore, Job, JobKind, JobStatus, JobStore, RunOutcome, RunRecord};
use squidbot_core::runs::{RunRequest, Runner, UserMessage};
use squidbot_core::scheduler::{
    JobControl, JobExecutor, JobRunError, RunTrigger, Scheduler, SchedulerHandle, SchedulerSettings, pause_notice,
};
use squidbot_store::{SqliteJobStore, SqliteSessionIndex};
use squidbot_types::ChatMessage;
use tokio_util::sync::CancellationToken;

use crate::housekeeping::Housekeeping;
use crate::wiring::OWNER_CONTEXT;

/// The owner of system jobs.
pub const SYSTEM_CONTEXT: &str = "system";

/// The gateway's WebSocket clients and web UI as a delivery channel (turns from there
/// have the origin `openclaw`, the protocol's name).
pub const GATEWAY_CHANNEL: &str = "gateway";

/// Channels that can take a message in the gateway.
const DELIVERY_CHANNELS: [&str; 2] = [GATEWAY_CHANNEL, "openai"];

/// Messages of the conversation a `session`-mode job sees, newest last.
const HISTORY_MESSAGES: usize = 12;

/// Characters kept of each of those messages.
const HISTORY_MESSAGE_CHARS: usize = 1_000;

/// The channel a turn's origin stands for.
pub fn channel_of(origin: &str) -> &str {
    match origin {
        "openclaw" | "ui" => GATEWAY_CHANNEL,
        other => other,
    }
}

/// Where a job's reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Destination {
    channel: String,
    session_key: String,
}

/// Runs jobs for the scheduler in this process.
pub struct JobRunner {
    runner: Arc<Runner>,
    housekeeping: Option<Arc<Housekeeping>>,
    preferred_channel: Option<String>,
    /// The chat channels running in this gateway (`[channels.<name>]`), which take
    /// messages as well as the gateway's own clients.
    chat_channels: Vec<String>,
    /// Print replies and notices instead of delivering them (`squidbot cron run` without
    /// a gateway).
    echo: bool,
    /// Where the sessions of runs are marked as such, so `prune_job_runs` can delete them.
    runs: Option<SqliteSessionIndex>,
}

impl JobRunner {
    /// Jobs run through `runner`'s assistant (and its delegator's heartbeat role);
    /// system jobs through `housekeeping`.
    pub fn new(
        runner: Arc<Runner>,
        housekeeping: Option<Arc<Housekeeping>>,
        preferred_channel: Option<String>,
    ) -> Self {
        Self { runner, housekeeping, preferred_channel, chat_channels: Vec::new(), echo: false, runs: None }
    }

    /// The same runner marking the sessions of its runs in `index`.
    pub fn marking_runs_in(mut self, index: SqliteSessionIndex) -> Self {
        self.runs = Some(index);
        self
    }

    /// Marks `session_key` as made by a run of `job` (a failure is logged: at worst the
    /// session is kept like any other).
    fn mark_run(&self, job: &Job, session_key: &str) {
        let Some(index) = &self.runs else { return };
        if let Err(error) =
            index.mark_job_run(session_key, &job.owner_context, &job.id, crate::indexed_sessions::unix_now())
        {
            tracing::warn!(job = %job.id, session = session_key, %error, "can't mark the session of a job run");
        }
    }

    /// The same runner delivering to these chat channels too.
    pub fn with_chat_channels(mut self, channels: Vec<String>) -> Self {
        self.chat_channels = channels;
        self
    }

    /// The same runner printing replies and notices to standard output.
    pub fn printing(mut self) -> Self {
        self.echo = true;
        self
    }

    /// Where a message for the owner of `job` goes: the job's channel, the preferred
    /// channel, or the last active one; with none known, the gateway's main session, where
    /// the web UI and WebSocket clients see it.
    fn destination(&self, job: &Job) -> Destination {
        let last = self.runner.last_active();
        let wanted = job.channel.as_deref().or(self.preferred_channel.as_deref());
        if let Some(wanted) = wanted {
            if DELIVERY_CHANNELS.contains(&wanted) || self.chat_channels.iter().any(|name| name == wanted) {
                let session_key = last
                    .as_ref()
                    .filter(|last| channel_of(&last.origin) == wanted)
                    .map(|last| last.session_key.clone())
                    .or_else(|| (wanted == GATEWAY_CHANNEL).then(|| squidbot_server::MAIN_SESSION.to_owned()));
                if let Some(session_key) = session_key {
                    return Destination { channel: wanted.to_owned(), session_key };
                }
                tracing::warn!(job = %job.id, channel = wanted, "nobody has written from this channel yet; using the last active one");
            } else {
                tracing::warn!(
                    job = %job.id,
                    channel = wanted,
                    "the job's channel is not running here; using the last active one"
                );
            }
        }
        last.map_or_else(
            || Destination {
                channel: GATEWAY_CHANNEL.to_owned(),
                session_key: squidbot_server::MAIN_SESSION.to_owned(),
            },
            |last| Destination { channel: channel_of(&last.origin).to_owned(), session_key: last.session_key },
        )
    }

    fn deliver(&self, job: &Job, destination: &Destination, text: &str) {
        tracing::info!(job = %job.id, name = %job.name, channel = %destination.channel, session = %destination.session_key, "job reply delivered");
        self.runner.post_user_message(UserMessage {
            session_key: destination.session_key.clone(),
            message_id: format!("job-{}-{}", job.id, SystemClock.unix_millis()),
            from: "scheduler".to_owned(),
            role: job.kind.as_str().to_owned(),
            priority: "normal".to_owned(),
            text: text.to_owned(),
            correlation_id: squidbot_core::ids::correlation_id(),
        });
    }

    /// The last messages of the destination's conversation, as text for the job's prompt.
    async fn recent_history(&self, destination: &Destination) -> Option<String> {
        let session = self.runner.session(&destination.session_key).await.ok()?;
        let history = session.lock().await.history();
        let lines: Vec<String> = history
            .iter()
            .filter_map(|message| match message {
                ChatMessage::User { content, .. } => Some(("user", content)),
                ChatMessage::Assistant { content, .. } if !content.is_empty() => Some(("assistant", content)),
                _ => None,
            })
            .map(|(role, text)| {
                format!("{role}: {}", squidbot_core::text::truncate_output(text, HISTORY_MESSAGE_CHARS))
            })
            .collect();
        let start = lines.len().saturating_sub(HISTORY_MESSAGES);
        (start < lines.len()).then(|| lines[start..].join("\n"))
    }

    async fn run_turn(&self, job: &Job, input: String) -> Result<String, JobRunError> {
        let session_key = format!("job:{}:{}", job.id, SystemClock.unix_millis());
        self.mark_run(job, &session_key);
        let request = RunRequest {
            session_key,
            input,
            images: Vec::new(),
            origin: "job".to_owned(),
            run_id: None,
            correlation_id: None,
        };
        let mut handle = self
            .runner
            .start(request)
            .map_err(|error| JobRunError::NotStarted(format!("can't start the turn: {error}")))?;
        while let Some(event) = handle.events.recv().await {
            match &event.kind {
                TurnEventKind::Finished { reply, .. } => return Ok(reply.clone()),
                TurnEventKind::Failed { error, .. } => return Err(JobRunError::Turn(error.clone())),
                TurnEventKind::Aborted { .. } => return Err(JobRunError::Turn("the turn was stopped".to_owned())),
                _ => {}
            }
        }
        Err(JobRunError::Turn("the turn ended without a result".to_owned()))
    }

    async fn run_heartbeat(&self, job: &Job, context: Option<String>) -> Result<String, JobRunError> {
        let task = heartbeat_task(&job.name, &job.message);
        let Some(delegation) = self.runner.delegation().filter(|delegation| delegation.role("heartbeat").is_some())
        else {
            let input = match context {
                Some(context) => format!("{task}\n\nRecent conversation:\n{context}"),
                None => task,
            };
            return self.run_turn(job, input).await;
        };
        let request = DelegateRequest {
            role: "heartbeat".to_owned(),
            task,
            context,
            response_format: None,
            priority: Priority::Normal,
        };
        let parent = Parent {
            session_key: format!("job:{}", job.id),
            context: job.owner_context.clone(),
            correlation_id: squidbot_core::ids::correlation_id(),
            cancel: CancellationToken::new(),
        };
        let delegated = delegation.delegate(request, &parent).await;
        if let Ok(Delegated::Finished(report)) = &delegated {
            self.mark_run(job, &report.worker.session_key);
        }
        match delegated {
            Ok(Delegated::Finished(report)) if report.state == WorkerState::Done => Ok(report.result),
            Ok(Delegated::Finished(report)) => {
                Err(JobRunError::Worker(format!("the heartbeat worker {}: {}", report.state.as_str(), report.result)))
            }
            Ok(Delegated::Started(worker)) => {
                Err(JobRunError::Worker(format!("the heartbeat worker {} was started in the background", worker.id)))
            }
            Err(error) => Err(JobRunError::NotStarted(error.to_string())),
        }
    }

    async fn run_conversational(&self, job: &Job) -> Result<(), JobRunError> {
        let destination = self.destination(job);
        let context = match job.context_mode {
            ContextMode::Session => self.recent_history(&destination).await,
            ContextMode::Isolated | ContextMode::Silent => None,
        };
        let reply = match job.kind {
            JobKind::Heartbeat => self.run_heartbeat(job, context).await?,
            JobKind::User | JobKind::System => {
                let input = match context {
                    Some(context) => format!(
                        "{}\n\n(Scheduled job \"{}\". Recent conversation with the user:\n{context})",
                        job.message, job.name
                    ),
                    None => job.message.clone(),
                };
                self.run_turn(job, input).await?
            }
        };
        if is_heartbeat_ok(&reply) {
            tracing::debug!(job = %job.id, name = %job.name, "HEARTBEAT_OK: nothing to deliver");
            if self.echo {
                eprintln!("the job answered HEARTBEAT_OK: nothing to report (a scheduled run delivers nothing)");
            }
            return Ok(());
        }
        if self.echo {
            println!("{reply}");
            return Ok(());
        }
        if reply.trim().is_empty() {
            tracing::info!(job = %job.id, name = %job.name, "the job's turn gave no reply; nothing to deliver");
            return Ok(());
        }
        if job.context_mode == ContextMode::Silent {
            tracing::info!(job = %job.id, name = %job.name, reply = %reply, "silent job: reply not delivered");
            return Ok(());
        }
        self.deliver(job, &destination, &format!("[{}] {reply}", job.name));
        Ok(())
    }
}

impl JobExecutor for JobRunner {
    fn execute<'a>(&'a self, job: &'a Job, trigger: RunTrigger) -> BoxFuture<'a, Result<(), JobRunError>> {
        Box::pin(async move {
            tracing::info!(job = %job.id, name = %job.name, kind = job.kind.as_str(), ?trigger, "job runs");
            match job.kind {
                JobKind::System => run_system_job(self.housekeeping.as_deref(), job).await,
                JobKind::User | JobKind::Heartbeat => self.run_conversational(job).await,
            }
        })
    }

    fn notify_owner<'a>(&'a self, job: &'a Job, notice: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if self.echo {
                eprintln!("{notice}");
                return;
            }
            match job.kind {
                JobKind::User | JobKind::Heartbeat => self.deliver(job, &self.destination(job), notice),
                JobKind::System => tracing::warn!(job = %job.id, name = %job.name, "{notice}"),
            }
        })
    }
}

/// Runs system job `job` with `housekeeping`.
async fn run_system_job(housekeeping: Option<&Housekeeping>, job: &Job) -> Result<(), JobRunError> {
    let Some(housekeeping) = housekeeping else {
        return Err(JobRunError::NotStarted("housekeeping is not available in this process".to_owned()));
    };
    let line = housekeeping.run_job(&job.name).await.map_err(JobRunError::Housekeeping)?;
    tracing::info!(job = %job.id, name = %job.name, "{line}");
    Ok(())
}

/// Runs system jobs only (the REPL's scheduler).
struct SystemJobs(Arc<Housekeeping>);

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

/// The scheduler settings of `[scheduler]`.
fn scheduler_settings(environment: &crate::wiring::Environment) -> SchedulerSettings {
    SchedulerSettings {
        max_consecutive_failures: environment.config().scheduler.max_consecutive_failures,
        ..SchedulerSettings::default()
    }
}

/// The job table of `environment`'s database with the system jobs installed.
async fn job_table(environment: &crate::wiring::Environment) -> Result<SqliteJobStore> {
    let store = SqliteJobStore::new(environment.database()?);
    let bulletin_every = Duration::from_secs(environment.config().memory.bulletin_interval_secs);
    install_system_jobs(&store, bulletin_every).await.context("can't install the system jobs")?;
    Ok(store)
}

/// Starts a scheduler of the system jobs alone, for a process that is not the gateway
/// (the interactive REPL): housekeeping runs while someone chats without a gateway, and
/// claims keep it from running a slot the gateway runs too.
pub async fn start_system_jobs(
    environment: &crate::wiring::Environment,
    shutdown: CancellationToken,
) -> Result<RunningScheduler> {
    let store: Arc<dyn DynJobStore> = Arc::new(job_table(environment).await?);
    let executor = Arc::new(SystemJobs(Arc::new(environment.housekeeping()?)));
    let settings = SchedulerSettings { only: Some(JobKind::System), ..scheduler_settings(environment) };
    let scheduler = Scheduler::new(store.clone(), executor, Arc::new(SystemClock), settings);
    let handle = scheduler.handle();
    Ok(RunningScheduler { handle, store, tasks: vec![tokio::spawn(scheduler.run(shutdown))] })
}

/// Runs every active system job now (`squidbot maintenance`), recording each outcome;
/// returns a line per job.
pub async fn run_system_jobs_now(environment: &crate::wiring::Environment) -> Result<Vec<String>> {
    let store = job_table(environment).await?;
    let housekeeping = environment.housekeeping()?;
    let mut lines = Vec::new();
    for job in store.list().await?.into_iter().filter(|job| job.kind == JobKind::System) {
        if job.status == JobStatus::Paused {
            lines.push(format!("{}: paused (`squidbot cron resume {}`)", job.name, job.id));
            continue;
        }
        let outcome = housekeeping.run_job(&job.name).await;
        let record = RunRecord { at: SystemClock.unix_millis(), outcome: RunOutcome::of(&outcome) };
        store.record_run(&job.id, &record).await?;
        lines.push(match outcome {
            Ok(line) => format!("{}: {line}", job.name),
            Err(reason) => format!("{}: failed: {reason}", job.name),
        });
    }
    Ok(lines)
}

/// Runs `job` once in this process (no gateway runs): replies are printed, the outcome
/// is recorded and counted like a scheduled run's, and the job is paused after too many
/// failures in a row.
pub async fn run_here(environment: &crate::wiring::Environment, store: &SqliteJobStore, job: &Job) -> Result<()> {
    let agent = environment.ready_assistant(None, false, "cli")?;
    let runner = Runner::new(Arc::new(agent), squidbot_core::events::EventHub::new());
    let housekeeping = match job.kind {
        JobKind::System => Some(Arc::new(environment.housekeeping()?)),
        JobKind::User | JobKind::Heartbeat => None,
    };
    let executor = JobRunner::new(runner.clone(), housekeeping, None)
        .printing()
        .marking_runs_in(SqliteSessionIndex::new(environment.database()?));
    let outcome = executor.execute(job, RunTrigger::Manual).await;
    runner.drain().await;
    let record = RunRecord { at: SystemClock.unix_millis(), outcome: RunOutcome::of(&outcome) };
    let failures = store.record_run(&job.id, &record).await?;
    match outcome {
        Ok(()) => Ok(()),
        Err(reason) if scheduler_settings(environment).pauses_after(failures) => {
            let current = store.get(&job.id).await?.and_then(|job| job.next_run);
            store.set_status(&job.id, JobStatus::Paused, current).await?;
            anyhow::bail!("{}", pause_notice(job, failures, &reason.to_string()))
        }
        Err(reason) => anyhow::bail!("job {} failed: {reason} ({failures} in a row)", job.id),
    }
}

/// The system jobs and how often they run.
pub fn system_jobs(bulletin_every: Duration, now: Timestamp) -> Vec<Job> {
    let bulletin = squidbot_core::schedule::Interval::new(bulletin_every.as_secs().max(60)).map_or_else(
        || "every 1h".to_owned(),
        |interval| squidbot_core::schedule::Schedule::Every(interval).to_string(),
    );
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
pub async fn install_system_jobs(store: &dyn DynJobStore, bulletin_every: Duration) -> Result<()> {
    let now = Timestamp::now();
    let existing = store.list_boxed().await?;
    let mut jobs = system_jobs(bulletin_every, now);
    for job in &mut jobs {
        match existing.iter().find(|old| old.id == job.id && old.schedule == job.schedule) {
            Some(old) => job.keep_state_of(old),
            None => job.next_run = Some(now.as_millisecond() + 60_000),
        }
    }
    store.replace_generated_boxed(JobKind::System, SYSTEM_CONTEXT, &jobs).await?;
    Ok(())
}

/// Keeps the heartbeat jobs of the owner in step with HEARTBEAT.md: regenerated when the
/// file's content hash differs from the one the jobs were made from, removed with the file.
pub struct HeartbeatSync {
    store: Arc<dyn DynJobStore>,
    path: std::path::PathBuf,
    context: String,
    every: String,
    timezone: String,
    active_hours: Option<String>,
    default_context: ContextMode,
    enabled: bool,
    /// The (modified time, length) last looked at, so an unchanged file is not re-read.
    seen: Option<(SystemTime, u64)>,
    /// The hash of the last file that could not be used, so its warning is logged once.
    refused: Option<String>,
}

impl HeartbeatSync {
    /// A sync of `workspace`/HEARTBEAT.md for the owner with `[scheduler]` settings.
    pub fn new(
        store: Arc<dyn DynJobStore>,
        workspace: &std::path::Path,
        config: &squidbot_types::config::SchedulerConfig,
        timezone: String,
    ) -> Self {
        Self {
            store,
            path: workspace.join("HEARTBEAT.md"),
            context: OWNER_CONTEXT.to_owned(),
            every: config.heartbeat.every.clone(),
            timezone,
            active_hours: config.heartbeat.active_hours.clone(),
            default_context: ContextMode::parse(&config.heartbeat.context).unwrap_or(ContextMode::Session),
            enabled: config.heartbeat.enabled,
            seen: None,
            refused: None,
        }
    }

    /// Looks at the file and regenerates the jobs if it changed; returns whether the
    /// job table was changed. Problems are logged, never fatal.
    pub async fn check(&mut self) -> bool {
        match self.try_check().await {
            Ok(changed) => changed,
            Err(error) => {
                tracing::warn!("can't sync HEARTBEAT.md with its jobs: {error:#}");
                false
            }
        }
    }

    async fn try_check(&mut self) -> Result<bool> {
        let stamp = match std::fs::metadata(&self.path) {
            Ok(metadata) if metadata.len() > squidbot_core::heartbeat::MAX_FILE_BYTES as u64 => {
                let stamp = (metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH), metadata.len());
                if self.seen != Some(stamp) {
                    tracing::warn!(
                        path = %self.path.display(),
                        bytes = metadata.len(),
                        "HEARTBEAT.md is over {} bytes; its heartbeat jobs stay as they were",
                        squidbot_core::heartbeat::MAX_FILE_BYTES
                    );
                    self.seen = Some(stamp);
                }
                return Ok(false);
            }
            Ok(metadata) => Some((metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH), metadata.len())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(error) => return Err(error).with_context(|| format!("can't read {}", self.path.display())),
        };
        if stamp.is_some() && stamp == self.seen {
            return Ok(false);
        }
        let current: Vec<Job> = self
            .store
            .list_boxed()
            .await?
            .into_iter()
            .filter(|job| job.kind == JobKind::Heartbeat && job.owner_context == self.context)
            .collect();
        let text = match stamp {
            Some(_) if self.enabled => Some(read_lossy(&self.path)?),
            _ => None,
        };
        self.seen = stamp;
        let Some(text) = text else {
            if current.is_empty() {
                return Ok(false);
            }
            tracing::info!(path = %self.path.display(), "HEARTBEAT.md is gone or heartbeats are off: removing its jobs");
            self.store.replace_generated_boxed(JobKind::Heartbeat, &self.context, &[]).await?;
            return Ok(true);
        };
        let hash = squidbot_core::heartbeat::content_hash(&text);
        if !current.is_empty() && current.iter().all(|job| job.source_hash.as_deref() == Some(hash.as_str())) {
            return Ok(false);
        }
        let defaults = HeartbeatDefaults {
            every: &self.every,
            timezone: &self.timezone,
            active_hours: self.active_hours.as_deref(),
            context: self.default_context,
        };
        let made = match heartbeat_jobs(&self.context, &text, &defaults, &current, Timestamp::now()) {
            Ok(made) => made,
            Err(error) => {
                if self.refused.as_deref() != Some(hash.as_str()) {
                    tracing::warn!(path = %self.path.display(), "{error}; its heartbeat jobs stay as they were");
                    self.refused = Some(hash);
                }
                return Ok(false);
            }
        };
        for warning in &made.warnings {
            tracing::warn!(path = %self.path.display(), "HEARTBEAT.md: {warning}");
        }
        if made.jobs.is_empty() && current.is_empty() {
            tracing::info!(path = %self.path.display(), "HEARTBEAT.md asks for nothing: no heartbeat runs");
            return Ok(false);
        }
        self.store.replace_generated_boxed(JobKind::Heartbeat, &self.context, &made.jobs).await?;
        tracing::info!(path = %self.path.display(), jobs = made.jobs.len(), hash = %made.hash, "heartbeat jobs regenerated from HEARTBEAT.md");
        Ok(true)
    }
}

/// The file as text; bytes that aren't UTF-8 become U+FFFD (a damaged file still runs
/// its readable sections).
fn read_lossy(path: &std::path::Path) -> Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("can't read {}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The scheduler running in the gateway, with the loop keeping HEARTBEAT.md and its jobs
/// in step.
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
/// system jobs are installed, HEARTBEAT.md is read, and jobs run through `runner` until
/// `shutdown`.
pub async fn start(
    environment: &crate::wiring::Environment,
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
    let executor = Arc::new(
        JobRunner::new(runner.clone(), housekeeping, config.preferred_channel.clone())
            .with_chat_channels(chat_channels)
            .marking_runs_in(squidbot_store::SqliteSessionIndex::new(environment.database()?)),
    );
    let mut sync = HeartbeatSync::new(store.clone(), &environment.workspace(), config, environment.job_zone());
    sync.check().await;
    let scheduler = Scheduler::new(store.clone(), executor, Arc::new(SystemClock), scheduler_settings(environment));
    let handle = scheduler.handle();
    let mut tasks = vec![tokio::spawn(scheduler.run(shutdown.clone()))];
    let waker = handle.clone();
    let mut tracker = LastActiveStore::restore(environment.database()?, runner);
    tasks.push(tokio::spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(HEARTBEAT_FILE_POLL) => {
                    if sync.check().await {
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

/// The last-active tracker kept across restarts: restored into the runner at start, and
/// written (a `meta` row) when the origin or session changes, so after a restart job
/// replies still go where the owner last wrote.
struct LastActiveStore {
    database: squidbot_store::Database,
    runner: Arc<Runner>,
    saved: Option<(String, String)>,
}

/// The `meta` key of the tracker.
const LAST_ACTIVE_KEY: &str = "scheduler.last_active";

impl LastActiveStore {
    fn restore(database: squidbot_store::Database, runner: &Arc<Runner>) -> Self {
        let saved = match database.meta(LAST_ACTIVE_KEY) {
            Ok(Some(text)) => serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|value| {
                let origin = value["origin"].as_str()?.to_owned();
                let session_key = value["session_key"].as_str()?.to_owned();
                Some((origin, session_key))
            }),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, "can't read where the owner last wrote; job replies wait for the next message");
                None
            }
        };
        if let Some((origin, session_key)) = &saved
            && runner.last_active().is_none()
        {
            runner.note_activity(origin, session_key);
        }
        Self { database, runner: runner.clone(), saved }
    }

    fn save_if_changed(&mut self) {
        let Some(last) = self.runner.last_active() else { return };
        let current = (last.origin, last.session_key);
        if self.saved.as_ref() == Some(&current) {
            return;
        }
        let value = serde_json::json!({"origin": current.0, "session_key": current.1}).to_string();
        match self.database.set_meta(LAST_ACTIVE_KEY, &value) {
            Ok(()) => self.saved = Some(current),
            Err(error) => tracing::warn!(%error, "can't remember where the owner last wrote"),
        }
    }
}

/// How often HEARTBEAT.md is looked at (a `stat`; read only when it changed).
const HEARTBEAT_FILE_POLL: Duration = Duration::from_secs(1);
