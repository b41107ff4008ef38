//! Turn events to OpenClaw `agent` and `chat` events, and the final `res` of an `agent`
//! request. The events come from the shared stream, so a connection shows exactly what
//! the API and the UI show.

mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use squidbot_core::events::{RunEnd, TurnEvent, TurnEventKind};

use super::Connection;
use super::frame::{ErrorCode, MethodError};
use super::outbox::Outbox;
use wire::{
    AbortedMeta, AgentMeta, AgentOutcome, AgentPayload, AssistantMessage, AssistantText, BackgroundMark, BusMark,
    ChatPayload, FileHandedOver, FinishedMeta, LifecycleEnd, LifecycleError, LifecycleModel, LifecycleStart,
    ModelCallUsage, Notice, TokenUsage, ToolResult, ToolStart,
};

/// Events a connection may receive.
pub const EVENTS: &[&str] = &["connect.challenge", "tick", "agent", "chat", "health"];

/// Streamed text is sent at most this often per run. `chat` deltas carry the whole message
/// so far, as OpenClaw clients expect; without coalescing a long reply would cost frames
/// quadratic in its length. The first piece goes out at once.
const DELTA_WINDOW: Duration = Duration::from_millis(50);

/// What a connection remembers about a run it shows.
#[derive(Debug, Default)]
struct RunView {
    text: String,
    /// Bytes of `text` already sent.
    sent: usize,
    last_flush: Option<Instant>,
    /// The last delta event, whose ids and time the coalesced frames carry.
    latest: Option<Arc<TurnEvent>>,
    /// The `agent` request waiting for its final response.
    request: Option<String>,
}

impl RunView {
    fn pending(&self) -> bool {
        self.sent < self.text.len()
    }

    /// Sends the text not yet sent, as an `agent` `assistant` and a `chat` `delta` event.
    fn flush(&mut self, out: &mut Outbox, protocol: u64) {
        if !self.pending() {
            return;
        }
        let Some(latest) = &self.latest else { return };
        let whole = self.text.as_str();
        let delta = whole.get(self.sent..).unwrap_or_default();
        agent_event(out, latest, "assistant", AssistantText { delta, text: whole });
        let mut chat = ChatPayload::new(latest, "delta");
        chat.message = Some(AssistantMessage::new(whole, latest.at_ms));
        if protocol >= 4 {
            chat.delta_text = Some(delta);
        }
        out.send_event("chat", &chat);
        self.sent = self.text.len();
        self.last_flush = Some(Instant::now());
    }
}

/// Runs seen by one connection.
#[derive(Debug, Default)]
pub struct Runs {
    /// Runs with streamed text or a waiting `agent` request, by run id.
    views: HashMap<String, RunView>,
}

impl Runs {
    /// Registers an `agent` request that gets a second response when the run ends.
    pub fn await_final(&mut self, run_id: &str, request_id: &str) {
        self.views.entry(run_id.to_owned()).or_default().request = Some(request_id.to_owned());
    }

    /// When coalesced text must go out next.
    pub fn next_flush(&self) -> Option<Instant> {
        self.views
            .values()
            .filter(|view| view.pending())
            .map(|view| view.last_flush.map_or_else(Instant::now, |last| last + DELTA_WINDOW))
            .min()
    }

    /// Sends the coalesced text whose window has passed.
    pub(crate) fn flush_due(&mut self, out: &mut Outbox, protocol: u64) {
        let now = Instant::now();
        for view in self.views.values_mut() {
            if view.last_flush.is_none_or(|last| now >= last + DELTA_WINDOW) {
                view.flush(out, protocol);
            }
        }
    }

    /// Sends what `event` means to a client speaking `protocol`.
    pub(crate) fn forward(&mut self, event: &Arc<TurnEvent>, out: &mut Outbox, protocol: u64) {
        // Text held back goes out before anything else of its run, so the client sees it in
        // order; an event that ends what the client shows of the run also forgets the run.
        let request = match &event.kind {
            TurnEventKind::Delta { .. } => None,
            TurnEventKind::Finished { .. }
            | TurnEventKind::Aborted { .. }
            | TurnEventKind::Failed { .. }
            | TurnEventKind::Background { .. }
            | TurnEventKind::BusMessage { .. } => self.views.remove(&event.run_id).and_then(|mut view| {
                view.flush(out, protocol);
                view.request
            }),
            TurnEventKind::Started { .. }
            | TurnEventKind::StreamReset
            | TurnEventKind::ModelCall { .. }
            | TurnEventKind::ToolStarted { .. }
            | TurnEventKind::ToolFinished { .. }
            | TurnEventKind::Warning { .. }
            | TurnEventKind::Notice { .. }
            | TurnEventKind::Waiting { .. }
            | TurnEventKind::File { .. } => {
                if let Some(view) = self.views.get_mut(&event.run_id) {
                    view.flush(out, protocol);
                }
                None
            }
        };
        match &event.kind {
            TurnEventKind::Started { model, .. } => {
                let (provider, model) = split_model(model);
                agent_event(out, event, "lifecycle", LifecycleStart { phase: "start", started_at: event.at_ms });
                agent_event(out, event, "lifecycle", LifecycleModel { model, phase: "model", provider });
            }
            TurnEventKind::Delta { text } => {
                // The run id is copied once per run, not once per piece of text.
                let view = match self.views.get_mut(&event.run_id) {
                    Some(view) => view,
                    None => self.views.entry(event.run_id.clone()).or_default(),
                };
                view.text.push_str(text);
                view.latest = Some(event.clone());
                if view.last_flush.is_none_or(|last| last.elapsed() >= DELTA_WINDOW) {
                    view.flush(out, protocol);
                }
            }
            TurnEventKind::StreamReset => {
                if let Some(view) = self.views.get_mut(&event.run_id) {
                    view.text.clear();
                    view.sent = 0;
                }
                agent_event(out, event, "assistant", json!({"text": "", "delta": "", "replace": true}));
            }
            TurnEventKind::ModelCall { model, usage, ok, duration } => {
                let data = ModelCallUsage {
                    duration_ms: duration.as_millis() as u64,
                    input_tokens: usage.input_tokens,
                    model,
                    ok: *ok,
                    output_tokens: usage.output_tokens,
                };
                agent_event(out, event, "usage", data);
            }
            TurnEventKind::ToolStarted { call_id, name, arguments } => {
                let args =
                    serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.clone()));
                agent_event(out, event, "tool", ToolStart { args, name, phase: "start", tool_call_id: call_id });
            }
            TurnEventKind::ToolFinished { call_id, name, is_error, duration, output } => {
                let data = ToolResult {
                    duration_ms: duration.as_millis() as u64,
                    is_error: *is_error,
                    name,
                    phase: "result",
                    result: output,
                    tool_call_id: call_id,
                };
                agent_event(out, event, "tool", data);
            }
            TurnEventKind::Warning { message }
            | TurnEventKind::Notice { message }
            | TurnEventKind::Waiting { message } => {
                agent_event(out, event, "notice", Notice { message });
            }
            TurnEventKind::File { path, name, mime } => {
                agent_event(out, event, "file", FileHandedOver { mime_type: mime, name, path });
            }
            TurnEventKind::Finished { reply, end, usage, model, tool_calls, duration } => {
                let stop_reason = match end {
                    RunEnd::Completed => "stop",
                    RunEnd::MaxTurns => "max_turns",
                };
                let usage = TokenUsage::from(usage);
                let lifecycle = LifecycleEnd {
                    aborted: false,
                    ended_at: event.at_ms,
                    phase: "end",
                    stop_reason,
                    tool_calls: Some(*tool_calls),
                };
                agent_event(out, event, "lifecycle", lifecycle);
                let mut chat = ChatPayload::new(event, "final");
                chat.message = Some(AssistantMessage::new(reply, event.at_ms));
                chat.usage = Some(usage);
                chat.stop_reason = Some(stop_reason);
                out.send_event("chat", &chat);
                if let Some(request) = request {
                    let (provider, model) = split_model(model);
                    let meta = FinishedMeta {
                        agent_meta: AgentMeta { model, provider, session_key: &event.session_key, usage },
                        duration_ms: duration.as_millis() as u64,
                        stop_reason,
                    };
                    out.respond_ok(&request, &AgentOutcome::new(&event.run_id, "ok", "completed", reply, meta));
                }
            }
            TurnEventKind::Aborted { partial, duration } => {
                let lifecycle = LifecycleEnd {
                    aborted: true,
                    ended_at: event.at_ms,
                    phase: "end",
                    stop_reason: "aborted",
                    tool_calls: None,
                };
                agent_event(out, event, "lifecycle", lifecycle);
                let mut chat = ChatPayload::new(event, "aborted");
                chat.message = Some(AssistantMessage::new(partial, event.at_ms));
                chat.stop_reason = Some("aborted");
                out.send_event("chat", &chat);
                if let Some(request) = request {
                    let meta = AbortedMeta { aborted: true, duration_ms: duration.as_millis() as u64 };
                    out.respond_ok(&request, &AgentOutcome::new(&event.run_id, "aborted", "aborted", partial, meta));
                }
            }
            TurnEventKind::Background { worker_id, agent, status, text, worker_session } => {
                // A message of its own outside any turn: a `chat` final the client shows
                // like a reply, marked so it can tell it came from background work.
                let mut chat = ChatPayload::new(event, "final");
                chat.message = Some(AssistantMessage::new(text, event.at_ms));
                chat.stop_reason = Some("background");
                chat.background = Some(BackgroundMark {
                    agent,
                    correlation_id: &event.correlation_id,
                    status,
                    worker_id,
                    worker_session,
                });
                out.send_event("chat", &chat);
            }
            TurnEventKind::BusMessage { message_id, from, role, priority, text } => {
                // A message of its own outside any turn, like a background result, marked
                // so the client can tell which agent sent it.
                let mut chat = ChatPayload::new(event, "final");
                chat.message = Some(AssistantMessage::new(text, event.at_ms));
                chat.stop_reason = Some("bus");
                chat.bus = Some(BusMark { correlation_id: &event.correlation_id, from, message_id, priority, role });
                out.send_event("chat", &chat);
            }
            TurnEventKind::Failed { error, .. } => {
                agent_event(out, event, "lifecycle", LifecycleError { ended_at: event.at_ms, error, phase: "error" });
                let mut chat = ChatPayload::new(event, "error");
                chat.error_message = Some(error);
                chat.error_kind = Some("agent");
                out.send_event("chat", &chat);
                if let Some(request) = request {
                    let failure = MethodError::new(ErrorCode::Unavailable, format!("the turn failed: {error}"));
                    out.respond_error(Some(&request), &failure);
                }
            }
        }
    }
}

/// Sends an `agent` event of `stream`.
fn agent_event(out: &mut Outbox, event: &TurnEvent, stream: &'static str, data: impl Serialize) {
    out.send_event("agent", &AgentPayload::new(event, stream, data));
}

fn split_model(model: &str) -> (&str, &str) {
    model.split_once('/').unwrap_or(("", model))
}

impl Connection {
    /// Sends what `event` means to this client.
    pub(crate) fn forward(&mut self, event: &Arc<TurnEvent>) {
        self.runs.forward(event, &mut self.outbox, self.protocol);
    }

    /// Sends the coalesced text whose window has passed.
    pub(crate) fn flush_due(&mut self) {
        self.runs.flush_due(&mut self.outbox, self.protocol);
    }
}

#[cfg(test)]
mod tests;
