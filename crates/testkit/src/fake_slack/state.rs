//! The fake Slack's state: the connection taking events, envelopes in flight and their
//! redelivery, stored messages and files, and everything recorded for assertions.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{
    APP_ID, ApiCall, BOT_USER_ID, DEFAULT_REDELIVERY_AFTER, Failure, FakeFile, MessageUpdate, PostedMessage, Reaction,
    TEAM_ID, Upload,
};

/// How often unacknowledged envelopes are looked at.
const REDELIVERY_TICK: Duration = Duration::from_millis(20);

/// What the fake and its handlers share.
pub(crate) struct Shared {
    pub app_token: String,
    pub bot_token: String,
    pub shutdown: CancellationToken,
    state: Mutex<State>,
}

impl Shared {
    pub(crate) fn new(app_token: &str, bot_token: &str, address: SocketAddr, shutdown: CancellationToken) -> Self {
        Self {
            app_token: app_token.to_owned(),
            bot_token: bot_token.to_owned(),
            shutdown,
            state: Mutex::new(State::new(address)),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a connection's task is told to do.
pub(crate) enum SocketCommand {
    /// Send this text frame.
    Frame(String),
    /// Send a ping with this payload.
    Ping(Vec<u8>),
    /// Drop the connection without a close frame.
    Drop,
}

/// The connection currently taking events.
pub(crate) struct SocketLink {
    pub id: usize,
    pub commands: mpsc::UnboundedSender<SocketCommand>,
}

impl SocketLink {
    /// Hands a command to the connection's task; false if the task has ended.
    pub(crate) fn send(&self, command: SocketCommand) -> bool {
        self.commands.send(command).is_ok()
    }
}

/// A frame waiting for a connection.
pub(crate) struct Outgoing {
    pub text: String,
    /// The envelope, when the frame is one (tracked for acknowledgement).
    pub envelope: Option<Value>,
}

/// An envelope sent and not acknowledged yet.
pub(crate) struct InFlight {
    pub envelope: Value,
    pub sent_at: Instant,
}

impl InFlight {
    pub(crate) fn envelope_id(&self) -> Option<&str> {
        self.envelope.get("envelope_id").and_then(Value::as_str)
    }
}

/// Who wrote a stored message.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Author {
    Bot,
    User,
}

/// A message the fake knows, for `chat.update` and `reactions.add`.
pub(crate) struct StoredMessage {
    pub author: Author,
    pub text: String,
}

/// A file served at `/files-pri/…`.
pub(crate) struct StoredFile {
    pub id: String,
    pub file: FakeFile,
}

/// An upload URL handed out by `files.getUploadURLExternal`.
pub(crate) struct UploadSlot {
    pub filename: String,
    pub length: u64,
    pub bytes: Option<Vec<u8>>,
}

/// Everything the fake keeps.
pub(crate) struct State {
    pub address: SocketAddr,
    next_number: u64,
    pub tickets: HashSet<String>,
    pub connections_opened: usize,
    pub sockets_accepted: usize,
    pub current: Option<SocketLink>,
    pub outbox: VecDeque<Outgoing>,
    pub in_flight: Vec<InFlight>,
    pub redelivery_after: Duration,
    pub acks_to_lose: usize,
    pub acks: Vec<String>,
    pub sent_envelopes: Vec<Value>,
    pub unexpected_frames: Vec<String>,
    pub pongs: Vec<Vec<u8>>,
    pub failures: HashMap<String, VecDeque<Failure>>,
    pub calls: Vec<ApiCall>,
    pub messages: HashMap<(String, String), StoredMessage>,
    pub posted: Vec<PostedMessage>,
    pub updates: Vec<MessageUpdate>,
    pub reactions: Vec<Reaction>,
    pub files: HashMap<String, StoredFile>,
    pub downloads: Vec<String>,
    pub upload_slots: HashMap<String, UploadSlot>,
    pub uploads: Vec<Upload>,
}

impl State {
    fn new(address: SocketAddr) -> Self {
        Self {
            address,
            next_number: 0,
            tickets: HashSet::new(),
            connections_opened: 0,
            sockets_accepted: 0,
            current: None,
            outbox: VecDeque::new(),
            in_flight: Vec::new(),
            redelivery_after: DEFAULT_REDELIVERY_AFTER,
            acks_to_lose: 0,
            acks: Vec::new(),
            sent_envelopes: Vec::new(),
            unexpected_frames: Vec::new(),
            pongs: Vec::new(),
            failures: HashMap::new(),
            calls: Vec::new(),
            messages: HashMap::new(),
            posted: Vec::new(),
            updates: Vec::new(),
            reactions: Vec::new(),
            files: HashMap::new(),
            downloads: Vec::new(),
            upload_slots: HashMap::new(),
            uploads: Vec::new(),
        }
    }

    /// A number unique within this fake (ids, tickets, timestamps).
    pub(crate) fn next_number(&mut self) -> u64 {
        self.next_number += 1;
        self.next_number
    }

    /// A new message `ts`, increasing like Slack's.
    pub(crate) fn next_ts(&mut self) -> String {
        let number = self.next_number();
        format!("{}.{:06}", 1_700_000_000 + number, number % 1_000_000)
    }

    /// Stores a message from a user and returns its `ts`.
    pub(crate) fn store_user_message(&mut self, channel: &str, text: &str) -> String {
        let ts = self.next_ts();
        self.messages
            .insert((channel.to_owned(), ts.clone()), StoredMessage { author: Author::User, text: text.to_owned() });
        ts
    }

    /// Stores a file shared by `user` and returns its event JSON.
    pub(crate) fn share_file(&mut self, user: &str, file: FakeFile) -> Value {
        let id = format!("F0{:06}", self.next_number());
        let key = format!("{TEAM_ID}-{id}");
        let name = path_segment(&file.name);
        let base = format!("http://{}/files-pri/{key}", self.address);
        let extension = file.name.rsplit_once('.').map_or("", |(_stem, extension)| extension).to_owned();
        let event = json!({
            "id": id, "created": 1_700_000_000, "timestamp": 1_700_000_000,
            "name": file.name, "title": file.name, "mimetype": file.mimetype,
            "filetype": extension, "pretty_type": extension.to_uppercase(), "user": user,
            "editable": false, "size": file.bytes.len(), "mode": "hosted", "is_external": false,
            "external_type": "", "is_public": false, "public_url_shared": false,
            "url_private": format!("{base}/{name}"),
            "url_private_download": format!("{base}/download/{name}"),
            "permalink": format!("https://fake.slack.com/files/{user}/{id}/{name}"),
        });
        self.files.insert(key, StoredFile { id, file });
        event
    }

    /// Wraps `event` in an `events_api` envelope and sends it; returns the envelope id.
    pub(crate) fn push_event(&mut self, event: Value) -> String {
        let envelope_id = self.new_envelope_id();
        let event_id = format!("Ev0{:08}", self.next_number());
        let envelope = json!({
            "envelope_id": envelope_id,
            "payload": {
                "token": "fake-verification-token",
                "team_id": TEAM_ID,
                "api_app_id": APP_ID,
                "event": event,
                "type": "event_callback",
                "event_id": event_id,
                "event_time": 1_700_000_000,
                "authorizations": [{
                    "enterprise_id": null, "team_id": TEAM_ID, "user_id": BOT_USER_ID,
                    "is_bot": true, "is_enterprise_install": false
                }],
                "is_ext_shared_channel": false,
                "event_context": format!("4-{event_id}")
            },
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": 0,
            "retry_reason": ""
        });
        self.dispatch(envelope.to_string(), Some(envelope));
        envelope_id
    }

    fn new_envelope_id(&mut self) -> String {
        let number = self.next_number();
        format!("{number:08x}-fake-envelope")
    }

    /// Sends a frame on the current connection, or keeps it for the next one.
    pub(crate) fn dispatch(&mut self, text: String, envelope: Option<Value>) {
        let outgoing = Outgoing { text, envelope };
        let outgoing = match &self.current {
            Some(link) if link.send(SocketCommand::Frame(outgoing.text.clone())) => {
                if let Some(envelope) = outgoing.envelope {
                    self.sent_envelopes.push(envelope.clone());
                    if envelope.get("envelope_id").is_some() {
                        self.in_flight.push(InFlight { envelope, sent_at: Instant::now() });
                    }
                }
                return;
            }
            Some(_) | None => outgoing,
        };
        self.outbox.push_back(outgoing);
    }

    /// Makes a new connection the one taking events and sends it what waited.
    pub(crate) fn attach(&mut self, link: SocketLink) {
        self.current = Some(link);
        for outgoing in std::mem::take(&mut self.outbox) {
            self.dispatch(outgoing.text, outgoing.envelope);
        }
    }

    /// Records a text frame from the client: an acknowledgement or something unexpected.
    pub(crate) fn receive_frame(&mut self, text: &str) {
        let envelope_id = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|value| value.get("envelope_id").and_then(Value::as_str).map(str::to_owned));
        let Some(envelope_id) = envelope_id else {
            self.unexpected_frames.push(text.to_owned());
            return;
        };
        if self.acks_to_lose > 0 {
            self.acks_to_lose -= 1;
            return;
        }
        self.in_flight.retain(|flight| flight.envelope_id() != Some(envelope_id.as_str()));
        self.acks.push(envelope_id);
    }

    /// Redelivers envelopes unacknowledged for longer than `redelivery_after`.
    fn redeliver_overdue(&mut self) {
        let now = Instant::now();
        let wait = self.redelivery_after;
        let (overdue, waiting): (Vec<InFlight>, Vec<InFlight>) = std::mem::take(&mut self.in_flight)
            .into_iter()
            .partition(|flight| now.duration_since(flight.sent_at) >= wait);
        self.in_flight = waiting;
        for flight in overdue {
            let mut envelope = flight.envelope;
            let attempt = envelope.get("retry_attempt").and_then(Value::as_u64).unwrap_or(0) + 1;
            envelope["envelope_id"] = json!(self.new_envelope_id());
            envelope["retry_attempt"] = json!(attempt);
            envelope["retry_reason"] = json!("timeout");
            self.dispatch(envelope.to_string(), Some(envelope));
        }
    }
}

/// Redelivers unacknowledged envelopes until the fake stops.
pub(crate) async fn redeliver_unacknowledged(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(REDELIVERY_TICK);
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            _ = tick.tick() => shared.lock().redeliver_overdue(),
        }
    }
}

/// A `message` event from `user` as Slack shapes it (without `channel_type`).
pub(crate) fn message_event(channel: &str, user: &str, text: &str, ts: &str, thread_ts: Option<&str>) -> Value {
    let mut event = json!({
        "client_msg_id": format!("fake-{ts}"),
        "type": "message",
        "text": text,
        "user": user,
        "ts": ts,
        "team": TEAM_ID,
        "channel": channel,
        "event_ts": ts,
    });
    if let Some(thread_ts) = thread_ts {
        event["thread_ts"] = json!(thread_ts);
    }
    event
}

/// A file name made safe for a URL path.
fn path_segment(name: &str) -> String {
    name.bytes()
        .map(|byte| match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'-' | b'_' => char::from(byte).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}
