//! The [`Transport`] over a running gateway's OpenClaw WebSocket protocol: requests as
//! `req` frames, their `res` frames and the `agent`/`chat` events of the watched session
//! as [`Event`]s. The socket (connecting, TLS, the `connect` handshake) is the binary's,
//! behind [`FrameSocket`].

use std::collections::HashMap;
use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::transport::{Event, EventSink, HistoryMessage, Mode, Request, Role, SessionSummary, Transport, Worker};

/// How often the sub-agents of the session are asked for while a turn runs.
const WORKERS_EVERY: Duration = Duration::from_secs(2);

/// Why a frame could not be carried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SocketError {
    /// The gateway closed the connection or it broke; the client can't go on.
    #[error("can't talk to the gateway: {0}")]
    Closed(String),
}

/// An open, authenticated connection to the gateway carrying JSON frames.
pub trait FrameSocket: Send + 'static {
    /// Sends one frame.
    fn send(&mut self, frame: Value) -> impl Future<Output = Result<(), SocketError>> + Send;
    /// The next frame; cancel-safe (it is raced against the client's requests).
    fn receive(&mut self) -> impl Future<Output = Result<Value, SocketError>> + Send;
}

/// What a request in flight was, to read its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    Send,
    Abort,
    History(String),
    Reset(String),
    Sessions,
    Models,
    Status,
    /// The first `status`, for the model in use.
    Ready,
    Workers,
    /// `/tree`, `/fork`, `/export` (with the file to export to).
    Extension {
        command: String,
        path: Option<String>,
    },
}

/// The gateway transport.
#[derive(Debug)]
pub struct GatewayTransport<S> {
    socket: S,
    /// Methods the gateway offers (from `hello-ok`).
    methods: Vec<String>,
    /// The session whose events are shown.
    session: String,
    model: String,
    pending: HashMap<String, Pending>,
    calls: u64,
    /// A turn is running: sub-agents are polled.
    running: bool,
}

impl<S: FrameSocket> GatewayTransport<S> {
    /// A transport over `socket`, whose gateway offers `methods`, showing `session`.
    pub fn new(socket: S, methods: Vec<String>, session: &str) -> Self {
        GatewayTransport {
            socket,
            methods,
            session: session.to_owned(),
            model: String::new(),
            pending: HashMap::new(),
            calls: 0,
            running: false,
        }
    }

    async fn call(&mut self, method: &str, params: Value, pending: Pending) -> Result<(), SocketError> {
        self.calls += 1;
        let id = format!("tui-{}", self.calls);
        self.pending.insert(id.clone(), pending);
        self.socket.send(json!({"type": "req", "id": id, "method": method, "params": params})).await
    }

    async fn request(&mut self, request: Request, events: &EventSink) -> Result<(), SocketError> {
        match request {
            Request::Send { session, message } => {
                self.session = session.clone();
                self.running = true;
                self.call("chat.send", json!({"sessionKey": session, "message": message}), Pending::Send).await
            }
            Request::Abort { session } => self.call("chat.abort", json!({"sessionKey": session}), Pending::Abort).await,
            Request::History { session } => {
                self.session = session.clone();
                let params = json!({"sessionKey": session, "limit": 1000});
                self.call("chat.history", params, Pending::History(session)).await
            }
            Request::Reset { session } => {
                self.session = session.clone();
                self.call("sessions.reset", json!({"sessionKey": session}), Pending::Reset(session)).await
            }
            Request::Sessions => self.call("sessions.list", json!({}), Pending::Sessions).await,
            Request::Models => self.call("models.list", json!({}), Pending::Models).await,
            Request::Status => self.call("status", json!({}), Pending::Status).await,
            Request::Workers { session } => {
                self.call("workers.list", json!({"sessionKey": session}), Pending::Workers).await
            }
            Request::SetModel { .. } => {
                // `chat.send` takes no model override; the gateway's model is its config's.
                events.send(Event::Unsupported { what: "switching the model over the gateway".into() });
                Ok(())
            }
            Request::Extension { command, session, argument } => {
                let method = match command.as_str() {
                    "approve" | "deny" => format!("approvals.{command}"),
                    _ => format!("sessions.{command}"),
                };
                if !self.methods.contains(&method) {
                    events.send(Event::Unsupported { what: format!("/{command} (this gateway has no {method})") });
                    return Ok(());
                }
                let mut words = argument.split_whitespace();
                let params = match command.as_str() {
                    "fork" => {
                        let Some(entry) = words.next() else {
                            events.send(Event::Error {
                                message: "can't fork: name an entry, /fork ENTRY_ID [NEW_KEY] (/tree lists them)"
                                    .into(),
                            });
                            return Ok(());
                        };
                        let mut params = json!({"key": session, "entryId": entry});
                        if let Some(new_key) = words.next() {
                            params["as"] = json!(new_key);
                        }
                        params
                    }
                    "export" => json!({"key": session, "format": words.next().unwrap_or("md"), "active": true}),
                    "approve" => json!({"id": argument}),
                    "deny" => {
                        let (id, reason) = argument.split_once(char::is_whitespace).unwrap_or((&argument, ""));
                        let reason = reason.trim();
                        if reason.is_empty() { json!({"id": id}) } else { json!({"id": id, "reason": reason}) }
                    }
                    _ => json!({"key": session}),
                };
                let path = words.next().map(str::to_owned);
                self.call(&method, params, Pending::Extension { command, path }).await
            }
        }
    }

    /// Reads a `res` frame.
    fn answer(&mut self, frame: &Value, events: &EventSink) {
        let Some(pending) = frame["id"].as_str().and_then(|id| self.pending.remove(id)) else { return };
        if frame["ok"] != true {
            let reason = frame["error"]["message"].as_str().unwrap_or("refused");
            if pending == Pending::Workers {
                // Without delegation there are no sub-agents to show.
                return;
            }
            if pending == Pending::Send {
                self.running = false;
                events.send(Event::Failed { error: format!("can't send the message: {reason}") });
                return;
            }
            events.send(Event::Error { message: format!("can't {}: {reason}", action(&pending)) });
            return;
        }
        let payload = &frame["payload"];
        match pending {
            Pending::Send | Pending::Abort => {}
            Pending::Ready => {
                self.model = text(&payload["model"]);
                events.send(Event::Ready { mode: Mode::Gateway, model: self.model.clone(), context_window: None });
            }
            Pending::History(session) => {
                let messages = payload["messages"].as_array().map(Vec::as_slice).unwrap_or_default();
                let messages = messages.iter().filter_map(history_message).collect();
                events.send(Event::History { session, messages });
            }
            Pending::Reset(session) => events.send(Event::History { session, messages: Vec::new() }),
            Pending::Sessions => {
                let sessions = payload["sessions"].as_array().map(Vec::as_slice).unwrap_or_default();
                events.send(Event::Sessions(sessions.iter().map(session_summary).collect()));
            }
            Pending::Models => {
                let models = payload["models"].as_array().map(Vec::as_slice).unwrap_or_default();
                let models = models.iter().map(|model| text(&model["id"])).collect();
                events.send(Event::Models { models, current: self.model.clone() });
            }
            Pending::Status => events.send(Event::Status(status_lines(payload))),
            Pending::Workers => {
                let workers = payload["workers"].as_array().map(Vec::as_slice).unwrap_or_default();
                let running = workers.iter().map(worker).filter(|worker| !is_terminal(&worker.state)).collect();
                events.send(Event::Workers(running));
            }
            Pending::Extension { command, path } => events.send(extension(&command, path, payload)),
        }
    }

    /// Reads an `event` frame of the watched session.
    fn event(&mut self, frame: &Value, events: &EventSink) {
        let payload = &frame["payload"];
        if payload["sessionKey"].as_str().is_some_and(|key| key != self.session) {
            return;
        }
        let data = &payload["data"];
        match (frame["event"].as_str(), payload["stream"].as_str()) {
            (Some("agent"), Some("assistant")) => {
                if data["replace"] == true {
                    events.send(Event::StreamReset);
                } else if let Some(delta) = data["delta"].as_str().filter(|delta| !delta.is_empty()) {
                    events.send(Event::Delta { text: delta.to_owned() });
                }
            }
            (Some("agent"), Some("tool")) => match data["phase"].as_str() {
                Some("start") => {
                    let arguments = match &data["args"] {
                        Value::String(arguments) => arguments.clone(),
                        other => other.to_string(),
                    };
                    events.send(Event::ToolStarted {
                        id: text(&data["toolCallId"]),
                        name: text(&data["name"]),
                        arguments,
                    });
                }
                Some("result") => events.send(Event::ToolFinished {
                    id: text(&data["toolCallId"]),
                    is_error: data["isError"] == true,
                    duration_ms: data["durationMs"].as_u64().unwrap_or_default(),
                    result: data["result"].as_str().map(str::to_owned),
                }),
                _ => {}
            },
            (Some("agent"), Some("usage")) => events.send(Event::Usage {
                model: text(&data["model"]),
                input_tokens: data["inputTokens"].as_u64().unwrap_or_default(),
                output_tokens: data["outputTokens"].as_u64().unwrap_or_default(),
                cost: data["cost"].as_f64(),
            }),
            (Some("agent"), Some("notice")) => events.send(Event::Notice { message: text(&data["message"]) }),
            (Some("agent"), Some("lifecycle")) if data["phase"] == "start" => self.running = true,
            (Some("chat"), _) => self.chat(payload, events),
            _ => {}
        }
    }

    fn chat(&mut self, payload: &Value, events: &EventSink) {
        let reply = text(&payload["message"]["content"][0]["text"]);
        match payload["state"].as_str() {
            Some("final") if payload["background"].is_object() || payload["bus"].is_object() => {
                events.send(Event::Background { text: reply });
            }
            Some("final") => {
                self.running = false;
                events.send(Event::Finished { reply });
            }
            Some("aborted") => {
                self.running = false;
                events.send(Event::Aborted);
            }
            Some("error") => {
                self.running = false;
                events.send(Event::Failed { error: text(&payload["errorMessage"]) });
                events.send(Event::Workers(Vec::new()));
            }
            _ => {}
        }
    }

    async fn serve(
        &mut self,
        mut requests: mpsc::UnboundedReceiver<Request>,
        events: &EventSink,
        cancel: &CancellationToken,
    ) -> Result<(), SocketError> {
        self.call("status", json!({}), Pending::Ready).await?;
        let mut workers = tokio::time::interval(WORKERS_EVERY);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                request = requests.recv() => match request {
                    Some(request) => self.request(request, events).await?,
                    None => return Ok(()),
                },
                frame = self.socket.receive() => {
                    let frame = frame?;
                    match frame["type"].as_str() {
                        Some("res") => self.answer(&frame, events),
                        Some("event") => self.event(&frame, events),
                        _ => {}
                    }
                }
                _ = workers.tick() => {
                    if self.running && self.methods.iter().any(|method| method == "workers.list") {
                        let session = self.session.clone();
                        self.call("workers.list", json!({"sessionKey": session}), Pending::Workers).await?;
                    }
                }
            }
        }
    }
}

impl<S: FrameSocket> Transport for GatewayTransport<S> {
    async fn run(mut self, requests: mpsc::UnboundedReceiver<Request>, events: EventSink, cancel: CancellationToken) {
        if let Err(error) = self.serve(requests, &events, &cancel).await {
            events.send(Event::Closed { reason: error.to_string() });
        }
    }
}

/// What a pending request did, for "can't <action>".
fn action(pending: &Pending) -> String {
    match pending {
        Pending::Send => "send the message".into(),
        Pending::Abort => "stop the turn".into(),
        Pending::History(session) => format!("load session {session}"),
        Pending::Reset(session) => format!("start a new conversation in {session}"),
        Pending::Sessions => "list the sessions".into(),
        Pending::Models => "list the models".into(),
        Pending::Status | Pending::Ready => "read the status".into(),
        Pending::Workers => "list the sub-agents".into(),
        Pending::Extension { command, .. } => format!("run /{command}"),
    }
}

/// What `/tree`, `/fork` or `/export` answered, for the client.
fn extension(command: &str, path: Option<String>, payload: &Value) -> Event {
    match command {
        "tree" => {
            let nodes = payload["nodes"].as_array().map(Vec::as_slice).unwrap_or_default();
            let mut lines = vec![format!("tree of {} (* active branch, > leaf):", text(&payload["key"]))];
            lines.extend(nodes.iter().map(|node| {
                let mark = if node["leaf"] == true {
                    ">"
                } else if node["active"] == true {
                    "*"
                } else {
                    " "
                };
                let who = node["role"].as_str().or(node["kind"].as_str()).unwrap_or_default();
                let depth = node["depth"].as_u64().unwrap_or(0) as usize;
                format!("{}{mark} {} {who}: {}", "  ".repeat(depth), text(&node["id"]), text(&node["text"]))
            }));
            Event::Output { lines }
        }
        "fork" => Event::Switched { session: text(&payload["key"]) },
        "approve" | "deny" => {
            let approval = &payload["approval"];
            Event::Output {
                lines: vec![format!(
                    "{} `{}`: {}",
                    text(&approval["id"]),
                    text(&approval["tool"]),
                    text(&approval["status"])
                )],
            }
        }
        "export" => {
            let format = text(&payload["format"]);
            let key = text(&payload["key"]);
            let path = path.unwrap_or_else(|| {
                let name: String =
                    key.chars().map(|character| if character.is_alphanumeric() { character } else { '-' }).collect();
                format!("{name}.{format}")
            });
            match std::fs::write(&path, text(&payload["text"])) {
                Ok(()) => Event::Output {
                    lines: vec![format!(
                        "exported {key} to {path} ({} secrets redacted)",
                        payload["redactions"].as_u64().unwrap_or(0)
                    )],
                },
                Err(error) => Event::Error { message: format!("can't write {path}: {error}") },
            }
        }
        _ => Event::Output { lines: vec![payload.to_string()] },
    }
}

fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}

fn is_terminal(state: &str) -> bool {
    matches!(state, "completed" | "failed" | "cancelled" | "timed_out" | "done")
}

fn history_message(message: &Value) -> Option<HistoryMessage> {
    let role = match message["role"].as_str()? {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        _ => return None,
    };
    let parts = message["content"].as_array()?;
    let text: Vec<&str> = parts.iter().filter_map(|part| part["text"].as_str()).collect();
    Some(HistoryMessage { role, text: text.join("\n") })
}

fn session_summary(session: &Value) -> SessionSummary {
    SessionSummary {
        key: text(&session["key"]),
        title: text(&session["title"]),
        messages: session["messages"].as_u64().unwrap_or_default(),
        updated: match &session["updatedAt"] {
            Value::String(updated) => updated.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        },
    }
}

fn worker(worker: &Value) -> Worker {
    Worker {
        id: text(&worker["id"]),
        role: text(&worker["role"]),
        state: text(&worker["state"]),
        status: text(&worker["status"]),
        elapsed_ms: worker["elapsedMs"].as_u64().unwrap_or_default(),
    }
}

/// `status` as a few lines.
fn status_lines(status: &Value) -> Vec<String> {
    let mut lines = vec![
        format!(
            "squidbot {} (gateway, up {} s)",
            text(&status["version"]),
            status["uptimeMs"].as_u64().unwrap_or(0) / 1000
        ),
        format!("model: {}", text(&status["model"])),
        format!(
            "usage: {} turns, {} input tokens, {} output tokens",
            status["usage"]["turns"].as_u64().unwrap_or(0),
            status["usage"]["inputTokens"].as_u64().unwrap_or(0),
            status["usage"]["outputTokens"].as_u64().unwrap_or(0)
        ),
        format!(
            "sessions open: {}, runs: {}, connections: {}",
            status["sessionsOpen"].as_u64().unwrap_or(0),
            status["activeRuns"].as_u64().unwrap_or(0),
            status["wsConnections"].as_u64().unwrap_or(0)
        ),
    ];
    for channel in status["channelSummary"].as_array().map(Vec::as_slice).unwrap_or_default() {
        lines.push(format!("channel {}", channel.as_str().unwrap_or_default()));
    }
    lines
}
