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
use axum::extract::DefaultBodyLimit;
use axum::routing::{any, get};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use self::markup::detect_entities;
use self::server::{call, download};

mod markup;
mod server;

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
        let mut message =
            json!({ "message_id": message_id, "from": incoming.from.to_json(), "chat": chat, "date": unix_now() });
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

    /// What the chat shows of the bot's messages now (edits applied), oldest first;
    /// files without a caption show as an empty string.
    pub fn chat_texts(&self, chat_id: i64) -> Vec<String> {
        let state = self.shared.lock();
        let mut messages: Vec<(i64, String)> = state
            .bot_messages
            .iter()
            .filter(|((chat, _), _)| *chat == chat_id)
            .map(|((_, message_id), text)| (*message_id, text.clone().unwrap_or_default()))
            .collect();
        messages.sort();
        messages.into_iter().map(|(_, text)| text).collect()
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
