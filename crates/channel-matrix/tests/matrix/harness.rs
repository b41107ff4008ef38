//! Test helpers: a person's Matrix client (plain client-server API calls), a running
//! bot (the adapter's receive loop in a task), and waiting with deadlines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot_channel_matrix::{DEFAULT_MAX_ATTACHMENT_BYTES, InvitePolicy, MatrixChannel, MatrixSettings};
use squidbot_channels::{Channel, ChannelError, InboundMessage, InboundSink};
use squidbot_types::Secret;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use squidbot_testkit::synapse::{Account, Synapse};

/// How long a test waits for something that should happen within a second or two.
pub const PATIENCE: Duration = Duration::from_secs(15);

/// A person using Matrix through the plain API.
pub struct Person {
    pub account: Account,
    base_url: String,
    http: reqwest::Client,
    transactions: std::sync::atomic::AtomicU64,
}

impl Person {
    pub fn new(synapse: &Synapse, account: Account) -> Person {
        Person {
            account,
            base_url: synapse.base_url.clone(),
            http: reqwest::Client::new(),
            transactions: std::sync::atomic::AtomicU64::new(0),
        }
    }

    pub fn user_id(&self) -> &str {
        &self.account.user_id
    }

    async fn request(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base_url);
        let mut request = self.http.request(method.clone(), &url).bearer_auth(&self.account.access_token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        assert!(status.is_success(), "{method} {path} as {}: {status} {answer}", self.account.user_id);
        answer
    }

    /// Creates a room (extra `createRoom` fields in `options`) and returns its id.
    pub async fn create_room(&self, options: Value) -> String {
        let mut body = json!({"preset": "private_chat"});
        for (key, value) in options.as_object().unwrap() {
            body[key] = value.clone();
        }
        let answer = self.request(reqwest::Method::POST, "/_matrix/client/v3/createRoom", Some(body)).await;
        answer["room_id"].as_str().unwrap().to_owned()
    }

    pub async fn invite(&self, room_id: &str, user_id: &str) {
        let path = format!("/_matrix/client/v3/rooms/{}/invite", encode(room_id));
        self.request(reqwest::Method::POST, &path, Some(json!({"user_id": user_id}))).await;
    }

    pub async fn join(&self, room_id: &str) {
        let path = format!("/_matrix/client/v3/rooms/{}/join", encode(room_id));
        self.request(reqwest::Method::POST, &path, Some(json!({}))).await;
    }

    /// Sends an event and returns its id.
    pub async fn send(&self, room_id: &str, event_type: &str, content: Value) -> String {
        let transaction = self.transactions.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = format!("/_matrix/client/v3/rooms/{}/send/{event_type}/t{transaction}", encode(room_id));
        let answer = self.request(reqwest::Method::PUT, &path, Some(content)).await;
        answer["event_id"].as_str().unwrap().to_owned()
    }

    pub async fn say(&self, room_id: &str, body: &str) -> String {
        self.send(room_id, "m.room.message", json!({"msgtype": "m.text", "body": body})).await
    }

    /// Uploads a file and returns its `mxc://` URI.
    pub async fn upload(&self, name: &str, mime: &str, bytes: Vec<u8>) -> String {
        let url = format!("{}/_matrix/media/v3/upload?filename={name}", self.base_url);
        let response = self
            .http
            .post(url)
            .bearer_auth(&self.account.access_token)
            .header("content-type", mime)
            .body(bytes)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "upload: {}", response.status());
        let answer: Value = response.json().await.unwrap();
        answer["content_uri"].as_str().unwrap().to_owned()
    }

    pub async fn download(&self, mxc: &str) -> Vec<u8> {
        let path = mxc.strip_prefix("mxc://").unwrap();
        let url = format!("{}/_matrix/client/v1/media/download/{path}", self.base_url);
        let response = self.http.get(url).bearer_auth(&self.account.access_token).send().await.unwrap();
        assert!(response.status().is_success(), "download: {}", response.status());
        response.bytes().await.unwrap().to_vec()
    }

    /// The room's latest events, oldest first.
    pub async fn events(&self, room_id: &str) -> Vec<Value> {
        let path = format!("/_matrix/client/v3/rooms/{}/messages?dir=b&limit=100", encode(room_id));
        let answer = self.request(reqwest::Method::GET, &path, None).await;
        let mut events = answer["chunk"].as_array().unwrap().clone();
        events.reverse();
        events
    }

    /// Waits until an event of the room matches.
    pub async fn wait_for_event(&self, room_id: &str, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(event) = self.events(room_id).await.into_iter().find(&matches) {
                return event;
            }
            assert!(Instant::now() < deadline, "no {what} in {room_id}: {:#?}", self.events(room_id).await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The membership of `user_id` in the room, as this person sees it.
    pub async fn membership(&self, room_id: &str, user_id: &str) -> Option<String> {
        let path = format!("/_matrix/client/v3/rooms/{}/state/m.room.member/{}", encode(room_id), encode(user_id));
        let url = format!("{}{path}", self.base_url);
        let response = self.http.get(url).bearer_auth(&self.account.access_token).send().await.unwrap();
        if !response.status().is_success() {
            return None;
        }
        let content: Value = response.json().await.unwrap();
        content["membership"].as_str().map(str::to_owned)
    }

    /// Waits until `user_id` has `membership` in the room.
    pub async fn wait_for_membership(&self, room_id: &str, user_id: &str, membership: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let current = self.membership(room_id, user_id).await;
            if current.as_deref() == Some(membership) {
                return;
            }
            assert!(Instant::now() < deadline, "{user_id} is {current:?} in {room_id}, not {membership}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A one-off sync (no since) of this person, for ephemeral events such as typing.
    pub async fn sync(&self) -> Value {
        self.request(reqwest::Method::GET, "/_matrix/client/v3/sync?timeout=0", None).await
    }
}

/// Percent-encodes a path segment.
pub fn encode(segment: &str) -> String {
    let mut url = reqwest::Url::parse("http://x/").unwrap();
    url.path_segments_mut().unwrap().push(segment);
    url.path().trim_start_matches('/').to_owned()
}

/// The adapter's settings for `account` with its access token.
pub fn settings(synapse: &Synapse, account: &Account, state_dir: &Path, invites: InvitePolicy) -> MatrixSettings {
    MatrixSettings {
        name: "matrix".to_owned(),
        homeserver: synapse.base_url.clone(),
        user_id: account.user_id.clone(),
        access_token: Some(Secret::new(account.access_token.clone())),
        password: None,
        device_id: None,
        state_dir: state_dir.to_path_buf(),
        invites,
        max_attachment_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
    }
}

/// The adapter's receive loop running in a task.
pub struct RunningBot {
    pub channel: Arc<MatrixChannel>,
    pub received: mpsc::Receiver<InboundMessage>,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ChannelError>>,
}

impl RunningBot {
    /// Starts the loop and, when the state directory had no sync token, waits for the
    /// first sync to be stored (before it, everything counts as history).
    pub async fn start(settings: MatrixSettings) -> RunningBot {
        let token_file: PathBuf = settings.state_dir.join(format!("{}.sync", settings.name));
        let channel = Arc::new(MatrixChannel::new(settings).unwrap());
        let (sink, received) = InboundSink::bounded(16);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let channel = Arc::clone(&channel);
            let shutdown = shutdown.clone();
            async move { channel.run(sink, shutdown).await }
        });
        let deadline = Instant::now() + PATIENCE;
        while !token_file.exists() {
            assert!(!task.is_finished(), "the receive loop ended before its first sync");
            assert!(Instant::now() < deadline, "no first sync stored in {}", token_file.display());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        RunningBot { channel, received, shutdown, task }
    }

    /// The next message handed over.
    pub async fn next(&mut self) -> InboundMessage {
        match tokio::time::timeout(PATIENCE, self.received.recv()).await {
            Ok(Some(message)) => message,
            Ok(None) => panic!("the receive loop stopped: {:?}", self.task.is_finished()),
            Err(_elapsed) => panic!("no message handed over in {PATIENCE:?}"),
        }
    }

    /// Stops the loop, which must end cleanly and promptly.
    pub async fn stop(self) {
        self.shutdown.cancel();
        let ended = tokio::time::timeout(Duration::from_secs(5), self.task).await;
        assert_eq!(ended.expect("the loop didn't stop in 5 s").unwrap(), Ok(()));
    }
}
