//! The fake's HTTP side: the Web API methods (JSON or form arguments, bearer tokens),
//! private file downloads and the upload URLs of the external upload flow.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest as _, Multipart, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{any, get, post};
use serde_json::{Map, Value, json};

use super::state::{Author, Shared, State as FakeState, StoredMessage, UploadSlot};
use super::{ApiCall, BOT_ID, BOT_USER_ID, Failure, MessageUpdate, PostedMessage, Reaction, TEAM_ID, Upload, socket};

/// Slack cuts messages after this many characters and refuses longer ones.
const MAX_TEXT_CHARS: usize = 40_000;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/api/{method}", any(api))
        .route("/link/", get(socket::upgrade))
        .route("/files-pri/{key}/{*rest}", get(download))
        .route("/upload/v1/{slot}", post(upload))
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// Any Web API method.
async fn api(
    State(shared): State<Arc<Shared>>,
    Path(method): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    body: Bytes,
) -> Response {
    let is_json = content_type(&headers).starts_with("application/json");
    let mut params = Map::new();
    if let Some(query) = uri.query() {
        params.extend(decode_form(query));
    }
    if is_json {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(object)) => params.extend(object),
            Ok(_) | Err(_) => return slack_error("invalid_json"),
        }
    } else {
        params.extend(decode_form(&String::from_utf8_lossy(&body)));
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::to_owned);
    let token = bearer.or_else(|| params.get("token").and_then(Value::as_str).map(str::to_owned));
    let mut state = shared.lock();
    let encoding = if is_json { "json" } else { "form" };
    state.calls.push(ApiCall { method: method.clone(), encoding, params: params.clone() });
    if let Some(failure) = state.failures.get_mut(&method).and_then(|queue| queue.pop_front()) {
        return scripted_failure(failure);
    }
    if let Err(code) = check_token(&shared, &method, token.as_deref()) {
        return slack_error(code);
    }
    let answer = match method.as_str() {
        "auth.test" => Ok(json!({
            "url": "https://fake.slack.com/", "team": "Fake Team", "user": "squidbot",
            "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID, "is_enterprise_install": false
        })),
        "apps.connections.open" => Ok(open_connection(&mut state)),
        "chat.postMessage" => post_message(&mut state, &params),
        "chat.update" => update_message(&mut state, &params),
        "reactions.add" => add_reaction(&mut state, &params),
        "files.getUploadURLExternal" => upload_url(&mut state, &params),
        "files.completeUploadExternal" => complete_upload(&mut state, &params),
        _ => Err("unknown_method"),
    };
    match answer {
        Ok(Value::Object(mut object)) => {
            object.insert("ok".to_owned(), Value::Bool(true));
            axum::Json(Value::Object(object)).into_response()
        }
        Ok(other) => axum::Json(other).into_response(),
        Err(code) => slack_error(code),
    }
}

fn check_token(shared: &Shared, method: &str, token: Option<&str>) -> Result<(), &'static str> {
    let (expected, other) = if method == "apps.connections.open" {
        (shared.app_token.as_str(), shared.bot_token.as_str())
    } else {
        (shared.bot_token.as_str(), shared.app_token.as_str())
    };
    match token {
        None | Some("") => Err("not_authed"),
        Some(token) if token == expected => Ok(()),
        Some(token) if token == other => Err("not_allowed_token_type"),
        Some(_) => Err("invalid_auth"),
    }
}

fn open_connection(state: &mut FakeState) -> Value {
    let ticket = format!("fake-ticket-{}", state.next_number());
    state.tickets.insert(ticket.clone());
    state.connections_opened += 1;
    json!({"url": format!("ws://{}/link/?ticket={ticket}&app_id={}", state.address, super::APP_ID)})
}

fn post_message(state: &mut FakeState, params: &Map<String, Value>) -> Result<Value, &'static str> {
    let channel = string(params, "channel").ok_or("channel_not_found")?;
    let text = string(params, "text").ok_or("no_text")?;
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err("msg_too_long");
    }
    let thread_ts = string(params, "thread_ts");
    let ts = state.next_ts();
    state.messages.insert((channel.clone(), ts.clone()), StoredMessage { author: Author::Bot, text: text.clone() });
    state.posted.push(PostedMessage {
        channel: channel.clone(),
        text: text.clone(),
        thread_ts: thread_ts.clone(),
        ts: ts.clone(),
        mrkdwn: flag(params, "mrkdwn"),
        unfurl_links: flag(params, "unfurl_links"),
    });
    let mut message = json!({"type": "message", "text": text, "user": BOT_USER_ID, "bot_id": BOT_ID, "ts": ts});
    if let Some(thread_ts) = thread_ts {
        message["thread_ts"] = json!(thread_ts);
    }
    Ok(json!({"channel": channel, "ts": ts, "message": message}))
}

fn update_message(state: &mut FakeState, params: &Map<String, Value>) -> Result<Value, &'static str> {
    let channel = string(params, "channel").ok_or("channel_not_found")?;
    let ts = string(params, "ts").ok_or("message_not_found")?;
    let text = string(params, "text").ok_or("no_text")?;
    if text.chars().count() > MAX_TEXT_CHARS {
        return Err("msg_too_long");
    }
    let stored = state.messages.get_mut(&(channel.clone(), ts.clone())).ok_or("message_not_found")?;
    if stored.author != Author::Bot {
        return Err("cant_update_message");
    }
    stored.text = text.clone();
    state.updates.push(MessageUpdate { channel: channel.clone(), ts: ts.clone(), text: text.clone() });
    Ok(json!({"channel": channel, "ts": ts, "text": text}))
}

fn add_reaction(state: &mut FakeState, params: &Map<String, Value>) -> Result<Value, &'static str> {
    let channel = string(params, "channel").ok_or("channel_not_found")?;
    let timestamp = string(params, "timestamp").ok_or("message_not_found")?;
    let name = string(params, "name").ok_or("invalid_name")?;
    if !state.messages.contains_key(&(channel.clone(), timestamp.clone())) {
        return Err("message_not_found");
    }
    let reaction = Reaction { channel, timestamp, name };
    if state.reactions.contains(&reaction) {
        return Err("already_reacted");
    }
    state.reactions.push(reaction);
    Ok(json!({}))
}

fn upload_url(state: &mut FakeState, params: &Map<String, Value>) -> Result<Value, &'static str> {
    let filename = string(params, "filename").ok_or("invalid_arguments")?;
    let length = match params.get("length") {
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => text.parse().ok(),
        Some(_) | None => None,
    }
    .ok_or("invalid_arguments")?;
    let file_id = format!("F0{:06}", state.next_number());
    state.upload_slots.insert(file_id.clone(), UploadSlot { filename, length, bytes: None });
    Ok(json!({"upload_url": format!("http://{}/upload/v1/{file_id}", state.address), "file_id": file_id}))
}

fn complete_upload(state: &mut FakeState, params: &Map<String, Value>) -> Result<Value, &'static str> {
    // Form-encoded calls send `files` as a JSON string.
    let files = match params.get("files") {
        Some(Value::Array(files)) => files.clone(),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(files)) => files,
            Ok(_) | Err(_) => return Err("invalid_arguments"),
        },
        Some(_) | None => return Err("invalid_arguments"),
    };
    if files.is_empty() {
        return Err("invalid_arguments");
    }
    let channel_id = string(params, "channel_id");
    let thread_ts = string(params, "thread_ts");
    let initial_comment = string(params, "initial_comment");
    let mut completed = Vec::new();
    for file in &files {
        let id = file.get("id").and_then(Value::as_str).ok_or("invalid_arguments")?;
        let slot = state.upload_slots.get(id).ok_or("file_not_found")?;
        let bytes = slot.bytes.clone().ok_or("file_not_found")?;
        if bytes.len() as u64 != slot.length {
            return Err("length_mismatch");
        }
        let title = file.get("title").and_then(Value::as_str).map(str::to_owned);
        completed.push((id.to_owned(), slot.filename.clone(), title, bytes));
    }
    let message_ts = channel_id.as_ref().map(|channel| {
        let ts = state.next_ts();
        let text = initial_comment.clone().unwrap_or_default();
        state.messages.insert((channel.clone(), ts.clone()), StoredMessage { author: Author::Bot, text });
        ts
    });
    let mut answered = Vec::new();
    for (file_id, filename, title, bytes) in completed {
        state.upload_slots.remove(&file_id);
        let mut file =
            json!({"id": file_id, "name": filename, "title": title.clone().unwrap_or_else(|| filename.clone())});
        if let (Some(channel), Some(ts)) = (&channel_id, &message_ts) {
            let visibility = if channel.starts_with('C') { "public" } else { "private" };
            file["shares"] = json!({visibility: {channel.as_str(): [{"ts": ts}]}});
        }
        answered.push(file);
        state.uploads.push(Upload {
            file_id,
            filename,
            title,
            bytes,
            channel_id: channel_id.clone(),
            thread_ts: thread_ts.clone(),
            initial_comment: initial_comment.clone(),
            message_ts: message_ts.clone(),
        });
    }
    Ok(json!({"files": answered}))
}

/// `GET /files-pri/<team>-<file>/…`: the file for the bot token, Slack's sign-in page
/// (HTML, status 200) for anyone else.
async fn download(
    State(shared): State<Arc<Shared>>,
    Path((key, _rest)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let authorized = headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok())
        == Some(format!("Bearer {}", shared.bot_token).as_str());
    if !authorized {
        let page = "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Fake Team</body></html>";
        return ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response();
    }
    let mut state = shared.lock();
    let Some(stored) = state.files.get(&key) else {
        return (StatusCode::NOT_FOUND, "file not found").into_response();
    };
    let id = stored.id.clone();
    let mime = HeaderValue::from_str(&stored.file.mimetype)
        .unwrap_or_else(|_invalid| HeaderValue::from_static("application/octet-stream"));
    let bytes = stored.file.bytes.clone();
    state.downloads.push(id);
    ([(header::CONTENT_TYPE, mime)], bytes).into_response()
}

/// `POST /upload/v1/<file id>`: the file's bytes, raw or as a multipart form's first file.
async fn upload(State(shared): State<Arc<Shared>>, Path(slot): Path<String>, request: Request) -> Response {
    let bytes = if content_type(request.headers()).starts_with("multipart/form-data") {
        match first_multipart_file(request).await {
            Some(bytes) => bytes,
            None => return (StatusCode::BAD_REQUEST, "no file in the form").into_response(),
        }
    } else {
        match Bytes::from_request(request, &()).await {
            Ok(bytes) => bytes.to_vec(),
            Err(rejection) => return rejection.into_response(),
        }
    };
    let mut state = shared.lock();
    let Some(slot) = state.upload_slots.get_mut(&slot) else {
        return (StatusCode::NOT_FOUND, "unknown upload URL").into_response();
    };
    let length = bytes.len();
    slot.bytes = Some(bytes);
    (StatusCode::OK, format!("OK - {length}")).into_response()
}

async fn first_multipart_file(request: Request) -> Option<Vec<u8>> {
    let mut form = Multipart::from_request(request, &()).await.ok()?;
    while let Some(field) = form.next_field().await.ok()? {
        if field.file_name().is_some() || field.name() == Some("file") {
            return field.bytes().await.ok().map(|bytes| bytes.to_vec());
        }
    }
    None
}

fn scripted_failure(failure: Failure) -> Response {
    match failure {
        Failure::RateLimited(wait) => {
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let body = axum::Json(json!({"ok": false, "error": "ratelimited"}));
            (StatusCode::TOO_MANY_REQUESTS, [(header::RETRY_AFTER, seconds.to_string())], body).into_response()
        }
        Failure::Status(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, "upstream trouble").into_response()
        }
        Failure::Error(code) => axum::Json(json!({"ok": false, "error": code})).into_response(),
    }
}

fn slack_error(code: &str) -> Response {
    axum::Json(json!({"ok": false, "error": code})).into_response()
}

fn content_type(headers: &HeaderMap) -> &str {
    headers.get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("")
}

/// A non-empty string argument.
fn string(params: &Map<String, Value>, name: &str) -> Option<String> {
    params.get(name).and_then(Value::as_str).filter(|value| !value.is_empty()).map(str::to_owned)
}

/// A boolean argument, sent as JSON or as the form strings `true`/`false`/`1`/`0`.
fn flag(params: &Map<String, Value>, name: &str) -> Option<bool> {
    match params.get(name)? {
        Value::Bool(value) => Some(*value),
        Value::String(text) => match text.as_str() {
            "true" | "1" => Some(true),
            "false" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// `application/x-www-form-urlencoded` pairs as string values.
fn decode_form(text: &str) -> Map<String, Value> {
    text.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(name), Value::String(percent_decode(value)))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        let hex = bytes.get(index + 1..index + 3).and_then(|digits| std::str::from_utf8(digits).ok());
        match (byte, hex.and_then(|digits| u8::from_str_radix(digits, 16).ok())) {
            (b'%', Some(value)) => {
                decoded.push(value);
                index += 3;
            }
            (b'+', _) => {
                decoded.push(b' ');
                index += 1;
            }
            (other, _) => {
                decoded.push(other);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_bodies_decode_like_slack_reads_them() {
        let params = decode_form("filename=my+notes%20%281%29.txt&length=12&empty=&flag");
        assert_eq!(params.get("filename"), Some(&json!("my notes (1).txt")));
        assert_eq!(params.get("length"), Some(&json!("12")));
        assert_eq!(params.get("empty"), Some(&json!("")));
        assert_eq!(params.get("flag"), Some(&json!("")));
        assert_eq!(percent_decode("100%"), "100%");
    }
}
