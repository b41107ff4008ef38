//! The webhook channel: `POST /webhook/<name>` with a JSON message, signed with
//! HMAC-SHA256 over `<timestamp>.<body>` by a secret shared with the caller. The reply
//! comes back in the response, or, when the turn outlasts `reply_timeout_secs`, the
//! request is answered `202` and the reply is posted to the message's `callback_url`.
//!
//! Headers: `X-Squidbot-Timestamp: <unix seconds>` (within five minutes of the gateway's
//! clock, so a captured request can't be replayed later) and `X-Squidbot-Signature:
//! sha256=<hex>`. Body: `{"sender": "...", "text": "...", "id"?: "...",
//! "conversation"?: "...", "callback_url"?: "..."}`.
//!
//! The server hands requests over through core's [`WebhookHandler`] port; [`Webhooks`]
//! finds the channel a request names.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use squidbot_core::clock::{Clock, unix_seconds};
use squidbot_core::sync::lock;
use squidbot_core::webhook::{WebhookHandler, WebhookRequest, WebhookResponse, status};
use squidbot_types::Secret;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::markdown::MarkdownFlavor;
use crate::port::{
    Capabilities, Channel, ChannelError, Conversation, ConversationKind, InboundMessage, InboundSink, OutboundMessage,
    ReadAttachment, Sender, SentMessage, StreamMode,
};

/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "x-squidbot-signature";
/// The header carrying the signing time.
pub const TIMESTAMP_HEADER: &str = "x-squidbot-timestamp";
/// Largest accepted request body.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Largest difference between the signing time and the gateway's clock.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);
/// Requests waiting to be handed to the manager.
const QUEUE: usize = 64;

/// A message as callers post it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Posted {
    sender: String,
    text: String,
    id: Option<String>,
    conversation: Option<String>,
    callback_url: Option<String>,
}

/// One webhook channel: it takes signed requests from [`Webhooks`], hands their messages
/// to the manager, and answers each request with its reply (or later, to its callback).
pub struct WebhookChannel {
    name: String,
    secret: Secret,
    reply_timeout: Duration,
    queue: mpsc::Sender<InboundMessage>,
    incoming: tokio::sync::Mutex<mpsc::Receiver<InboundMessage>>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    callbacks: Mutex<HashMap<String, String>>,
    http: reqwest::Client,
    clock: Arc<dyn Clock>,
}

impl WebhookChannel {
    /// The webhook `name`, checking signatures with `secret` against the time on `clock`
    /// and answering a request `202` when its reply takes longer than `reply_timeout`.
    pub fn new(name: &str, secret: Secret, reply_timeout: Duration, clock: Arc<dyn Clock>) -> Self {
        let (queue, incoming) = mpsc::channel(QUEUE);
        Self {
            name: name.to_owned(),
            secret,
            reply_timeout,
            queue,
            incoming: tokio::sync::Mutex::new(incoming),
            waiting: Mutex::new(HashMap::new()),
            callbacks: Mutex::new(HashMap::new()),
            http: reqwest::Client::new(),
            clock,
        }
    }

    fn verify(&self, request: &WebhookRequest, now: SystemTime) -> Result<(), String> {
        let header = |name: &str| request.header(name).map(str::trim);
        let Some(stamp) = header(TIMESTAMP_HEADER) else {
            return Err(format!("the {TIMESTAMP_HEADER} header is missing"));
        };
        let Ok(signed_at) = stamp.parse::<u64>() else { return Err(format!("{TIMESTAMP_HEADER} is not Unix seconds")) };
        let signed_at = i64::try_from(signed_at).unwrap_or(i64::MAX);
        if unix_seconds(now).abs_diff(signed_at) > MAX_CLOCK_SKEW.as_secs() {
            return Err("the request was signed more than five minutes away from now".to_owned());
        }
        let Some(signature) = header(SIGNATURE_HEADER).and_then(|value| value.strip_prefix("sha256=")) else {
            return Err(format!("the {SIGNATURE_HEADER} header is missing or not sha256=<hex>"));
        };
        let Some(signature) = decode_hex(signature) else { return Err("the signature is not hex".to_owned()) };
        let mut mac = Hmac::<Sha256>::new_from_slice(self.secret.expose().as_bytes())
            .map_err(|error| format!("can't use the webhook secret: {error}"))?;
        mac.update(stamp.as_bytes());
        mac.update(b".");
        mac.update(&request.body);
        // Constant-time: the time taken says nothing about how much of a guess matched.
        mac.verify_slice(&signature).map_err(|_mismatch| "the signature does not match".to_owned())
    }

    async fn receive(&self, request: WebhookRequest) -> WebhookResponse {
        let refuse = |status: u16, error: String| {
            tracing::warn!(channel = %self.name, %error, "webhook request refused");
            WebhookResponse { status, body: json!({"error": error}) }
        };
        if request.body.len() > MAX_BODY_BYTES {
            return refuse(status::PAYLOAD_TOO_LARGE, format!("the body is over {MAX_BODY_BYTES} bytes"));
        }
        let now = self.clock.now();
        if let Err(error) = self.verify(&request, now) {
            return refuse(status::UNAUTHORIZED, format!("can't accept the request: {error}"));
        }
        let posted: Posted = match serde_json::from_slice(&request.body) {
            Ok(posted) => posted,
            Err(error) => return refuse(status::BAD_REQUEST, format!("can't read the message: {error}")),
        };
        if posted.sender.trim().is_empty() || posted.text.trim().is_empty() {
            return refuse(status::BAD_REQUEST, "can't read the message: sender and text must not be empty".into());
        }
        let id = posted.id.filter(|id| !id.trim().is_empty()).unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let (reply, replied) = oneshot::channel();
        {
            let mut waiting = lock(&self.waiting);
            if waiting.contains_key(&id) {
                return refuse(status::CONFLICT, format!("message {id} is already being answered"));
            }
            waiting.insert(id.clone(), reply);
        }
        if let Some(url) = &posted.callback_url {
            lock(&self.callbacks).insert(id.clone(), url.clone());
        }
        let message = InboundMessage {
            channel: self.name.clone(),
            platform_message_id: id.clone(),
            conversation: Conversation {
                id: posted.conversation.unwrap_or_else(|| posted.sender.clone()),
                kind: ConversationKind::Direct,
                thread: None,
            },
            sender: Sender { id: posted.sender, display_name: None },
            text: posted.text,
            mentions_bot: true,
            attachments: Vec::new(),
            received_at: jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH),
        };
        if self.queue.try_send(message).is_err() {
            self.forget(&id);
            return refuse(status::SERVICE_UNAVAILABLE, "too many messages are waiting; try again later".into());
        }
        match tokio::time::timeout(self.reply_timeout, replied).await {
            Ok(Ok(body)) => {
                self.forget(&id);
                WebhookResponse { status: status::OK, body }
            }
            Ok(Err(_)) | Err(_) => {
                lock(&self.waiting).remove(&id);
                let callback = lock(&self.callbacks).contains_key(&id);
                WebhookResponse {
                    status: status::ACCEPTED,
                    body: json!({"id": id, "status": "accepted", "callback": callback}),
                }
            }
        }
    }

    fn forget(&self, id: &str) {
        lock(&self.waiting).remove(id);
        lock(&self.callbacks).remove(id);
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|start| u8::from_str_radix(text.get(start..start + 2)?, 16).ok()).collect()
}

impl Channel for WebhookChannel {
    fn name(&self) -> &str {
        &self.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            streams: StreamMode::SendOnce,
            typing: false,
            threads: false,
            max_message_chars: 1_000_000,
            markdown: MarkdownFlavor::PlainText,
        }
    }

    async fn run(&self, inbound: InboundSink, shutdown: CancellationToken) -> Result<(), ChannelError> {
        let mut incoming = self.incoming.lock().await;
        inbound.forward(&mut incoming, &shutdown).await.map_err(|closed| ChannelError::transient(closed.to_string()))
    }

    async fn send(&self, message: &OutboundMessage) -> Result<SentMessage, ChannelError> {
        let id = message.reply_to.clone().unwrap_or_default();
        let sent = SentMessage { conversation: message.conversation.clone(), platform_message_id: id.clone() };
        let body = reply_body(&id, message).await?;
        let waiting = lock(&self.waiting).remove(&id);
        if let Some(waiting) = waiting
            && waiting.send(body.clone()).is_ok()
        {
            return Ok(sent);
        }
        let callback = lock(&self.callbacks).remove(&id);
        let Some(url) = callback else {
            tracing::warn!(channel = %self.name, %id, "a reply came after the request was answered and it had no callback_url; dropped");
            return Ok(sent);
        };
        let response = self
            .http
            .post(&url)
            .timeout(Duration::from_secs(30))
            .json(&body)
            .send()
            .await
            .map_err(|error| ChannelError::transient(format!("can't post the reply to {url}: {error}")))?;
        let status = response.status();
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            // Kept for the retry the manager makes.
            lock(&self.callbacks).insert(id.clone(), url.clone());
            return Err(ChannelError::transient(format!("can't post the reply to {url}: {status}")));
        }
        if !status.is_success() {
            return Err(ChannelError::rejected(format!("can't post the reply to {url}: {status}")));
        }
        Ok(sent)
    }
}

/// The JSON of a reply: `{"id", "reply"}`, and `files` (`name`, `mime`, base64 `data`)
/// when the turn handed any over.
async fn reply_body(id: &str, message: &OutboundMessage) -> Result<Value, ChannelError> {
    use base64::Engine as _;
    if message.attachments.is_empty() {
        return Ok(json!({"id": id, "reply": message.text}));
    }
    let mut files = Vec::with_capacity(message.attachments.len());
    for file in &message.attachments {
        let bytes = file.bytes().await?;
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        files.push(json!({"name": file.name, "mime": file.mime, "data": data}));
    }
    Ok(json!({"id": id, "reply": message.text, "files": files}))
}

/// Every webhook channel of the gateway, by name: the handler the server hands
/// `POST /webhook/<name>` to.
#[derive(Default)]
pub struct Webhooks {
    channels: HashMap<String, Arc<WebhookChannel>>,
}

impl Webhooks {
    /// Adds a webhook channel.
    pub fn add(&mut self, channel: Arc<WebhookChannel>) {
        self.channels.insert(channel.name.clone(), channel);
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.channels.is_empty()
    }
}

impl WebhookHandler for Webhooks {
    async fn handle(&self, request: WebhookRequest) -> WebhookResponse {
        match self.channels.get(&request.channel).cloned() {
            Some(channel) => channel.receive(request).await,
            None => WebhookResponse {
                status: status::NOT_FOUND,
                body: json!({"error": format!("no webhook named {}", request.channel)}),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use squidbot_core::clock::{FixedClock, SystemClock};

    use super::*;

    /// The signature header's value for `body` signed at `timestamp`.
    fn sign(secret: &str, timestamp: u64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        let digest = mac.finalize().into_bytes();
        let hex: String = digest.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("sha256={hex}")
    }

    fn request(timestamp: u64, signature: &str, body: &[u8]) -> WebhookRequest {
        WebhookRequest {
            channel: "hook".to_owned(),
            headers: vec![
                (TIMESTAMP_HEADER.to_owned(), timestamp.to_string()),
                (SIGNATURE_HEADER.to_owned(), signature.to_owned()),
            ],
            body: body.to_vec(),
        }
    }

    #[test]
    fn signatures_are_checked_over_time_and_body() {
        let channel = WebhookChannel::new("hook", Secret::new("s3cret"), Duration::from_secs(1), Arc::new(SystemClock));
        let now = SystemTime::now();
        let stamp = now.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let body = br#"{"sender":"ci","text":"hi"}"#;
        assert_eq!(channel.verify(&request(stamp, &sign("s3cret", stamp, body), body), now), Ok(()));
        let tampered = br#"{"sender":"ci","text":"rm"}"#;
        assert!(channel.verify(&request(stamp, &sign("s3cret", stamp, body), tampered), now).is_err());
        assert!(channel.verify(&request(stamp, &sign("other", stamp, body), body), now).is_err());
        let old = stamp - 600;
        assert!(
            channel.verify(&request(old, &sign("s3cret", old, body), body), now).unwrap_err().contains("five minutes")
        );
        assert!(channel.verify(&request(stamp, "sha256=zz", body), now).is_err());
        let unsigned = WebhookRequest { channel: "hook".to_owned(), headers: Vec::new(), body: body.to_vec() };
        assert!(channel.verify(&unsigned, now).unwrap_err().contains("missing"));
    }

    #[tokio::test]
    async fn a_reply_carries_its_files_in_base64() {
        let conversation = Conversation { id: "ci".to_owned(), kind: ConversationKind::Direct, thread: None };
        let mut message = OutboundMessage {
            conversation,
            reply_to: Some("m1".to_owned()),
            text: "done".to_owned(),
            attachments: vec![],
        };
        assert_eq!(reply_body("m1", &message).await.unwrap(), json!({"id": "m1", "reply": "done"}));
        message.attachments.push(crate::port::Attachment {
            name: "a.txt".to_owned(),
            mime: "text/plain".to_owned(),
            data: crate::port::AttachmentData::Bytes(b"hi".to_vec()),
        });
        assert_eq!(
            reply_body("m1", &message).await.unwrap(),
            json!({"id": "m1", "reply": "done", "files": [{"name": "a.txt", "mime": "text/plain", "data": "aGk="}]})
        );
    }

    #[tokio::test]
    async fn a_request_to_an_unknown_webhook_is_not_found() {
        let webhooks = Webhooks::default();
        let unknown = WebhookRequest { channel: "nope".to_owned(), headers: Vec::new(), body: Vec::new() };
        let response = webhooks.handle(unknown).await;
        assert_eq!(response.status, status::NOT_FOUND);
        assert_eq!(response.body, json!({"error": "no webhook named nope"}));
    }

    #[tokio::test]
    async fn a_request_with_a_bad_signature_is_refused_before_its_body_is_read() {
        let mut webhooks = Webhooks::default();
        webhooks.add(Arc::new(WebhookChannel::new(
            "hook",
            Secret::new("s3cret"),
            Duration::from_secs(1),
            Arc::new(SystemClock),
        )));
        let stamp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
        let response = webhooks.handle(request(stamp, &sign("wrong", stamp, b"not json"), b"not json")).await;
        assert_eq!(response.status, status::UNAUTHORIZED);
        assert_eq!(response.body, json!({"error": "can't accept the request: the signature does not match"}));
    }

    #[tokio::test]
    async fn a_correctly_signed_request_replayed_an_hour_later_by_the_channels_clock_is_refused() {
        let signed_at = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let later = FixedClock(signed_at + Duration::from_secs(3_600));
        let mut webhooks = Webhooks::default();
        webhooks.add(Arc::new(WebhookChannel::new(
            "hook",
            Secret::new("s3cret"),
            Duration::from_secs(1),
            Arc::new(later),
        )));
        let stamp = 1_800_000_000;
        let body = br#"{"sender":"ci","text":"hi"}"#;
        let response = webhooks.handle(request(stamp, &sign("s3cret", stamp, body), body)).await;
        assert_eq!(response.status, status::UNAUTHORIZED);
        assert!(
            response.body["error"].as_str().is_some_and(|error| error.contains("five minutes")),
            "{}",
            response.body
        );
    }
}
