//! A real gateway with people in memory, served on a loopback port, and the clients the
//! tests speak to it with: the WebSocket protocol and plain HTTP/1.1.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use squidbot_core::clock::SystemClock;
use squidbot_core::events::EventHub;
use squidbot_core::people::memory::{MemoryApprovals, MemoryAudit, MemoryDirectory, MemoryUsage};
use squidbot_core::people::tokens::{TOKEN_PREFIX, token_hash};
use squidbot_core::people::{People, PeopleSettings, PeopleStores};
use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};
use squidbot_core::runs::Runner;
use squidbot_types::Secret;
use squidbot_types::message::Usage;
use squidbot_types::people::{ADMIN, AuditRow, BudgetLimits, USER, User};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::ws::fixture::test_agent;
use crate::{Auth, Gateway, Services};

/// The gateway's own token: the owner's.
pub(super) const GATEWAY_TOKEN: &str = "the-gateway-owners-own-token";

/// The audit trail's key.
pub(super) const AUDIT_KEY: &[u8] = b"test audit key, thirty-two bytes";

/// What the model answers every turn.
pub(super) const REPLY: &str = "hello from the model";

/// Each model call's tokens (input, output).
pub(super) const CALL_TOKENS: (u64, u64) = (10, 5);

/// A search that reads every stored session (what the real index answers, slowly): the
/// tests check which scope the gateway asks for.
struct StoreSearch(Arc<dyn squidbot_core::store::DynSessionStore>);

impl squidbot_core::store::search::SessionSearch for StoreSearch {
    async fn search<'a>(
        &'a self,
        query: &'a str,
        scope: squidbot_core::store::search::SearchScope<'a>,
        limit: usize,
    ) -> Result<Vec<squidbot_core::store::search::SearchHit>, squidbot_core::store::search::SearchError> {
        use squidbot_core::store::search::{SearchError, SearchHit, SearchScope};
        let failed = |error: squidbot_core::store::StoreError| SearchError::Index(error.to_string());
        let mut hits = Vec::new();
        for summary in self.0.list_boxed().await.map_err(failed)? {
            if matches!(scope, SearchScope::Context(context) if context != summary.context) {
                continue;
            }
            let Some(loaded) = self.0.load_boxed(&summary.key).await.map_err(failed)? else { continue };
            for entry in loaded.entries {
                let text = serde_json::to_string(&entry.body).unwrap_or_default();
                if text.contains(query) {
                    hits.push(SearchHit {
                        key: summary.key.clone(),
                        context: summary.context.clone(),
                        entry_id: entry.id,
                        timestamp: entry.timestamp,
                        kind: entry.body.type_name().to_owned(),
                        snippet: text,
                    });
                }
            }
        }
        hits.truncate(limit);
        Ok(hits)
    }
}

/// User `id`'s gateway token.
pub(super) fn token_of(id: &str) -> String {
    format!("{TOKEN_PREFIX}{id}0123456789abcdef0123456789abcdef")
}

/// A model that answers [`REPLY`], streamed in one piece.
struct Model;

impl LlmProvider for Model {
    async fn complete<'a>(
        &'a self,
        _request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        sink.text_delta(REPLY);
        Ok(Completion {
            content: REPLY.into(),
            tool_calls: Vec::new(),
            usage: Usage { input_tokens: CALL_TOKENS.0, output_tokens: CALL_TOKENS.1, ..Usage::default() },
            stop_reason: StopReason::EndTurn,
            model: "fake/model".into(),
        })
    }
}

fn user(id: &str, role: &str) -> User {
    User {
        id: id.into(),
        name: id.to_uppercase(),
        role: role.into(),
        context: format!("user:{id}"),
        created_ms: 0,
        disabled: false,
        budget: BudgetLimits::default(),
    }
}

/// A gateway with four people, each holding a token: `bob` and `carol` (role `user`),
/// `dave` (an `admin`) and `eve` (disabled); the owner holds [`GATEWAY_TOKEN`].
pub(super) struct World {
    pub(super) address: SocketAddr,
    pub(super) gateway: Arc<Gateway>,
    pub(super) directory: Arc<MemoryDirectory>,
    pub(super) usage: Arc<MemoryUsage>,
    pub(super) audit: Arc<MemoryAudit>,
    pub(super) approvals: Arc<MemoryApprovals>,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl World {
    /// Serves a gateway with its audit key.
    pub(super) async fn start() -> World {
        World::serve(Some(AUDIT_KEY.to_vec())).await
    }

    /// Serves a gateway; `audit_key` is what `audit.verify` is given.
    pub(super) async fn serve(audit_key: Option<Vec<u8>>) -> World {
        let directory = Arc::new(MemoryDirectory::default());
        for (id, role) in [("bob", USER), ("carol", USER), ("dave", ADMIN), ("eve", USER)] {
            let mut person = user(id, role);
            person.disabled = id == "eve";
            directory.put(person);
            directory.set_token_hash(id, &token_hash(&token_of(id)));
        }
        directory.link(squidbot_types::people::Identity { channel: "telegram".into(), sender_id: "42".into() }, "bob");
        let usage = Arc::new(MemoryUsage::default());
        let audit = Arc::new(MemoryAudit::new(AUDIT_KEY));
        let approvals = Arc::new(MemoryApprovals::default());
        let stores = PeopleStores {
            directory: directory.clone(),
            usage: usage.clone(),
            audit: audit.clone(),
            approvals: approvals.clone(),
        };
        let people = Arc::new(People::new(PeopleSettings::default(), stores, Arc::new(SystemClock)));
        let agent = test_agent(Arc::new(Model), 2).with_people(people.clone());
        let runner = Runner::new(Arc::new(agent), EventHub::new());
        let memories = squidbot_core::memory::Memories::new(
            Arc::new(squidbot_core::memory::in_memory::InMemoryMemoryStore::default()),
            None,
            Arc::new(SystemClock),
        );
        let search = StoreSearch(runner.agent().store().clone());
        let services = Services {
            session_search: Some(Arc::new(search)),
            people: Some(people.clone()),
            audit_key,
            memories: Some(Arc::new(memories)),
            memory_context: "owner".into(),
            ..Services::default()
        };
        let auth = Auth::Token(Secret::new(GATEWAY_TOKEN));
        let gateway = Gateway::new(runner, auth, vec!["fake/model".into()], services);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        tokio::spawn(crate::run(listener, gateway.clone(), shutdown.clone()));
        World { address, gateway, directory, usage, audit, approvals, shutdown }
    }

    /// The stored session `key`'s context, `None` when it was never written.
    pub(super) async fn session_context(&self, key: &str) -> Option<String> {
        let loaded = self.gateway.runner().agent().store().load_boxed(key).await.unwrap();
        loaded.map(|loaded| loaded.header.context)
    }

    /// How many entries the stored session `key` has (0 when it was never written).
    pub(super) async fn session_entries(&self, key: &str) -> usize {
        let loaded = self.gateway.runner().agent().store().load_boxed(key).await.unwrap();
        loaded.map_or(0, |loaded| loaded.entries.len())
    }

    /// Every audit row so far.
    pub(super) fn audit_rows(&self) -> Vec<AuditRow> {
        self.audit.snapshot().0
    }

    /// Connects with `auth` (`{"token": …}` or `{"password": …}`) asking for `scopes`;
    /// returns the client and the `connect` response.
    pub(super) async fn login(&self, auth: Value, scopes: &[&str]) -> (Client, Value) {
        let (socket, _) = tokio_tungstenite::connect_async(format!("ws://{}/", self.address)).await.unwrap();
        let mut client = Client { socket, next_id: 0, events: Vec::new() };
        let challenge = client.frame().await.unwrap();
        assert_eq!(challenge["event"], "connect.challenge", "{challenge}");
        let params = json!({
            "minProtocol": 4, "maxProtocol": 4, "role": "operator", "scopes": scopes, "auth": auth,
            "client": {"id": "test", "version": "1", "platform": "linux", "mode": "test"},
        });
        let response = client.call("connect", params).await;
        (client, response)
    }

    /// A connected client of the person `id` asking for every scope.
    pub(super) async fn person(&self, id: &str) -> Client {
        let (client, response) = self.login(json!({"token": token_of(id)}), &ALL_SCOPES).await;
        assert_eq!(response["ok"], true, "{id} can't log in: {response}");
        client
    }

    /// A connected client of the owner asking for every scope.
    pub(super) async fn owner(&self) -> Client {
        let (client, response) = self.login(json!({"token": GATEWAY_TOKEN}), &ALL_SCOPES).await;
        assert_eq!(response["ok"], true, "the owner can't log in: {response}");
        client
    }

    /// An HTTP/1.1 request; the status and the body.
    pub(super) async fn http(
        &self,
        method: &str,
        path: &str,
        bearer: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(self.address).await.unwrap();
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut request = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n", self.address);
        if let Some(bearer) = bearer {
            request.push_str(&format!("Authorization: Bearer {bearer}\r\n"));
        }
        request.push_str(&format!("Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw)).await.unwrap().unwrap();
        let text = String::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
        (status, if chunked { unchunk(body) } else { body.to_owned() })
    }

    /// `POST /v1/chat/completions` with `bearer`, saying `message` as `user`.
    pub(super) async fn complete(&self, bearer: &str, user: &str, message: &str) -> (u16, Value) {
        let body = json!({"model": "fake/model", "user": user, "messages": [{"role": "user", "content": message}]});
        let (status, text) = self.http("POST", "/v1/chat/completions", Some(bearer), Some(&body)).await;
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }
}

/// Every scope a client may ask for.
pub(super) const ALL_SCOPES: [&str; 3] = ["operator.read", "operator.write", "operator.admin"];

/// The body of a chunked response.
fn unchunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A protocol client that keeps the events it saw.
pub(super) struct Client {
    socket: Socket,
    next_id: u64,
    pub(super) events: Vec<Value>,
}

impl Client {
    /// The next text frame, `None` once the server closed.
    async fn frame(&mut self) -> Option<Value> {
        loop {
            let message =
                tokio::time::timeout(Duration::from_secs(20), self.socket.next()).await.expect("a frame in time");
            match message {
                Some(Ok(Message::Text(text))) => return Some(serde_json::from_str(text.as_str()).unwrap()),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    }

    /// Sends a request and returns its response frame, keeping events seen meanwhile.
    pub(super) async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let request = json!({"type": "req", "id": id, "method": method, "params": params});
        self.socket.send(Message::Text(request.to_string().into())).await.unwrap();
        loop {
            let frame = self.frame().await.unwrap_or_else(|| panic!("closed while waiting for {method}"));
            if frame["type"] == "res" && frame["id"] == id {
                return frame;
            }
            self.events.push(frame);
        }
    }

    /// [`Client::call`] that must succeed; its payload.
    pub(super) async fn ok(&mut self, method: &str, params: Value) -> Value {
        let response = self.call(method, params).await;
        assert_eq!(response["ok"], true, "{method} failed: {response}");
        response["payload"].clone()
    }

    /// Waits until the server closes the connection.
    pub(super) async fn closed(&mut self) -> bool {
        self.frame().await.is_none()
    }

    /// Waits for the `chat` event that ends run `run_id`.
    pub(super) async fn run_final(&mut self, run_id: &str) -> Value {
        let ends = |event: &Value| {
            event["event"] == "chat" && event["payload"]["runId"] == run_id && event["payload"]["state"] == "final"
        };
        if let Some(position) = self.events.iter().position(ends) {
            return self.events.remove(position);
        }
        loop {
            let frame = self.frame().await.expect("the run's end before the socket closed");
            if ends(&frame) {
                return frame;
            }
            self.events.push(frame);
        }
    }

    /// Runs a turn (`chat.send` with `params`) to its end; the `chat.send` payload.
    pub(super) async fn turn(&mut self, params: Value) -> Value {
        let sent = self.ok("chat.send", params).await;
        let run_id = sent["runId"].as_str().unwrap().to_owned();
        self.run_final(&run_id).await;
        sent
    }
}

/// A request's error code and its details' code.
pub(super) fn refusal(response: &Value) -> (&str, &str) {
    assert_eq!(response["ok"], false, "expected a refusal: {response}");
    (response["error"]["code"].as_str().unwrap_or(""), response["error"]["details"]["code"].as_str().unwrap_or(""))
}
