//! The faults a real Synapse won't produce on demand (rate limits, server errors, a
//! token revoked mid-loop, malformed events), from a scripted stub homeserver.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use serde_json::{Value, json};
use squidbot_channel_matrix::{InvitePolicy, MatrixChannel, MatrixSettings};
use squidbot_channels::{
    AttachmentData, Channel, ChannelErrorKind, Conversation, ConversationKind, InboundSink, OutboundMessage,
};
use squidbot_types::Secret;
use tokio_util::sync::CancellationToken;

/// A scripted answer: status, `Retry-After` header, JSON body (or raw text).
#[derive(Clone)]
struct Answer {
    status: u16,
    retry_after: Option<&'static str>,
    body: String,
}

fn ok(body: Value) -> Answer {
    Answer { status: 200, retry_after: None, body: body.to_string() }
}

fn failing(status: u16, body: Value) -> Answer {
    Answer { status, retry_after: None, body: body.to_string() }
}

#[derive(Default)]
struct Script {
    syncs: VecDeque<Answer>,
    sends: VecDeque<Answer>,
    /// When each request came, with its path and query.
    requests: Vec<(Instant, String)>,
}

struct Stub {
    script: Arc<Mutex<Script>>,
    base_url: String,
}

impl Stub {
    async fn start(syncs: Vec<Answer>, sends: Vec<Answer>) -> Stub {
        let script = Arc::new(Mutex::new(Script { syncs: syncs.into(), sends: sends.into(), requests: Vec::new() }));
        let router = Router::new().fallback(answer).with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        Stub { script, base_url }
    }

    fn channel(&self, state_dir: &std::path::Path) -> MatrixChannel {
        MatrixChannel::new(MatrixSettings {
            name: "stubbed".to_owned(),
            homeserver: self.base_url.clone(),
            user_id: "@bot:stub".to_owned(),
            access_token: Some(Secret::new("syt_stub")),
            password: None,
            device_id: None,
            state_dir: state_dir.to_path_buf(),
            invites: InvitePolicy::All,
            max_attachment_bytes: 1024,
        })
        .unwrap()
    }

    /// When each sync request came, with its query.
    fn syncs(&self) -> Vec<(Instant, String)> {
        let script = self.script.lock().unwrap();
        script.requests.iter().filter(|(_, path)| path.contains("/sync")).cloned().collect()
    }
}

async fn answer(State(script): State<Arc<Mutex<Script>>>, method: Method, uri: Uri) -> (StatusCode, HeaderMap, String) {
    let path = uri.path().to_owned();
    let scripted = {
        let mut script = script.lock().unwrap();
        script.requests.push((Instant::now(), uri.to_string()));
        if path.ends_with("/sync") {
            script.syncs.pop_front()
        } else if method == Method::PUT && path.contains("/send/") {
            Some(script.sends.pop_front().unwrap_or_else(|| ok(json!({"event_id": "$sent"}))))
        } else if path.ends_with("/account/whoami") {
            Some(ok(json!({"user_id": "@bot:stub"})))
        } else if path == "/_matrix/media/v3/download/stub/legacy" {
            Some(Answer { status: 200, retry_after: None, body: "file from the legacy endpoint".to_owned() })
        } else if path.ends_with("/joined_members") {
            Some(ok(json!({"joined": {"@bot:stub": {}, "@alice:stub": {}}})))
        } else {
            Some(failing(404, json!({"errcode": "M_NOT_FOUND", "error": "not scripted"})))
        }
    };
    let answer = match scripted {
        Some(answer) => answer,
        // Nothing more scripted: a long poll with no news.
        None => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ok(json!({"next_batch": "idle"}))
        }
    };
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    if let Some(seconds) = answer.retry_after {
        headers.insert("retry-after", seconds.parse().unwrap());
    }
    (StatusCode::from_u16(answer.status).unwrap(), headers, answer.body)
}

fn batch_with_message(next_batch: &str, event_id: &str, body: &str) -> Value {
    json!({
        "next_batch": next_batch,
        "rooms": {"join": {"!room:stub": {"timeline": {"events": [
            {"type": "m.room.message", "event_id": event_id, "sender": "@alice:stub", "origin_server_ts": 1,
             "content": {"msgtype": "m.text", "body": body}},
        ]}}}},
    })
}

/// The gap between sync request `index` and the one before it.
fn gap_before(syncs: &[(Instant, String)], index: usize) -> Duration {
    syncs[index].0 - syncs[index - 1].0
}

#[tokio::test]
async fn a_rate_limited_sync_waits_as_long_as_told() {
    let limited = failing(429, json!({"errcode": "M_LIMIT_EXCEEDED", "error": "slow down", "retry_after_ms": 1500}));
    let stub =
        Stub::start(vec![ok(json!({"next_batch": "s1"})), limited, ok(batch_with_message("s2", "$m", "hi"))], vec![])
            .await;
    let state = tempfile::tempdir().unwrap();
    let channel = stub.channel(state.path());
    let (sink, mut received) = InboundSink::bounded(4);
    let shutdown = CancellationToken::new();
    let run = channel.run(sink, shutdown.clone());
    let check = async {
        let message = tokio::time::timeout(Duration::from_secs(5), received.recv()).await.unwrap().unwrap();
        assert_eq!((message.platform_message_id.as_str(), message.text.as_str()), ("$m", "hi"));
        assert_eq!(message.conversation.kind, ConversationKind::Direct, "two joined members");
        shutdown.cancel();
    };
    let (ended, ()) = tokio::join!(run, check);
    assert_eq!(ended, Ok(()));
    let syncs = stub.syncs();
    assert!(syncs[0].1.contains("timeout=0") && !syncs[0].1.contains("since="), "{}", syncs[0].1);
    assert!(syncs[1].1.contains("since=s1") && syncs[1].1.contains("timeout=30000"), "{}", syncs[1].1);
    assert!(syncs[2].1.contains("since=s1"), "the limited sync is repeated: {}", syncs[2].1);
    let waited = gap_before(&syncs, 2);
    // Neither the 1 s backoff nor the 5 s default: the 1.5 s asked for.
    assert!(waited >= Duration::from_millis(1500) && waited < Duration::from_millis(2500), "waited {waited:?}");
    // The token is stored once the batch is handed over.
    let stored = std::fs::read_to_string(state.path().join("stubbed.sync")).unwrap();
    assert!(["s2\n", "idle\n"].contains(&stored.as_str()), "{stored:?}");
}

#[tokio::test]
async fn server_errors_are_retried_after_a_backoff() {
    let stub = Stub::start(
        vec![
            ok(json!({"next_batch": "s1"})),
            failing(502, json!({})),
            Answer { status: 200, retry_after: None, body: "<html>not json</html>".to_owned() },
            ok(batch_with_message("s2", "$after", "after the outage")),
        ],
        vec![],
    )
    .await;
    let state = tempfile::tempdir().unwrap();
    let channel = stub.channel(state.path());
    let (sink, mut received) = InboundSink::bounded(4);
    let shutdown = CancellationToken::new();
    let check = async {
        let message = tokio::time::timeout(Duration::from_secs(10), received.recv()).await.unwrap().unwrap();
        assert_eq!(message.platform_message_id, "$after");
        shutdown.cancel();
    };
    let (ended, ()) = tokio::join!(channel.run(sink, shutdown.clone()), check);
    assert_eq!(ended, Ok(()));
    let syncs = stub.syncs();
    let first_retry = gap_before(&syncs, 2);
    let second_retry = gap_before(&syncs, 3);
    assert!(first_retry >= Duration::from_secs(1) && first_retry < Duration::from_millis(1900), "{first_retry:?}");
    assert!(second_retry >= Duration::from_secs(2) && second_retry < Duration::from_millis(2900), "{second_retry:?}");
}

#[tokio::test]
async fn a_token_revoked_mid_loop_ends_it_as_fatal() {
    let revoked = failing(401, json!({"errcode": "M_UNKNOWN_TOKEN", "error": "Invalid access token passed."}));
    let stub = Stub::start(vec![ok(json!({"next_batch": "s1"})), revoked], vec![]).await;
    let state = tempfile::tempdir().unwrap();
    let channel = stub.channel(state.path());
    let (sink, _received) = InboundSink::bounded(4);
    let ended =
        tokio::time::timeout(Duration::from_secs(5), channel.run(sink, CancellationToken::new())).await.unwrap();
    let error = ended.unwrap_err();
    assert_eq!(error.kind, ChannelErrorKind::Fatal);
    assert!(error.message.contains("M_UNKNOWN_TOKEN"), "{error}");
}

#[tokio::test]
async fn malformed_events_are_skipped_and_the_rest_delivered() {
    let batch = json!({"next_batch": "s2", "rooms": {"join": {"!room:stub": {"timeline": {"events": [
        {"type": 5},
        {"type": "m.room.message", "event_id": "$nobody", "sender": "@alice:stub", "content": {"msgtype": "m.text"}},
        {"type": "m.room.message", "event_id": "$edit", "sender": "@alice:stub",
         "content": {"msgtype": "m.text", "body": "* fixed", "m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}}},
        {"type": "m.room.message", "event_id": "$mine", "sender": "@bot:stub", "content": {"msgtype": "m.text", "body": "me"}},
        {"type": "m.room.message", "event_id": "$good", "sender": "@alice:stub", "content": {"msgtype": "m.text", "body": "fine"}},
    ]}}}}});
    let stub = Stub::start(vec![ok(json!({"next_batch": "s1"})), ok(batch)], vec![]).await;
    let state = tempfile::tempdir().unwrap();
    let channel = stub.channel(state.path());
    let (sink, mut received) = InboundSink::bounded(4);
    let shutdown = CancellationToken::new();
    let check = async {
        let message = tokio::time::timeout(Duration::from_secs(5), received.recv()).await.unwrap().unwrap();
        assert_eq!(message.platform_message_id, "$good");
        shutdown.cancel();
    };
    let (ended, ()) = tokio::join!(channel.run(sink, shutdown.clone()), check);
    assert_eq!(ended, Ok(()));
    assert!(received.try_recv().is_err(), "only the good message is handed over");
}

#[tokio::test]
async fn send_failures_are_classified_without_waiting() {
    let sends = vec![
        Answer {
            status: 429,
            retry_after: Some("3"),
            body: json!({"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 3000}).to_string(),
        },
        failing(429, json!({"errcode": "M_LIMIT_EXCEEDED", "retry_after_ms": 1500})),
        failing(500, json!({"errcode": "M_UNKNOWN"})),
        failing(403, json!({"errcode": "M_FORBIDDEN", "error": "You are not in the room"})),
        failing(401, json!({"errcode": "M_UNKNOWN_TOKEN"})),
    ];
    let stub = Stub::start(vec![], sends).await;
    let state = tempfile::tempdir().unwrap();
    let channel = stub.channel(state.path());
    let message = OutboundMessage {
        conversation: Conversation { id: "!room:stub".to_owned(), kind: ConversationKind::Group, thread: None },
        reply_to: None,
        text: "hello".to_owned(),
        attachments: vec![],
    };
    let started = Instant::now();
    let mut kinds = Vec::new();
    for _ in 0..5 {
        kinds.push(channel.send(&message).await.unwrap_err().kind);
    }
    assert_eq!(
        kinds,
        [
            ChannelErrorKind::RateLimited { retry_after: Duration::from_secs(3) },
            ChannelErrorKind::RateLimited { retry_after: Duration::from_millis(1500) },
            ChannelErrorKind::Transient,
            ChannelErrorKind::Rejected,
            ChannelErrorKind::Fatal,
        ]
    );
    assert!(started.elapsed() < Duration::from_secs(1), "send doesn't wait itself");
    assert_eq!(channel.send(&message).await.unwrap().platform_message_id, "$sent");
    let sent: Vec<String> = stub.script.lock().unwrap().requests.iter().map(|(_, path)| path.clone()).collect();
    let transactions: std::collections::HashSet<&String> = sent.iter().collect();
    assert_eq!(transactions.len(), sent.len(), "every message gets its own transaction id: {sent:?}");
}

#[tokio::test]
async fn media_falls_back_to_the_unauthenticated_endpoint_and_respects_the_cap() {
    let file = |event_id: &str, name: &str, uri: &str, size: Option<u64>| {
        let mut content = json!({"msgtype": "m.file", "body": name, "url": uri});
        if let Some(size) = size {
            content["info"] = json!({"size": size});
        }
        json!({"type": "m.room.message", "event_id": event_id, "sender": "@alice:stub", "content": content})
    };
    let batch = json!({"next_batch": "s2", "rooms": {"join": {"!room:stub": {"timeline": {"events": [
        file("$legacy", "notes.txt", "mxc://stub/legacy", None),
        file("$huge", "movie.mkv", "mxc://stub/huge", Some(3 * 1024 * 1024)),
        file("$gone", "gone.txt", "mxc://stub/gone", None),
    ]}}}}});
    let stub = Stub::start(vec![ok(json!({"next_batch": "s1"})), ok(batch)], vec![]).await;
    let state = tempfile::tempdir().unwrap();
    let channel = stub.channel(state.path());
    let (sink, mut received) = InboundSink::bounded(4);
    let shutdown = CancellationToken::new();
    let check = async {
        let mut messages = Vec::new();
        for _ in 0..3 {
            messages.push(tokio::time::timeout(Duration::from_secs(5), received.recv()).await.unwrap().unwrap());
        }
        shutdown.cancel();
        messages
    };
    let (ended, messages) = tokio::join!(channel.run(sink, shutdown.clone()), check);
    assert_eq!(ended, Ok(()));
    let legacy = &messages[0];
    assert_eq!(legacy.attachments.len(), 1);
    assert_eq!(legacy.attachments[0].name, "notes.txt");
    assert_eq!(legacy.attachments[0].mime, "application/octet-stream");
    assert_eq!(legacy.attachments[0].data, AttachmentData::Bytes(b"file from the legacy endpoint".to_vec()));
    assert_eq!(messages[1].text, "[attachment movie.mkv skipped: 3 MB is over the 1 KB limit]");
    assert!(messages[1].attachments.is_empty());
    assert!(
        messages[2].text.starts_with("[attachment gone.txt skipped: can't download mxc://stub/gone: 404"),
        "{}",
        messages[2].text
    );
    let requests: Vec<String> = stub.script.lock().unwrap().requests.iter().map(|(_, path)| path.clone()).collect();
    assert!(
        !requests.iter().any(|path| path.contains("huge")),
        "a file declared too large isn't fetched: {requests:?}"
    );
    assert!(requests.iter().any(|path| path == "/_matrix/client/v1/media/download/stub/legacy"), "{requests:?}");
}
