//! Running a due job in this process: the [`JobExecutor`] that turns a job into a turn
//! (the assistant for user jobs, the heartbeat role for heartbeats, housekeeping for
//! system jobs), and delivers the reply where the owner will see it or drops it.

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use squidbot_types::ChatMessage;
use tokio_util::sync::CancellationToken;

use super::{ContextMode, DynJobStore, Job, JobKind, JobStatus, JobStoreError, RunOutcome, RunRecord};
use crate::BoxFuture;
use crate::delegation::{DelegateRequest, Delegated, Parent, Priority, WorkerState};
use crate::events::TurnEventKind;
use crate::heartbeat::{heartbeat_task, is_heartbeat_ok};
use crate::hooks::{HookEvent, HookInput};
use crate::housekeeping::{Housekeeping, run_system_job};
use crate::runs::{RunRequest, Runner, UserMessage};
use crate::scheduler::{JobExecutor, JobRunError, RunTrigger, SchedulerSettings, pause_notice};
use crate::store::index::SessionIndex;

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
pub struct Destination {
    /// The channel ([`GATEWAY_CHANNEL`], `openai` or a chat channel's name).
    pub channel: String,
    /// The session the reply is added to.
    pub session_key: String,
}

/// Where job replies can go in this process.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delivery {
    /// The gateway's main session, where the web UI and WebSocket clients see a reply
    /// when nobody has written from anywhere yet.
    pub main_session: String,
    /// The channel of jobs that name none (`scheduler.preferred_channel`); `None` means
    /// the channel the owner last wrote from.
    pub preferred_channel: Option<String>,
    /// The chat channels running here (`[channels.<name>]`), which take messages as well
    /// as the gateway's own clients.
    pub chat_channels: Vec<String>,
}

/// Where a job run in the foreground (`squidbot cron run` without a gateway) shows what
/// a scheduled run would deliver.
pub trait JobConsole: Send + Sync {
    /// Shows the job's reply.
    fn reply(&self, text: &str);
    /// Shows a notice about the run (nothing to report, an auto-pause).
    fn notice(&self, text: &str);
}

/// Why a run of a job in the foreground failed.
#[derive(Debug, thiserror::Error)]
pub enum ManualRunError {
    /// The outcome could not be recorded.
    #[error(transparent)]
    Store(#[from] JobStoreError),
    /// The run failed once too often in a row, and the job is now paused.
    #[error("{notice}")]
    Paused {
        /// What the owner is told ([`pause_notice`]).
        notice: String,
    },
    /// The run failed.
    #[error("job {id} failed: {reason} ({failures} in a row)")]
    Failed {
        /// The job's id.
        id: String,
        /// Why.
        reason: JobRunError,
        /// Failed runs since the last success, this one included.
        failures: u32,
    },
}

/// Runs jobs for the scheduler in this process.
pub struct JobRunner {
    runner: Arc<Runner>,
    housekeeping: Option<Arc<Housekeeping>>,
    delivery: Delivery,
    /// Where replies and notices are shown instead of delivered, in the foreground.
    console: Option<Arc<dyn JobConsole>>,
    /// Where the sessions of runs are marked as such, so housekeeping can prune them.
    runs: Option<Arc<dyn SessionIndex>>,
}

impl JobRunner {
    /// Jobs run through `runner`'s assistant (and its delegator's heartbeat role) and
    /// their replies go where `delivery` says; system jobs run through `housekeeping`.
    pub fn new(runner: Arc<Runner>, housekeeping: Option<Arc<Housekeeping>>, delivery: Delivery) -> Self {
        Self { runner, housekeeping, delivery, console: None, runs: None }
    }

    /// The same runner marking the sessions of its runs in `index`.
    pub fn marking_runs_in(mut self, index: Arc<dyn SessionIndex>) -> Self {
        self.runs = Some(index);
        self
    }

    /// The same runner showing replies and notices on `console` instead of delivering
    /// them.
    pub fn printing_to(mut self, console: Arc<dyn JobConsole>) -> Self {
        self.console = Some(console);
        self
    }

    fn now_millis(&self) -> i64 {
        self.runner.agent().clock().unix_millis()
    }

    /// Marks `session_key` as made by a run of `job` (a failure is logged: at worst the
    /// session is kept like any other).
    fn mark_run(&self, job: &Job, session_key: &str) {
        let Some(index) = &self.runs else { return };
        let now = self.runner.agent().clock().unix_seconds();
        if let Err(error) = index.mark_job_run(session_key, &job.owner_context, &job.id, now) {
            tracing::warn!(job = %job.id, session = session_key, %error, "can't mark the session of a job run");
        }
    }

    /// Where a message for the owner of `job` goes: the job's channel, the preferred
    /// channel, or the last active one; with none known, the gateway's main session, where
    /// the web UI and WebSocket clients see it.
    pub fn destination(&self, job: &Job) -> Destination {
        if job.owner_context != self.runner.agent().settings().context {
            // Someone else's job: their last conversation, never the owner's channels.
            return match self.runner.last_active_in(&job.owner_context) {
                Some(last) => {
                    Destination { channel: channel_of(&last.origin).to_owned(), session_key: last.session_key }
                }
                // Nobody of that context wrote since the start: the reply stays in the
                // run's own session (theirs), where their clients find it.
                None => Destination { channel: String::new(), session_key: String::new() },
            };
        }
        let last = self.runner.last_active();
        let wanted = job.channel.as_deref().or(self.delivery.preferred_channel.as_deref());
        if let Some(wanted) = wanted {
            if DELIVERY_CHANNELS.contains(&wanted) || self.delivery.chat_channels.iter().any(|name| name == wanted) {
                let session_key = last
                    .as_ref()
                    .filter(|last| channel_of(&last.origin) == wanted)
                    .map(|last| last.session_key.clone())
                    .or_else(|| (wanted == GATEWAY_CHANNEL).then(|| self.delivery.main_session.clone()));
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
            || Destination { channel: GATEWAY_CHANNEL.to_owned(), session_key: self.delivery.main_session.clone() },
            |last| Destination { channel: channel_of(&last.origin).to_owned(), session_key: last.session_key },
        )
    }

    fn deliver(&self, job: &Job, destination: &Destination, text: &str) {
        if destination.session_key.is_empty() {
            tracing::info!(job = %job.id, context = %job.owner_context, "nobody of the job's context wrote since the start; the reply stays in the run's session");
            return;
        }
        tracing::info!(job = %job.id, name = %job.name, channel = %destination.channel, session = %destination.session_key, "job reply delivered");
        self.runner.post_user_message(UserMessage {
            session_key: destination.session_key.clone(),
            message_id: format!("job-{}-{}", job.id, self.now_millis()),
            from: "scheduler".to_owned(),
            role: job.kind.as_str().to_owned(),
            priority: "normal".to_owned(),
            text: text.to_owned(),
            correlation_id: crate::ids::correlation_id(),
        });
    }

    /// The last messages of the destination's conversation, as text for the job's prompt.
    async fn recent_history(&self, destination: &Destination) -> Option<String> {
        if destination.session_key.is_empty() {
            return None;
        }
        let session = self.runner.session(&destination.session_key).await.ok()?;
        let history = session.lock().await.history();
        let lines: Vec<String> = history
            .iter()
            .filter_map(|message| match message {
                ChatMessage::User { content, .. } => Some(("user", content)),
                ChatMessage::Assistant { content, .. } if !content.is_empty() => Some(("assistant", content)),
                _ => None,
            })
            .map(|(role, text)| format!("{role}: {}", crate::text::truncate_output(text, HISTORY_MESSAGE_CHARS)))
            .collect();
        let start = lines.len().saturating_sub(HISTORY_MESSAGES);
        (start < lines.len()).then(|| lines[start..].join("\n"))
    }

    async fn run_turn(&self, job: &Job, input: String) -> Result<String, JobRunError> {
        let session_key = format!("job:{}:{}", job.id, self.now_millis());
        self.mark_run(job, &session_key);
        // The run belongs to the job's owner: their context, their role, their budget.
        self.runner
            .session_in(&session_key, &job.owner_context)
            .await
            .map_err(|error| JobRunError::NotStarted(format!("can't open the run's session: {error}")))?;
        let request = RunRequest {
            session_key,
            input,
            images: Vec::new(),
            origin: "job".to_owned(),
            run_id: None,
            correlation_id: None,
            actor: None,
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
            correlation_id: crate::ids::correlation_id(),
            cancel: CancellationToken::new(),
            actor: None,
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
            if let Some(console) = &self.console {
                console.notice("the job answered HEARTBEAT_OK: nothing to report (a scheduled run delivers nothing)");
            }
            return Ok(());
        }
        if let Some(console) = &self.console {
            console.reply(&reply);
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

    /// Runs `job` once in the foreground (no gateway runs): the outcome is recorded in
    /// `store` and counted like a scheduled run's, and the job is paused after as many
    /// failures in a row as `settings` allow.
    pub async fn run_once(
        &self,
        job: &Job,
        store: &dyn DynJobStore,
        settings: &SchedulerSettings,
    ) -> Result<(), ManualRunError> {
        let outcome = self.execute(job, RunTrigger::Manual).await;
        // Replies posted by the run land in their sessions before the process ends.
        self.runner.drain().await;
        let record = RunRecord { at: self.now_millis(), outcome: RunOutcome::of(&outcome) };
        let failures = store.record_run_boxed(&job.id, &record).await?;
        match outcome {
            Ok(()) => Ok(()),
            Err(reason) if settings.pauses_after(failures) => {
                let current = store.get_boxed(&job.id).await?.and_then(|job| job.next_run);
                store.set_status_boxed(&job.id, JobStatus::Paused, current).await?;
                Err(ManualRunError::Paused { notice: pause_notice(job, failures, &reason.to_string()) })
            }
            Err(reason) => Err(ManualRunError::Failed { id: job.id.clone(), reason, failures }),
        }
    }
}

impl JobExecutor for JobRunner {
    fn execute<'a>(&'a self, job: &'a Job, trigger: RunTrigger) -> BoxFuture<'a, Result<(), JobRunError>> {
        Box::pin(async move {
            tracing::info!(job = %job.id, name = %job.name, kind = job.kind.as_str(), ?trigger, "job runs");
            let result = match job.kind {
                JobKind::System => run_system_job(self.housekeeping.as_deref(), job).await,
                JobKind::User | JobKind::Heartbeat => self.run_conversational(job).await,
            };
            let hooks = self.runner.agent().hooks();
            if hooks.wants(HookEvent::JobRun, "") {
                let mut input = HookInput::new(HookEvent::JobRun, "", &job.owner_context)
                    .with("job", job.id.clone())
                    .with("name", job.name.clone())
                    .with("kind", job.kind.as_str())
                    .with(
                        "trigger",
                        match trigger {
                            RunTrigger::Scheduled { .. } => "scheduled",
                            RunTrigger::Manual => "manual",
                        },
                    )
                    .with("ok", result.is_ok());
                if let Err(error) = &result {
                    input = input.with("error", error.to_string());
                }
                hooks.observe(input).await;
            }
            result
        })
    }

    fn notify_owner<'a>(&'a self, job: &'a Job, notice: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(console) = &self.console {
                console.notice(notice);
                return;
            }
            match job.kind {
                JobKind::User | JobKind::Heartbeat => self.deliver(job, &self.destination(job), notice),
                JobKind::System => tracing::warn!(job = %job.id, name = %job.name, "{notice}"),
            }
        })
    }
}
