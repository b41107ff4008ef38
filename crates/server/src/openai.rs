//! The OpenAI-compatible API: `POST /v1/chat/completions` (plain and SSE) and
//! `GET /v1/models`. The `user` field names the session (`openai:<user>`); squidbot
//! keeps the history, so only the last user message of a request is new input.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use squidbot_core::agent::{AgentError, AgentEvents, SilentEvents, TurnOutcome, TurnStatus};
use squidbot_types::{ToolCall, Usage};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::{Gateway, Refusal};

/// Forwards events and times tool calls into the metrics.
struct MeteredEvents<'a> {
    inner: &'a dyn AgentEvents,
    metrics: &'a Metrics,
    started: Mutex<HashMap<String, Instant>>,
}

impl<'a> MeteredEvents<'a> {
    fn new(inner: &'a dyn AgentEvents, metrics: &'a Metrics) -> Self {
        Self { inner, metrics, started: Mutex::new(HashMap::new()) }
    }
}

impl AgentEvents for MeteredEvents<'_> {
    fn text_delta(&self, text: &str) {
        self.inner.text_delta(text);
    }

    fn stream_reset(&self) {
        self.inner.stream_reset();
    }

    fn tool_started(&self, call: &ToolCall) {
        if let Ok(mut started) = self.started.lock() {
            started.insert(call.id.clone(), Instant::now());
        }
        self.inner.tool_started(call);
    }

    fn tool_finished(&self, call: &ToolCall, is_error: bool) {
        let began = self.started.lock().ok().and_then(|mut started| started.remove(&call.id));
        if let Some(began) = began {
            self.metrics.tool(&call.name, is_error, began.elapsed());
        }
        self.inner.tool_finished(call, is_error);
    }

    fn warning(&self, message: &str) {
        self.inner.warning(message);
    }

    fn notice(&self, message: &str) {
        self.inner.notice(message);
    }
}

/// Records a finished (or failed) turn.
fn record_turn(metrics: &Metrics, model: &str, result: &Result<TurnOutcome, AgentError>, began: Instant) {
    match result {
        Ok(outcome) => {
            let status = match outcome.status {
                TurnStatus::Completed => "completed",
                TurnStatus::MaxTurns => "max_turns",
                TurnStatus::Cancelled => "cancelled",
            };
            metrics.turn(
                &outcome.model,
                status,
                began.elapsed(),
                outcome.usage.input_tokens,
                outcome.usage.output_tokens,
            );
        }
        Err(_) => metrics.turn(model, "error", began.elapsed(), 0, 0),
    }
}

/// Longest accepted `user` value.
const MAX_USER_CHARS: usize = 128;

fn error(status: StatusCode, kind: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"message": message.into(), "type": kind, "param": null, "code": null}});
    (status, axum::Json(body)).into_response()
}

fn refused(refusal: Refusal) -> Response {
    match refusal {
        Refusal::Unauthorized => {
            error(StatusCode::UNAUTHORIZED, "invalid_request_error", "missing or wrong bearer token")
        }
        Refusal::LockedOut(wait) => {
            let mut response = error(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                format!("too many failed attempts from this address; try again in {}s", wait.as_secs().max(1)),
            );
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(wait.as_secs().max(1)));
            response
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs())
}

/// `GET /v1/models`: the configured models and agent roles.
pub async fn models(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = gateway.authorize(&headers, peer.ip()) {
        let response = refused(refusal);
        gateway.metrics.request("/v1/models", response.status().as_u16());
        return response;
    }
    gateway.metrics.request("/v1/models", 200);
    let data: Vec<Value> = gateway
        .models
        .iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "squidbot"}))
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

/// What a chat request asks for.
struct ChatRequest {
    input: String,
    session_key: String,
    stream: bool,
    include_usage: bool,
}

/// Text of a message's `content`: a string, or the text parts of an array.
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> =
                parts.iter().filter(|part| part["type"] == "text").filter_map(|part| part["text"].as_str()).collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}

/// Reads a chat request; the error is the message for a 400 response.
fn parse_request(body: &[u8]) -> Result<ChatRequest, String> {
    let value: Value = serde_json::from_slice(body).map_err(|problem| format!("invalid JSON body: {problem}"))?;
    let messages = value["messages"].as_array().ok_or_else(|| "`messages` must be an array".to_owned())?;
    let last_user = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .ok_or_else(|| "`messages` has no user message".to_owned())?;
    let input = content_text(&last_user["content"])
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| "the last user message has no text content".to_owned())?;
    let user = match &value["user"] {
        Value::Null => "default".to_owned(),
        Value::String(user) if !user.trim().is_empty() && user.chars().count() <= MAX_USER_CHARS => user.clone(),
        _ => return Err(format!("`user` must be a non-empty string of at most {MAX_USER_CHARS} characters")),
    };
    Ok(ChatRequest {
        input,
        session_key: format!("openai:{user}"),
        stream: value["stream"].as_bool().unwrap_or(false),
        include_usage: value["stream_options"]["include_usage"].as_bool().unwrap_or(false),
    })
}

fn usage_json(usage: Usage) -> Value {
    json!({"prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens, "total_tokens": usage.total()})
}

/// `POST /v1/chat/completions`.
pub async fn chat_completions(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let response = match gateway.authorize(&headers, peer.ip()) {
        Ok(()) => answer(&gateway, &body).await,
        Err(refusal) => refused(refusal),
    };
    gateway.metrics.request("/v1/chat/completions", response.status().as_u16());
    response
}

async fn answer(gateway: &Arc<Gateway>, body: &Bytes) -> Response {
    let request = match parse_request(body) {
        Ok(request) => request,
        Err(message) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", message),
    };
    let session = match gateway.sessions.get(&request.session_key).await {
        Ok(session) => session,
        Err(problem) => return error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", problem.to_string()),
    };
    let id = format!("chatcmpl-{}", squidbot_core::ids::entry_id());
    let created = unix_now();
    let model = gateway.agent.settings().model.clone();
    if request.stream {
        return stream(gateway.clone(), session, request, id, created, model);
    }
    let cancel = CancellationToken::new();
    let mut session = session.lock().await;
    let began = Instant::now();
    let events = MeteredEvents::new(&SilentEvents, &gateway.metrics);
    let result = gateway.agent.run_turn(&mut session, &request.input, &events, &cancel).await;
    record_turn(&gateway.metrics, &model, &result, began);
    match result {
        Ok(outcome) => axum::Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": outcome.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": outcome.reply}, "finish_reason": "stop"}],
            "usage": usage_json(outcome.usage),
        }))
        .into_response(),
        Err(problem) => error(StatusCode::BAD_GATEWAY, "server_error", problem.to_string()),
    }
}

/// Sends chunks of one streamed completion.
struct ChunkSender {
    sender: UnboundedSender<Bytes>,
    id: String,
    created: u64,
    model: String,
}

impl ChunkSender {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) {
        let chunk = json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        });
        self.send(&chunk);
    }

    fn send(&self, value: &Value) {
        // A closed channel means the client left; the turn is being cancelled anyway.
        if self.sender.send(Bytes::from(format!("data: {value}\n\n"))).is_err() {
            tracing::debug!("stream client went away");
        }
    }

    fn finish(&self, outcome: &TurnOutcome, include_usage: bool) {
        self.chunk(json!({}), Some("stop"));
        if include_usage {
            let usage = json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [], "usage": usage_json(outcome.usage),
            });
            self.send(&usage);
        }
    }
}

impl AgentEvents for ChunkSender {
    fn text_delta(&self, text: &str) {
        self.chunk(json!({"content": text}), None);
    }
}

fn stream(
    gateway: Arc<Gateway>,
    session: crate::sessions::SharedSession,
    request: ChatRequest,
    id: String,
    created: u64,
    model: String,
) -> Response {
    let (sender, receiver) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let cancel = CancellationToken::new();
    let disconnect_guard = cancel.clone().drop_guard();
    tokio::spawn(async move {
        let chunks = ChunkSender { sender, id, created, model };
        chunks.chunk(json!({"role": "assistant", "content": ""}), None);
        let mut session = session.lock().await;
        let began = Instant::now();
        let events = MeteredEvents::new(&chunks, &gateway.metrics);
        let result = gateway.agent.run_turn(&mut session, &request.input, &events, &cancel).await;
        record_turn(&gateway.metrics, &chunks.model, &result, began);
        match result {
            Ok(outcome) => chunks.finish(&outcome, request.include_usage),
            Err(problem) => chunks.send(&json!({"error": {"message": problem.to_string(), "type": "server_error"}})),
        }
        if chunks.sender.send(Bytes::from_static(b"data: [DONE]\n\n")).is_err() {
            tracing::debug!("stream client went away before [DONE]");
        }
    });
    let body = futures_util::stream::unfold((receiver, disconnect_guard), |(mut receiver, guard)| async move {
        receiver.recv().await.map(|bytes| (Ok::<Bytes, Infallible>(bytes), (receiver, guard)))
    });
    let mut response = Response::new(Body::from_stream(body));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_and_the_user_names_the_session() {
        let ok = parse_request(br#"{"model":"x","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]}],"user":"ana","stream":true,"stream_options":{"include_usage":true}}"#);
        let request = ok.ok().unwrap();
        assert_eq!(request.input, "hi");
        assert_eq!(request.session_key, "openai:ana");
        assert!(request.stream && request.include_usage);
        for bad in [
            &b"not json"[..],
            br#"{"messages":"x"}"#,
            br#"{"messages":[{"role":"assistant","content":"a"}]}"#,
            br#"{"messages":[{"role":"user","content":"hi"}],"user":""}"#,
        ] {
            assert!(parse_request(bad).is_err());
        }
    }
}
