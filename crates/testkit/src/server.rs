//! The scripted LLM server: the test handle, its shared state, routing and the per-request flow.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::Response;
use axum::routing::post;
use axum::serve::ListenerExt as _;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::exchange::Exchange;
use crate::fixed_reply::{self, FixedReply};
use crate::invariants::{CheckOptions, check_request};
use crate::script::{ErrorKind, RecordedRequest, Reply, Wire};
use crate::{anthropic, embeddings, openai, sse};

/// Why the scripted LLM server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The listening socket could not be opened.
    #[error("can't bind the scripted LLM server: {0}")]
    Bind(#[source] std::io::Error),
    /// The server stopped on an IO error.
    #[error("can't keep serving the scripted LLM: {0}")]
    Serve(#[source] std::io::Error),
}

/// Handle to a scripted LLM server running on a tokio task. Clones share the server; it shuts
/// down when the last clone is dropped or `shutdown` is called.
#[derive(Clone)]
pub struct ScriptedLlm {
    shared: Arc<Shared>,
    address: SocketAddr,
    lifetime: Arc<Lifetime>,
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

impl fmt::Debug for ScriptedLlm {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.debug_struct("ScriptedLlm").field("base_url", &self.base_url()).finish_non_exhaustive()
    }
}

impl ScriptedLlm {
    /// Starts a server on `127.0.0.1:0`. Panics if no port can be bound (this is test support).
    pub async fn start() -> ScriptedLlm {
        match ScriptedLlm::try_start().await {
            Ok(server) => server,
            Err(error) => panic!("{error}"),
        }
    }

    /// Starts a server on `127.0.0.1:0`.
    pub async fn try_start() -> Result<ScriptedLlm, ServerError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.map_err(ServerError::Bind)?;
        let address = listener.local_addr().map_err(ServerError::Bind)?;
        let shared = Arc::new(Shared::new(Mode::Scripted));
        let shutdown = CancellationToken::new();
        let serving = run_router(listener, router(Arc::clone(&shared)), shutdown.clone().cancelled_owned());
        tokio::spawn(async move {
            if let Err(error) = serving.await {
                eprintln!("scripted LLM: {error}");
            }
        });
        Ok(ScriptedLlm { shared, address, lifetime: Arc::new(Lifetime { shutdown }) })
    }

    /// The base URL clients are configured with: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The socket address the server listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Queues a reply; requests on either wire consume replies first in, first out.
    /// Calls with an empty id get the next `call_N` id of this server (`call_1` first).
    pub fn push(&self, mut reply: Reply) {
        let mut state = self.shared.lock();
        reply.assign_call_ids(&mut state.next_call_number);
        state.script.push_back(reply);
    }

    /// Queues several replies in order.
    pub fn push_all(&self, replies: impl IntoIterator<Item = Reply>) {
        for reply in replies {
            self.push(reply);
        }
    }

    /// From now on every request must carry `key` (OpenAI: `Authorization: Bearer KEY`;
    /// Anthropic: `x-api-key: KEY` and an `anthropic-version` header).
    pub fn expect_api_key(&self, key: &str) {
        self.shared.lock().expected_api_key = Some(key.to_owned());
    }

    /// Whether requests must carry a non-empty system prompt (default: required).
    pub fn set_require_system_prompt(&self, required: bool) {
        self.shared.lock().check_options.require_system_prompt = required;
    }

    /// Every chat request (OpenAI or Anthropic wire) received so far, in arrival order.
    /// Embeddings requests are kept apart in [`ScriptedLlm::embedding_requests`], so chat
    /// request counts and positions don't shift when the client also embeds text.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Every `POST /v1/embeddings` request received so far, in arrival order.
    pub fn embedding_requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().embedding_requests.clone()
    }

    /// With `Some(status)`, every embeddings request from now on fails with that HTTP
    /// status in OpenAI's error format (401/403 auth, 429 rate limit, other 4xx invalid
    /// request, anything else a server error); `None` makes the endpoint answer again.
    pub fn set_embeddings_failing(&self, status: Option<u16>) {
        self.shared.lock().embeddings_failing = status;
    }

    /// The latest request received, if any.
    pub fn last_request(&self) -> Option<RecordedRequest> {
        self.shared.lock().requests.last().cloned()
    }

    /// Every invariant failure seen so far, each a readable sentence.
    pub fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// Panics listing the violations, if there are any.
    pub fn assert_clean(&self) {
        let violations = self.violations();
        if !violations.is_empty() {
            panic!("the scripted LLM saw {} violation(s):\n  - {}", violations.len(), violations.join("\n  - "));
        }
    }

    /// Panics if scripted replies are left over, i.e. the client made fewer requests than scripted.
    pub fn assert_script_consumed(&self) {
        let remaining = self.remaining();
        if remaining > 0 {
            panic!("the scripted LLM still has {remaining} unused repl(ies) queued");
        }
    }

    /// How many replies are still queued.
    pub fn remaining(&self) -> usize {
        self.shared.lock().script.len()
    }

    /// Stops accepting connections; in-flight answers finish.
    pub fn shutdown(&self) {
        self.lifetime.shutdown.cancel();
    }
}

/// Serves every chat request on `listener` with the same text reply, and embeddings with
/// the fake embedding model, until `shutdown` resolves, keeping no record of requests;
/// invariant violations go to stderr. Used for benchmarks.
pub async fn run_fixed_reply(
    listener: TcpListener,
    reply_text: String,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    run_fixed_reply_with(listener, FixedReply::new(reply_text), shutdown).await
}

/// [`run_fixed_reply`] with latency, word pacing and send stamps as `reply` says.
pub async fn run_fixed_reply_with(
    listener: TcpListener,
    reply: FixedReply,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let shared = Arc::new(Shared::new(Mode::FixedReply(reply)));
    run_router(listener, router(shared), shutdown).await
}

async fn run_router(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    // Without TCP_NODELAY, Nagle's algorithm holds small SSE frames back behind the
    // client's delayed ACK (up to 40 ms), which would show up as provider latency.
    let listener = listener.tap_io(|connection| {
        if let Err(error) = connection.set_nodelay(true) {
            eprintln!("scripted LLM: can't set TCP_NODELAY: {error}");
        }
    });
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await.map_err(ServerError::Serve)
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route(Wire::OpenAi.path(), post(openai_request))
        .route(Wire::Anthropic.path(), post(anthropic_request))
        .route(Wire::Embeddings.path(), post(embeddings_request))
        .fallback(unknown_request)
        // Context-overflow tests send large prompts; the default 2 MB limit would reject them.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared)
}

/// Whether the server follows a script or answers everything alike.
enum Mode {
    Scripted,
    FixedReply(FixedReply),
}

struct Shared {
    mode: Mode,
    state: Mutex<ScriptState>,
}

struct ScriptState {
    script: VecDeque<Reply>,
    requests: Vec<RecordedRequest>,
    embedding_requests: Vec<RecordedRequest>,
    embeddings_failing: Option<u16>,
    violations: Vec<String>,
    expected_api_key: Option<String>,
    check_options: CheckOptions,
    next_call_number: u64,
    request_count: u64,
}

/// What the server does with an admitted request.
enum Outcome {
    Reply(Reply),
    Rejected(Rejection),
    Exhausted,
}

/// What the embeddings endpoint does with an admitted request.
enum EmbeddingsOutcome {
    Answer,
    Failing(u16),
    Invalid(String),
    Rejected,
}

/// Why a request's credentials were refused.
enum Rejection {
    WrongKey,
    MissingVersion,
}

impl Shared {
    fn new(mode: Mode) -> Shared {
        let state = ScriptState {
            script: VecDeque::new(),
            requests: Vec::new(),
            embedding_requests: Vec::new(),
            embeddings_failing: None,
            violations: Vec::new(),
            expected_api_key: None,
            check_options: CheckOptions::default(),
            next_call_number: 1,
            request_count: 0,
        };
        Shared { mode, state: Mutex::new(state) }
    }

    /// A panicking test thread must not hide the record from the other tests' assertions.
    fn lock(&self) -> MutexGuard<'_, ScriptState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record_violations(&self, state: &mut ScriptState, label: &str, problems: Vec<String>) {
        for problem in problems {
            let sentence = format!("{label}: {problem}");
            match &self.mode {
                Mode::Scripted => state.violations.push(sentence),
                Mode::FixedReply(_) => eprintln!("scripted LLM violation: {sentence}"),
            }
        }
    }

    /// The invariant failures of a request; checked outside the main lock so concurrent
    /// benchmark requests don't queue on it.
    fn problems(&self, wire: Wire, body: &Result<Value, String>) -> Vec<String> {
        let check_options = self.lock().check_options;
        match body {
            Ok(value) => check_request(wire, value, &check_options),
            Err(_) => vec!["the body is not valid JSON".to_owned()],
        }
    }

    /// Numbers the request and, when scripted, records it (chat and embeddings apart).
    fn record(&self, state: &mut ScriptState, wire: Wire, headers: &HeaderMap, body: &Result<Value, String>) -> u64 {
        state.request_count += 1;
        if let Mode::Scripted = self.mode {
            let recorded_body = match body {
                Ok(value) => value.clone(),
                Err(raw) => Value::String(raw.clone()),
            };
            let request = RecordedRequest {
                wire,
                path: wire.path().to_owned(),
                headers: recorded_headers(headers),
                body: recorded_body,
            };
            match wire {
                Wire::OpenAi | Wire::Anthropic => state.requests.push(request),
                Wire::Embeddings => state.embedding_requests.push(request),
            }
        }
        state.request_count
    }

    /// Checks an embeddings request and records it; the answer comes from the fake model
    /// (or the configured failure), never from the script.
    fn admit_embeddings(&self, headers: &HeaderMap, body: &Result<Value, String>) -> (u64, EmbeddingsOutcome) {
        let wire = Wire::Embeddings;
        let mut problems = self.problems(wire, body);
        let mut state = self.lock();
        let number = self.record(&mut state, wire, headers, body);
        let label = format!("request {number} ({wire} {})", wire.path());
        let rejection = state.expected_api_key.as_deref().and_then(|key| check_credentials(wire, headers, key));
        let outcome = match (rejection, problems.first(), state.embeddings_failing) {
            (Some(rejection), _, _) => {
                problems.push(rejection.describe(wire));
                EmbeddingsOutcome::Rejected
            }
            (None, Some(problem), _) => EmbeddingsOutcome::Invalid(problem.clone()),
            (None, None, Some(status)) => EmbeddingsOutcome::Failing(status),
            (None, None, None) => EmbeddingsOutcome::Answer,
        };
        self.record_violations(&mut state, &label, problems);
        (number, outcome)
    }

    /// Checks the request, then records it and takes the reply it gets under one lock so
    /// concurrent requests keep a consistent order.
    fn admit(&self, wire: Wire, headers: &HeaderMap, body: &Result<Value, String>) -> (u64, Outcome) {
        let mut problems = self.problems(wire, body);
        let mut state = self.lock();
        let number = self.record(&mut state, wire, headers, body);
        let label = format!("request {number} ({wire} {})", wire.path());
        let rejection = state.expected_api_key.as_deref().and_then(|key| check_credentials(wire, headers, key));
        let outcome = match (rejection, &self.mode) {
            (Some(rejection), _) => {
                problems.push(rejection.describe(wire));
                Outcome::Rejected(rejection)
            }
            (None, Mode::FixedReply(fixed)) => Outcome::Reply(fixed.reply()),
            (None, Mode::Scripted) => match state.script.pop_front() {
                Some(reply) => Outcome::Reply(reply),
                None => {
                    problems.push("unexpected request: script exhausted".to_owned());
                    Outcome::Exhausted
                }
            },
        };
        self.record_violations(&mut state, &label, problems);
        (number, outcome)
    }
}

impl Rejection {
    fn describe(&self, wire: Wire) -> String {
        match (self, wire) {
            (Rejection::WrongKey, Wire::OpenAi | Wire::Embeddings) => {
                "the request lacks the expected API key in `Authorization: Bearer <key>`".to_owned()
            }
            (Rejection::WrongKey, Wire::Anthropic) => {
                "the request lacks the expected API key in `x-api-key`".to_owned()
            }
            (Rejection::MissingVersion, _) => "the request has no `anthropic-version` header".to_owned(),
        }
    }
}

fn check_credentials(wire: Wire, headers: &HeaderMap, key: &str) -> Option<Rejection> {
    let header_text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    match wire {
        Wire::OpenAi | Wire::Embeddings => {
            let expected = format!("Bearer {key}");
            (header_text(header::AUTHORIZATION.as_str()) != Some(expected.as_str())).then_some(Rejection::WrongKey)
        }
        Wire::Anthropic if header_text("x-api-key") != Some(key) => Some(Rejection::WrongKey),
        Wire::Anthropic if header_text("anthropic-version").is_none_or(str::is_empty) => {
            Some(Rejection::MissingVersion)
        }
        Wire::Anthropic => None,
    }
}

fn recorded_headers(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect()
}

async fn openai_request(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    answer(&shared, Wire::OpenAi, &headers, &body).await
}

async fn anthropic_request(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    answer(&shared, Wire::Anthropic, &headers, &body).await
}

async fn embeddings_request(State(shared): State<Arc<Shared>>, headers: HeaderMap, raw_body: Bytes) -> Response {
    let body = serde_json::from_slice::<Value>(&raw_body).map_err(|_| String::from_utf8_lossy(&raw_body).into_owned());
    let (number, outcome) = shared.admit_embeddings(&headers, &body);
    let value = body.as_ref().unwrap_or(&Value::Null);
    let exchange = Exchange::new(number, value, raw_body.len());
    match outcome {
        EmbeddingsOutcome::Answer => embeddings::respond(value, &exchange),
        EmbeddingsOutcome::Failing(status) => embeddings::failure(status, &exchange),
        EmbeddingsOutcome::Invalid(problem) => {
            openai::error_response(400, ErrorKind::BadRequest, &problem, None, &exchange)
        }
        EmbeddingsOutcome::Rejected => openai::error_response(401, ErrorKind::Auth, "", None, &exchange),
    }
}

async fn answer(shared: &Shared, wire: Wire, headers: &HeaderMap, raw_body: &Bytes) -> Response {
    let body = serde_json::from_slice::<Value>(raw_body).map_err(|_| String::from_utf8_lossy(raw_body).into_owned());
    let (number, outcome) = shared.admit(wire, headers, &body);
    let exchange = Exchange::new(number, body.as_ref().unwrap_or(&Value::Null), raw_body.len());
    match outcome {
        Outcome::Reply(reply) => {
            let reply = wait_until_due(reply).await;
            if let (Wire::OpenAi, Mode::FixedReply(fixed), Reply::Text(text)) = (wire, &shared.mode, &reply)
                && exchange.stream
                && fixed.is_paced()
            {
                return fixed_reply::paced_openai_stream(text, fixed, &exchange);
            }
            match wire {
                // Embeddings are answered by `embeddings_request`; their wire is OpenAI's.
                Wire::OpenAi | Wire::Embeddings => openai::respond(&reply, &exchange),
                Wire::Anthropic => anthropic::respond(&reply, &exchange),
            }
        }
        Outcome::Rejected(Rejection::WrongKey) => wire_error(wire, 401, ErrorKind::Auth, "", &exchange),
        Outcome::Rejected(Rejection::MissingVersion) => {
            wire_error(wire, 400, ErrorKind::BadRequest, "anthropic-version: header is required", &exchange)
        }
        Outcome::Exhausted => {
            wire_error(wire, 500, ErrorKind::Server, "scripted LLM: unexpected request: script exhausted", &exchange)
        }
    }
}

/// Sleeps through every `Delayed` layer and returns the reply that is finally due.
async fn wait_until_due(mut reply: Reply) -> Reply {
    while let Reply::Delayed { delay, reply: inner } = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    reply
}

fn wire_error(wire: Wire, status: u16, kind: ErrorKind, message: &str, exchange: &Exchange) -> Response {
    match wire {
        Wire::OpenAi | Wire::Embeddings => openai::error_response(status, kind, message, None, exchange),
        Wire::Anthropic => anthropic::error_response(status, kind, message, None),
    }
}

async fn unknown_request(State(shared): State<Arc<Shared>>, method: Method, uri: Uri) -> Response {
    let problem = format!("unexpected request: {method} {uri} is not an endpoint of the scripted LLM");
    {
        let mut state = shared.lock();
        shared.record_violations(&mut state, "request outside the API", vec![problem.clone()]);
    }
    let body = json!({"error": {"message": problem, "type": "invalid_request_error", "param": null, "code": null}});
    sse::raw_response(StatusCode::NOT_FOUND, "application/json", body.to_string())
}
