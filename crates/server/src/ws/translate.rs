//! Turn events to OpenClaw `agent` and `chat` events, and the final `res` of an `agent`
//! request. The events come from the shared stream, so a connection shows exactly what
//! the API and the UI show.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot_core::events::{RunEnd, TurnEvent, TurnEventKind};

use super::Connection;

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
}

/// Runs seen by one connection.
#[derive(Debug, Default)]
pub struct Runs {
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
}

fn assistant_message(text: &str, at_ms: i64) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": at_ms})
}

fn split_model(model: &str) -> (&str, &str) {
    model.split_once('/').unwrap_or(("", model))
}

impl Connection {
    fn agent_event(&mut self, event: &TurnEvent, stream: &str, data: Value) {
        let payload = json!({
            "runId": event.run_id, "sessionKey": event.session_key, "agentId": "main",
            "stream": stream, "data": data, "seq": event.seq, "ts": event.at_ms,
        });
        self.send_event("agent", payload);
    }

    fn chat_event(&mut self, event: &TurnEvent, state: &str, extra: Value) {
        let mut payload = json!({
            "runId": event.run_id, "sessionKey": event.session_key, "agentId": "main",
            "seq": event.seq, "state": state,
        });
        if let (Some(payload), Value::Object(extra)) = (payload.as_object_mut(), extra) {
            payload.extend(extra);
        }
        self.send_event("chat", payload);
    }

    /// Sends the text of `run_id` not yet sent.
    fn flush(&mut self, run_id: &str) {
        let Some(view) = self.runs.views.get_mut(run_id) else { return };
        let Some(latest) = view.latest.clone().filter(|_| view.pending()) else { return };
        let delta = view.text.get(view.sent..).unwrap_or_default().to_owned();
        let whole = view.text.clone();
        view.sent = view.text.len();
        view.last_flush = Some(Instant::now());
        self.agent_event(&latest, "assistant", json!({"text": whole, "delta": delta}));
        let mut extra = json!({"message": assistant_message(&whole, latest.at_ms)});
        if self.protocol >= 4 {
            extra["deltaText"] = Value::String(delta);
        }
        self.chat_event(&latest, "delta", extra);
    }

    /// Sends the coalesced text whose window has passed.
    pub(crate) fn flush_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .runs
            .views
            .iter()
            .filter(|(_, view)| view.pending() && view.last_flush.is_none_or(|last| now >= last + DELTA_WINDOW))
            .map(|(id, _)| id.clone())
            .collect();
        for run_id in due {
            self.flush(&run_id);
        }
    }

    /// Sends what `event` means to this client.
    pub(crate) fn forward(&mut self, event: &Arc<TurnEvent>) {
        if !matches!(event.kind, TurnEventKind::Delta { .. }) {
            self.flush(&event.run_id);
        }
        let view = self.runs.views.entry(event.run_id.clone()).or_default();
        match &event.kind {
            TurnEventKind::Started { model, .. } => {
                let (provider, model) = split_model(model);
                let (provider, model) = (provider.to_owned(), model.to_owned());
                self.agent_event(event, "lifecycle", json!({"phase": "start", "startedAt": event.at_ms}));
                self.agent_event(event, "lifecycle", json!({"phase": "model", "provider": provider, "model": model}));
            }
            TurnEventKind::Delta { text } => {
                view.text.push_str(text);
                view.latest = Some(event.clone());
                if view.last_flush.is_none_or(|last| last.elapsed() >= DELTA_WINDOW) {
                    self.flush(&event.run_id);
                }
            }
            TurnEventKind::StreamReset => {
                view.text.clear();
                view.sent = 0;
                self.agent_event(event, "assistant", json!({"text": "", "delta": "", "replace": true}));
            }
            TurnEventKind::ModelCall { model, usage, ok, duration } => {
                let data = json!({
                    "model": model, "inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                    "ok": ok, "durationMs": duration.as_millis() as u64,
                });
                self.agent_event(event, "usage", data);
            }
            TurnEventKind::ToolStarted { call_id, name, arguments } => {
                let args =
                    serde_json::from_str::<Value>(arguments).unwrap_or_else(|_| Value::String(arguments.clone()));
                let data = json!({"phase": "start", "name": name, "toolCallId": call_id, "args": args});
                self.agent_event(event, "tool", data);
            }
            TurnEventKind::ToolFinished { call_id, name, is_error, duration } => {
                let data = json!({
                    "phase": "result", "name": name, "toolCallId": call_id, "isError": is_error,
                    "durationMs": duration.as_millis() as u64,
                });
                self.agent_event(event, "tool", data);
            }
            TurnEventKind::Warning { message } | TurnEventKind::Notice { message } => {
                let message = message.clone();
                self.agent_event(event, "notice", json!({"message": message}));
            }
            TurnEventKind::File { path, name, mime } => {
                let data = json!({"path": path, "name": name, "mimeType": mime});
                self.agent_event(event, "file", data);
            }
            TurnEventKind::Finished { reply, end, usage, model, tool_calls, duration } => {
                let request = self.runs.views.remove(&event.run_id).and_then(|view| view.request);
                let stop_reason = match end {
                    RunEnd::Completed => "stop",
                    RunEnd::MaxTurns => "max_turns",
                };
                let usage_json = json!({
                    "input": usage.input_tokens, "output": usage.output_tokens,
                    "cacheRead": usage.cached_input_tokens, "total": usage.total(),
                });
                let lifecycle = json!({
                    "phase": "end", "aborted": false, "stopReason": stop_reason,
                    "endedAt": event.at_ms, "toolCalls": tool_calls,
                });
                self.agent_event(event, "lifecycle", lifecycle);
                let extra = json!({
                    "message": assistant_message(reply, event.at_ms), "usage": usage_json, "stopReason": stop_reason,
                });
                self.chat_event(event, "final", extra);
                if let Some(request) = request {
                    let (provider, model) = split_model(model);
                    let payload = json!({
                        "runId": event.run_id,
                        "status": "ok",
                        "summary": "completed",
                        "result": {
                            "payloads": [{"text": reply, "mediaUrl": null}],
                            "meta": {
                                "durationMs": duration.as_millis() as u64,
                                "stopReason": stop_reason,
                                "agentMeta": {
                                    "sessionKey": event.session_key, "provider": provider, "model": model,
                                    "usage": usage_json,
                                },
                            },
                        },
                    });
                    self.respond(&request, Ok(payload));
                }
            }
            TurnEventKind::Aborted { partial, duration } => {
                let request = self.runs.views.remove(&event.run_id).and_then(|view| view.request);
                let lifecycle =
                    json!({"phase": "end", "aborted": true, "stopReason": "aborted", "endedAt": event.at_ms});
                self.agent_event(event, "lifecycle", lifecycle);
                let extra = json!({"message": assistant_message(partial, event.at_ms), "stopReason": "aborted"});
                self.chat_event(event, "aborted", extra);
                if let Some(request) = request {
                    let payload = json!({
                        "runId": event.run_id, "status": "aborted", "summary": "aborted",
                        "result": {"payloads": [{"text": partial, "mediaUrl": null}],
                                   "meta": {"durationMs": duration.as_millis() as u64, "aborted": true}},
                    });
                    self.respond(&request, Ok(payload));
                }
            }
            TurnEventKind::Background { worker_id, agent, status, text, worker_session } => {
                // A message of its own outside any turn: a `chat` final the client shows
                // like a reply, marked so it can tell it came from background work.
                self.runs.views.remove(&event.run_id);
                let extra = json!({
                    "message": assistant_message(text, event.at_ms),
                    "stopReason": "background",
                    "background": {
                        "workerId": worker_id, "agent": agent, "status": status, "workerSession": worker_session,
                        "correlationId": event.correlation_id,
                    },
                });
                self.chat_event(event, "final", extra);
            }
            TurnEventKind::BusMessage { message_id, from, role, priority, text } => {
                // A message of its own outside any turn, like a background result, marked
                // so the client can tell which agent sent it.
                self.runs.views.remove(&event.run_id);
                let extra = json!({
                    "message": assistant_message(text, event.at_ms),
                    "stopReason": "bus",
                    "bus": {
                        "messageId": message_id, "from": from, "role": role, "priority": priority,
                        "correlationId": event.correlation_id,
                    },
                });
                self.chat_event(event, "final", extra);
            }
            TurnEventKind::Failed { error, .. } => {
                let request = self.runs.views.remove(&event.run_id).and_then(|view| view.request);
                let error = error.clone();
                self.agent_event(event, "lifecycle", json!({"phase": "error", "error": error, "endedAt": event.at_ms}));
                self.chat_event(event, "error", json!({"errorMessage": error, "errorKind": "agent"}));
                if let Some(request) = request {
                    let failure =
                        super::MethodError::new(super::ErrorCode::Unavailable, format!("the turn failed: {error}"));
                    self.respond(&request, Err(failure));
                }
            }
        }
    }
}
