//! A local fake of Discord (gateway WebSocket and the REST endpoints the adapter uses), for tests.
//!
//! One bot ([`FAKE_BOT_ID`]) with one token. The gateway speaks API v10 JSON: HELLO with a
//! short heartbeat interval, IDENTIFY → READY (its `resume_gateway_url` is this fake's
//! `/resume-gateway`), heartbeats ACKed, RESUME → the dispatches after the client's
//! sequence replayed, then RESUMED; a wrong token closes with 4004, frames before
//! IDENTIFY with 4003, bad JSON with 4002. Tests drive it: push messages and raw
//! dispatches, ask for RECONNECT, drop the connection without a close frame, invalidate
//! the session, stop ACKing, close with a code. REST: `GET /api/v10/gateway/bot`, message
//! create (JSON or multipart), edit, typing and reaction, each checking
//! `Authorization: Bot <token>` (401 otherwise) and a `DiscordBot (…)` user agent, with
//! failures (429 with `retry_after`, any status) queued per [`FakeRoute`]. Attachments of
//! pushed messages are served under `/attachments/`, like a CDN, without the token.
//!
//! ```no_run
//! # async fn example() {
//! use squidbot_testkit::fake_discord::{FakeDiscord, FakeMessage};
//! let discord = FakeDiscord::start("bot-token").await;
//! // point the adapter at discord.api_base() and run it, then:
//! discord.wait_for_live().await;
//! discord.push_message_create(FakeMessage::direct("500", "42", "hello"));
//! discord.wait_for_sent(1).await;
//! # }
//! ```

mod gateway;
mod rest;
mod state;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::net::TcpListener;

use state::{Control, Injected, Shared};

/// The user id of the fake's bot (READY's `user.id`).
pub const FAKE_BOT_ID: &str = "1100000000000000001";

/// The heartbeat interval HELLO announces unless the test chooses one.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(200);

/// How long the `wait_for_*` helpers wait before failing the test.
const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// A REST route, for queuing failures and counting requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FakeRoute {
    /// `GET /gateway/bot`.
    GatewayBot,
    /// `POST /channels/{id}/messages`.
    CreateMessage,
    /// `PATCH /channels/{id}/messages/{id}`.
    EditMessage,
    /// `POST /channels/{id}/typing`.
    Typing,
    /// `PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me`.
    Reaction,
    /// The attachment files of pushed messages.
    Attachment,
}

/// A file: attached to a pushed message, or received with a sent one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeFile {
    /// The file name.
    pub name: String,
    /// Its media type.
    pub content_type: String,
    /// Its content.
    pub bytes: Vec<u8>,
    /// The size the message's `attachments[].size` claims, when not the real one.
    pub announced_size: Option<u64>,
}

impl FakeFile {
    /// A file announced with its real size.
    pub fn new(name: &str, content_type: &str, bytes: impl Into<Vec<u8>>) -> Self {
        Self { name: name.to_owned(), content_type: content_type.to_owned(), bytes: bytes.into(), announced_size: None }
    }
}

/// A message a person (or a bot) writes, for [`FakeDiscord::push_message_create`].
#[derive(Debug, Clone)]
pub struct FakeMessage {
    /// The channel (DM channel, guild channel or thread) it is written in.
    pub channel_id: String,
    /// The guild, for guild channels; `None` for direct messages.
    pub guild_id: Option<String>,
    /// The author's user id.
    pub author_id: String,
    /// The author's user name.
    pub author_name: String,
    /// Whether the author is a bot.
    pub author_is_bot: bool,
    /// The text (write `<@ID>` yourself to mention someone in it).
    pub content: String,
    /// Whether `mentions` lists the fake's bot.
    pub mentions_bot: bool,
    /// Whether it replies to a message of the fake's bot.
    pub reply_to_bot: bool,
    /// Its files, served by the fake.
    pub attachments: Vec<FakeFile>,
}

impl FakeMessage {
    /// A direct message from user `author_id` in DM channel `channel_id`.
    pub fn direct(channel_id: &str, author_id: &str, content: &str) -> Self {
        Self {
            channel_id: channel_id.to_owned(),
            guild_id: None,
            author_id: author_id.to_owned(),
            author_name: format!("user{author_id}"),
            author_is_bot: false,
            content: content.to_owned(),
            mentions_bot: false,
            reply_to_bot: false,
            attachments: Vec::new(),
        }
    }

    /// A message in channel `channel_id` of guild `guild_id`.
    pub fn guild(guild_id: &str, channel_id: &str, author_id: &str, content: &str) -> Self {
        Self { guild_id: Some(guild_id.to_owned()), ..Self::direct(channel_id, author_id, content) }
    }

    /// Lists the fake's bot in `mentions`.
    pub fn mentioning_bot(mut self) -> Self {
        self.mentions_bot = true;
        self
    }

    /// Makes it a reply to a message of the fake's bot.
    pub fn replying_to_bot(mut self) -> Self {
        self.reply_to_bot = true;
        self
    }

    /// Adds a file.
    pub fn with_attachment(mut self, file: FakeFile) -> Self {
        self.attachments.push(file);
        self
    }

    /// Makes the author another bot.
    pub fn by_a_bot(mut self, bot_id: &str) -> Self {
        self.author_id = bot_id.to_owned();
        self.author_is_bot = true;
        self
    }

    /// Makes the author the fake's own bot (an echo of something it sent).
    pub fn by_the_bot_itself(self) -> Self {
        self.by_a_bot(FAKE_BOT_ID)
    }
}

/// A message the client sent (`POST /channels/{id}/messages`).
#[derive(Debug, Clone, PartialEq)]
pub struct SentRecord {
    /// The channel it went to.
    pub channel_id: String,
    /// The id the fake gave it.
    pub message_id: String,
    /// Its `content`.
    pub content: String,
    /// Its `message_reference`, if any.
    pub message_reference: Option<Value>,
    /// Its `allowed_mentions`, if any.
    pub allowed_mentions: Option<Value>,
    /// The files of a multipart request.
    pub files: Vec<FakeFile>,
    /// The whole JSON payload (`payload_json` for multipart).
    pub payload: Value,
}

/// An edit the client made (`PATCH /channels/{id}/messages/{id}`).
#[derive(Debug, Clone, PartialEq)]
pub struct EditRecord {
    /// The channel of the message.
    pub channel_id: String,
    /// The message edited.
    pub message_id: String,
    /// The new content.
    pub content: String,
    /// Its `allowed_mentions`, if any.
    pub allowed_mentions: Option<Value>,
}

/// A reaction the client added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReactionRecord {
    /// The channel of the message.
    pub channel_id: String,
    /// The message reacted to.
    pub message_id: String,
    /// The emoji, percent-decoded (`👀`).
    pub emoji: String,
}

/// A heartbeat the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeartbeatRecord {
    /// The connection it came on (numbered from 1).
    pub connection: u64,
    /// The sequence number it carried.
    pub sequence: Option<u64>,
    /// When it arrived.
    pub at: Instant,
}

/// A WebSocket connection the client opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayConnection {
    /// `/gateway` or `/resume-gateway`.
    pub path: String,
    /// The query string (`v=10&encoding=json`).
    pub query: String,
}

/// Handle to a running fake Discord; clones share it, and it stops when the last one is
/// dropped.
#[derive(Clone)]
pub struct FakeDiscord {
    shared: Arc<Shared>,
    address: SocketAddr,
    _lifetime: Arc<Lifetime>,
}

/// Stops the server when the last handle goes away.
struct Lifetime {
    shared: Arc<Shared>,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl fmt::Debug for FakeDiscord {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("FakeDiscord").field("address", &self.address).finish_non_exhaustive()
    }
}

impl FakeDiscord {
    /// Starts a fake on `127.0.0.1:0` accepting `token`, with
    /// [`DEFAULT_HEARTBEAT_INTERVAL`]. Panics if no port can be bound (test support).
    pub async fn start(token: &str) -> FakeDiscord {
        FakeDiscord::start_with_heartbeat(token, DEFAULT_HEARTBEAT_INTERVAL).await
    }

    /// Starts a fake whose HELLO announces `heartbeat_interval`.
    pub async fn start_with_heartbeat(token: &str, heartbeat_interval: Duration) -> FakeDiscord {
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await {
            Ok(listener) => listener,
            Err(error) => panic!("can't bind the fake Discord: {error}"),
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => panic!("can't read the fake Discord's address: {error}"),
        };
        let shared = Arc::new(Shared::new(token.to_owned(), heartbeat_interval, format!("http://{address}")));
        let router = rest::router(Arc::clone(&shared));
        let stopped = shared.shutdown.clone().cancelled_owned();
        tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).with_graceful_shutdown(stopped).await {
                eprintln!("fake Discord: {error}");
            }
        });
        FakeDiscord { shared: Arc::clone(&shared), address, _lifetime: Arc::new(Lifetime { shared }) }
    }

    /// The REST base the adapter is configured with: `http://127.0.0.1:PORT/api/v10`.
    pub fn api_base(&self) -> String {
        format!("http://{}/api/v10", self.address)
    }

    /// The gateway URL `GET /gateway/bot` names: `ws://127.0.0.1:PORT/gateway`.
    pub fn gateway_url(&self) -> String {
        format!("ws://{}/gateway", self.address)
    }

    /// Pushes a `MESSAGE_CREATE` (delivered now, replayed on RESUME, or sent after READY
    /// when no session exists yet) and returns the message id.
    pub fn push_message_create(&self, message: FakeMessage) -> String {
        let base = self.shared.base_url.clone();
        self.shared.update(|state| {
            let id = state.next_id();
            let mut attachments = Vec::new();
            for file in message.attachments {
                let file_id = state.next_id();
                attachments.push(json!({
                    "id": file_id,
                    "filename": file.name,
                    "size": file.announced_size.unwrap_or(file.bytes.len() as u64),
                    "url": format!("{base}/attachments/{file_id}/{}", file.name),
                    "proxy_url": format!("{base}/attachments/{file_id}/{}", file.name),
                    "content_type": file.content_type,
                }));
                state.files.insert(file_id, file);
            }
            let mut author = json!({
                "id": message.author_id, "username": message.author_name, "global_name": message.author_name,
                "discriminator": "0",
            });
            if message.author_is_bot {
                author["bot"] = json!(true);
            }
            let mentions = if message.mentions_bot {
                json!([{"id": FAKE_BOT_ID, "username": "squidbot", "bot": true, "discriminator": "0"}])
            } else {
                json!([])
            };
            let mut data = json!({
                "id": id, "channel_id": message.channel_id, "author": author, "content": message.content,
                "timestamp": "2025-01-01T00:00:00.000000+00:00", "edited_timestamp": null, "tts": false,
                "mention_everyone": false, "mentions": mentions, "mention_roles": [], "attachments": attachments,
                "embeds": [], "pinned": false, "type": 0,
            });
            if let Some(guild) = message.guild_id {
                data["guild_id"] = json!(guild);
                data["member"] = json!({"nick": null, "roles": [], "joined_at": "2024-01-01T00:00:00.000000+00:00"});
            }
            if message.reply_to_bot {
                let earlier = state.next_id();
                data["type"] = json!(19);
                data["message_reference"] = json!({"message_id": earlier, "channel_id": message.channel_id});
                data["referenced_message"] = rest::bot_message(&earlier, &message.channel_id, "an earlier answer");
            }
            state.dispatch("MESSAGE_CREATE", data);
            id
        })
    }

    /// Pushes any dispatch (unknown event types, odd payloads), sequenced like the rest.
    pub fn push_raw_dispatch(&self, event: &str, data: Value) {
        self.shared.update(|state| state.dispatch(event, data));
    }

    /// Sends a raw text frame (malformed JSON, say) on the live connection; not replayed.
    pub fn send_raw_frame(&self, text: &str) {
        self.control_live("send a raw frame", Control::Send(text.to_owned()), false);
    }

    /// Sends op 7 RECONNECT; dispatches pushed from now on wait for the RESUME.
    pub fn send_reconnect(&self) {
        self.control_live("send RECONNECT", Control::Send(json!({"op": 7, "d": null}).to_string()), true);
    }

    /// Ends the live connection without a close frame; dispatches wait for the RESUME.
    pub fn drop_connection(&self) {
        self.control_live("drop the connection", Control::Drop, true);
    }

    /// Sends op 9 INVALID_SESSION with `d = resumable`; when not resumable, a RESUME of
    /// this session fails.
    pub fn invalidate_session(&self, resumable: bool) {
        if !resumable {
            self.shared.update(|state| state.forbid_resume());
        }
        let frame = json!({"op": 9, "d": resumable}).to_string();
        self.control_live("invalidate the session", Control::Send(frame), true);
    }

    /// Closes the live connection with `code`.
    pub fn close_connection(&self, code: u16) {
        self.control_live(
            "close the connection",
            Control::Close(code, format!("closed by the test with {code}")),
            true,
        );
    }

    /// Asks the client for a heartbeat now (op 1 from the server).
    pub fn request_heartbeat(&self) {
        self.control_live("request a heartbeat", Control::Send(json!({"op": 1, "d": null}).to_string()), false);
    }

    /// Stops ACKing heartbeats on the live connection (later connections are ACKed).
    pub fn stop_acking_heartbeats(&self) {
        if !self.shared.update(|state| state.stop_acking()) {
            panic!("the fake Discord can't stop ACKing: no live gateway connection");
        }
    }

    /// Answers the next request on `route` with 429 and `retry_after` (route scope).
    pub fn rate_limit_next(&self, route: FakeRoute, retry_after: Duration) {
        self.shared.update(|state| state.inject(route, Injected::RateLimited { retry_after, global: false }));
    }

    /// Answers the next request on `route` with a global 429.
    pub fn rate_limit_next_globally(&self, route: FakeRoute, retry_after: Duration) {
        self.shared.update(|state| state.inject(route, Injected::RateLimited { retry_after, global: true }));
    }

    /// Answers the next request on `route` with `status` and a Discord error body.
    pub fn fail_next(&self, route: FakeRoute, status: u16) {
        self.shared.update(|state| state.inject(route, Injected::Status(status)));
    }

    fn control_live(&self, what: &str, control: Control, detach: bool) {
        if !self.shared.update(|state| state.control_live(control, detach)) {
            panic!("the fake Discord can't {what}: no live gateway connection");
        }
    }

    /// Messages sent so far.
    pub fn sent(&self) -> Vec<SentRecord> {
        self.shared.lock().sent.clone()
    }

    /// Edits made so far.
    pub fn edits(&self) -> Vec<EditRecord> {
        self.shared.lock().edits.clone()
    }

    /// Channels typing was shown in, in order.
    pub fn typing(&self) -> Vec<String> {
        self.shared.lock().typing.clone()
    }

    /// Reactions added so far.
    pub fn reactions(&self) -> Vec<ReactionRecord> {
        self.shared.lock().reactions.clone()
    }

    /// IDENTIFY payloads received (wrong tokens included).
    pub fn identifies(&self) -> Vec<Value> {
        self.shared.lock().identifies.clone()
    }

    /// How many IDENTIFYs arrived.
    pub fn identify_count(&self) -> usize {
        self.shared.lock().identify_count()
    }

    /// RESUME payloads received.
    pub fn resumes(&self) -> Vec<Value> {
        self.shared.lock().resumes.clone()
    }

    /// How many RESUMEs arrived.
    pub fn resume_count(&self) -> usize {
        self.shared.lock().resumes.len()
    }

    /// Heartbeats received.
    pub fn heartbeats(&self) -> Vec<HeartbeatRecord> {
        self.shared.lock().heartbeats.clone()
    }

    /// Gateway connections opened.
    pub fn connections(&self) -> Vec<GatewayConnection> {
        self.shared.lock().connections.clone()
    }

    /// Close codes the client sent, in order.
    pub fn client_close_codes(&self) -> Vec<u16> {
        self.shared.lock().client_close_codes.clone()
    }

    /// Requests that reached `route` past the token check.
    pub fn request_count(&self, route: FakeRoute) -> usize {
        self.shared.lock().requests.get(&route).copied().unwrap_or(0)
    }

    /// Whether a connection is identified or resumed and receiving dispatches.
    pub fn is_live(&self) -> bool {
        self.shared.lock().is_live()
    }

    /// The session's last sequence number.
    pub fn sequence(&self) -> Option<u64> {
        self.shared.lock().live_sequence()
    }

    /// Waits until `done` holds, failing the test after 10 s with `what`.
    pub async fn wait_until(&self, what: &str, mut done: impl FnMut(&FakeDiscord) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT_TIMEOUT;
        loop {
            let notified = self.shared.changed.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if done(self) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("the fake Discord waited {WAIT_TIMEOUT:?} for {what}");
            }
        }
    }

    /// Waits for a connection receiving dispatches.
    pub async fn wait_for_live(&self) {
        self.wait_until("a live gateway connection", FakeDiscord::is_live).await;
    }

    /// Waits for `count` IDENTIFYs.
    pub async fn wait_for_identify_count(&self, count: usize) {
        self.wait_until(&format!("{count} IDENTIFY"), |discord| discord.identify_count() >= count).await;
    }

    /// Waits for `count` RESUMEs.
    pub async fn wait_for_resume_count(&self, count: usize) {
        self.wait_until(&format!("{count} RESUME"), |discord| discord.resume_count() >= count).await;
    }

    /// Waits for `count` heartbeats.
    pub async fn wait_for_heartbeats(&self, count: usize) {
        self.wait_until(&format!("{count} heartbeats"), |discord| discord.heartbeats().len() >= count).await;
    }

    /// Waits for `count` sent messages.
    pub async fn wait_for_sent(&self, count: usize) {
        self.wait_until(&format!("{count} sent messages"), |discord| discord.sent().len() >= count).await;
    }

    /// Waits for `count` edits.
    pub async fn wait_for_edits(&self, count: usize) {
        self.wait_until(&format!("{count} edits"), |discord| discord.edits().len() >= count).await;
    }

    /// Waits for `count` close frames from the client.
    pub async fn wait_for_client_closes(&self, count: usize) {
        self.wait_until(&format!("{count} client close frames"), |discord| discord.client_close_codes().len() >= count)
            .await;
    }
}
