//! Secrets kept out of what leaves the agent: the streamed reply (redacted as it streams),
//! then the one place every finished text is redacted (the reply, tool output, tool-call
//! arguments shown in events and stored in the session), with its log line and warning.

use std::sync::Mutex;

use super::AgentEvents;
use crate::BoxFuture;
use crate::hooks::{Hook, HookEvent, HookInput, HookVerdict};
use crate::leaks::{LeakScanner, StreamRedactor};
use crate::provider::StreamSink;
use crate::sync::lock;

/// Where a redacted text was headed: what the log line and the warning name.
#[derive(Debug, Clone, Copy)]
pub(super) enum Outbound<'a> {
    /// The reply of `model`, before it is stored or sent anywhere.
    Reply {
        /// `provider/model` that wrote it.
        model: &'a str,
    },
    /// The output of `tool`, before the model sees it.
    ToolOutput {
        /// The tool's name.
        tool: &'a str,
    },
    /// The arguments of a call of `tool`, as announced in its event (logged, not warned:
    /// the call itself runs with them).
    ToolArguments {
        /// The tool's name.
        tool: &'a str,
    },
    /// The arguments of a call of `tool`, as the session file keeps them (logged, not
    /// warned: the call itself runs with them).
    StoredArguments {
        /// The tool's name.
        tool: &'a str,
    },
}

/// `text` with the secrets `leaks` finds replaced; each redaction is logged and, for the
/// reply and tool output, told to the user.
pub(super) fn redact(leaks: &LeakScanner, text: String, outbound: Outbound<'_>, events: &dyn AgentEvents) -> String {
    let (redacted, findings) = leaks.redact(&text);
    if findings.is_empty() {
        return text;
    }
    let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
    match outbound {
        Outbound::Reply { model } => {
            tracing::warn!(kinds = ?kinds, model = %model, "redacted secrets from the model's reply");
            events.warning(&format!(
                "Redacted {} secret(s) ({}) from the reply before it was sent or stored.",
                findings.len(),
                kinds.join(", ")
            ));
        }
        Outbound::ToolOutput { tool } => {
            tracing::warn!(tool = %tool, kinds = ?kinds, "redacted secrets from tool output");
            events.warning(&format!(
                "Redacted {} secret(s) ({}) from the output of {} before the model saw it.",
                findings.len(),
                kinds.join(", "),
                tool
            ));
        }
        Outbound::ToolArguments { tool } => {
            tracing::warn!(tool = %tool, kinds = ?kinds, "redacted secrets from a tool call's arguments in its event");
        }
        Outbound::StoredArguments { tool } => {
            tracing::warn!(tool = %tool, kinds = ?kinds, "redacted secrets from a tool call's arguments in the session file");
        }
    }
    redacted
}

/// Forwards streamed text to the channel, redacted, and keeps a copy for interrupted
/// turns. Redacting here, where the reply is produced, covers every reader of the events
/// (gateway clients, the web UI, channels) at once.
pub(super) struct TurnSink<'a> {
    events: &'a dyn AgentEvents,
    state: Mutex<StreamState<'a>>,
    /// A configured hook decides on the reply first: nothing is sent on while streaming.
    holding: bool,
}

/// What a [`TurnSink`] holds between deltas.
struct StreamState<'a> {
    /// The redacted text sent on so far.
    streamed: String,
    /// Holds back a tail that could still become a secret.
    redactor: StreamRedactor<'a>,
}

impl<'a> TurnSink<'a> {
    pub(super) fn new(events: &'a dyn AgentEvents, leaks: &'a LeakScanner, holding: bool) -> Self {
        Self {
            events,
            state: Mutex::new(StreamState { streamed: String::new(), redactor: StreamRedactor::new(leaks) }),
            holding,
        }
    }

    /// Whether streamed text is held back for the hooks to decide on.
    pub(super) fn holding(&self) -> bool {
        self.holding
    }

    /// Ends one model response: sends on what the redactor still holds and returns the
    /// whole redacted text streamed for it.
    pub(super) fn take(&self) -> String {
        let mut state = lock(&self.state);
        let rest = state.redactor.finish();
        if !rest.is_empty() && !self.holding {
            self.events.text_delta(&rest);
        }
        state.streamed.push_str(&rest);
        state.redactor.reset();
        std::mem::take(&mut state.streamed)
    }

    /// Forgets the response streamed so far without sending on what is held.
    pub(super) fn discard(&self) {
        let mut state = lock(&self.state);
        state.redactor.reset();
        state.streamed.clear();
    }
}

impl StreamSink for TurnSink<'_> {
    fn text_delta(&self, text: &str) {
        let mut state = lock(&self.state);
        let safe = state.redactor.push(text);
        if !safe.is_empty() {
            state.streamed.push_str(&safe);
            if !self.holding {
                self.events.text_delta(&safe);
            }
        }
    }

    fn stream_reset(&self) {
        self.discard();
        self.events.stream_reset();
    }
}

/// The built-in hook that redacts the final reply after every configured hook had its say,
/// so a reply a hook rewrote is scanned like one the model wrote.
#[derive(Debug)]
pub(super) struct RedactReplies {
    leaks: LeakScanner,
}

impl RedactReplies {
    pub(super) fn new(leaks: LeakScanner) -> Self {
        Self { leaks }
    }
}

impl Hook for RedactReplies {
    fn wants(&self, event: HookEvent, _tool: &str) -> bool {
        event == HookEvent::BeforeReply
    }

    fn before<'a>(&'a self, input: &'a HookInput) -> BoxFuture<'a, HookVerdict> {
        let text = input.text.as_deref().unwrap_or_default();
        let (redacted, findings) = self.leaks.redact(text);
        let verdict = if findings.is_empty() {
            HookVerdict::Allow
        } else {
            let kinds: Vec<&str> = findings.iter().map(|finding| finding.kind).collect();
            tracing::warn!(kinds = ?kinds, "redacted secrets a hook put in the reply");
            HookVerdict::Rewrite(serde_json::Value::String(redacted))
        };
        Box::pin(async move { verdict })
    }

    fn after(&self, _input: HookInput) -> BoxFuture<'static, ()> {
        Box::pin(async {})
    }

    fn built_in(&self) -> bool {
        true
    }
}
