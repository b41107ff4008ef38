//! The TUI's in-process transport: the assistant built as `squidbot agent` builds it, its
//! turns' events turned into the client's [`Event`]s, sessions opened from the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use squidbot_core::agent::{Agent, AgentEvents, ModelCallReport, TurnStatus};
use squidbot_core::session::Session;
use squidbot_tui::{Event, EventSink, HistoryMessage, Mode, Request, Role, SessionSummary, Transport, Worker};
use squidbot_types::ToolCall;
use squidbot_types::session::{EntryBody, MessageRole};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::wiring::Environment;

mod commands;

/// How often the session's sub-agents are reported while a turn runs.
const WORKERS_EVERY: Duration = Duration::from_secs(1);

/// How long a background compaction may finish after the client quits.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The assistant in this process.
pub struct LocalTransport {
    environment: Environment,
    model: Option<String>,
}

impl LocalTransport {
    /// A transport that builds the assistant (with `model` instead of the configured one)
    /// when it starts, so the first screen does not wait for it.
    pub fn new(environment: Environment, model: Option<String>) -> Self {
        LocalTransport { environment, model }
    }
}

/// A turn's events for the client; tool durations measured here.
struct Bridge {
    sink: EventSink,
    started: Mutex<HashMap<String, Instant>>,
    /// How long each finished call ran, in milliseconds, by call id.
    durations: Mutex<HashMap<String, u64>>,
}

impl AgentEvents for Bridge {
    fn text_delta(&self, text: &str) {
        self.sink.send(Event::Delta { text: text.to_owned() });
    }

    fn stream_reset(&self) {
        self.sink.send(Event::StreamReset);
    }

    fn tool_started(&self, call: &ToolCall) {
        if let Ok(mut started) = self.started.lock() {
            started.insert(call.id.clone(), Instant::now());
        }
        self.sink.send(Event::ToolStarted {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        });
    }

    fn tool_finished(&self, call: &ToolCall, is_error: bool, output: &str) {
        let started = self.started.lock().ok().and_then(|mut started| started.remove(&call.id));
        let duration_ms = started.map_or(0, |started| started.elapsed().as_millis() as u64);
        if let Ok(mut durations) = self.durations.lock() {
            durations.insert(call.id.clone(), duration_ms);
        }
        self.sink.send(Event::ToolFinished {
            id: call.id.clone(),
            is_error,
            duration_ms,
            result: Some(output.to_owned()),
        });
    }

    fn file_shared(&self, file: &squidbot_core::tool::SharedFile) {
        self.sink.send(Event::Notice { message: format!("file: {} ({})", file.path.display(), file.mime) });
    }

    fn warning(&self, message: &str) {
        self.sink.send(Event::Notice { message: format!("warning: {message}") });
    }

    fn notice(&self, message: &str) {
        self.sink.send(Event::Notice { message: message.to_owned() });
    }

    fn model_call(&self, report: &ModelCallReport) {
        self.sink.send(Event::Usage {
            model: report.model.clone(),
            input_tokens: report.usage.input_tokens,
            output_tokens: report.usage.output_tokens,
            cost: None,
        });
    }
}

/// Background sub-agents' results shown the moment they end.
struct BackgroundSink(EventSink);

impl squidbot_core::delegation::BackgroundSink for BackgroundSink {
    fn background_finished(&self, result: &squidbot_core::delegation::BackgroundResult) {
        self.0.send(Event::Background { text: result.announcement() });
    }
}

/// The running assistant and the open session.
struct Local {
    environment: Environment,
    agent: Agent,
    session: Option<Session>,
    events: EventSink,
}

impl Transport for LocalTransport {
    async fn run(self, mut requests: mpsc::UnboundedReceiver<Request>, events: EventSink, cancel: CancellationToken) {
        let agent = match self.environment.ready_assistant(self.model.as_deref(), true, "cli") {
            Ok(agent) => agent,
            Err(error) => {
                events.send(Event::Closed { reason: format!("can't start the assistant: {error:#}") });
                return;
            }
        };
        if let Some(delegation) = agent.delegation() {
            delegation.set_sink(Arc::new(BackgroundSink(events.clone())));
        }
        let mut local = Local { environment: self.environment, agent, session: None, events };
        local.ready();
        loop {
            let request = tokio::select! {
                () = cancel.cancelled() => break,
                request = requests.recv() => match request {
                    Some(request) => request,
                    None => break,
                },
            };
            local.serve(request, &mut requests).await;
        }
        local.close().await;
    }
}

impl Local {
    fn ready(&self) {
        let settings = self.agent.settings();
        self.events.send(Event::Ready {
            mode: Mode::Local,
            model: settings.model.clone(),
            context_window: Some(u64::from(settings.context_window)),
        });
    }

    fn error(&self, message: String) {
        self.events.send(Event::Error { message });
    }

    /// The open session, opening `key` when another (or none) is open.
    async fn open(&mut self, key: &str) -> Option<&mut Session> {
        if self.session.as_ref().is_none_or(|session| session.key() != key) {
            match self.agent.open_session(key).await {
                Ok((session, warnings)) => {
                    for warning in warnings {
                        self.events.send(Event::Notice { message: format!("session {key}: {warning}") });
                    }
                    self.session = Some(session);
                }
                Err(error) => {
                    self.error(format!("can't open session {key}: {error}"));
                    return None;
                }
            }
        }
        self.session.as_mut()
    }

    async fn serve(&mut self, request: Request, requests: &mut mpsc::UnboundedReceiver<Request>) {
        match request {
            Request::Send { session, message } => self.turn(&session, &message, requests).await,
            Request::Abort { .. } => {}
            Request::History { session: key } => {
                let Some(session) = self.open(&key).await else { return };
                let messages = history(session);
                self.events.send(Event::History { session: key, messages });
            }
            Request::Reset { session: key } => {
                let Some(session) = self.open(&key).await else { return };
                session.start_new_branch();
                self.events.send(Event::History { session: key, messages: Vec::new() });
            }
            Request::Sessions => match self.agent.store().list_boxed().await {
                Ok(summaries) => {
                    let sessions = summaries
                        .into_iter()
                        .map(|summary| SessionSummary {
                            key: summary.key,
                            title: summary.preview,
                            messages: summary.message_count as u64,
                            updated: summary.updated,
                        })
                        .collect();
                    self.events.send(Event::Sessions(sessions));
                }
                Err(error) => self.error(format!("can't list the sessions: {error}")),
            },
            Request::Models => {
                let config = self.environment.config();
                let current = self.agent.settings().model.clone();
                let mut models = vec![current.clone()];
                models.push(config.llm.model.clone());
                models.extend(config.llm.fallbacks.iter().cloned());
                models.extend(config.agents.values().filter_map(|agent| agent.model.clone()));
                let mut seen = std::collections::HashSet::new();
                models.retain(|model| seen.insert(model.clone()));
                self.events.send(Event::Models { models, current });
            }
            Request::SetModel { model } => match self.environment.ready_assistant(Some(&model), true, "cli") {
                Ok(agent) => {
                    if let Some(delegation) = agent.delegation() {
                        delegation.set_sink(Arc::new(BackgroundSink(self.events.clone())));
                    }
                    let old = std::mem::replace(&mut self.agent, agent);
                    old.hooks().close().await;
                    let settings = self.agent.settings();
                    self.events.send(Event::ModelChanged {
                        model: settings.model.clone(),
                        context_window: Some(u64::from(settings.context_window)),
                    });
                }
                Err(error) => self.error(format!("can't switch to {model}: {error:#}")),
            },
            Request::Status => {
                let settings = self.agent.settings();
                let mut lines = vec![
                    format!("squidbot {} (local: the assistant runs in this process)", env!("CARGO_PKG_VERSION")),
                    format!("model: {} (context window {} tokens)", settings.model, settings.context_window),
                    format!("workspace: {}", settings.workspace.display()),
                ];
                if let Some(session) = &self.session {
                    lines.push(format!("session: {} ({} messages)", session.key(), session.history().len()));
                }
                self.events.send(Event::Status(lines));
            }
            Request::Workers { session } => self.workers(&session),
            Request::Extension { command, session, argument } => self.extension(&command, &session, &argument).await,
        }
    }

    fn workers(&self, key: &str) {
        if let Some(workers) = running_workers(&self.agent, key) {
            self.events.send(Event::Workers(workers));
        }
    }

    /// Runs one turn; Esc (an `Abort`) stops it, other requests wait for its end.
    async fn turn(&mut self, key: &str, message: &str, requests: &mut mpsc::UnboundedReceiver<Request>) {
        if self.open(key).await.is_none() {
            self.events.send(Event::Failed { error: format!("can't open session {key}") });
            return;
        }
        let Some(session) = self.session.as_mut() else { return };
        let bridge = Bridge {
            sink: self.events.clone(),
            started: Mutex::new(HashMap::new()),
            durations: Mutex::new(HashMap::new()),
        };
        let cancel = CancellationToken::new();
        let mut waiting = Vec::new();
        let first_entry = session.entries().len();
        let outcome = {
            let turn = self.agent.run_turn(session, message, &bridge, &cancel);
            tokio::pin!(turn);
            let mut poll = tokio::time::interval(WORKERS_EVERY);
            loop {
                tokio::select! {
                    outcome = &mut turn => break outcome,
                    request = requests.recv() => match request {
                        Some(Request::Abort { .. }) | None => cancel.cancel(),
                        Some(other) => waiting.push(other),
                    },
                    _ = poll.tick() => {
                        if let Some(workers) = running_workers(&self.agent, key) {
                            self.events.send(Event::Workers(workers));
                        }
                    }
                }
            }
        };
        if let Some(session) = &self.session {
            // The cards show what each tool returned, as the session recorded it.
            for entry in session.entries().iter().skip(first_entry) {
                if let EntryBody::ToolResult { call_id, content, is_error, .. } = &entry.body {
                    let duration_ms =
                        bridge.durations.lock().ok().and_then(|durations| durations.get(call_id).copied());
                    self.events.send(Event::ToolFinished {
                        id: call_id.clone(),
                        is_error: *is_error,
                        duration_ms: duration_ms.unwrap_or_default(),
                        result: Some(content.clone()),
                    });
                }
            }
        }
        match outcome {
            Ok(outcome) => match outcome.status {
                TurnStatus::Completed | TurnStatus::MaxTurns | TurnStatus::Refused => {
                    self.events.send(Event::Finished { reply: outcome.reply });
                }
                TurnStatus::Cancelled => self.events.send(Event::Aborted),
            },
            Err(error) => self.events.send(Event::Failed { error: error.to_string() }),
        }
        for request in waiting {
            Box::pin(self.serve(request, requests)).await;
        }
    }

    /// What the REPL does at exit: background work stops and is recorded, a compaction
    /// in flight finishes, hooks end.
    async fn close(mut self) {
        if let Some(delegation) = self.agent.delegation() {
            delegation.shutdown().await;
            if let Some(session) = self.session.as_mut()
                && let Err(error) = self.agent.take_background_results(session).await
            {
                tracing::warn!(%error, "can't record the background results");
            }
        }
        if let Some(session) = self.session.as_mut() {
            let events = squidbot_core::agent::SilentEvents;
            match tokio::time::timeout(SETTLE_TIMEOUT, self.agent.settle(session, &events)).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "can't apply the background compaction"),
                Err(_) => tracing::warn!("a background compaction did not finish; it runs again next time"),
            }
        }
        self.agent.hooks().close().await;
    }
}

/// The messages on the session's active branch.
fn history(session: &Session) -> Vec<HistoryMessage> {
    session
        .active_path()
        .iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::Message { role, content, .. } if !content.is_empty() => Some(HistoryMessage {
                role: match role {
                    MessageRole::User => Role::User,
                    MessageRole::Assistant => Role::Assistant,
                },
                text: content.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The sub-agents of session `key` still at work; `None` without delegation.
fn running_workers(agent: &Agent, key: &str) -> Option<Vec<Worker>> {
    let delegation = agent.delegation()?;
    let workers = delegation
        .pool()
        .owned_by(key)
        .into_iter()
        .filter(|worker| !worker.state.is_terminal())
        .map(|worker| Worker {
            id: worker.id,
            role: worker.role,
            state: worker.state.as_str().to_owned(),
            status: worker.status,
            elapsed_ms: worker.elapsed.as_millis() as u64,
        })
        .collect();
    Some(workers)
}
