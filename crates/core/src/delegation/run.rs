//! Running one worker: its brief, its turns (a final plain answer is its result; one
//! reminder when it ends with nothing), the messages of its inbox between turns, its time
//! limit, and how a loop, a failure, a panic or a stop ends it.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use super::{
    DelegateRequest, DynWorkerAgent, GRACE, MAX_REMINDERS, Outcome, Parent, RoleAgent, WorkerInbox, WorkerPool,
    WorkerSnapshot, WorkerState,
};
use crate::agent::{AgentEvents, TurnInput, TurnStatus};
use squidbot_types::people::Actor;

/// A registered worker about to run.
pub(super) struct Job {
    pub(super) worker: WorkerSnapshot,
    pub(super) role: RoleAgent,
    pub(super) brief: String,
    pub(super) context: String,
    pub(super) cancel: CancellationToken,
    pub(super) inbox: WorkerInbox,
    pub(super) actor: Option<Actor>,
}

/// How a worker ended, before the pool records it.
pub(super) struct Ending {
    pub(super) worker: WorkerSnapshot,
    pub(super) state: WorkerState,
    pub(super) result: String,
    /// It failed because it ran out of time.
    pub(super) timed_out: bool,
    pub(super) inbox: WorkerInbox,
}

/// The first message of a worker's session: a header naming the worker, the owner and the
/// correlation id, then the task, the context and the wanted format.
pub(super) fn brief(request: &DelegateRequest, worker: &WorkerSnapshot, parent: &Parent) -> String {
    let mut text = format!(
        "[Task from the assistant · worker {} · role {} · for session {} · correlation {}]\n\n{}",
        worker.id,
        worker.role,
        parent.session_key,
        parent.correlation_id,
        request.task.trim()
    );
    if let Some(context) = request.context.as_deref().map(str::trim).filter(|context| !context.is_empty()) {
        text.push_str("\n\n## Context\n");
        text.push_str(context);
    }
    if let Some(format) = request.response_format.as_deref().map(str::trim).filter(|format| !format.is_empty()) {
        text.push_str("\n\n## Respond with\n");
        text.push_str(format);
    }
    text
}

/// Runs the worker in a task of its own (so a panic stays there), tracked by `tracker`,
/// under its time limit.
pub(super) async fn supervise(pool: &Arc<WorkerPool>, tracker: &TaskTracker, job: Job) -> Ending {
    let Job { worker, role, brief, context, cancel, inbox, actor } = job;
    let span = tracing::info_span!(
        "worker", correlation_id = %worker.correlation_id, worker = %worker.id, role = %worker.role
    );
    let mut task = tracker.spawn(
        work(
            role.agent.clone(),
            pool.clone(),
            worker.clone(),
            Input { brief, context, inbox: inbox.clone(), actor },
            cancel.clone(),
        )
        .instrument(span),
    );
    let mut timed_out = false;
    let (state, result) = tokio::select! {
        biased;
        joined = &mut task => ended(joined),
        () = cancel.cancelled() => match tokio::time::timeout(GRACE, &mut task).await {
            Ok(joined) => ended(joined),
            Err(_) => {
                task.abort();
                (WorkerState::Cancelled, "it was stopped and did not wind down in time".to_owned())
            }
        },
        () = tokio::time::sleep(role.timeout) => {
            timed_out = true;
            cancel.cancel();
            if tokio::time::timeout(GRACE, &mut task).await.is_err() {
                task.abort();
            }
            (WorkerState::Failed, format!("timed out after {}s", role.timeout.as_secs()))
        }
    };
    Ending { worker, state, result, timed_out, inbox }
}

/// Reads a finished worker task; a panic is a failure, not a crash of the caller.
fn ended(joined: Result<(WorkerState, String), tokio::task::JoinError>) -> (WorkerState, String) {
    match joined {
        Ok(ending) => ending,
        Err(error) if error.is_panic() => {
            let payload = error.into_panic();
            let message = payload
                .downcast_ref::<&str>()
                .map(|text| (*text).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_owned());
            tracing::error!(panic = %message, "a worker panicked");
            (WorkerState::Failed, format!("it crashed (panic: {message})"))
        }
        Err(_) => (WorkerState::Cancelled, "its task was stopped".to_owned()),
    }
}

/// Shows a worker's latest tool call as its status while it set none.
struct WorkerEvents<'a> {
    pool: &'a WorkerPool,
    id: &'a str,
}

impl AgentEvents for WorkerEvents<'_> {
    fn tool_started(&self, call: &squidbot_types::ToolCall) {
        tracing::debug!(tool = %call.name, "worker tool call");
        self.pool.note_activity(self.id, &format!("calling {}", call.name));
    }

    fn warning(&self, message: &str) {
        tracing::warn!(worker = %self.id, "{message}");
    }
}

/// What a worker starts from and reads.
struct Input {
    brief: String,
    context: String,
    inbox: WorkerInbox,
    actor: Option<Actor>,
}

/// The worker's turns: the brief; then, after each turn, the messages that reached its
/// inbox meanwhile (before its outcome is taken, so none is left unread while it runs).
/// A turn that ends in a plain answer hands that answer back as the result unless the
/// worker reported an outcome with `set_status`; a turn that ends with no answer at all
/// gets up to [`MAX_REMINDERS`] reminders, then the worker fails.
async fn work(
    agent: Arc<dyn DynWorkerAgent>,
    pool: Arc<WorkerPool>,
    worker: WorkerSnapshot,
    start: Input,
    cancel: CancellationToken,
) -> (WorkerState, String) {
    let Input { brief, context, inbox, actor } = start;
    let mut session = match agent.open_session_boxed(&worker.session_key, &context).await {
        Ok(session) => session,
        Err(error) => return (WorkerState::Failed, format!("can't open its session: {error}")),
    };
    let events = WorkerEvents { pool: &pool, id: &worker.id };
    let mut input = brief;
    // A message another agent sent carries its own correlation id into the turn that reads it.
    let mut correlation_id = worker.correlation_id.clone();
    let mut reminders = 0;
    loop {
        let turn = inbox.begin_turn(&cancel);
        let turn_input = TurnInput { text: &input, images: &[], actor: actor.as_ref() };
        let outcome = agent.run_turn_boxed(&mut session, turn_input, &events, &turn, &correlation_id).await;
        let interrupted = inbox.end_turn();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(error) => return (WorkerState::Failed, format!("it broke off: {error}")),
        };
        // Only a turn that ran to its end has an answer; an interrupted one reads its inbox.
        let answer = match outcome.status {
            TurnStatus::Completed => outcome.reply,
            // An urgent message stopped the turn, not the worker: it reads the message next.
            TurnStatus::Cancelled if interrupted && !cancel.is_cancelled() => {
                tracing::info!(worker = %worker.id, "an urgent message interrupted the worker's turn");
                String::new()
            }
            TurnStatus::Cancelled => return (WorkerState::Cancelled, "it was stopped before it finished".to_owned()),
            TurnStatus::Refused => return (WorkerState::Failed, outcome.reply),
            TurnStatus::MaxTurns => {
                return (
                    WorkerState::Failed,
                    format!(
                        "it made {} model calls without finishing (max_turns = {}); it may be looping",
                        outcome.model_calls,
                        agent.turn_limit()
                    ),
                );
            }
        };
        if let Some(messages) = inbox.take_input() {
            input = messages.text;
            correlation_id = messages.correlation_id.unwrap_or_else(|| worker.correlation_id.clone());
            continue;
        }
        if let Some(ending) = ending(pool.reported(&worker.id), &answer) {
            return ending;
        }
        if reminders == MAX_REMINDERS {
            return (
                WorkerState::Failed,
                format!("it ended {} times without an answer, even after a reminder", reminders + 1),
            );
        }
        reminders += 1;
        for next in [WorkerState::WaitingForInput, WorkerState::Running] {
            if let Err(error) = pool.transition(&worker.id, next) {
                tracing::warn!(%error, "worker state");
            }
        }
        input = agent.reminder_text();
    }
}

/// How a worker's turn ends it: the outcome it reported with `set_status`, else its plain
/// answer as the result (`None`: it answered nothing and gets a reminder).
fn ending(reported: Option<(Outcome, String)>, answer: &str) -> Option<(WorkerState, String)> {
    let ending = match reported {
        Some((Outcome::Done, result)) if result.trim().is_empty() => {
            (WorkerState::Failed, "it reported done but returned an empty result".to_owned())
        }
        Some((Outcome::Done, result)) => (WorkerState::Done, result),
        Some((Outcome::Failed, reason)) if reason.trim().is_empty() => {
            (WorkerState::Failed, "it gave up without saying why".to_owned())
        }
        Some((Outcome::Failed, reason)) => (WorkerState::Failed, reason),
        None if answer.trim().is_empty() => return None,
        None => (WorkerState::Done, answer.trim().to_owned()),
    };
    Some(ending)
}
