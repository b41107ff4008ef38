//! What the client asks of an assistant and what it hears back, as plain data, and the
//! [`Transport`] port that carries them: the gateway over its WebSocket protocol
//! ([`crate::gateway`]) or an agent in this process (wired by the binary).

use std::future::Future;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Where the assistant runs, as the status line says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A running gateway, reached over its WebSocket protocol: the client sees what the
    /// channels and jobs do in the same session.
    Gateway,
    /// An agent in this process (no gateway answered).
    Local,
}

impl Mode {
    /// `gateway` or `local`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Gateway => "gateway",
            Mode::Local => "local",
        }
    }
}

/// Something the client asks the assistant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Start a turn in `session` with `message`.
    Send {
        /// The session key.
        session: String,
        /// What the user wrote.
        message: String,
    },
    /// Stop the running turn of `session`.
    Abort {
        /// The session key.
        session: String,
    },
    /// The messages of `session`'s active branch ([`Event::History`]).
    History {
        /// The session key.
        session: String,
    },
    /// Start a fresh conversation in `session` (the old one stays in the session file).
    Reset {
        /// The session key.
        session: String,
    },
    /// The sessions there are ([`Event::Sessions`]).
    Sessions,
    /// The models there are ([`Event::Models`]).
    Models,
    /// Use `model` from now on, where the transport can.
    SetModel {
        /// `provider/model`.
        model: String,
    },
    /// The assistant's status ([`Event::Status`]).
    Status,
    /// The sub-agents working for `session` ([`Event::Workers`]).
    Workers {
        /// The session key.
        session: String,
    },
    /// A session operation only some servers offer (`/fork`, `/tree`, `/export`, ...):
    /// the transport answers [`Event::Unsupported`] when it has no such method.
    Extension {
        /// The command as the user named it (`fork`, `tree`, `export`).
        command: String,
        /// The session key.
        session: String,
        /// What followed the command.
        argument: String,
    },
}

/// A message of a session's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryMessage {
    /// Who wrote it.
    pub role: Role,
    /// Its text (Markdown for the assistant).
    pub text: String,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person at the keyboard (or another client of the same session).
    User,
    /// The assistant.
    Assistant,
}

/// A session as the sessions picker lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// Its key.
    pub key: String,
    /// A preview of its first message.
    pub title: String,
    /// How many messages it holds.
    pub messages: u64,
    /// When it last changed, as the transport formats it.
    pub updated: String,
}

/// A running sub-agent, as the side panel shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Worker {
    /// Its id.
    pub id: String,
    /// Its role (`researcher`, `coder`, ...).
    pub role: String,
    /// Its state (`running`, `queued`, ...).
    pub state: String,
    /// What it reports doing.
    pub status: String,
    /// How long it has run, in milliseconds.
    pub elapsed_ms: u64,
}

/// Something the assistant tells the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The transport is ready.
    Ready {
        /// Where the assistant runs.
        mode: Mode,
        /// The model it answers with.
        model: String,
        /// The context window of that model in tokens, when known.
        context_window: Option<u64>,
    },
    /// A piece of the reply being streamed.
    Delta {
        /// The new text.
        text: String,
    },
    /// The text streamed so far is void (the provider retries or falls back).
    StreamReset,
    /// The model's thinking, streamed.
    Thinking {
        /// The new text.
        text: String,
    },
    /// A tool call started.
    ToolStarted {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments (JSON text).
        arguments: String,
    },
    /// A tool call finished.
    ToolFinished {
        /// The call's id.
        id: String,
        /// Whether it failed.
        is_error: bool,
        /// How long it ran, in milliseconds.
        duration_ms: u64,
        /// What it returned, when the transport knows.
        result: Option<String>,
    },
    /// A model call finished: its tokens.
    Usage {
        /// The model that answered.
        model: String,
        /// Prompt tokens (the context it used).
        input_tokens: u64,
        /// Tokens it wrote.
        output_tokens: u64,
        /// What the call cost, when known.
        cost: Option<f64>,
    },
    /// The turn ended with `reply`.
    Finished {
        /// The whole reply.
        reply: String,
    },
    /// The turn was stopped.
    Aborted,
    /// The turn failed.
    Failed {
        /// Why.
        error: String,
    },
    /// A message outside any turn (a background sub-agent's result, another agent's
    /// message over the bus).
    Background {
        /// The text.
        text: String,
    },
    /// Something the user should know that is not part of the reply.
    Notice {
        /// What to tell the user.
        message: String,
    },
    /// A session's messages, in order.
    History {
        /// The session.
        session: String,
        /// Its messages.
        messages: Vec<HistoryMessage>,
    },
    /// The client should show `session` afresh (a fork moved its leaf or made it).
    Switched {
        /// The session key.
        session: String,
    },
    /// The sessions there are.
    Sessions(Vec<SessionSummary>),
    /// The models there are, and the one in use.
    Models {
        /// `provider/model` ids.
        models: Vec<String>,
        /// The one answering now.
        current: String,
    },
    /// The model changed.
    ModelChanged {
        /// `provider/model`.
        model: String,
        /// Its context window in tokens, when known.
        context_window: Option<u64>,
    },
    /// The assistant's status as lines of text.
    Status(Vec<String>),
    /// The running sub-agents of the session.
    Workers(Vec<Worker>),
    /// The request can't be served by this transport.
    Unsupported {
        /// What was asked (`/fork`, `model switching over the gateway`).
        what: String,
    },
    /// The result of an extension command, as text.
    Output {
        /// Its lines.
        lines: Vec<String>,
    },
    /// A request failed.
    Error {
        /// Why, as "can't <action>: <reason>".
        message: String,
    },
    /// The transport ended (the gateway went away).
    Closed {
        /// Why.
        reason: String,
    },
}

/// Where a transport sends its events; dropped events mean the client has quit.
#[derive(Debug, Clone)]
pub struct EventSink {
    sender: mpsc::UnboundedSender<Event>,
}

impl EventSink {
    /// A sink and the receiving end the client reads.
    pub fn channel() -> (EventSink, mpsc::UnboundedReceiver<Event>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (EventSink { sender }, receiver)
    }

    /// Sends `event`; after the client quit nobody listens, which is not an error.
    pub fn send(&self, event: Event) {
        if self.sender.send(event).is_err() {
            tracing::debug!("the client has quit; an event is dropped");
        }
    }
}

/// Carries the client's requests to an assistant and its events back: runs until
/// `requests` closes or `cancel` fires.
pub trait Transport: Send + 'static {
    /// Serves requests and forwards events.
    fn run(
        self,
        requests: mpsc::UnboundedReceiver<Request>,
        events: EventSink,
        cancel: CancellationToken,
    ) -> impl Future<Output = ()> + Send;
}
