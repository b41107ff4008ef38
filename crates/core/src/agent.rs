//! The agent loop: one user turn = model calls and tool runs until a final answer,
//! `max_turns`, cancellation or an error, with every step appended to the session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use squidbot_types::message::{ToolCall, Usage};
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};
use squidbot_types::{ChatMessage, ImageRef, ToolSpec};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::clock::{Clock, rfc3339};
use crate::compactor::{CompactionOutput, CompactionPlan, CompactionPolicy};
use crate::context::{self, PromptProfile, PromptSection, PromptSections, RuntimeInfo};
use crate::delegation::{BackgroundResult, Delegator};
use crate::leaks::{LeakScanner, StreamRedactor};
use crate::memory::Memories;
use crate::provider::{Completion, CompletionRequest, DynLlmProvider, ProviderError, StreamSink};
use crate::session::Session;
use crate::store::{Durability, DynSessionStore, StoreError};
use crate::tool::{SharedFile, ToolContext, ToolError, ToolRegistry};
use crate::workspace::{ContextWorkspace, ContextWorkspaces, WorkspaceFiles};
use crate::{ids, text};

mod budget;
mod compaction;
mod tools;

pub use budget::fit_history;

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
    /// A tool call finished.
    fn tool_finished(&self, _call: &ToolCall, _is_error: bool) {}
    /// A tool handed the people of the conversation a file.
    fn file_shared(&self, _file: &SharedFile) {}
    /// Something the user should know that is not part of the reply.
    fn warning(&self, _message: &str) {}
    /// Background housekeeping the user may like to see (compaction).
    fn notice(&self, _message: &str) {}
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
    delegation: Option<Arc<Delegator>>,
    leaks: LeakScanner,
    jobs: Mutex<HashMap<String, CompactionJob>>,
    context_workspaces: Option<Arc<dyn ContextWorkspaces>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Agent").field("settings", &self.settings).field("tools", &self.tools).finish()
    }
}

/// Forwards streamed text to the channel, redacted, and keeps a copy for interrupted
/// turns. Redacting here, where the reply is produced, covers every reader of the events
/// (gateway clients, the web UI, channels) at once.
struct TurnSink<'a> {
    events: &'a dyn AgentEvents,
    state: Mutex<StreamState<'a>>,
}

/// What a [`TurnSink`] holds between deltas.
struct StreamState<'a> {
    /// The redacted text sent on so far.
    streamed: String,
    /// Holds back a tail that could still become a secret.
    redactor: StreamRedactor<'a>,
}

impl<'a> TurnSink<'a> {
    fn new(events: &'a dyn AgentEvents, leaks: &'a LeakScanner) -> Self {
        Self {
            events,
            state: Mutex::new(StreamState { streamed: String::new(), redactor: StreamRedactor::new(leaks) }),
        }
    }

    /// Ends one model response: sends on what the redactor still holds and returns the
    /// whole redacted text streamed for it.
    fn take(&self) -> String {
        let Ok(mut state) = self.state.lock() else { return String::new() };
        let rest = state.redactor.finish();
        if !rest.is_empty() {
            self.events.text_delta(&rest);
        }
        state.streamed.push_str(&rest);
        state.redactor.reset();
        std::mem::take(&mut state.streamed)
    }

    /// Forgets the response streamed so far without sending on what is held.
    fn discard(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.redactor.reset();
            state.streamed.clear();
        }
    }
}

impl StreamSink for TurnSink<'_> {
    fn text_delta(&self, text: &str) {
        let Ok(mut state) = self.state.lock() else { return };
        let safe = state.redactor.push(text);
        if !safe.is_empty() {
            state.streamed.push_str(&safe);
            self.events.text_delta(&safe);
        }
    }

    fn stream_reset(&self) {
        self.discard();
        self.events.stream_reset();
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
            delegation: None,
            leaks: LeakScanner::default(),
            jobs: Mutex::new(HashMap::new()),
            context_workspaces: None,
        }
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
        self
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

    /// Lets the agent hand work to sub-agents: each turn first takes in the results of
    /// background workers that finished since, and the prompt lists this session's workers.
    pub fn with_delegation(mut self, delegation: Arc<Delegator>) -> Self {
        self.delegation = Some(delegation);
        self
    }

    /// The sub-agents this agent hands work to, if any.
    pub fn delegation(&self) -> Option<&Arc<Delegator>> {
        self.delegation.as_ref()
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
        self.system_prompt_from(self.workspace.as_ref(), first_run, sections)
    }

    fn system_prompt_from(
        &self,
        workspace: &dyn WorkspaceFiles,
        first_run: bool,
        sections: &[PromptSection],
    ) -> context::SystemPrompt {
        let mut runtime = self.settings.runtime.clone();
        runtime.model = self.settings.model.clone();
        context::assemble_for(&self.profile, workspace, &runtime, first_run, sections)
    }

    /// Gives user and group contexts workspaces of their own (the owner's stays the
    /// agent's workspace).
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
                Ok((Session::from_loaded(loaded), warnings))
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

    /// Appends the results of background sub-agents of this session that finished since
    /// its last turn, each as a distinct `delegate` entry; returns them (in finishing order).
    pub async fn take_background_results(&self, session: &mut Session) -> Result<Vec<BackgroundResult>, AgentError> {
        let Some(delegation) = &self.delegation else { return Ok(Vec::new()) };
        let results = delegation.take_results(session.key());
        if results.is_empty() {
            return Ok(results);
        }
        let bodies = results.iter().map(BackgroundResult::entry).collect();
        if let Err(error) = self.record(session, bodies, Durability::Synced).await {
            // Not lost: they go back to the inbox for the next attempt.
            delegation.return_results(session.key(), results);
            return Err(error.into());
        }
        Ok(results)
    }

    fn now(&self) -> String {
        rfc3339(self.clock.now())
    }

    /// The model's reply with secrets redacted before it is stored or sent anywhere (the
    /// streamed deltas went through the same scanner on the way out).
    fn redact_reply(&self, mut completion: Completion, events: &dyn AgentEvents) -> Completion {
        let (content, findings) = self.leaks.redact(&completion.content);
        if !findings.is_empty() {
            let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
            tracing::warn!(kinds = ?kinds, model = %completion.model, "redacted secrets from the model's reply");
            events.warning(&format!(
                "Redacted {} secret(s) ({}) from the reply before it was sent or stored.",
                findings.len(),
                kinds.join(", ")
            ));
            completion.content = content;
        }
        completion
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
            self.take_background_results(session).await?;
            let outcome = self.run_turn_inner(session, input, events, cancel, correlation_id).await?;
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

    async fn run_turn_inner(
        &self,
        session: &mut Session,
        input: TurnInput<'_>,
        events: &dyn AgentEvents,
        cancel: &CancellationToken,
        correlation_id: &str,
    ) -> Result<TurnOutcome, AgentError> {
        let first_run = !session.is_persisted() && session.branch_is_empty();
        let mut opening = Vec::new();
        if session.current_model().as_deref() != Some(self.settings.model.as_str()) {
            opening.push(EntryBody::ModelChange {
                previous: session.current_model().unwrap_or_default(),
                new: self.settings.model.clone(),
            });
        }
        opening.push(EntryBody::Message {
            role: MessageRole::User,
            content: input.text.to_owned(),
            images: input.images.to_vec(),
            model: None,
            usage: None,
            interrupted: false,
        });
        // The model call comes next, not an answer: the reply's synced append below makes
        // the user's message durable with it.
        self.record(session, opening, Durability::Written).await?;

        let mut sections = self.prompt_sections(&session.header().context).await;
        if let Some(workers) = self.delegation.as_ref().and_then(|delegation| delegation.status_section(session.key()))
        {
            sections.push(workers);
        }
        let workspace = self.workspace_of(&session.header().context)?;
        let system = self.system_prompt_from(workspace.files.as_ref(), first_run, &sections).text;
        // Tools of run-time sources (MCP servers) are looked up, and their servers started,
        // only when a turn needs them; a stopped turn goes on with the fixed tools and ends
        // at the model call below.
        let turn_tools = tokio::select! {
            biased;
            () = cancel.cancelled() => self.tools.clone(),
            resolved = self.tools.resolve() => resolved,
        };
        let tool_specs = turn_tools.specs();
        let tool_specs_chars = turn_tools.specs_chars();
        let sink = TurnSink::new(events, &self.leaks);
        let mut outcome = TurnOutcome {
            reply: String::new(),
            status: TurnStatus::Completed,
            usage: Usage::default(),
            model: self.settings.model.clone(),
            model_calls: 0,
            tool_calls: 0,
            prompt_tokens: 0,
            correlation_id: correlation_id.to_owned(),
        };
        let mut warned_overflow = false;
        let mut overflow_retries = 0;
        let mut overflow_budget = usize::MAX;
        while outcome.model_calls < self.settings.max_turns {
            let reserve = self.settings.max_tokens as usize + system.len() / 4 + tool_specs_chars / 4;
            let budget = (self.settings.context_window as usize).saturating_sub(reserve).min(overflow_budget);
            let fitted = fit_history(session.history(), budget);
            if fitted.dropped > 0 && !warned_overflow {
                warned_overflow = true;
                events.warning(&format!(
                    "The conversation is too long for the model's context; the {} oldest messages were left out of this request (they stay in the session file).",
                    fitted.dropped
                ));
            }
            let request = CompletionRequest {
                model: self.settings.model.clone(),
                system: system.clone(),
                messages: fitted.messages,
                tools: tool_specs.clone(),
                max_tokens: self.settings.max_tokens,
                temperature: self.settings.temperature,
                stream: self.settings.stream,
            };
            outcome.model_calls += 1;
            let call_began = std::time::Instant::now();
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(ProviderError::Cancelled),
                result = self.provider.complete_boxed(&request, &sink) => result,
            };
            events.model_call(&ModelCallReport {
                model: result.as_ref().map_or_else(|_| request.model.clone(), |completion| completion.model.clone()),
                duration: call_began.elapsed(),
                usage: result.as_ref().map(|completion| completion.usage).unwrap_or_default(),
                ok: result.is_ok(),
            });
            let completion = match result {
                Ok(completion) => completion,
                Err(ProviderError::ContextOverflow { .. }) if overflow_retries < 3 => {
                    // The provider counts tokens differently from our estimate: halve what
                    // was sent and try again, at most three times.
                    overflow_retries += 1;
                    overflow_budget = estimate_message_tokens(&request.messages) / 2;
                    outcome.model_calls -= 1;
                    sink.discard();
                    continue;
                }
                Err(error) => {
                    let partial = sink.take();
                    self.record(session, vec![interrupted_reply(partial.clone())], Durability::Synced).await?;
                    if matches!(error, ProviderError::Cancelled) {
                        outcome.status = TurnStatus::Cancelled;
                        outcome.reply = partial;
                        return Ok(outcome);
                    }
                    return Err(error.into());
                }
            };
            sink.take();
            let completion = self.redact_reply(completion, events);
            outcome.usage.add(completion.usage);
            outcome.prompt_tokens = match completion.usage.total() {
                0 => (estimate_message_tokens(&request.messages) + system.len() / 4 + tool_specs_chars / 4) as u64,
                reported => reported,
            };
            outcome.model = completion.model.clone();
            let mut bodies = vec![EntryBody::Message {
                role: MessageRole::Assistant,
                content: completion.content.clone(),
                images: Vec::new(),
                model: Some(completion.model.clone()),
                usage: Some(completion.usage),
                interrupted: false,
            }];
            bodies.extend(completion.tool_calls.iter().map(|call| EntryBody::ToolCall {
                call_id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            }));
            // Synced before anyone acts on it: the reply is sent, the tools run.
            self.record(session, bodies, Durability::Synced).await?;
            if completion.tool_calls.is_empty() {
                outcome.reply = completion.content;
                return Ok(outcome);
            }

            let context = ToolContext {
                workspace: workspace.path.clone(),
                session_key: session.key().to_owned(),
                context: session.header().context.clone(),
                cancel: cancel.child_token(),
                correlation_id: correlation_id.to_owned(),
            };
            let results = tools::run_calls(&turn_tools, &completion.tool_calls, &context, events, &self.leaks).await;
            outcome.tool_calls += results.len() as u32;
            let mut fatal = None;
            let mut final_reply = None;
            let bodies = results
                .into_iter()
                .map(|(call, result)| {
                    let mut ends_turn = false;
                    let (content, is_error) = match result {
                        Ok(output) => {
                            ends_turn = output.ends_turn;
                            (output.content, false)
                        }
                        Err(ToolError::RespondToModel(message)) => (message, true),
                        Err(ToolError::Fatal(message)) => {
                            fatal.get_or_insert_with(|| message.clone());
                            (message, true)
                        }
                    };
                    let (content, findings) = self.leaks.redact(&content);
                    if !findings.is_empty() {
                        let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
                        tracing::warn!(tool = %call.name, kinds = ?kinds, "redacted secrets from tool output");
                        events.warning(&format!(
                            "Redacted {} secret(s) ({}) from the output of {} before the model saw it.",
                            findings.len(),
                            kinds.join(", "),
                            call.name
                        ));
                    }
                    if ends_turn {
                        final_reply.get_or_insert_with(|| content.clone());
                    }
                    EntryBody::ToolResult { call_id: call.id.clone(), name: call.name.clone(), content, is_error }
                })
                .collect();
            // Results the next model call goes on from are synced with its reply; a turn
            // ending here syncs them now.
            let durability = if fatal.is_some() || final_reply.is_some() || cancel.is_cancelled() {
                Durability::Synced
            } else {
                Durability::Written
            };
            self.record(session, bodies, durability).await?;
            if let Some(message) = fatal {
                return Err(AgentError::Tool(message));
            }
            if let Some(reply) = final_reply {
                outcome.reply = reply;
                return Ok(outcome);
            }
            if cancel.is_cancelled() {
                outcome.status = TurnStatus::Cancelled;
                return Ok(outcome);
            }
        }
        outcome.status = TurnStatus::MaxTurns;
        outcome.reply = format!(
            "I stopped after {} model calls without a final answer (the limit is max_turns = {}). Say \"continue\" and I will pick up where I left off.",
            outcome.model_calls, self.settings.max_turns
        );
        self.record(
            session,
            vec![EntryBody::Message {
                role: MessageRole::Assistant,
                content: outcome.reply.clone(),
                images: Vec::new(),
                model: None,
                usage: None,
                interrupted: true,
            }],
            Durability::Synced,
        )
        .await?;
        Ok(outcome)
    }
}

fn interrupted_reply(partial: String) -> EntryBody {
    EntryBody::Message {
        role: MessageRole::Assistant,
        content: partial,
        images: Vec::new(),
        model: None,
        usage: None,
        interrupted: true,
    }
}

/// What the person sent for one turn: the text and any images with it.
#[derive(Debug, Clone, Copy)]
pub struct TurnInput<'a> {
    /// The message.
    pub text: &'a str,
    /// Images sent with it (shown to vision-capable models).
    pub images: &'a [ImageRef],
}

impl<'a> From<&'a str> for TurnInput<'a> {
    fn from(text: &'a str) -> Self {
        Self { text, images: &[] }
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
