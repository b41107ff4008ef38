//! The agent: its ports and settings, its sessions, and the entry of one user turn (model
//! calls and tool runs until a final answer, `max_turns`, cancellation or an error, with
//! every step appended to the session; the steps are in `turn`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use squidbot_types::message::{ToolCall, Usage};
use squidbot_types::people::Actor;
use squidbot_types::session::{EntryBody, HeaderTag, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};
use squidbot_types::{ChatMessage, ImageRef, ToolSpec};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::clock::{Clock, rfc3339};
use crate::compactor::{CompactionOutput, CompactionPlan, CompactionPolicy};
use crate::context::{self, PromptProfile, PromptSection, PromptSections, RuntimeInfo};
use crate::hooks::{Hook, HookBus};
use crate::leaks::LeakScanner;
use crate::memory::Memories;
use crate::people::People;
use crate::provider::{DynLlmProvider, ProviderError};
use crate::session::Session;
use crate::store::{Durability, DynSessionStore, StoreError};
use crate::tool::{SharedFile, ToolRegistry};
#[cfg(test)] // the loop's tests write their tools against these
use crate::tool::{ToolContext, ToolError};
use crate::workspace::{ContextWorkspace, ContextWorkspaces, PromptFiles, WorkspaceFiles};
use crate::{ids, text};

mod budget;
mod compaction;
mod redaction;
mod sub_agents;
mod tools;
mod turn;

pub use budget::fit_history;
pub use sub_agents::{DynSubAgents, SubAgents};

/// Settings of one agent (one role).
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// `provider/model` to ask.
    pub model: String,
    /// Model calls allowed per user turn.
    pub max_turns: u32,
    /// Tokens the model may generate per call.
    pub max_tokens: u32,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Context window of the model, in tokens.
    pub context_window: u32,
    /// Ask providers to stream.
    pub stream: bool,
    /// Workspace directory tools work in.
    pub workspace: PathBuf,
    /// Facts for the system prompt (the model field is overwritten per turn).
    pub runtime: RuntimeInfo,
    /// Context (user or group) new sessions belong to.
    pub context: String,
}

/// What a channel hears while a turn runs. Every method has a no-op default.
pub trait AgentEvents: Send + Sync {
    /// A piece of the reply streamed from the model.
    fn text_delta(&self, _text: &str) {}
    /// Text streamed so far is void (the provider is retrying or falling back).
    fn stream_reset(&self) {}
    /// A tool call is about to run.
    fn tool_started(&self, _call: &ToolCall) {}
    /// A tool call finished; `output` is what it returned (or its error), secrets redacted.
    fn tool_finished(&self, _call: &ToolCall, _is_error: bool, _output: &str) {}
    /// A tool handed the people of the conversation a file.
    fn file_shared(&self, _file: &SharedFile) {}
    /// Something the user should know that is not part of the reply.
    fn warning(&self, _message: &str) {}
    /// Background housekeeping the user may like to see (compaction).
    fn notice(&self, _message: &str) {}
    /// The turn waits for someone else (an admin's approval); the person should know.
    fn waiting(&self, message: &str) {
        self.warning(message);
    }
    /// A model call finished (or failed): for latency and token accounting.
    fn model_call(&self, _report: &ModelCallReport) {}
}

/// One model call, as reported to [`AgentEvents::model_call`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCallReport {
    /// `provider/model` that answered, or the one asked when the call failed.
    pub model: String,
    /// Wall time of the call, streaming included.
    pub duration: std::time::Duration,
    /// Tokens it used.
    pub usage: Usage,
    /// False when it failed (cancellations included).
    pub ok: bool,
}

/// Events go nowhere (callers that only want the final reply).
#[derive(Debug, Clone, Copy, Default)]
pub struct SilentEvents;

impl AgentEvents for SilentEvents {}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStatus {
    /// The model gave a final answer.
    Completed,
    /// The model was still calling tools after `max_turns` calls.
    MaxTurns,
    /// The user cancelled; partial work is recorded as interrupted.
    Cancelled,
    /// The turn was not run (a used-up budget); the reply says why and until when.
    Refused,
}

impl TurnStatus {
    /// The status as hooks and logs name it.
    pub fn name(self) -> &'static str {
        match self {
            TurnStatus::Completed => "completed",
            TurnStatus::MaxTurns => "max_turns",
            TurnStatus::Cancelled => "cancelled",
            TurnStatus::Refused => "refused",
        }
    }
}

/// The result of one user turn.
#[derive(Debug, Clone)]
pub struct TurnOutcome {
    /// The reply to show (for `MaxTurns` and `Cancelled`, a notice saying so).
    pub reply: String,
    /// How the turn ended.
    pub status: TurnStatus,
    /// Tokens used by all model calls of the turn.
    pub usage: Usage,
    /// `provider/model` that produced the last answer.
    pub model: String,
    /// Model calls made.
    pub model_calls: u32,
    /// Tool calls run.
    pub tool_calls: u32,
    /// Size of the last model call's prompt plus reply, in tokens (reported, else estimated).
    pub prompt_tokens: u64,
    /// The turn's correlation id (shared by its tool calls, sub-agents and log lines).
    pub correlation_id: String,
}

/// How an agent keeps its sessions inside the context window.
#[derive(Clone, Debug)]
pub struct CompactionSettings {
    /// Thresholds.
    pub policy: CompactionPolicy,
    /// `provider/model` that writes summaries.
    pub model: String,
    /// Where extracted memories go (none: summaries only).
    pub memories: Option<Memories>,
}

/// A background compaction's result, once it finishes.
type CompactionJob = tokio::task::JoinHandle<Option<(CompactionPlan, CompactionOutput)>>;

/// Why a turn failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The model could not be reached or answered unusably.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The session could not be read or written.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A tool failed beyond what the model could handle.
    #[error("can't finish the turn: {0}")]
    Tool(String),
    /// The session's context has no usable workspace.
    #[error("{0}")]
    Workspace(String),
}

/// An agent: a model, tools, a session store and the workspace it reads its prompt from.
pub struct Agent {
    provider: Arc<dyn DynLlmProvider>,
    tools: ToolRegistry,
    store: Arc<dyn DynSessionStore>,
    workspace: Arc<dyn WorkspaceFiles>,
    clock: Arc<dyn Clock>,
    settings: AgentSettings,
    compaction: Option<CompactionSettings>,
    sections: Option<Arc<dyn PromptSections>>,
    profile: PromptProfile,
    sub_agents: Option<Box<dyn DynSubAgents>>,
    leaks: LeakScanner,
    jobs: Mutex<HashMap<String, CompactionJob>>,
    /// Background work of the agent's own (compactions), waited for on shutdown.
    tasks: TaskTracker,
    /// Cancelled on shutdown: stops the background work and starts no more.
    shutdown: CancellationToken,
    context_workspaces: Option<Arc<dyn ContextWorkspaces>>,
    /// The people's policy: budgets, tool policy, approvals, usage and audit.
    people: Option<Arc<People>>,
    /// The configured hooks (executables), before the built-ins.
    configured_hooks: Vec<Arc<dyn Hook>>,
    /// Every hook in order: the configured ones, then the built-in redaction and audit
    /// trail. Rebuilt whenever one of its parts changes.
    hooks: Arc<HookBus>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Agent").field("settings", &self.settings).field("tools", &self.tools).finish()
    }
}

impl Agent {
    /// Wires an agent from its ports.
    pub fn new(
        provider: Arc<dyn DynLlmProvider>,
        tools: ToolRegistry,
        store: Arc<dyn DynSessionStore>,
        workspace: Arc<dyn WorkspaceFiles>,
        clock: Arc<dyn Clock>,
        settings: AgentSettings,
    ) -> Self {
        Self {
            provider,
            tools,
            store,
            workspace,
            clock,
            settings,
            compaction: None,
            sections: None,
            profile: PromptProfile::default(),
            sub_agents: None,
            leaks: LeakScanner::default(),
            jobs: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            context_workspaces: None,
            people: None,
            configured_hooks: Vec::new(),
            hooks: Arc::new(HookBus::default()),
        }
        .with_built_in_hooks()
    }

    /// Puts the hook bus together again from the configured hooks, the redaction of the
    /// agent's leak scanner and the people's audit trail.
    fn with_built_in_hooks(mut self) -> Self {
        let mut hooks = self.configured_hooks.clone();
        hooks.push(Arc::new(redaction::RedactReplies::new(self.leaks.clone())));
        if let Some(people) = &self.people {
            hooks.push(Arc::new(crate::people::AuditTrail::new(people.clone())));
        }
        self.hooks = Arc::new(HookBus::new(hooks));
        self
    }

    /// Puts every turn under the people's policy: the actor's budget is checked before
    /// it runs, their role decides which tools the model sees and which calls run, wait
    /// for an admin or are refused, and every model call and tool call is accounted.
    pub fn with_people(mut self, people: Arc<People>) -> Self {
        self.people = Some(people);
        self.with_built_in_hooks()
    }

    /// Runs `hooks` (in order, before the built-in ones) on the events of every turn:
    /// messages received, turns started and finished, tool calls, replies, sessions
    /// created, and the runs of the jobs this agent answers.
    pub fn with_hooks(mut self, hooks: Vec<Arc<dyn Hook>>) -> Self {
        self.configured_hooks = hooks;
        self.with_built_in_hooks()
    }

    /// The hook bus every turn of this agent goes through.
    pub fn hooks(&self) -> &Arc<HookBus> {
        &self.hooks
    }

    /// The people's policy, if the agent runs under one.
    pub fn people(&self) -> Option<&Arc<People>> {
        self.people.as_ref()
    }

    /// Turns on compaction.
    pub fn with_compaction(mut self, compaction: CompactionSettings) -> Self {
        self.compaction = Some(compaction);
        self
    }

    /// Scans tool output with this scanner (which knows the configured secrets) instead of
    /// the default one (secret shapes only).
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> Self {
        self.leaks = leaks;
        self.with_built_in_hooks()
    }

    /// The scanner that knows the configured secrets (exports pass it too).
    pub fn leak_scanner(&self) -> &LeakScanner {
        &self.leaks
    }

    /// Adds per-context prompt sections (memory.md, bulletin).
    pub fn with_sections(mut self, sections: Arc<dyn PromptSections>) -> Self {
        self.sections = Some(sections);
        self
    }

    /// Builds the system prompt from `profile` instead of the assistant's default.
    pub fn with_prompt_profile(mut self, profile: PromptProfile) -> Self {
        self.profile = profile;
        self
    }

    /// Lets the agent hand work to sub-agents: each turn first records the results of
    /// background workers that finished since, and the prompt lists this session's workers.
    pub fn with_sub_agents(mut self, sub_agents: impl SubAgents + 'static) -> Self {
        self.sub_agents = Some(Box::new(sub_agents));
        self
    }

    /// The sub-agents attached with [`Agent::with_sub_agents`], if any.
    pub fn sub_agents(&self) -> Option<&dyn DynSubAgents> {
        self.sub_agents.as_deref()
    }

    /// Stops the agent's background work (a compaction summarizing, whose result is then
    /// dropped) and waits for it to end. Turns run afterwards start none.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        self.tasks.close();
        self.tasks.wait().await;
        self.hooks.close().await;
    }

    /// The workspace the agent reads its prompt files from.
    pub fn workspace(&self) -> &Arc<dyn WorkspaceFiles> {
        &self.workspace
    }

    /// The session store the agent records into.
    pub fn store(&self) -> &Arc<dyn DynSessionStore> {
        &self.store
    }

    /// The agent's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The agent's settings.
    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// The agent's tools.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Tool specs as sent to the model.
    pub fn tool_specs(&self) -> Arc<[ToolSpec]> {
        self.tools.specs()
    }

    /// The system prompt as it would be sent now.
    pub fn system_prompt(&self, first_run: bool, sections: &[PromptSection]) -> context::SystemPrompt {
        self.system_prompt_from(&PromptFiles::of_workspace(self.workspace.as_ref()), None, first_run, sections)
    }

    /// The system prompt from `workspace`'s files; `directory` is the workspace the
    /// prompt names when it is not the agent's own (a person's or a group's).
    fn system_prompt_from(
        &self,
        workspace: &dyn WorkspaceFiles,
        directory: Option<&std::path::Path>,
        first_run: bool,
        sections: &[PromptSection],
    ) -> context::SystemPrompt {
        let mut runtime = self.settings.runtime.clone();
        runtime.model = self.settings.model.clone();
        if let Some(directory) = directory {
            runtime.workspace = directory.display().to_string();
        }
        context::assemble_for(&self.profile, workspace, &runtime, first_run, sections)
    }

    /// Gives user and group contexts workspaces of their own (the owner's stays the
    /// agent's workspace), and their prompts the `USER.md` or `GROUP.md` kept beside it.
    pub fn with_context_workspaces(mut self, workspaces: Arc<dyn ContextWorkspaces>) -> Self {
        self.context_workspaces = Some(workspaces);
        self
    }

    /// The workspace of `context`: its own when it has one, else the agent's.
    fn workspace_of(&self, context: &str) -> Result<ContextWorkspace, AgentError> {
        let own = match &self.context_workspaces {
            Some(workspaces) => workspaces
                .workspace(context)
                .map_err(|reason| AgentError::Workspace(format!("can't open the workspace of {context}: {reason}")))?,
            None => None,
        };
        Ok(own.unwrap_or_else(|| ContextWorkspace {
            path: self.settings.workspace.clone(),
            files: self.workspace.clone(),
            profile: None,
        }))
    }

    /// The per-context sections of the prompt.
    pub async fn prompt_sections(&self, context: &str) -> Vec<PromptSection> {
        match &self.sections {
            Some(sections) => sections.sections(context).await,
            None => Vec::new(),
        }
    }

    /// Loads a session, or prepares a new one (written on its first turn).
    /// Returns the session and warnings about unreadable lines.
    pub async fn open_session(&self, key: &str) -> Result<(Session, Vec<String>), AgentError> {
        self.open_session_in(key, &self.settings.context).await
    }

    /// Like [`Agent::open_session`], a new session belonging to `context`.
    pub async fn open_session_in(&self, key: &str, context: &str) -> Result<(Session, Vec<String>), AgentError> {
        match self.store.load_boxed(key).await? {
            Some(loaded) => {
                let warnings = loaded.warnings.clone();
                let mut session = Session::from_loaded(loaded);
                session.release_compacted();
                Ok((session, warnings))
            }
            None => Ok((
                Session::new(SessionHeader {
                    kind: HeaderTag::Header,
                    version: SESSION_FORMAT_VERSION,
                    id: ids::session_id(),
                    key: key.to_owned(),
                    context: context.to_owned(),
                    created: self.now(),
                }),
                Vec::new(),
            )),
        }
    }

    fn now(&self) -> String {
        rfc3339(self.clock.now())
    }

    pub(crate) async fn record(
        &self,
        session: &mut Session,
        bodies: Vec<EntryBody>,
        durability: Durability,
    ) -> Result<(), StoreError> {
        if bodies.is_empty() {
            return Ok(());
        }
        if !session.is_persisted() {
            self.store.create_boxed(session.header()).await?;
            session.mark_persisted();
        }
        let timestamp = self.now();
        let entries: Vec<SessionEntry> = bodies.into_iter().map(|body| session.push(body, timestamp.clone())).collect();
        self.store.append_boxed(session.key(), &entries, durability).await
    }

    /// Runs one user turn to its end. Cancelling `cancel` stops it at the next await
    /// point; what was produced so far is recorded as interrupted. A finished background
    /// compaction is applied first; afterwards the session's size is checked and a new
    /// compaction started (or, past the emergency threshold, the oldest turns cut).
    pub async fn run_turn(
        &self,
        session: &mut Session,
        input: &str,
        events: &dyn AgentEvents,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, AgentError> {
        self.run_turn_correlated(session, input.into(), events, cancel, &ids::correlation_id()).await
    }

    /// [`Agent::run_turn`] under a correlation id chosen by the caller (one per inbound
    /// message): it reaches every tool call, every sub-agent and every log line of the turn.
    pub async fn run_turn_correlated(
        &self,
        session: &mut Session,
        input: TurnInput<'_>,
        events: &dyn AgentEvents,
        cancel: &CancellationToken,
        correlation_id: &str,
    ) -> Result<TurnOutcome, AgentError> {
        let span = tracing::info_span!("turn", correlation_id, session = %session.key());
        async {
            self.apply_finished_compaction(session, events, false).await?;
            if let Some(sub_agents) = &self.sub_agents {
                sub_agents.record_finished_boxed(self, session).await?;
            }
            let user = match (input.actor, &self.people) {
                (Some(actor), _) => actor.user.clone(),
                (None, Some(people)) => people.actor_for_context(&session.header().context).user,
                (None, None) => None,
            };
            let result = self.run_turn_inner(session, input, events, cancel, correlation_id).await;
            if self.hooks.wants(crate::hooks::HookEvent::TurnFinished, "") {
                let finished = crate::hooks::HookInput {
                    user,
                    ..crate::hooks::HookInput::new(
                        crate::hooks::HookEvent::TurnFinished,
                        session.key(),
                        &session.header().context,
                    )
                };
                let finished = match &result {
                    Ok(outcome) => finished
                        .with("status", outcome.status.name())
                        .with("model", outcome.model.clone())
                        .with("model_calls", outcome.model_calls)
                        .with("tool_calls", outcome.tool_calls)
                        .with("reply_chars", outcome.reply.chars().count()),
                    Err(error) => {
                        finished.with("status", "failed").with("error", self.leaks.redact(&error.to_string()).0)
                    }
                };
                self.hooks.observe(finished).await;
            }
            let outcome = result?;
            if outcome.status != TurnStatus::Cancelled {
                self.check_pressure(session, outcome.prompt_tokens, events).await?;
            }
            Ok(outcome)
        }
        .instrument(span)
        .await
    }

    /// Waits for this session's background compaction, if one runs, and applies it.
    pub async fn settle(&self, session: &mut Session, events: &dyn AgentEvents) -> Result<(), AgentError> {
        self.apply_finished_compaction(session, events, true).await
    }
}

/// What the person sent for one turn: the text and any images with it, and who they are.
#[derive(Debug, Clone, Copy)]
pub struct TurnInput<'a> {
    /// The message.
    pub text: &'a str,
    /// Images sent with it (shown to vision-capable models).
    pub images: &'a [ImageRef],
    /// Who the turn acts for, as the front end established it; `None`: whoever the
    /// session's context belongs to (see [`People::actor_for_context`]).
    pub actor: Option<&'a Actor>,
}

impl<'a> From<&'a str> for TurnInput<'a> {
    fn from(text: &'a str) -> Self {
        Self { text, images: &[], actor: None }
    }
}

/// Characters of a message list, for size reports.
pub fn history_chars(messages: &[ChatMessage]) -> usize {
    messages.iter().map(ChatMessage::char_len).sum()
}

/// Token estimate of a request's messages.
pub fn estimate_message_tokens(messages: &[ChatMessage]) -> usize {
    text::estimate_tokens(history_chars(messages))
}

#[cfg(test)]
mod tests;
