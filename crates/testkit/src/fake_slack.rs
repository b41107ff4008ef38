//! A local fake of Slack for adapter tests: the Web API methods a Socket Mode bot uses,
//! the Socket Mode WebSocket (hello, event envelopes, acknowledgements, redelivery of
//! unacknowledged envelopes, disconnects), private file downloads and external uploads,
//! all over real HTTP and WebSocket on `127.0.0.1`.
//!
//! ```no_run
//! # async fn example() {
//! use squidbot_testkit::fake_slack::FakeSlack;
//! let slack = FakeSlack::start("xapp-1-test", "xoxb-test").await;
//! // point the adapter at slack.api_base(), run it, then:
//! let _ts = slack.push_message("D1", "im", "U1", "hello", None, Vec::new());
//! assert_eq!(slack.wait_for_acks(1).await.len(), 1);
//! # }
//! ```
//!
//! Answers have Slack's shapes (`{"ok":true,…}`, `{"ok":false,"error":"…"}`); a wrong
//! token gets `invalid_auth`, a missing one `not_authed`, the other kind of token
//! `not_allowed_token_type`. Failures can be scripted per method
//! ([`FakeSlack::fail_next`], [`FakeSlack::rate_limit_next`]).

mod socket;
mod state;
mod web_api;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use self::state::{Shared, SocketCommand, State};

/// The bot's user id, as `auth.test` answers it and mentions (`<@…>`) spell it.
pub const BOT_USER_ID: &str = "U0SQUIDBOT";

/// The bot's bot id, as `auth.test` answers it and the bot's own messages carry it.
pub const BOT_ID: &str = "B0SQUIDBOT";

/// The fake workspace's team id.
pub const TEAM_ID: &str = "T0FAKE";

/// The fake app's id.
pub const APP_ID: &str = "A0FAKE";

/// How long the fake waits for an acknowledgement before redelivering an envelope,
/// unless [`FakeSlack::set_redelivery_after`] says otherwise.
pub const DEFAULT_REDELIVERY_AFTER: Duration = Duration::from_secs(3);

/// A file shared with a pushed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeFile {
    /// Its name, e.g. `notes.txt`.
    pub name: String,
    /// Its media type, e.g. `text/plain`.
    pub mimetype: String,
    /// Its content, served only with the bot token.
    pub bytes: Vec<u8>,
}

impl FakeFile {
    /// A file with this name, type and content.
    pub fn new(name: impl Into<String>, mimetype: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Self { name: name.into(), mimetype: mimetype.into(), bytes: bytes.into() }
    }
}

/// A `chat.postMessage` the fake accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostedMessage {
    /// The `channel` it went to.
    pub channel: String,
    /// Its `text`.
    pub text: String,
    /// The `thread_ts` it replied in, if any.
    pub thread_ts: Option<String>,
    /// The `ts` the fake gave it.
    pub ts: String,
    /// The `mrkdwn` flag, if sent.
    pub mrkdwn: Option<bool>,
    /// The `unfurl_links` flag, if sent.
    pub unfurl_links: Option<bool>,
}

/// A `chat.update` the fake accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageUpdate {
    /// The message's channel.
    pub channel: String,
    /// The message's `ts`.
    pub ts: String,
    /// Its new text.
    pub text: String,
}

/// A `reactions.add` the fake accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaction {
    /// The message's channel.
    pub channel: String,
    /// The message's `ts`.
    pub timestamp: String,
    /// The emoji name, e.g. `eyes`.
    pub name: String,
}

/// A file shared through `files.completeUploadExternal`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upload {
    /// The id `files.getUploadURLExternal` gave it.
    pub file_id: String,
    /// The `filename` given to `files.getUploadURLExternal`.
    pub filename: String,
    /// The `title` given when completing, if any.
    pub title: Option<String>,
    /// The bytes posted to the upload URL.
    pub bytes: Vec<u8>,
    /// The `channel_id` it was shared in, if any.
    pub channel_id: Option<String>,
    /// The `thread_ts` it was shared in, if any.
    pub thread_ts: Option<String>,
    /// The `initial_comment`, if any.
    pub initial_comment: Option<String>,
    /// The `ts` of the message sharing it, when shared in a channel.
    pub message_ts: Option<String>,
}

/// One Web API request, as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    /// The method, e.g. `chat.postMessage`.
    pub method: String,
    /// `json` or `form`.
    pub encoding: &'static str,
    /// Its arguments (form values as strings).
    pub params: serde_json::Map<String, Value>,
}

/// A scripted failure of the next call to a method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// HTTP 429 with `Retry-After` in whole seconds and `{"ok":false,"error":"ratelimited"}`.
    RateLimited(Duration),
    /// This HTTP status with a plain-text body (as a proxy in front of Slack would answer).
    Status(u16),
    /// HTTP 200 with `{"ok":false,"error":"<code>"}`.
    Error(String),
}

/// Handle to a running fake Slack; clones share it, and it stops when the last clone is
/// dropped.
#[derive(Clone)]
pub struct FakeSlack {
    shared: Arc<Shared>,
    address: SocketAddr,
    _lifetime: Arc<Lifetime>,
}

/// Stops the server when the last handle goes away.
struct Lifetime {
    shutdown: CancellationToken,
}

impl Drop for Lifetime {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl fmt::Debug for FakeSlack {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("FakeSlack").field("api_base", &self.api_base()).finish_non_exhaustive()
    }
}

/// How long the `wait_for_*` helpers wait before giving up and returning what there is.
const WAIT_LIMIT: Duration = Duration::from_secs(5);

impl FakeSlack {
    /// Starts a fake on `127.0.0.1:0` that accepts `app_token` for
    /// `apps.connections.open` and `bot_token` for everything else. Panics if no port
    /// can be bound (this is test support).
    pub async fn start(app_token: &str, bot_token: &str) -> FakeSlack {
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await {
            Ok(listener) => listener,
            Err(error) => panic!("can't bind the fake Slack: {error}"),
        };
        let address = match listener.local_addr() {
            Ok(address) => address,
            Err(error) => panic!("can't read the fake Slack's address: {error}"),
        };
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared::new(app_token, bot_token, address, shutdown.clone()));
        let router = web_api::router(Arc::clone(&shared));
        let serving = axum::serve(listener, router).with_graceful_shutdown(shutdown.clone().cancelled_owned());
        tokio::spawn(async move {
            if let Err(error) = serving.await {
                eprintln!("fake Slack: {error}");
            }
        });
        tokio::spawn(state::redeliver_unacknowledged(Arc::clone(&shared)));
        FakeSlack { shared, address, _lifetime: Arc::new(Lifetime { shutdown }) }
    }

    /// The Web API base the adapter is configured with: `http://127.0.0.1:PORT/api`.
    pub fn api_base(&self) -> String {
        format!("http://{}/api", self.address)
    }

    /// The socket address the fake listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Sends a `message` event (`channel_type` `im`, `channel`, `group` or `mpim`) from
    /// `user`, in `thread_ts` if given, sharing `files` (subtype `file_share`). Returns
    /// the message's `ts`.
    pub fn push_message(
        &self,
        channel: &str,
        channel_type: &str,
        user: &str,
        text: &str,
        thread_ts: Option<&str>,
        files: Vec<FakeFile>,
    ) -> String {
        let mut state = self.shared.lock();
        let ts = state.store_user_message(channel, text);
        let mut event = state::message_event(channel, user, text, &ts, thread_ts);
        event["channel_type"] = json!(channel_type);
        if !files.is_empty() {
            event["subtype"] = json!("file_share");
            event["files"] = Value::Array(files.into_iter().map(|file| state.share_file(user, file)).collect());
        }
        state.push_event(event);
        ts
    }

    /// Sends an `app_mention` event alone. Returns the message's `ts`.
    pub fn push_app_mention(&self, channel: &str, user: &str, text: &str, thread_ts: Option<&str>) -> String {
        let mut state = self.shared.lock();
        let ts = state.store_user_message(channel, text);
        let mut event = state::message_event(channel, user, text, &ts, thread_ts);
        event["type"] = json!("app_mention");
        state.push_event(event);
        ts
    }

    /// Sends what Slack sends when someone mentions the bot in a channel it is in: a
    /// `message` event and an `app_mention` event for the same message, in two
    /// envelopes. `text` should contain `<@BOT_USER_ID>`. Returns the message's `ts`.
    pub fn push_mention(&self, channel: &str, user: &str, text: &str, thread_ts: Option<&str>) -> String {
        let mut state = self.shared.lock();
        let ts = state.store_user_message(channel, text);
        let mut message = state::message_event(channel, user, text, &ts, thread_ts);
        message["channel_type"] = json!("channel");
        let mut mention = state::message_event(channel, user, text, &ts, thread_ts);
        mention["type"] = json!("app_mention");
        state.push_event(message);
        state.push_event(mention);
        ts
    }

    /// Sends any event (bot messages, edits, reactions…) in an `events_api` envelope.
    /// Returns the envelope id.
    pub fn push_event(&self, event: Value) -> String {
        self.shared.lock().push_event(event)
    }

    /// Sends `envelope` as it is (with or without an `envelope_id`; one with an id is
    /// expected to be acknowledged and redelivered if it isn't).
    pub fn push_raw_envelope(&self, envelope: Value) {
        self.shared.lock().dispatch(envelope.to_string(), Some(envelope));
    }

    /// Sends a text frame as it is, e.g. something that isn't JSON.
    pub fn push_raw_frame(&self, text: &str) {
        self.shared.lock().dispatch(text.to_owned(), None);
    }

    /// Sends `{"type":"disconnect","reason":…}` on the current connection. From then on
    /// nothing more goes out on it; events wait for the next connection, and the fake
    /// keeps it open until the client closes it.
    pub fn send_disconnect(&self, reason: &str) {
        let mut state = self.shared.lock();
        if let Some(link) = state.current.take() {
            let frame = json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}});
            link.send(SocketCommand::Frame(frame.to_string()));
        }
    }

    /// Drops the current connection without a close frame, as a network failure would.
    pub fn drop_connection(&self) {
        if let Some(link) = self.shared.lock().current.take() {
            link.send(SocketCommand::Drop);
        }
    }

    /// Sends a WebSocket ping on the current connection; pongs are in [`FakeSlack::pongs`].
    pub fn ping(&self, payload: &[u8]) {
        if let Some(link) = &self.shared.lock().current {
            link.send(SocketCommand::Ping(payload.to_vec()));
        }
    }

    /// The next call to `method` answers HTTP 429 with `Retry-After` (whole seconds).
    pub fn rate_limit_next(&self, method: &str, retry_after: Duration) {
        self.fail_next(method, Failure::RateLimited(retry_after));
    }

    /// The next call to `method` fails as `failure` says (queued per method).
    pub fn fail_next(&self, method: &str, failure: Failure) {
        self.shared.lock().failures.entry(method.to_owned()).or_default().push_back(failure);
    }

    /// The next `count` acknowledgements are lost (as if they never reached Slack), so
    /// their envelopes are redelivered.
    pub fn lose_next_acks(&self, count: usize) {
        self.shared.lock().acks_to_lose += count;
    }

    /// How long an envelope may stay unacknowledged before it is redelivered with
    /// `retry_attempt` one higher and `retry_reason` `timeout`.
    pub fn set_redelivery_after(&self, wait: Duration) {
        self.shared.lock().redelivery_after = wait;
    }

    /// Messages posted with `chat.postMessage`.
    pub fn posted(&self) -> Vec<PostedMessage> {
        self.shared.lock().posted.clone()
    }

    /// Edits made with `chat.update`.
    pub fn updates(&self) -> Vec<MessageUpdate> {
        self.shared.lock().updates.clone()
    }

    /// Reactions added with `reactions.add`.
    pub fn reactions(&self) -> Vec<Reaction> {
        self.shared.lock().reactions.clone()
    }

    /// Files shared with `files.completeUploadExternal`.
    pub fn uploads(&self) -> Vec<Upload> {
        self.shared.lock().uploads.clone()
    }

    /// Every Web API request received, in order.
    pub fn calls(&self) -> Vec<ApiCall> {
        self.shared.lock().calls.clone()
    }

    /// Envelope ids acknowledged (lost acknowledgements not included), in order.
    pub fn acks(&self) -> Vec<String> {
        self.shared.lock().acks.clone()
    }

    /// Every envelope sent on a connection (redeliveries included), in order.
    pub fn sent_envelopes(&self) -> Vec<Value> {
        self.shared.lock().sent_envelopes.clone()
    }

    /// Envelope ids sent but not acknowledged yet.
    pub fn unacknowledged(&self) -> Vec<String> {
        let state = self.shared.lock();
        state.in_flight.iter().filter_map(|flight| flight.envelope_id().map(str::to_owned)).collect()
    }

    /// Text frames from the client that weren't acknowledgements.
    pub fn unexpected_frames(&self) -> Vec<String> {
        self.shared.lock().unexpected_frames.clone()
    }

    /// Ids of the files downloaded with the bot token.
    pub fn downloads(&self) -> Vec<String> {
        self.shared.lock().downloads.clone()
    }

    /// Payloads of the pongs received.
    pub fn pongs(&self) -> Vec<Vec<u8>> {
        self.shared.lock().pongs.clone()
    }

    /// Successful `apps.connections.open` calls.
    pub fn connections_opened(&self) -> usize {
        self.shared.lock().connections_opened
    }

    /// WebSocket connections accepted.
    pub fn sockets_accepted(&self) -> usize {
        self.shared.lock().sockets_accepted
    }

    /// Whether a connection is currently taking events.
    pub fn is_connected(&self) -> bool {
        self.shared.lock().current.is_some()
    }

    /// Waits (up to 5 s) until `count` envelopes were acknowledged; returns the ids.
    pub async fn wait_for_acks(&self, count: usize) -> Vec<String> {
        self.wait_until(|state| state.acks.len() >= count).await;
        self.acks()
    }

    /// Waits (up to 5 s) until `count` messages were posted; returns them.
    pub async fn wait_for_posted(&self, count: usize) -> Vec<PostedMessage> {
        self.wait_until(|state| state.posted.len() >= count).await;
        self.posted()
    }

    /// Waits (up to 5 s) until `count` WebSocket connections were accepted and one is
    /// taking events; returns whether that happened.
    pub async fn wait_for_sockets(&self, count: usize) -> bool {
        self.wait_until(|state| state.sockets_accepted >= count && state.current.is_some()).await
    }

    /// Waits (up to 5 s) until `count` pongs arrived; returns their payloads.
    pub async fn wait_for_pongs(&self, count: usize) -> Vec<Vec<u8>> {
        self.wait_until(|state| state.pongs.len() >= count).await;
        self.pongs()
    }

    async fn wait_until(&self, done: impl Fn(&State) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + WAIT_LIMIT;
        loop {
            if done(&self.shared.lock()) {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}
