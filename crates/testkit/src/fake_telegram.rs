//! A local fake of the Telegram Bot API (the endpoints the adapter uses), for tests.
//!
//! It speaks the documented wire format: `POST /bot<token>/<method>` with JSON or
//! multipart parameters, answers in the `{"ok":true,"result":...}` envelope (or
//! `{"ok":false,"error_code":...,"description":...}`), and serves files at
//! `/file/bot<token>/<file_path>`. `getUpdates` long-polls: it answers at once when
//! updates at or past `offset` are queued, else waits up to `timeout` seconds; a poll
//! with a higher offset confirms (forgets) the updates below it.
//!
//! ```no_run
//! # async fn example() {
//! use squidbot_testkit::fake_telegram::{ChatKind, FakeTelegram, FakeUser};
//! let telegram = FakeTelegram::start("123:secret").await;
//! let ada = FakeUser::new(1, "Ada");
//! telegram.push_user_message(1, ChatKind::Private, &ada, "hello");
//! // point the adapter at telegram.api_base(), run it, then:
//! let sent = telegram.wait_for_sent(1, std::time::Duration::from_secs(5)).await;
//! assert_eq!(sent[0].params["chat_id"], 1);
//! # }
//! ```

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The fake bot's username (without `@`).
pub const BOT_USERNAME: &str = "thebot";

/// The description of Telegram's 400 for an edit that changes nothing.
pub const NOT_MODIFIED: &str = "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message";

/// Largest request body accepted (uploads).
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// The kind of chat a pushed message is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChatKind {
    /// A one-to-one chat with the bot (`"private"`).
    Private,
    /// A basic group (`"group"`).
    Group,
    /// A supergroup (`"supergroup"`).
    Supergroup,
    /// A supergroup with topics (`"supergroup"`, `is_forum: true`).
    Forum,
}

/// A Telegram user who writes to the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeUser {
    /// The user id.
    pub id: i64,
    /// Whether the user is a bot.
    pub is_bot: bool,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: Option<String>,
    /// Username without `@`.
    pub username: Option<String>,
}

impl FakeUser {
    /// A human user with a first name only.
    pub fn new(id: i64, first_name: &str) -> Self {
        Self { id, is_bot: false, first_name: first_name.to_owned(), last_name: None, username: None }
    }

    /// The same user with a last name.
    pub fn with_last_name(mut self, last_name: &str) -> Self {
        self.last_name = Some(last_name.to_owned());
        self
    }

    /// The same user with a username.
    pub fn with_username(mut self, username: &str) -> Self {
        self.username = Some(username.to_owned());
        self
    }

    /// The same user flagged as a bot.
    pub fn as_bot(mut self) -> Self {
        self.is_bot = true;
        self
    }

    /// The Bot API `User` object.
    pub fn to_json(&self) -> Value {
        let mut user = json!({ "id": self.id, "is_bot": self.is_bot, "first_name": self.first_name });
        if let Some(last_name) = &self.last_name {
            user["last_name"] = last_name.as_str().into();
        }
        if let Some(username) = &self.username {
            user["username"] = username.as_str().into();
        }
        user
    }
}

/// A file sent with a pushed message.
#[derive(Debug, Clone)]
enum Media {
    Photo(Vec<u8>),
    Document { name: String, mime: String, bytes: Vec<u8> },
}

/// A message a user writes to the bot, built up and then pushed with
/// [`FakeTelegram::push`]. Entities are detected as Telegram does (a leading
/// `/command`, `@username` mentions) unless given.
#[derive(Debug, Clone)]
pub struct IncomingMessage {
    chat_id: i64,
    kind: ChatKind,
    from: FakeUser,
    text: String,
    entities: Option<Value>,
    reply_to_bot: Option<i64>,
    thread: Option<i64>,
    media: Vec<Media>,
}

impl IncomingMessage {
    /// A message from `from` in chat `chat_id`.
    pub fn new(chat_id: i64, kind: ChatKind, from: &FakeUser) -> Self {
        Self {
            chat_id,
            kind,
            from: from.clone(),
            text: String::new(),
            entities: None,
            reply_to_bot: None,
            thread: None,
            media: Vec::new(),
        }
    }

    /// Its text (the caption when a file is attached).
    pub fn text(mut self, text: &str) -> Self {
        self.text = text.to_owned();
        self
    }

    /// Its entities, instead of the detected ones (offsets in UTF-16 code units).
    pub fn entities(mut self, entities: Value) -> Self {
        self.entities = Some(entities);
        self
    }

    /// Makes it a reply to the bot's message `message_id`.
    pub fn reply_to_bot(mut self, message_id: i64) -> Self {
        self.reply_to_bot = Some(message_id);
        self
    }

    /// Puts it in forum topic `thread_id`.
    pub fn in_topic(mut self, thread_id: i64) -> Self {
        self.thread = Some(thread_id);
        self
    }

    /// Attaches a photo (as a thumbnail and a full size; the full size holds `bytes`).
    pub fn photo(mut self, bytes: Vec<u8>) -> Self {
        self.media.push(Media::Photo(bytes));
        self
    }

    /// Attaches a document.
    pub fn document(mut self, name: &str, mime: &str, bytes: Vec<u8>) -> Self {
        self.media.push(Media::Document { name: name.to_owned(), mime: mime.to_owned(), bytes });
        self
    }
}

/// Ids of a pushed update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// The update's `update_id`.
    pub update_id: i64,
    /// The message's `message_id`.
    pub message_id: i64,
}

/// A file part of a multipart request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedFile {
    /// The form field (`photo`, `document`).
    pub field: String,
    /// The part's file name.
    pub file_name: Option<String>,
    /// The part's content type.
    pub mime: Option<String>,
    /// The content.
    pub bytes: Vec<u8>,
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// The Bot API method (`sendMessage`), or `file` for a download.
    pub method: String,
    /// Its parameters as JSON (multipart text fields holding JSON are parsed).
    pub params: Value,
    /// The file parts of a multipart request.
    pub files: Vec<UploadedFile>,
    /// When it arrived.
    pub at: Instant,
    /// The HTTP status answered (0 while a long poll is still open).
    pub status: u16,
}

/// A scripted failure for the next call of a method.
#[derive(Debug, Clone)]
struct Fault {
    status: u16,
    body: String,
}

#[derive(Debug, Clone)]
struct StoredFile {
    path: String,
    bytes: Vec<u8>,
}

#[derive(Debug, Default)]
struct Platform {
    token: String,
    bot: Value,
    next_update_id: i64,
    next_message_id: i64,
    next_file: u64,
    /// Updates not yet confirmed by a poll with a higher offset.
    pending: Vec<Value>,
    /// Every update ever queued, by id, for redelivery.
    history: HashMap<i64, Value>,
    chats: HashMap<i64, Value>,
    /// Texts (or `None` for media) of messages the bot sent, by (chat, message).
    bot_messages: HashMap<(i64, i64), Option<String>>,
    user_messages: HashSet<(i64, i64)>,
    files: HashMap<String, StoredFile>,
    faults: HashMap<String, VecDeque<Fault>>,
    requests: Vec<RecordedRequest>,
    webhook: Option<String>,
}

struct Shared {
    state: Mutex<Platform>,
    updates_queued: Notify,
    shutdown: CancellationToken,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Platform> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Cancels the server when the last handle goes away.
struct Lifetime {
    shutdown: CancellationToken,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// Handle to a fake Bot API server on a tokio task; it stops when the last clone drops.
#[derive(Clone)]
pub struct FakeTelegram {
    shared: Arc<Shared>,
    address: SocketAddr,
    _lifetime: Arc<Lifetime>,
}

impl fmt::Debug for FakeTelegram {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("FakeTelegram").field("address", &self.address).finish_non_exhaustive()
    }
}

impl FakeTelegram {
    /// Starts a fake for the bot with `token` (`<bot id>:<secret>`; the bot's id is the
    /// number before the colon) on `127.0.0.1:0`. Panics if no port can be bound.
    pub async fn start(token: &str) -> FakeTelegram {
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await {
            Ok(listener) => listener,
            Err(error) => panic!("can't bind the fake Telegram server: {error}"),
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => panic!("can't read the fake Telegram server's address: {error}"),
        };
        let bot_id = token.split(':').next().and_then(|id| id.parse::<i64>().ok()).unwrap_or(1_000_000);
        let state = Platform {
            token: token.to_owned(),
            bot: json!({ "id": bot_id, "is_bot": true, "first_name": "The Bot", "username": BOT_USERNAME,
                          "can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false }),
            next_update_id: 100,
            next_message_id: 1,
            ..Platform::default()
        };
        let shutdown = CancellationToken::new();
        let shared =
            Arc::new(Shared { state: Mutex::new(state), updates_queued: Notify::new(), shutdown: shutdown.clone() });
        let router = Router::new()
            .route("/file/{bot}/{*path}", get(download))
            .route("/{bot}/{method}", any(call))
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(Arc::clone(&shared));
        let stopped = shutdown.clone().cancelled_owned();
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).with_graceful_shutdown(stopped).await {
                eprintln!("fake Telegram: {error}");
            }
        });
        FakeTelegram { shared, address, _lifetime: Arc::new(Lifetime { shutdown }) }
    }

    /// The base URL the adapter is configured with (`http://127.0.0.1:PORT`).
    pub fn api_base(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The bot's user id.
    pub fn bot_id(&self) -> i64 {
        self.shared.lock().bot["id"].as_i64().unwrap_or_default()
    }

    /// Queues a text message from `from` in chat `chat` as an update.
    pub fn push_user_message(&self, chat: i64, kind: ChatKind, from: &FakeUser, text: &str) -> Pushed {
        self.push(IncomingMessage::new(chat, kind, from).text(text))
    }

    /// Queues a message as an update.
    pub fn push(&self, incoming: IncomingMessage) -> Pushed {
        let mut state = self.shared.lock();
        let message_id = state.next_message_id;
        state.next_message_id += 1;
        let chat = chat_json(incoming.chat_id, incoming.kind, &incoming.from);
        state.chats.insert(incoming.chat_id, chat.clone());
        state.user_messages.insert((incoming.chat_id, message_id));
        let mut message = json!({ "message_id": message_id, "from": incoming.from.to_json(), "chat": chat, "date": unix_now() });
        let entities = incoming.entities.clone().unwrap_or_else(|| detect_entities(&incoming.text));
        let (text_field, entities_field) =
            if incoming.media.is_empty() { ("text", "entities") } else { ("caption", "caption_entities") };
        if !incoming.text.is_empty() {
            message[text_field] = incoming.text.as_str().into();
            if entities.as_array().is_some_and(|entities| !entities.is_empty()) {
                message[entities_field] = entities;
            }
        }
        if let Some(thread) = incoming.thread {
            message["message_thread_id"] = thread.into();
            message["is_topic_message"] = true.into();
        }
        if let Some(replied) = incoming.reply_to_bot {
            let text = state.bot_messages.get(&(incoming.chat_id, replied)).cloned().flatten();
            message["reply_to_message"] = json!({ "message_id": replied, "from": state.bot.clone(),
                "chat": message["chat"].clone(), "date": unix_now(), "text": text.unwrap_or_else(|| "an earlier reply".to_owned()) });
        }
        for media in incoming.media {
            match media {
                Media::Photo(bytes) => {
                    let thumbnail = state.store_file("photos", "jpg", vec![0xFF; 16]);
                    let full_size = bytes.len();
                    let full = state.store_file("photos", "jpg", bytes);
                    message["photo"] = json!([
                        { "file_id": thumbnail, "file_unique_id": format!("u{thumbnail}"), "width": 90, "height": 67, "file_size": 16 },
                        { "file_id": full, "file_unique_id": format!("u{full}"), "width": 1280, "height": 960, "file_size": full_size },
                    ]);
                }
                Media::Document { name, mime, bytes } => {
                    let size = bytes.len();
                    let file_id = state.store_file("documents", "bin", bytes);
                    message["document"] = json!({ "file_id": file_id, "file_unique_id": format!("u{file_id}"),
                        "file_name": name, "mime_type": mime, "file_size": size });
                }
            }
        }
        let update_id = state.queue(json!({ "message": message }));
        drop(state);
        self.shared.updates_queued.notify_waiters();
        Pushed { update_id, message_id }
    }

    /// Queues any JSON object as an update (an `update_id` is added when missing), for
    /// malformed or unknown updates. Panics unless `update` is an object.
    pub fn push_raw_update(&self, update: Value) -> i64 {
        assert!(update.is_object(), "a raw update must be a JSON object");
        let update_id = self.shared.lock().queue(update);
        self.shared.updates_queued.notify_waiters();
        update_id
    }

    /// Queues a past update again under a new `update_id`, as Telegram does when it
    /// redelivers. Returns the new id. Panics if `update_id` was never queued.
    pub fn push_duplicate(&self, update_id: i64) -> i64 {
        let mut state = self.shared.lock();
        let Some(mut update) = state.history.get(&update_id).cloned() else {
            panic!("update {update_id} was never queued");
        };
        if let Some(fields) = update.as_object_mut() {
            fields.remove("update_id");
        }
        let new_id = state.queue(update);
        drop(state);
        self.shared.updates_queued.notify_waiters();
        new_id
    }

    /// Makes `getUpdates` answer 409 Conflict until `deleteWebhook` is called.
    pub fn set_webhook(&self, url: &str) {
        self.shared.lock().webhook = Some(url.to_owned());
    }

    /// Whether a webhook is set.
    pub fn webhook(&self) -> Option<String> {
        self.shared.lock().webhook.clone()
    }

    /// The next call of `method` (`file` for downloads) answers `status` with the JSON
    /// `body`. Faults queue up in order.
    pub fn fail_next(&self, method: &str, status: u16, body: Value) {
        self.fail_next_raw(method, status, &body.to_string());
    }

    /// The next call of `method` answers `status` with `body` as is (e.g. not JSON).
    pub fn fail_next_raw(&self, method: &str, status: u16, body: &str) {
        let fault = Fault { status, body: body.to_owned() };
        self.shared.lock().faults.entry(method.to_owned()).or_default().push_back(fault);
    }

    /// The next call of `method` answers 429 with `parameters.retry_after`.
    pub fn rate_limit_next(&self, method: &str, retry_after_secs: u64) {
        let body = json!({ "ok": false, "error_code": 429,
            "description": format!("Too Many Requests: retry after {retry_after_secs}"),
            "parameters": { "retry_after": retry_after_secs } });
        self.fail_next(method, 429, body);
    }

    /// Every request received, in order (wrong-token and failed ones included).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// The requests for `method`, in order, whatever was answered.
    pub fn requests_for(&self, method: &str) -> Vec<RecordedRequest> {
        self.shared.lock().requests.iter().filter(|request| request.method == method).cloned().collect()
    }

    fn accepted(&self, methods: &[&str]) -> Vec<RecordedRequest> {
        let state = self.shared.lock();
        let accepted = |request: &&RecordedRequest| request.status == 200 && methods.contains(&request.method.as_str());
        state.requests.iter().filter(accepted).cloned().collect()
    }

    /// Accepted `sendMessage` requests.
    pub fn sent(&self) -> Vec<RecordedRequest> {
        self.accepted(&["sendMessage"])
    }

    /// Accepted `editMessageText` requests.
    pub fn edits(&self) -> Vec<RecordedRequest> {
        self.accepted(&["editMessageText"])
    }

    /// Accepted `sendChatAction` requests.
    pub fn chat_actions(&self) -> Vec<RecordedRequest> {
        self.accepted(&["sendChatAction"])
    }

    /// Accepted `setMessageReaction` requests.
    pub fn reactions(&self) -> Vec<RecordedRequest> {
        self.accepted(&["setMessageReaction"])
    }

    /// Accepted `sendPhoto` and `sendDocument` requests.
    pub fn uploads(&self) -> Vec<RecordedRequest> {
        self.accepted(&["sendPhoto", "sendDocument"])
    }

    /// Waits until `count` messages were sent and returns them. Panics after `timeout`.
    pub async fn wait_for_sent(&self, count: usize, timeout: Duration) -> Vec<RecordedRequest> {
        self.wait_until(timeout, &format!("{count} sent messages"), || {
            let sent = self.sent();
            (sent.len() >= count).then_some(sent)
        })
        .await
    }

    /// Waits until `count` requests for `method` arrived and returns them. Panics after
    /// `timeout`.
    pub async fn wait_for_requests(&self, method: &str, count: usize, timeout: Duration) -> Vec<RecordedRequest> {
        self.wait_until(timeout, &format!("{count} {method} requests"), || {
            let requests = self.requests_for(method);
            (requests.len() >= count).then_some(requests)
        })
        .await
    }

    async fn wait_until<T>(&self, timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(found) = check() {
                return found;
            }
            if Instant::now() >= deadline {
                let methods: Vec<String> = self.requests().into_iter().map(|request| request.method).collect();
                panic!("fake Telegram: no {what} within {timeout:?}; requests so far: {methods:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Platform {
    fn queue(&mut self, mut update: Value) -> i64 {
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

    fn store_file(&mut self, folder: &str, extension: &str, bytes: Vec<u8>) -> String {
        self.next_file += 1;
        let file_id = format!("file-{}", self.next_file);
        let path = format!("{folder}/file_{}.{extension}", self.next_file);
        self.files.insert(file_id.clone(), StoredFile { path, bytes });
        file_id
    }

    fn chat(&self, id: i64) -> Value {
        self.chats.get(&id).cloned().unwrap_or_else(|| {
            if id > 0 { json!({ "id": id, "type": "private" }) } else { json!({ "id": id, "type": "supergroup", "title": "A group" }) }
        })
    }

    fn new_bot_message(&mut self, chat_id: i64, parameters: &Value) -> (i64, Value) {
        let message_id = self.next_message_id;
        self.next_message_id += 1;
        let mut message =
            json!({ "message_id": message_id, "from": self.bot.clone(), "chat": self.chat(chat_id), "date": unix_now() });
        if let Some(thread) = parameters.get("message_thread_id").and_then(as_i64) {
            message["message_thread_id"] = thread.into();
            message["is_topic_message"] = true.into();
        }
        if let Some(replied) = parameters.pointer("/reply_parameters/message_id").and_then(as_i64) {
            message["reply_to_message"] = json!({ "message_id": replied, "chat": self.chat(chat_id), "date": unix_now() });
        }
        (message_id, message)
    }
}

fn chat_json(id: i64, kind: ChatKind, from: &FakeUser) -> Value {
    match kind {
        ChatKind::Private => json!({ "id": id, "type": "private", "first_name": from.first_name }),
        ChatKind::Group => json!({ "id": id, "type": "group", "title": "A group" }),
        ChatKind::Supergroup => json!({ "id": id, "type": "supergroup", "title": "A supergroup" }),
        ChatKind::Forum => json!({ "id": id, "type": "supergroup", "title": "A forum", "is_forum": true }),
    }
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or_default()
}

/// A number given as a JSON number or a numeric string (form fields).
fn as_i64(value: &Value) -> Option<i64> {
    value.as_i64().or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
}

/// Entities as Telegram finds them in plain text: a leading `/command[@bot]` and
/// `@username` mentions, with offsets and lengths in UTF-16 code units.
fn detect_entities(text: &str) -> Value {
    let mut entities = Vec::new();
    let characters: Vec<char> = text.chars().collect();
    let utf16_offset = |index: usize| characters.iter().take(index).map(|character| character.len_utf16()).sum::<usize>();
    let word_character = |character: char| character.is_ascii_alphanumeric() || character == '_';
    let mut index = 0;
    while index < characters.len() {
        let starts_word = index == 0 || !word_character(characters[index - 1]);
        let marker = characters[index];
        if starts_word && (marker == '@' || (marker == '/' && index == 0)) {
            let mut end = index + 1;
            while end < characters.len() && (word_character(characters[end]) || (marker == '/' && characters[end] == '@')) {
                end += 1;
            }
            let kind = if marker == '@' { "mention" } else { "bot_command" };
            if end - index > 1 {
                let offset = utf16_offset(index);
                entities.push(json!({ "type": kind, "offset": offset, "length": utf16_offset(end) - offset }));
            }
            index = end;
        } else {
            index += 1;
        }
    }
    Value::Array(entities)
}

/// Why Telegram would refuse `text` with `parse_mode` HTML, if it would.
fn html_problem(text: &str) -> Option<String> {
    const SUPPORTED: [&str; 15] = [
        "b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "code", "pre", "blockquote",
    ];
    let mut open: Vec<&str> = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('<') {
        let offset = text.len() - rest.len() + start;
        let tail = &rest[start + 1..];
        let Some(end) = tail.find('>') else { return Some(format!("Unclosed start tag at byte offset {offset}")) };
        let tag = &tail[..end];
        let closing = tag.strip_prefix('/');
        let name = closing.unwrap_or(tag).split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        if !SUPPORTED.contains(&name.as_str()) {
            return Some(format!("Unsupported start tag \"{name}\" at byte offset {offset}"));
        }
        let name = SUPPORTED.iter().find(|supported| **supported == name).copied().unwrap_or("");
        if closing.is_some() {
            if open.pop() != Some(name) {
                return Some(format!("Unmatched end tag at byte offset {offset}"));
            }
        } else {
            open.push(name);
        }
        rest = &tail[end + 1..];
    }
    open.last().map(|name| format!("Can't find end tag corresponding to start tag \"{name}\""))
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
    let mut parameters: Map<String, Value> = query.into_iter().map(|(key, value)| (key, Value::String(value))).collect();
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
        let body = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await.map_err(|error| error.to_string())?;
        if !body.is_empty() {
            match serde_json::from_slice::<Value>(&body) {
                Ok(Value::Object(fields)) => parameters.extend(fields),
                _ => return Err("the body is not a JSON object".to_owned()),
            }
        }
    }
    Ok((Value::Object(parameters), files))
}

async fn call(
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
        state.requests.push(RecordedRequest { method: method.clone(), params: parameters.clone(), files: files.clone(), at, status: 0 });
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
            let Some((chat_id, message_id)) = chat_id.zip(message_id) else { return bad_request("message to edit not found") };
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
            let known = chat_id.zip(message_id).is_some_and(|key| state.user_messages.contains(&key) || state.bot_messages.contains_key(&key));
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
            state.bot_messages.insert((chat_id, message_id), None);
            envelope_ok(message)
        }
        _ => envelope_error(404, "Not Found"),
    }
}

fn html_checked(parameters: &Value, text: &str) -> Option<String> {
    let html = parameters.get("parse_mode").and_then(Value::as_str).is_some_and(|mode| mode.eq_ignore_ascii_case("html"));
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

async fn download(State(shared): State<Arc<Shared>>, Path((bot, path)): Path<(String, String)>) -> Response {
    let mut state = shared.lock();
    let at = Instant::now();
    let index = state.requests.len();
    state.requests.push(RecordedRequest { method: "file".to_owned(), params: json!({ "file_path": path }), files: Vec::new(), at, status: 0 });
    let response = if bot.strip_prefix("bot") != Some(state.token.as_str()) {
        envelope_error(401, "Unauthorized")
    } else if let Some(fault) = state.faults.get_mut("file").and_then(VecDeque::pop_front) {
        (StatusCode::from_u16(fault.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR), fault.body).into_response()
    } else {
        match state.files.values().find(|file| file.path == path) {
            Some(file) => (StatusCode::OK, [(header::CONTENT_TYPE, "application/octet-stream")], Bytes::from(file.bytes.clone())).into_response(),
            None => envelope_error(404, "Not Found"),
        }
    };
    state.requests[index].status = response.status().as_u16();
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_detected_with_utf16_offsets() {
        let entities = detect_entities("/new@thebot hi 🦑 @ada_l, x@y");
        assert_eq!(
            entities,
            json!([
                { "type": "bot_command", "offset": 0, "length": 11 },
                { "type": "mention", "offset": 18, "length": 6 },
            ])
        );
    }

    #[test]
    fn html_is_checked_like_telegram_does() {
        assert_eq!(html_problem("<b>ok</b> <a href=\"x\">l</a> &lt;"), None);
        assert!(html_problem("<p>no</p>").is_some_and(|problem| problem.starts_with("Unsupported start tag \"p\"")));
        assert!(html_problem("<b>open").is_some());
        assert!(html_problem("<b><i>x</b></i>").is_some());
    }
}
