//! The fake's HTTP side: reading parameters, answering each Bot API method, the long
//! poll, file downloads.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::markup::html_problem;
use super::{MAX_BODY_BYTES, NOT_MODIFIED, Platform, RecordedRequest, Shared, StoredFile, UploadedFile, unix_now};

impl Platform {
    pub(super) fn queue(&mut self, mut update: Value) -> i64 {
        let update_id = match update.get("update_id").and_then(Value::as_i64) {
            Some(id) => id,
            None => {
                let id = self.next_update_id;
                update["update_id"] = id.into();
                id
            }
        };
        self.next_update_id = self.next_update_id.max(update_id + 1);
        self.history.insert(update_id, update.clone());
        self.pending.push(update);
        update_id
    }

    pub(super) fn store_file(&mut self, folder: &str, extension: &str, bytes: Vec<u8>) -> String {
        self.next_file += 1;
        let file_id = format!("file-{}", self.next_file);
        let path = format!("{folder}/file_{}.{extension}", self.next_file);
        self.files.insert(file_id.clone(), StoredFile { path, bytes });
        file_id
    }

    fn chat(&self, id: i64) -> Value {
        self.chats.get(&id).cloned().unwrap_or_else(|| {
            if id > 0 {
                json!({ "id": id, "type": "private" })
            } else {
                json!({ "id": id, "type": "supergroup", "title": "A group" })
            }
        })
    }

    fn new_bot_message(&mut self, chat_id: i64, parameters: &Value) -> (i64, Value) {
        let message_id = self.next_message_id;
        self.next_message_id += 1;
        let mut message = json!({ "message_id": message_id, "from": self.bot.clone(), "chat": self.chat(chat_id), "date": unix_now() });
        if let Some(thread) = parameters.get("message_thread_id").and_then(as_i64) {
            message["message_thread_id"] = thread.into();
            message["is_topic_message"] = true.into();
        }
        if let Some(replied) = parameters.pointer("/reply_parameters/message_id").and_then(as_i64) {
            message["reply_to_message"] =
                json!({ "message_id": replied, "chat": self.chat(chat_id), "date": unix_now() });
        }
        (message_id, message)
    }
}

/// A number given as a JSON number or a numeric string (form fields).
fn as_i64(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
}

fn envelope_ok(result: Value) -> Response {
    (StatusCode::OK, axum::Json(json!({ "ok": true, "result": result }))).into_response()
}

fn envelope_error(status: u16, description: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, axum::Json(json!({ "ok": false, "error_code": status, "description": description }))).into_response()
}

fn bad_request(description: &str) -> Response {
    envelope_error(400, &format!("Bad Request: {description}"))
}

/// Reads a request's parameters: JSON body, query string, or multipart form.
async fn parameters(query: HashMap<String, String>, request: Request) -> Result<(Value, Vec<UploadedFile>), String> {
    let mut parameters: Map<String, Value> =
        query.into_iter().map(|(key, value)| (key, Value::String(value))).collect();
    let mut files = Vec::new();
    let content_type =
        request.headers().get(header::CONTENT_TYPE).and_then(|value| value.to_str().ok()).unwrap_or("").to_owned();
    if content_type.starts_with("multipart/form-data") {
        let mut form = Multipart::from_request(request, &()).await.map_err(|error| error.body_text())?;
        while let Some(field) = form.next_field().await.map_err(|error| error.body_text())? {
            let name = field.name().unwrap_or("").to_owned();
            let file_name = field.file_name().map(str::to_owned);
            let mime = field.content_type().map(str::to_owned);
            let bytes = field.bytes().await.map_err(|error| error.body_text())?;
            if file_name.is_some() {
                files.push(UploadedFile { field: name, file_name, mime, bytes: bytes.to_vec() });
            } else {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                // Structured fields (ids, reply_parameters) arrive JSON-serialized.
                let structured = matches!(name.as_str(), "chat_id" | "message_thread_id" | "reply_parameters");
                let value = match serde_json::from_str::<Value>(&text) {
                    Ok(value) if structured => value,
                    _ => Value::String(text),
                };
                parameters.insert(name, value);
            }
        }
    } else {
        let body =
            axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await.map_err(|error| error.to_string())?;
        if !body.is_empty() {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(fields)) => parameters.extend(fields),
                _ => return Err("the body is not a JSON object".to_owned()),
            }
        }
    }
    Ok((Value::Object(parameters), files))
}

pub(super) async fn call(
    State(shared): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    request: Request,
) -> Response {
    let (parameters, files) = match parameters(query, request).await {
        Ok(read) => read,
        Err(problem) => return bad_request(&problem),
    };
    let index = {
        let mut state = shared.lock();
        let at = Instant::now();
        state.requests.push(RecordedRequest {
            method: method.clone(),
            params: parameters.clone(),
            files: files.clone(),
            at,
            status: 0,
        });
        state.requests.len() - 1
    };
    let response = answer(&shared, &bot, &method, &parameters, files).await;
    shared.lock().requests[index].status = response.status().as_u16();
    response
}

async fn answer(shared: &Shared, bot: &str, method: &str, parameters: &Value, files: Vec<UploadedFile>) -> Response {
    {
        let mut state = shared.lock();
        if bot.strip_prefix("bot") != Some(state.token.as_str()) {
            return envelope_error(401, "Unauthorized");
        }
        if let Some(fault) = state.faults.get_mut(method).and_then(VecDeque::pop_front) {
            let code = StatusCode::from_u16(fault.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return (code, [(header::CONTENT_TYPE, "application/json")], fault.body).into_response();
        }
    }
    if method == "getUpdates" {
        return get_updates(shared, parameters).await;
    }
    let mut state = shared.lock();
    let chat_id = parameters.get("chat_id").and_then(as_i64);
    match method {
        "getMe" => envelope_ok(state.bot.clone()),
        "deleteWebhook" => {
            state.webhook = None;
            envelope_ok(true.into())
        }
        "sendMessage" => {
            let Some(chat_id) = chat_id else { return bad_request("chat not found") };
            let text = parameters.get("text").and_then(Value::as_str).unwrap_or("");
            if text.trim().is_empty() {
                return bad_request("message text is empty");
            }
            if let Some(problem) = html_checked(parameters, text) {
                return bad_request(&format!("can't parse entities: {problem}"));
            }
            let (message_id, mut message) = state.new_bot_message(chat_id, parameters);
            message["text"] = text.into();
            state.bot_messages.insert((chat_id, message_id), Some(text.to_owned()));
            envelope_ok(message)
        }
        "editMessageText" => {
            let message_id = parameters.get("message_id").and_then(as_i64);
            let text = parameters.get("text").and_then(Value::as_str).unwrap_or("");
            let Some((chat_id, message_id)) = chat_id.zip(message_id) else {
                return bad_request("message to edit not found");
            };
            let previous = match state.bot_messages.get(&(chat_id, message_id)) {
                None => return bad_request("message to edit not found"),
                Some(None) => return bad_request("there is no text in the message to edit"),
                Some(Some(previous)) => previous.clone(),
            };
            if let Some(problem) = html_checked(parameters, text) {
                return bad_request(&format!("can't parse entities: {problem}"));
            }
            if previous == text {
                return envelope_error(400, NOT_MODIFIED);
            }
            state.bot_messages.insert((chat_id, message_id), Some(text.to_owned()));
            envelope_ok(json!({ "message_id": message_id, "from": state.bot.clone(), "chat": state.chat(chat_id),
                "date": unix_now(), "edit_date": unix_now(), "text": text }))
        }
        "sendChatAction" => match (chat_id, parameters.get("action").and_then(Value::as_str)) {
            (Some(_), Some("typing" | "upload_photo" | "upload_document" | "record_voice")) => envelope_ok(true.into()),
            _ => bad_request("wrong parameter action in request"),
        },
        "setMessageReaction" => {
            let message_id = parameters.get("message_id").and_then(as_i64);
            let known = chat_id
                .zip(message_id)
                .is_some_and(|key| state.user_messages.contains(&key) || state.bot_messages.contains_key(&key));
            if !known {
                return bad_request("message to react not found");
            }
            let emoji = parameters.pointer("/reaction/0/emoji").and_then(Value::as_str);
            if emoji.is_none_or(str::is_empty) {
                return bad_request("REACTION_INVALID");
            }
            envelope_ok(true.into())
        }
        "getFile" => {
            let file_id = parameters.get("file_id").and_then(Value::as_str).unwrap_or("");
            match state.files.get(file_id) {
                Some(file) => envelope_ok(json!({ "file_id": file_id, "file_unique_id": format!("u{file_id}"),
                    "file_size": file.bytes.len(), "file_path": file.path })),
                None => bad_request("invalid file_id"),
            }
        }
        "sendPhoto" | "sendDocument" => {
            let field = if method == "sendPhoto" { "photo" } else { "document" };
            let Some(chat_id) = chat_id else { return bad_request("chat not found") };
            let Some(file) = files.into_iter().find(|file| file.field == field) else {
                return bad_request(&format!("there is no {field} in the request"));
            };
            let caption = parameters.get("caption").and_then(Value::as_str);
            if let Some(problem) = caption.and_then(|caption| html_checked(parameters, caption)) {
                return bad_request(&format!("can't parse caption entities: can't parse entities: {problem}"));
            }
            let (message_id, mut message) = state.new_bot_message(chat_id, parameters);
            let size = file.bytes.len();
            let file_id = state.store_file(if field == "photo" { "photos" } else { "documents" }, "bin", file.bytes);
            message[field] = if field == "photo" {
                json!([{ "file_id": file_id, "file_unique_id": format!("u{file_id}"), "width": 800, "height": 600, "file_size": size }])
            } else {
                json!({ "file_id": file_id, "file_unique_id": format!("u{file_id}"), "file_name": file.file_name, "mime_type": file.mime, "file_size": size })
            };
            if let Some(caption) = caption {
                message["caption"] = caption.into();
            }
            state.bot_messages.insert((chat_id, message_id), caption.map(str::to_owned));
            envelope_ok(message)
        }
        _ => envelope_error(404, "Not Found"),
    }
}

fn html_checked(parameters: &Value, text: &str) -> Option<String> {
    let html =
        parameters.get("parse_mode").and_then(Value::as_str).is_some_and(|mode| mode.eq_ignore_ascii_case("html"));
    if html { html_problem(text) } else { None }
}

/// The long poll: confirms updates below `offset`, then answers the ones at or past it
/// as soon as there are any, or an empty list after `timeout` seconds.
async fn get_updates(shared: &Shared, parameters: &Value) -> Response {
    if shared.lock().webhook.is_some() {
        return envelope_error(
            409,
            "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first",
        );
    }
    let offset = parameters.get("offset").and_then(as_i64).unwrap_or(0);
    let limit = parameters.get("limit").and_then(as_i64).unwrap_or(100).clamp(1, 100);
    let timeout = parameters.get("timeout").and_then(as_i64).unwrap_or(0).max(0);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout.unsigned_abs());
    loop {
        let queued = shared.updates_queued.notified();
        tokio::pin!(queued);
        queued.as_mut().enable();
        {
            let mut state = shared.lock();
            let id = |update: &Value| update.get("update_id").and_then(Value::as_i64).unwrap_or(i64::MIN);
            if offset > 0 {
                state.pending.retain(|update| id(update) >= offset);
            }
            let mut ready: Vec<Value> = state.pending.iter().filter(|update| id(update) >= offset).cloned().collect();
            ready.sort_by_key(id);
            ready.truncate(usize::try_from(limit).unwrap_or(100));
            if !ready.is_empty() || tokio::time::Instant::now() >= deadline {
                return envelope_ok(Value::Array(ready));
            }
        }
        tokio::select! {
            () = &mut queued => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = shared.shutdown.cancelled() => return envelope_ok(json!([])),
        }
    }
}

pub(super) async fn download(State(shared): State<Arc<Shared>>, Path((bot, path)): Path<(String, String)>) -> Response {
    let mut state = shared.lock();
    let at = Instant::now();
    let index = state.requests.len();
    state.requests.push(RecordedRequest {
        method: "file".to_owned(),
        params: json!({ "file_path": path }),
        files: Vec::new(),
        at,
        status: 0,
    });
    let response = if bot.strip_prefix("bot") != Some(state.token.as_str()) {
        envelope_error(401, "Unauthorized")
    } else if let Some(fault) = state.faults.get_mut("file").and_then(VecDeque::pop_front) {
        (StatusCode::from_u16(fault.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), fault.body).into_response()
    } else {
        match state.files.values().find(|file| file.path == path) {
            Some(file) => {
                (StatusCode::OK, [(header::CONTENT_TYPE, "application/octet-stream")], Bytes::from(file.bytes.clone()))
                    .into_response()
            }
            None => envelope_error(404, "Not Found"),
        }
    };
    state.requests[index].status = response.status().as_u16();
    response
}
