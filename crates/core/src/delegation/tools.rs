//! The delegation tools: `delegate`, `spawn` and `cancel_worker` for the assistant,
//! `set_status` for sub-agents. Bad arguments, unknown roles and refusals come back to the
//! model as tool errors it can act on.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_types::ToolSpec;

use super::{DelegateRequest, Delegated, Delegator, Outcome, Parent, Priority, WorkerPool, WorkerState};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, parse_arguments};

/// Reads an optional free-text argument; models sometimes send objects, which are kept as
/// JSON text rather than refused.
fn free_text(value: Option<Value>) -> Option<String> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text),
        Some(other) => Some(other.to_string()),
    }
}

fn parent_of(context: &ToolContext) -> Parent {
    let correlation_id =
        if context.correlation_id.is_empty() { crate::ids::correlation_id() } else { context.correlation_id.clone() };
    Parent {
        session_key: context.session_key.clone(),
        context: context.context.clone(),
        correlation_id,
        cancel: context.cancel.clone(),
        actor: context.actor.clone(),
    }
}

async fn hand_over(
    delegator: &Arc<Delegator>,
    request: DelegateRequest,
    context: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    match delegator.delegate(request, &parent_of(context)).await {
        Ok(Delegated::Finished(report)) => match report.state {
            WorkerState::Done => Ok(ToolOutput::text(report.render())),
            WorkerState::Failed | WorkerState::Cancelled | WorkerState::Running | WorkerState::WaitingForInput => {
                Err(ToolError::RespondToModel(report.render()))
            }
        },
        Ok(Delegated::Started(worker)) => Ok(ToolOutput::text(format!(
            "Started {} worker {} in the background (its session: {}). Its result will arrive later as a separate message; tell the user you are on it.",
            worker.role, worker.id, worker.session_key
        ))),
        Err(error) => Err(ToolError::RespondToModel(error.to_string())),
    }
}

/// `delegate {agent, task, context?, response_format?, priority?}`.
pub struct DelegateTool {
    delegator: Arc<Delegator>,
}

impl DelegateTool {
    /// The tool over `delegator`'s roles.
    pub fn new(delegator: Arc<Delegator>) -> Self {
        Self { delegator }
    }
}

#[derive(Deserialize)]
struct DelegateArguments {
    agent: String,
    task: String,
    #[serde(default)]
    context: Option<Value>,
    #[serde(default)]
    response_format: Option<Value>,
    #[serde(default)]
    priority: Option<PriorityArgument>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum PriorityArgument {
    Normal,
    Background,
}

impl Tool for DelegateTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delegate".into(),
            description: "Hands a task to a sub-agent that has the tools for it and works in its own session; you get back its result, not its tool calls. The sub-agent can't see this conversation, so the task must stand on its own.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "enum": self.delegator.role_names(), "description": "Role of the sub-agent (see the list in your instructions)."},
                    "task": {"type": "string", "description": "What to do, complete and self-contained."},
                    "context": {"type": "string", "description": "Facts the sub-agent needs: names, paths, preferences, earlier results."},
                    "response_format": {"type": "string", "description": "What the result should look like (a short answer, a list, a table, a diff)."},
                    "priority": {"type": "string", "enum": ["normal", "background"], "description": "normal (default): wait for the result now. background: return at once with a worker id; the result arrives later as its own message."}
                },
                "required": ["agent", "task"]
            }),
        }
    }

    fn mutates(&self) -> bool {
        // Sub-agents work in their own sessions; several delegations in one reply run
        // side by side (the pool bounds how many).
        false
    }

    async fn call<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: DelegateArguments = parse_arguments(arguments)?;
        let request = DelegateRequest {
            role: arguments.agent.trim().to_owned(),
            task: arguments.task,
            context: free_text(arguments.context),
            response_format: free_text(arguments.response_format),
            priority: match arguments.priority {
                None | Some(PriorityArgument::Normal) => Priority::Normal,
                Some(PriorityArgument::Background) => Priority::Background,
            },
        };
        hand_over(&self.delegator, request, context).await
    }
}

/// `spawn {task, profile?}`: a blocking child agent for the assistant in direct mode.
pub struct SpawnTool {
    delegator: Arc<Delegator>,
    default_profile: String,
}

impl SpawnTool {
    /// The tool; `profile` defaults to `default_profile` (normally `worker`).
    pub fn new(delegator: Arc<Delegator>, default_profile: impl Into<String>) -> Self {
        Self { delegator, default_profile: default_profile.into() }
    }
}

#[derive(Deserialize)]
struct SpawnArguments {
    task: String,
    #[serde(default)]
    profile: Option<String>,
}

impl Tool for SpawnTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "spawn".into(),
            description: "Runs a sub-agent on a self-contained task in its own session and waits for its result (its tool calls stay out of this conversation). It can't see this conversation: put everything it needs into the task.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": {"type": "string", "description": "What to do, complete and self-contained, including the form of the answer you want."},
                    "profile": {"type": "string", "enum": self.delegator.role_names(), "description": format!("Role of the sub-agent; default {}.", self.default_profile)}
                },
                "required": ["task"]
            }),
        }
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: SpawnArguments = parse_arguments(arguments)?;
        let role = arguments
            .profile
            .map(|profile| profile.trim().to_owned())
            .filter(|profile| !profile.is_empty())
            .unwrap_or_else(|| self.default_profile.clone());
        let request = DelegateRequest {
            role,
            task: arguments.task,
            context: None,
            response_format: None,
            priority: Priority::Normal,
        };
        hand_over(&self.delegator, request, context).await
    }
}

/// `cancel_worker {id}`: stops one of this session's sub-agents.
pub struct CancelWorkerTool {
    delegator: Arc<Delegator>,
}

impl CancelWorkerTool {
    /// The tool over `delegator`'s pool.
    pub fn new(delegator: Arc<Delegator>) -> Self {
        Self { delegator }
    }
}

#[derive(Deserialize)]
struct CancelArguments {
    id: String,
}

impl Tool for CancelWorkerTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "cancel_worker".into(),
            description: "Stops a running sub-agent of this conversation (ids are listed under Workers).".into(),
            parameters: json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The worker id."}},
                "required": ["id"]
            }),
        }
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: CancelArguments = parse_arguments(arguments)?;
        let id = arguments.id.trim();
        let owned = self.delegator.pool().snapshot(id).filter(|worker| worker.owner == context.session_key);
        if owned.is_none() {
            return Err(ToolError::RespondToModel(format!(
                "can't cancel worker {id}: this conversation has no such worker"
            )));
        }
        match self.delegator.cancel(id) {
            Ok(worker) => Ok(ToolOutput::text(format!(
                "Cancelling {} worker {}; it stops within seconds and its session ({}) keeps what it did.",
                worker.role, worker.id, worker.session_key
            ))),
            Err(error) => Err(ToolError::RespondToModel(error.to_string())),
        }
    }
}

/// `set_status {status?, outcome?, result?}`: a sub-agent's progress line and final report.
pub struct SetStatusTool {
    pool: Arc<WorkerPool>,
}

impl SetStatusTool {
    /// The tool over `pool`.
    pub fn new(pool: Arc<WorkerPool>) -> Self {
        Self { pool }
    }
}

#[derive(Deserialize)]
struct SetStatusArguments {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    outcome: Option<OutcomeArgument>,
    #[serde(default)]
    result: Option<Value>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum OutcomeArgument {
    Done,
    Failed,
}

impl Tool for SetStatusTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "set_status".into(),
            description: "Reports progress (`status`), or ends your work with an explicit outcome: `failed` and why, or `done` and a structured `result`. A plain final answer is your result too.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "status": {"type": "string", "description": "What you are doing now, in one line."},
                    "outcome": {"type": "string", "enum": ["done", "failed"]},
                    "result": {"type": "string", "description": "With an outcome: the result, or why it failed."}
                }
            }),
        }
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call<'a>(&'a self, arguments: Value, context: &'a ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments: SetStatusArguments = parse_arguments(arguments)?;
        let Some(worker) = self.pool.by_session(&context.session_key) else {
            return Err(ToolError::RespondToModel(
                "set_status only works inside a delegated sub-agent; this conversation is not one".into(),
            ));
        };
        let refused = |error: super::PoolError| ToolError::RespondToModel(error.to_string());
        if let Some(status) = arguments.status.as_deref().filter(|status| !status.trim().is_empty()) {
            self.pool.set_status(&worker.id, status).map_err(refused)?;
        }
        let Some(outcome) = arguments.outcome else {
            return Ok(ToolOutput::text("Status noted. Keep going; when you are finished, answer with your result."));
        };
        let outcome = match outcome {
            OutcomeArgument::Done => Outcome::Done,
            OutcomeArgument::Failed => Outcome::Failed,
        };
        let result = free_text(arguments.result).unwrap_or_default();
        self.pool.report(&worker.id, outcome, &result).map_err(refused)?;
        Ok(ToolOutput::final_text(match outcome {
            Outcome::Done => "Outcome recorded: done. Your result goes back to the assistant.",
            Outcome::Failed => "Outcome recorded: failed. The reason goes back to the assistant.",
        }))
    }
}
