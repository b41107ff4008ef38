//! The OpenClaw gateway protocol over WebSocket against the real gateway process: the
//! handshake, methods, streamed turn events for protocol 4 and 3, abort, memory and
//! session methods, and every kind of bad input from the issue.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;

use crate::gateway::{Running, TOKEN, gateway_home, start};

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A protocol client that keeps the events it saw.
pub(crate) struct Client {
    socket: Socket,
    next_id: u64,
    events: Vec<Value>,
    last_seq: u64,
}

fn ws_url(running: &Running) -> String {
    running.base.replace("http://", "ws://")
}

impl Client {
    /// Opens the socket and reads the challenge.
    pub(crate) async fn open(running: &Running) -> (Client, Value) {
        let (socket, _) = tokio_tungstenite::connect_async(ws_url(running)).await.unwrap();
        let mut client = Client { socket, next_id: 0, events: Vec::new(), last_seq: 0 };
        let challenge = client.frame().await.expect("a challenge frame");
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        (client, challenge)
    }

    /// Waits for the `chat` event that ends run `run_id`.
    pub(crate) async fn chat_final(&mut self, run_id: &str) -> Value {
        self.event_where(|event| {
            event["event"] == "chat" && event["payload"]["runId"] == run_id && event["payload"]["state"] == "final"
        })
        .await
    }

    /// The first event (already seen or still to come) that `wanted` accepts, within 60 s
    /// (ticks and other events keep arriving, so each frame's own time limit is not enough).
    pub(crate) async fn event_where(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        if let Some(position) = self.events.iter().position(&wanted) {
            return self.events.remove(position);
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the wanted event did not come within 60 s; seen: {:?}",
                self.events
            );
            let frame = self.frame().await.expect("the event before the socket closed");
            if wanted(&frame) {
                return frame;
            }
            self.events.push(frame);
        }
    }

    /// Opens and connects with `protocol`, `scopes` and `auth`; returns the hello payload.
    pub(crate) async fn connected(running: &Running, protocol: u64, scopes: &[&str]) -> (Client, Value) {
        let (mut client, _) = Client::open(running).await;
        let response = client.call("connect", connect_params(protocol, scopes, json!({"token": TOKEN}))).await;
        assert_eq!(response["ok"], true, "{response}");
        (client, response["payload"].clone())
    }

    async fn send_text(&mut self, text: String) {
        self.socket.send(Message::Text(text.into())).await.unwrap();
    }

    /// The next text frame, `None` when the server closed (`Some(Value::Null)` never).
    async fn frame(&mut self) -> Option<Value> {
        loop {
            let message =
                tokio::time::timeout(Duration::from_secs(20), self.socket.next()).await.expect("a frame in time");
            match message {
                Some(Ok(Message::Text(text))) => {
                    let value: Value = serde_json::from_str(text.as_str()).unwrap();
                    if value["type"] == "event" && value.get("seq").is_some() {
                        let seq = value["seq"].as_u64().unwrap();
                        assert_eq!(seq, self.last_seq + 1, "event seq must grow by one: {value}");
                        self.last_seq = seq;
                    }
                    return Some(value);
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    }

    /// Sends a request and returns its response, keeping events seen meanwhile.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        self.send_text(json!({"type": "req", "id": id, "method": method, "params": params}).to_string()).await;
        self.response(&id).await
    }

    async fn response(&mut self, id: &str) -> Value {
        loop {
            let frame = self.frame().await.unwrap_or_else(|| panic!("closed while waiting for {id}"));
            if frame["type"] == "res" && frame["id"] == id {
                return frame;
            }
            self.events.push(frame);
        }
    }

    /// Reads until a `chat` event of `run_id` in a terminal state; returns its events.
    pub(crate) async fn chat_until_done(&mut self, run_id: &str) -> Vec<Value> {
        let mut seen: Vec<Value> = std::mem::take(&mut self.events);
        loop {
            if let Some(last) = seen.iter().find(|event| {
                event["event"] == "chat"
                    && event["payload"]["runId"] == run_id
                    && ["final", "aborted", "error"].contains(&event["payload"]["state"].as_str().unwrap_or(""))
            }) {
                let _ = last;
                return seen;
            }
            seen.push(self.frame().await.expect("the run's events"));
        }
    }

    /// Waits for the server to close; returns the close code.
    async fn closed(&mut self) -> Option<CloseCode> {
        loop {
            match tokio::time::timeout(Duration::from_secs(20), self.socket.next()).await.expect("a close in time") {
                Some(Ok(Message::Close(frame))) => return frame.map(|frame| frame.code),
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    }
}

pub(crate) fn connect_params(protocol: u64, scopes: &[&str], auth: Value) -> Value {
    json!({
        "minProtocol": protocol, "maxProtocol": protocol,
        "client": {"id": "test", "version": "1", "platform": "linux", "mode": "test"},
        "role": "operator", "scopes": scopes, "caps": [], "auth": auth,
    })
}

fn chat_texts(events: &[Value], state: &str) -> Vec<Value> {
    events.iter().filter(|event| event["event"] == "chat" && event["payload"]["state"] == state).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_methods_scopes_and_errors() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;

    let (_, challenge) = Client::open(&running).await;
    assert!(challenge["payload"]["nonce"].as_str().is_some_and(|nonce| nonce.len() >= 16), "{challenge}");

    let (mut client, hello) = Client::connected(&running, 4, &["operator.read"]).await;
    assert_eq!(hello["type"], "hello-ok");
    assert_eq!(hello["protocol"], 4);
    let methods: Vec<&str> =
        hello["features"]["methods"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for method in [
        "health",
        "status",
        "agent",
        "chat.send",
        "chat.history",
        "chat.abort",
        "sessions.list",
        "sessions.reset",
        "cron.list",
        "cron.add",
        "cron.remove",
        "config.get",
    ] {
        assert!(methods.contains(&method), "{method} missing from {methods:?}");
    }
    assert_eq!(hello["policy"]["tickIntervalMs"], 15000);
    assert_eq!(hello["auth"]["scopes"], json!(["operator.read"]));

    let health = client.call("health", json!({})).await;
    assert_eq!(health["payload"]["ok"], true, "{health}");
    let status = client.call("status", json!({})).await;
    assert_eq!(status["payload"]["model"], "local/test-model", "{status}");

    let unknown = client.call("no.such.method", json!({})).await;
    assert_eq!(unknown["ok"], false);
    assert_eq!(unknown["error"]["code"], "INVALID_REQUEST");
    assert_eq!(unknown["error"]["details"]["code"], "UNKNOWN_METHOD");

    // The scheduler runs in the gateway: its housekeeping jobs are listed from the start.
    let cron = client.call("cron.list", json!({})).await;
    let jobs = cron["payload"]["jobs"].as_array().unwrap_or_else(|| panic!("{cron}"));
    assert!(jobs.iter().any(|job| job["kind"] == "system" && job["name"] == "ttl_expiry"), "{cron}");
    let missing = client.call("cron.get", json!({"id": "nosuchjob"})).await;
    assert_eq!(missing["error"]["code"], "NOT_FOUND", "{missing}");

    let config = client.call("config.get", json!({})).await;
    let text = config["payload"].to_string();
    assert!(config["payload"]["config"]["llm"]["model"] == "local/test-model", "{config}");
    assert!(!text.contains(TOKEN), "config.get must not reveal the token: {text}");

    let forbidden = client.call("chat.send", json!({"message": "hi"})).await;
    assert_eq!(forbidden["error"]["code"], "FORBIDDEN", "{forbidden}");
    assert_eq!(forbidden["error"]["details"]["code"], "MISSING_SCOPE");

    let skills = client.call("skills.list", json!({})).await;
    let names: Vec<&str> =
        skills["payload"]["skills"].as_array().unwrap().iter().filter_map(|skill| skill["name"].as_str()).collect();
    assert!(names.contains(&"skill-creator") && names.contains(&"summarize"), "{skills}");
    let creator = skills["payload"]["skills"].as_array().unwrap().iter().find(|skill| skill["name"] == "skill-creator");
    assert_eq!(creator.unwrap()["available"], true);

    let bad_params = client.call("chat.history", json!({"limit": "ten"})).await;
    assert_eq!(bad_params["error"]["code"], "INVALID_REQUEST", "{bad_params}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_streams_the_same_turn_to_protocol_4_and_3_and_history_sessions_and_reset_follow() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;
    server.push(Reply::text("streamed words for the newer client"));
    server.push(Reply::text("and the older client gets these"));

    let (mut v4, _) = Client::connected(&running, 4, &["operator.write"]).await;
    let ack = v4
        .call("chat.send", json!({"sessionKey": "agent:main:main", "message": "first", "idempotencyKey": "run-a"}))
        .await;
    assert_eq!(ack["payload"], json!({"runId": "run-a", "sessionKey": "agent:main:main", "status": "started"}));
    let events = v4.chat_until_done("run-a").await;
    let deltas = chat_texts(&events, "delta");
    assert!(!deltas.is_empty(), "{events:?}");
    let joined: String = deltas.iter().map(|event| event["payload"]["deltaText"].as_str().unwrap()).collect();
    assert_eq!(joined, "streamed words for the newer client");
    let finals = chat_texts(&events, "final");
    assert_eq!(finals[0]["payload"]["message"]["content"][0]["text"], "streamed words for the newer client");
    assert!(events.iter().any(|event| event["event"] == "agent"
        && event["payload"]["stream"] == "lifecycle"
        && event["payload"]["data"]["phase"] == "start"));

    let (mut v3, hello) = Client::connected(&running, 3, &["operator.write"]).await;
    assert_eq!(hello["protocol"], 3);
    let ack = v3.call("chat.send", json!({"message": "second", "idempotencyKey": "run-b"})).await;
    assert_eq!(ack["ok"], true, "{ack}");
    let events = v3.chat_until_done("run-b").await;
    let deltas = chat_texts(&events, "delta");
    assert!(!deltas.is_empty() && deltas.iter().all(|event| event["payload"].get("deltaText").is_none()), "{deltas:?}");
    assert_eq!(
        chat_texts(&events, "final")[0]["payload"]["message"]["content"][0]["text"],
        "and the older client gets these"
    );

    // The v4 client watches the session it used, so it saw the v3 client's turn too.
    let seen = v4.chat_until_done("run-b").await;
    assert_eq!(chat_texts(&seen, "final").len(), 1);

    let history = v4.call("chat.history", json!({"sessionKey": "agent:main:main"})).await;
    let texts: Vec<&str> = history["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["first", "streamed words for the newer client", "second", "and the older client gets these"]);

    let sessions = v4.call("sessions.list", json!({})).await;
    assert!(
        sessions["payload"]["sessions"].as_array().unwrap().iter().any(|session| session["key"] == "agent:main:main"),
        "{sessions}"
    );
    let tree = v4.call("sessions.get", json!({"key": "agent:main:main"})).await;
    let entries = tree["payload"]["entries"].as_array().unwrap();
    assert!(entries.len() >= 4, "{tree}");
    assert!(entries.iter().skip(1).all(|entry| entry["parent"].is_string()), "entries link to their parents: {tree}");

    let reset = v4.call("sessions.reset", json!({"sessionKey": "agent:main:main"})).await;
    assert_eq!(reset["payload"]["ok"], true);
    let history = v4.call("chat.history", json!({"sessionKey": "agent:main:main"})).await;
    assert_eq!(history["payload"]["messages"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_abort_stops_a_running_turn() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;
    server.push(Reply::StallStream { text: "partial words".into() });

    let (mut client, _) = Client::connected(&running, 4, &["operator.write"]).await;
    let ack = client.call("chat.send", json!({"sessionKey": "s1", "message": "go", "idempotencyKey": "run-x"})).await;
    assert_eq!(ack["ok"], true, "{ack}");
    loop {
        let frame = client.frame().await.unwrap();
        if frame["event"] == "chat" && frame["payload"]["state"] == "delta" {
            break;
        }
    }
    let abort = client.call("chat.abort", json!({"sessionKey": "s1"})).await;
    assert_eq!(abort["payload"]["aborted"], true, "{abort}");
    let events = client.chat_until_done("run-x").await;
    let aborted = chat_texts(&events, "aborted");
    assert_eq!(aborted.len(), 1, "{events:?}");
    assert_eq!(aborted[0]["payload"]["message"]["content"][0]["text"], "partial words");
    let again = client.call("chat.abort", json!({"sessionKey": "s1"})).await;
    assert_eq!(again["payload"]["aborted"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_methods_edit_memories_and_memory_md() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;
    let (mut client, _) = Client::connected(&running, 4, &["operator.read", "operator.write"]).await;

    let saved = client.call("memory.save", json!({"content": "The user's cat is called Miso", "type": "fact"})).await;
    let id = saved["payload"]["id"].as_i64().unwrap_or_else(|| panic!("{saved}"));
    let listed = client.call("memory.list", json!({})).await;
    assert_eq!(listed["payload"]["memories"][0]["content"], "The user's cat is called Miso", "{listed}");
    let found = client.call("memory.list", json!({"query": "cat"})).await;
    assert_eq!(found["payload"]["memories"][0]["id"], id, "{found}");
    let bad = client.call("memory.save", json!({"content": "x", "type": "nonsense"})).await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST");
    let deleted = client.call("memory.delete", json!({"id": id})).await;
    assert_eq!(deleted["payload"]["ok"], true);
    let listed = client.call("memory.list", json!({})).await;
    assert_eq!(listed["payload"]["memories"], json!([]));

    let set = client.call("memory.doc.set", json!({"text": "## Projects\n- squidbot"})).await;
    assert_eq!(set["payload"]["ok"], true, "{set}");
    let got = client.call("memory.doc.get", json!({})).await;
    assert!(got["payload"]["text"].as_str().unwrap().contains("- squidbot"), "{got}");
    let on_disk = std::fs::read_to_string(got["payload"]["location"].as_str().unwrap()).unwrap();
    assert!(on_disk.contains("## Projects"));
    let too_big = client.call("memory.doc.set", json!({"text": "x".repeat(50_000)})).await;
    assert_eq!(too_big["error"]["code"], "INVALID_REQUEST", "{too_big}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_frames_get_errors_or_clean_closes_and_the_server_stays_up() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;

    // A request before connect.
    let (mut early, _) = Client::open(&running).await;
    let response = early.call("health", json!({})).await;
    assert_eq!(response["ok"], false);
    assert!(response["error"]["message"].as_str().unwrap().contains("connect"), "{response}");
    assert_eq!(early.closed().await, Some(CloseCode::Policy));

    // Garbage before connect.
    let (mut garbage, _) = Client::open(&running).await;
    garbage.send_text("{not json".into()).await;
    let response = garbage.frame().await.unwrap();
    assert_eq!(response["error"]["code"], "INVALID_REQUEST", "{response}");
    assert_eq!(garbage.closed().await, Some(CloseCode::Policy));

    // A wrong token.
    let (mut wrong, _) = Client::open(&running).await;
    let response = wrong.call("connect", connect_params(4, &["operator.read"], json!({"token": "nope"}))).await;
    assert_eq!(response["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH", "{response}");
    assert_eq!(wrong.closed().await, Some(CloseCode::Policy));

    // An unsupported protocol.
    let (mut old, _) = Client::open(&running).await;
    let response = old.call("connect", connect_params(2, &["operator.read"], json!({"token": TOKEN}))).await;
    assert_eq!(response["error"]["details"]["code"], "PROTOCOL_MISMATCH", "{response}");

    // After connect: malformed frames are answered and the connection goes on.
    let (mut client, _) = Client::connected(&running, 4, &["operator.read"]).await;
    client.send_text("[1,2,3]".into()).await;
    let response = client.frame().await.unwrap();
    assert_eq!((response["ok"].clone(), response["id"].clone()), (json!(false), Value::Null), "{response}");
    client.send_text(json!({"type": "req", "id": "p", "method": "health", "params": [1]}).to_string()).await;
    let response = client.response("p").await;
    assert!(response["error"]["message"].as_str().unwrap().contains("params"), "{response}");
    client.socket.send(Message::Binary(vec![1, 2, 3].into())).await.unwrap();
    let response = client.frame().await.unwrap();
    assert!(response["error"]["message"].as_str().unwrap().contains("binary"), "{response}");
    assert_eq!(client.call("health", json!({})).await["ok"], true);

    // A frame over 1 MiB: an error, then a close saying why.
    let huge = json!({"type": "req", "id": "big", "method": "health", "params": {"pad": "x".repeat(1024 * 1024 + 10)}});
    client.send_text(huge.to_string()).await;
    let response = client.frame().await.unwrap();
    assert!(response["error"]["message"].as_str().unwrap().contains("limit"), "{response}");
    assert_eq!(client.closed().await, Some(CloseCode::Size));

    // A client that vanishes mid-handshake, and one that never reads while a long turn
    // streams to it, do not hurt a well-behaved client.
    let (vanishing, _) = Client::open(&running).await;
    drop(vanishing);
    let long_reply = "word ".repeat(60_000);
    server.push(Reply::text(long_reply.clone()));
    let (mut stuck, _) = Client::connected(&running, 4, &["operator.write"]).await;
    stuck.send_text(json!({"type": "req", "id": "s", "method": "chat.send", "params": {"sessionKey": "flood", "message": "talk a lot", "idempotencyKey": "flood-run"}}).to_string()).await;
    let (mut good, _) = Client::connected(&running, 4, &["operator.read"]).await;
    for _ in 0..3 {
        assert_eq!(good.call("health", json!({})).await["ok"], true);
    }
    let (mut watcher, _) = Client::connected(&running, 4, &["operator.read"]).await;
    let history = loop {
        let history = watcher.call("chat.history", json!({"sessionKey": "flood"})).await;
        if history["payload"]["messages"].as_array().is_some_and(|messages| messages.len() == 2) {
            break history;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(history["payload"]["messages"][1]["content"][0]["text"].as_str().unwrap().len(), long_reply.len());
    drop(stuck);
    assert_eq!(good.call("health", json!({})).await["ok"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopping_gateway_finishes_the_running_turn_before_closing_clients() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let mut running = start(&home).await;
    server.push(Reply::Delayed { delay: Duration::from_millis(1500), reply: Box::new(Reply::text("finished anyway")) });
    let (mut client, _) = Client::connected(&running, 4, &["operator.write"]).await;
    let ack = client.call("chat.send", json!({"message": "slow one", "idempotencyKey": "slow"})).await;
    assert_eq!(ack["ok"], true, "{ack}");
    loop {
        let frame = client.frame().await.unwrap();
        if frame["event"] == "agent" && frame["payload"]["data"]["phase"] == "start" {
            break;
        }
    }
    let pid = running.child.id().unwrap();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let events = client.chat_until_done("slow").await;
    assert_eq!(chat_texts(&events, "final")[0]["payload"]["message"]["content"][0]["text"], "finished anyway");
    assert_eq!(client.closed().await, Some(CloseCode::Restart));
    let status = tokio::time::timeout(Duration::from_secs(20), running.child.wait()).await.unwrap().unwrap();
    assert!(status.success());
}
