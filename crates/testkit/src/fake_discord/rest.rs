//! The fake REST API: `GET /gateway/bot`, messages (JSON or multipart), edits, typing,
//! reactions and the attachment files, each checking the bot token and recording what
//! it got; queued failures (429, 5xx…) answer first.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, post, put};
use serde_json::{Value, json};

use super::state::{Injected, Shared};
use super::{EditRecord, FAKE_BOT_ID, FakeFile, FakeRoute, ReactionRecord, SentRecord, gateway};

/// Longest message content Discord accepts.
const MAX_CONTENT_CHARS: usize = 2000;

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/gateway", get(gateway::upgrade))
        .route("/resume-gateway", get(gateway::upgrade))
        .route("/api/v10/gateway/bot", get(gateway_bot))
        .route("/api/v10/channels/{channel}/messages", post(create_message))
        .route("/api/v10/channels/{channel}/messages/{message}", patch(edit_message))
        .route("/api/v10/channels/{channel}/typing", post(typing))
        .route("/api/v10/channels/{channel}/messages/{message}/reactions/{emoji}/@me", put(react))
        .route("/attachments/{id}/{name}", get(attachment))
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(shared)
}

fn error(status: StatusCode, message: &str, code: u64) -> Response {
    (status, axum::Json(json!({"message": message, "code": code}))).into_response()
}

/// The token and user-agent checks' refusal, or else the failure queued for `route`.
fn gate(shared: &Shared, route: FakeRoute, headers: &HeaderMap) -> Option<Response> {
    let expected = format!("Bot {}", shared.token);
    if headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()) != Some(expected.as_str()) {
        return Some(error(StatusCode::UNAUTHORIZED, "401: Unauthorized", 0));
    }
    let agent = headers.get(header::USER_AGENT).and_then(|value| value.to_str().ok()).unwrap_or_default();
    if !agent.starts_with("DiscordBot (") {
        return Some(error(StatusCode::BAD_REQUEST, "the User-Agent must read `DiscordBot (url, version)`", 0));
    }
    shared.update(|state| state.take_injected(route)).map(injected_response)
}

fn injected_response(injected: Injected) -> Response {
    match injected {
        Injected::RateLimited { retry_after, global } => {
            let seconds = retry_after.as_secs_f64();
            let body = json!({"message": "You are being rate limited.", "retry_after": seconds, "global": global});
            let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
            let headers = response.headers_mut();
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds.ceil() as u64));
            headers.insert("x-ratelimit-scope", HeaderValue::from_static(if global { "global" } else { "user" }));
            if global {
                headers.insert("x-ratelimit-global", HeaderValue::from_static("true"));
            }
            response
        }
        Injected::Status(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            error(status, status.canonical_reason().unwrap_or("error"), 0)
        }
    }
}

async fn gateway_bot(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = gate(&shared, FakeRoute::GatewayBot, &headers) {
        return refusal;
    }
    let url = format!("{}/gateway", shared.base_url.replacen("http://", "ws://", 1));
    axum::Json(json!({
        "url": url,
        "shards": 1,
        "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1},
    }))
    .into_response()
}

fn is_snowflake(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|byte| byte.is_ascii_digit())
}

async fn create_message(State(shared): State<Arc<Shared>>, Path(channel): Path<String>, request: Request) -> Response {
    if let Some(refusal) = gate(&shared, FakeRoute::CreateMessage, request.headers()) {
        return refusal;
    }
    if !is_snowflake(&channel) {
        return error(StatusCode::NOT_FOUND, "Unknown Channel", 10003);
    }
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("multipart/form-data"));
    let parsed = if multipart { read_multipart(request).await } else { read_json(request).await };
    let (payload, files) = match parsed {
        Ok(parsed) => parsed,
        Err(message) => return error(StatusCode::BAD_REQUEST, &message, 50035),
    };
    let content = payload.get("content").and_then(Value::as_str).unwrap_or_default().to_owned();
    if content.chars().count() > MAX_CONTENT_CHARS {
        return error(StatusCode::BAD_REQUEST, "Invalid Form Body: content must be 2000 or fewer in length", 50035);
    }
    if content.is_empty() && files.is_empty() {
        return error(StatusCode::BAD_REQUEST, "Cannot send an empty message", 50006);
    }
    let response = shared.update(|state| {
        let id = state.next_id();
        state.sent.push(SentRecord {
            channel_id: channel.clone(),
            message_id: id.clone(),
            content: content.clone(),
            message_reference: payload.get("message_reference").cloned(),
            allowed_mentions: payload.get("allowed_mentions").cloned(),
            files,
            payload: payload.clone(),
        });
        bot_message(&id, &channel, &content)
    });
    axum::Json(response).into_response()
}

/// The message object Discord answers with, written by the fake's bot.
pub(super) fn bot_message(id: &str, channel: &str, content: &str) -> Value {
    json!({
        "id": id, "channel_id": channel, "content": content, "type": 0,
        "author": {"id": FAKE_BOT_ID, "username": "squidbot", "bot": true, "discriminator": "0"},
        "timestamp": "2025-01-01T00:00:00.000000+00:00", "edited_timestamp": null,
        "mentions": [], "attachments": [], "embeds": [], "pinned": false, "tts": false, "mention_everyone": false,
    })
}

async fn read_json(request: Request) -> Result<(Value, Vec<FakeFile>), String> {
    let body = Bytes::from_request(request, &()).await.map_err(|error| error.to_string())?;
    let payload: Value = serde_json::from_slice(&body).map_err(|error| format!("the body is not JSON: {error}"))?;
    Ok((payload, Vec::new()))
}

/// `payload_json` plus `files[n]` parts, each file matched by an `attachments` entry
/// with `id` n.
async fn read_multipart(request: Request) -> Result<(Value, Vec<FakeFile>), String> {
    let mut multipart = Multipart::from_request(request, &()).await.map_err(|error| error.to_string())?;
    let mut payload = None;
    let mut files = Vec::new();
    while let Some(field) = multipart.next_field().await.map_err(|error| error.to_string())? {
        let name = field.name().unwrap_or_default().to_owned();
        if name == "payload_json" {
            let text = field.text().await.map_err(|error| error.to_string())?;
            payload = Some(serde_json::from_str::<Value>(&text).map_err(|error| format!("bad payload_json: {error}"))?);
        } else if let Some(index) = name.strip_prefix("files[").and_then(|rest| rest.strip_suffix(']')) {
            let index: u64 = index.parse().map_err(|_bad| format!("bad part name {name}"))?;
            let file_name = field.file_name().unwrap_or_default().to_owned();
            let content_type = field.content_type().unwrap_or_default().to_owned();
            let bytes = field.bytes().await.map_err(|error| error.to_string())?.to_vec();
            files.push((index, FakeFile { name: file_name, content_type, bytes, announced_size: None }));
        } else {
            return Err(format!("unexpected part {name}"));
        }
    }
    let payload = payload.ok_or("no payload_json part")?;
    let described: Vec<u64> = payload
        .get("attachments")
        .and_then(Value::as_array)
        .map(|attachments| attachments.iter().filter_map(|attachment| attachment.get("id")?.as_u64()).collect())
        .unwrap_or_default();
    for (index, _) in &files {
        if !described.contains(index) {
            return Err(format!("files[{index}] has no entry in payload_json.attachments"));
        }
    }
    Ok((payload, files.into_iter().map(|(_, file)| file).collect()))
}

async fn edit_message(
    State(shared): State<Arc<Shared>>,
    Path((channel, message)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = gate(&shared, FakeRoute::EditMessage, &headers) {
        return refusal;
    }
    let Ok(payload) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "the body is not JSON", 50035);
    };
    let content = payload.get("content").and_then(Value::as_str).unwrap_or_default().to_owned();
    if content.chars().count() > MAX_CONTENT_CHARS {
        return error(StatusCode::BAD_REQUEST, "Invalid Form Body: content must be 2000 or fewer in length", 50035);
    }
    let found = shared.update(|state| {
        let known = state.sent.iter().any(|sent| sent.channel_id == channel && sent.message_id == message);
        if known {
            state.edits.push(EditRecord {
                channel_id: channel.clone(),
                message_id: message.clone(),
                content: content.clone(),
                allowed_mentions: payload.get("allowed_mentions").cloned(),
            });
        }
        known
    });
    if !found {
        return error(StatusCode::NOT_FOUND, "Unknown Message", 10008);
    }
    axum::Json(bot_message(&message, &channel, &content)).into_response()
}

async fn typing(State(shared): State<Arc<Shared>>, Path(channel): Path<String>, headers: HeaderMap) -> Response {
    if let Some(refusal) = gate(&shared, FakeRoute::Typing, &headers) {
        return refusal;
    }
    shared.update(|state| state.typing.push(channel));
    StatusCode::NO_CONTENT.into_response()
}

async fn react(
    State(shared): State<Arc<Shared>>,
    Path((channel, message, emoji)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Response {
    if let Some(refusal) = gate(&shared, FakeRoute::Reaction, &headers) {
        return refusal;
    }
    shared.update(|state| state.reactions.push(ReactionRecord { channel_id: channel, message_id: message, emoji }));
    StatusCode::NO_CONTENT.into_response()
}

/// A file of a pushed message, as the CDN serves it (no token needed, none expected).
async fn attachment(
    State(shared): State<Arc<Shared>>,
    Path((id, _name)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let (injected, file) =
        shared.update(|state| (state.take_injected(FakeRoute::Attachment), state.files.get(&id).cloned()));
    if headers.contains_key(header::AUTHORIZATION) {
        return error(StatusCode::BAD_REQUEST, "the CDN must not be sent the bot token", 0);
    }
    if let Some(injected) = injected {
        return injected_response(injected);
    }
    match file {
        Some(file) => ([(header::CONTENT_TYPE, file.content_type)], file.bytes).into_response(),
        None => error(StatusCode::NOT_FOUND, "404: Not Found", 0),
    }
}
