//! The OpenAI-compatible API: `POST /v1/chat/completions` (plain and SSE) and
//! `GET /v1/models`. The `user` field names a session, never an identity: `openai:<user>`
//! for the owner, `openai:<user id>:<user>` for a person (their token says who they are);
//! squidbot keeps the history, so only the last user message of a request is new input.

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::Body;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use squidbot_core::events::{TurnEvent, TurnEventKind};
use squidbot_core::runs::{RunError, RunHandle, RunRequest};
use squidbot_types::Usage;

use squidbot_types::people::Actor;

use crate::people::{Caller, ClaimError, Door, Ownership};
use crate::uploads::{Upload, UploadError};
use crate::{Gateway, Refusal};

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

/// `GET /v1/models`: the configured models and agent roles.
pub async fn models(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = gateway.authorize(&headers, peer.ip(), Door::Http("models")).await {
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
    /// The last user message's image parts.
    images: Vec<Upload>,
    /// The `user` field (`default` without one): it names the session.
    user: String,
    stream: bool,
    include_usage: bool,
}

impl ChatRequest {
    /// The session the request goes to for `caller`.
    fn session_key(&self, caller: &Caller) -> String {
        match caller.person() {
            None => format!("openai:{}", self.user),
            Some(actor) => crate::people::openai_session(actor, &self.user),
        }
    }
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

/// The `image_url` parts of a message's `content` array, decoded; remote URLs are
/// refused, never fetched.
fn content_images(content: &Value) -> Result<Vec<Upload>, UploadError> {
    let Value::Array(parts) = content else { return Ok(Vec::new()) };
    let images = parts
        .iter()
        .filter(|part| part["type"] == "image_url")
        .enumerate()
        .map(|(position, part)| {
            // `image_url` is an object `{url}` in the API, a bare string in some clients.
            let url = part["image_url"]["url"].as_str().or_else(|| part["image_url"].as_str());
            match url {
                Some(url) => Upload::from_image_url(url, position),
                None => Err(UploadError::BadDataUrl { reason: "an image_url part has no url".into() }),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::uploads::check(&images)?;
    Ok(images)
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
    let images = content_images(&last_user["content"]).map_err(|error| error.to_string())?;
    let input = content_text(&last_user["content"]).filter(|text| !text.trim().is_empty());
    let input = match input {
        Some(input) => input,
        None if !images.is_empty() => String::new(),
        None => return Err("the last user message has no text content".to_owned()),
    };
    let user = match &value["user"] {
        Value::Null => "default".to_owned(),
        Value::String(user) if !user.trim().is_empty() && user.chars().count() <= MAX_USER_CHARS => user.clone(),
        _ => return Err(format!("`user` must be a non-empty string of at most {MAX_USER_CHARS} characters")),
    };
    Ok(ChatRequest {
        input,
        images,
        user,
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
    let response = if !is_json(&headers) {
        // A browser sends a cross-site `text/plain` or form POST without asking first; JSON
        // needs a preflight that this API never answers, so only JSON may come in.
        error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            "the body must be sent as Content-Type: application/json",
        )
    } else {
        match gateway.authorize(&headers, peer.ip(), Door::Http("openai")).await {
            Ok(caller) => answer(&gateway, &caller, &body).await,
            Err(refusal) => refused(refusal),
        }
    };
    gateway.metrics.request("/v1/chat/completions", response.status().as_u16());
    response
}

/// True when the request says its body is `application/json` (parameters such as
/// `charset` aside).
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// Opens a person's session before their turn: made in their context when new, refused
/// as missing when it is someone else's.
async fn claim(gateway: &Gateway, actor: &Actor, key: &str) -> Result<(), Response> {
    let missing = || error(StatusCode::NOT_FOUND, "invalid_request_error", format!("no session {key:?} of yours"));
    match crate::people::ownership(&gateway.runner, actor, key).await {
        Ok(Ownership::Mine | Ownership::Fresh) => {}
        Ok(Ownership::Theirs) => return Err(missing()),
        Err(problem) => return Err(error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", problem.to_string())),
    }
    match crate::people::claim(&gateway.runner, actor, key).await {
        Ok(()) => Ok(()),
        Err(ClaimError::Theirs(_)) => Err(missing()),
        Err(problem @ ClaimError::Busy(_)) => {
            Err(error(StatusCode::CONFLICT, "invalid_request_error", problem.to_string()))
        }
        Err(problem @ ClaimError::Agent(_)) => {
            Err(error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", problem.to_string()))
        }
    }
}

async fn answer(gateway: &Arc<Gateway>, caller: &Caller, body: &Bytes) -> Response {
    let mut request = match parse_request(body) {
        Ok(request) => request,
        Err(message) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", message),
    };
    let session_key = request.session_key(caller);
    if let Some(actor) = caller.person()
        && let Err(response) = claim(gateway, actor, &session_key).await
    {
        return response;
    }
    let store = gateway.services.attachments.as_deref();
    let (input, images) = match crate::uploads::save(
        store,
        &session_key,
        std::mem::take(&mut request.images),
        std::mem::take(&mut request.input),
    ) {
        Ok(saved) => saved,
        Err(problem) if problem.is_client_error() => {
            return error(StatusCode::BAD_REQUEST, "invalid_request_error", problem.to_string());
        }
        Err(problem) => return error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", problem.to_string()),
    };
    let run = RunRequest {
        session_key,
        input,
        images,
        origin: "openai".into(),
        run_id: Some(format!("chatcmpl-{}", squidbot_core::ids::entry_id())),
        correlation_id: None,
        actor: caller.person().cloned(),
    };
    let handle = match gateway.runner.start(run) {
        Ok(handle) => handle,
        Err(RunError::ShuttingDown) => {
            return error(StatusCode::SERVICE_UNAVAILABLE, "server_error", RunError::ShuttingDown.to_string());
        }
        Err(problem) => return error(StatusCode::BAD_REQUEST, "invalid_request_error", problem.to_string()),
    };
    let created = gateway.runner.agent().clock().unix_seconds();
    let model = gateway.runner.agent().settings().model.clone();
    let abort = AbortOnDrop::new(gateway.clone(), &handle);
    if request.stream {
        return stream(handle, abort, request.include_usage, created, model);
    }
    let mut handle = handle;
    let id = handle.run_id.clone();
    while let Some(event) = handle.events.recv().await {
        match &event.kind {
            TurnEventKind::Finished { reply, usage, model, .. } => {
                abort.disarm();
                return axum::Json(json!({
                    "id": id,
                    "object": "chat.completion",
                    "created": created,
                    "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                    "usage": usage_json(*usage),
                }))
                .into_response();
            }
            TurnEventKind::Aborted { .. } => {
                return error(StatusCode::SERVICE_UNAVAILABLE, "server_error", "the turn was stopped");
            }
            TurnEventKind::Failed { error: problem, .. } => {
                return error(StatusCode::BAD_GATEWAY, "server_error", problem.clone());
            }
            _ => {}
        }
    }
    error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "the turn's event stream ended early")
}

/// Stops the run when the client goes away before it ended (the response future or the
/// streamed body is dropped).
struct AbortOnDrop {
    gateway: Option<Arc<Gateway>>,
    run_id: String,
    session_key: String,
}

impl AbortOnDrop {
    fn new(gateway: Arc<Gateway>, handle: &RunHandle) -> Self {
        Self { gateway: Some(gateway), run_id: handle.run_id.clone(), session_key: handle.session_key.clone() }
    }

    fn disarm(mut self) {
        self.gateway = None;
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(gateway) = self.gateway.take() {
            gateway.runner.abort(&self.session_key, Some(&self.run_id));
        }
    }
}

/// One streamed completion's chunks.
struct Chunks {
    id: String,
    created: i64,
    model: String,
}

impl Chunks {
    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Bytes {
        sse(&json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }))
    }

    fn usage(&self, usage: Usage) -> Bytes {
        sse(&json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
            "choices": [], "usage": usage_json(usage),
        }))
    }
}

fn sse(value: &Value) -> Bytes {
    Bytes::from(format!("data: {value}\n\n"))
}

/// What to send for one event, and whether the stream is over.
fn chunks_for(chunks: &Chunks, event: &TurnEvent, include_usage: bool) -> (Vec<Bytes>, bool) {
    match &event.kind {
        TurnEventKind::Delta { text } => (vec![chunks.chunk(json!({"content": text}), None)], false),
        TurnEventKind::Finished { usage, .. } => {
            let mut out = vec![chunks.chunk(json!({}), Some("stop"))];
            if include_usage {
                out.push(chunks.usage(*usage));
            }
            out.push(Bytes::from_static(b"data: [DONE]\n\n"));
            (out, true)
        }
        TurnEventKind::Aborted { .. } => {
            (vec![chunks.chunk(json!({}), Some("stop")), Bytes::from_static(b"data: [DONE]\n\n")], true)
        }
        TurnEventKind::Failed { error, .. } => (
            vec![
                sse(&json!({"error": {"message": error, "type": "server_error"}})),
                Bytes::from_static(b"data: [DONE]\n\n"),
            ],
            true,
        ),
        _ => (Vec::new(), false),
    }
}

fn stream(handle: RunHandle, abort: AbortOnDrop, include_usage: bool, created: i64, model: String) -> Response {
    let chunks = Chunks { id: handle.run_id.clone(), created, model };
    let opening = chunks.chunk(json!({"role": "assistant", "content": ""}), None);
    struct State {
        handle: RunHandle,
        chunks: Chunks,
        queue: std::collections::VecDeque<Bytes>,
        done: bool,
        abort: Option<AbortOnDrop>,
    }
    let state = State { handle, chunks, queue: [opening].into(), done: false, abort: Some(abort) };
    let body = futures_util::stream::unfold(state, move |mut state| async move {
        loop {
            if let Some(bytes) = state.queue.pop_front() {
                return Some((Ok::<Bytes, Infallible>(bytes), state));
            }
            if state.done {
                return None;
            }
            let Some(event) = state.handle.events.recv().await else {
                state.done = true;
                state.queue.push_back(sse(
                    &json!({"error": {"message": "the event stream ended early", "type": "server_error"}}),
                ));
                continue;
            };
            let (bytes, done) = chunks_for(&state.chunks, &event, include_usage);
            state.queue.extend(bytes);
            if done {
                state.done = true;
                if let Some(abort) = state.abort.take() {
                    abort.disarm();
                }
            }
        }
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
        assert_eq!(request.session_key(&Caller::Owner), "openai:ana");
        let bob = Actor {
            user: Some("bob".into()),
            name: "Bob".into(),
            role: "user".into(),
            context: "user:bob".into(),
            session: None,
        };
        assert_eq!(request.session_key(&Caller::Person(bob)), "openai:bob:ana");
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
