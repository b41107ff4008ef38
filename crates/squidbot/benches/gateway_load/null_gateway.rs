//! The null gateway: the bench binary run again as a relay that speaks just enough of the
//! OpenClaw protocol for the load clients and makes one streamed provider request per
//! turn, and does nothing else, so its numbers are the floor of any gateway on this machine.

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::processes::{API_KEY, MODEL, Running, TOKEN, log_file, spawn_listening};

/// Set to the provider's base URL, it turns the bench binary into the null gateway.
pub const ENVIRONMENT_VARIABLE: &str = "GATEWAY_BENCH_NULL_GATEWAY";

/// The provider checks that every request opens with a system prompt.
const SYSTEM_PROMPT: &str = "You are a relay that measures the cost of the network hops alone.";

/// Starts the bench binary again as a null gateway relaying to `provider_base`, its
/// stderr in `log`; a process of its own, so its CPU time is measured apart from the
/// clients' as the real gateway's is.
pub fn start(provider_base: &str, log: &Path) -> Result<Running> {
    let executable = std::env::current_exe().context("can't find the bench binary")?;
    let mut command = Command::new(executable);
    command.env(ENVIRONMENT_VARIABLE, provider_base).stdin(Stdio::null()).stderr(log_file(log)?);
    Ok(spawn_listening(command)?.0)
}

/// The null gateway process: prints `listening on URL` like the real gateway and serves
/// until it is killed.
pub fn main(provider_base: &str) -> ExitCode {
    match serve(provider_base) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("null gateway: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(provider_base: &str) -> Result<()> {
    // The real gateway's runtime, so neither gets more threads than the other.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("can't start tokio")?;
    runtime.block_on(async {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.context("can't listen on 127.0.0.1")?;
        println!("listening on http://{}", listener.local_addr().context("can't read the bound address")?);
        run(listener, Relay::new(provider_base)?, CancellationToken::new()).await
    })
}

/// What every connection shares.
pub struct Relay {
    /// The provider's `chat/completions` URL.
    completions: String,
    /// One connection pool for every turn, as a real gateway keeps.
    http: reqwest::Client,
    /// Connections so far, so no two challenges carry the same nonce.
    connections: AtomicU64,
}

impl Relay {
    /// A relay to the OpenAI-compatible provider at `provider_base` (ending in `/v1`).
    pub fn new(provider_base: &str) -> Result<Arc<Relay>> {
        // The real gateway's client: the same connect timeout, pooling and TCP_NODELAY.
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .context("can't build the HTTP client")?;
        Ok(Arc::new(Relay {
            completions: format!("{}/chat/completions", provider_base.trim_end_matches('/')),
            http,
            connections: AtomicU64::new(0),
        }))
    }

    /// One streamed completion of `message`: the reply's text once the stream has ended.
    async fn complete(&self, message: &str) -> Result<String> {
        // The gateway's config names the model `provider/model`; the provider sees the rest.
        let model = MODEL.split_once('/').map_or(MODEL, |(_, model)| model);
        let body = json!({
            "model": model,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": message}],
        });
        let response = self
            .http
            .post(&self.completions)
            .bearer_auth(API_KEY)
            .json(&body)
            .send()
            .await
            .context("can't reach the provider")?;
        if !response.status().is_success() {
            bail!("the provider answered {}", response.status());
        }
        let mut stream = response.bytes_stream();
        let mut pending = Vec::new();
        let mut text = String::new();
        let mut done = false;
        // On past `[DONE]` to the end of the body: only then does the connection go back
        // to the pool for the next round, as it does in the real gateway.
        while let Some(chunk) = stream.next().await {
            pending.extend_from_slice(&chunk.context("can't read the provider's stream")?);
            let mut consumed = 0;
            while let Some(length) = pending[consumed..].iter().position(|byte| *byte == b'\n') {
                done |= read_line(&pending[consumed..consumed + length], &mut text)?;
                consumed += length + 1;
            }
            pending.drain(..consumed);
        }
        if !done {
            bail!("the provider's stream ended without [DONE]");
        }
        Ok(text)
    }
}

/// Adds the text of one SSE line to `text`; true when it is the closing `[DONE]`.
fn read_line(line: &[u8], text: &mut String) -> Result<bool> {
    let Some(data) = line.strip_prefix(b"data:") else { return Ok(false) };
    let data = data.trim_ascii();
    if data == b"[DONE]" {
        return Ok(true);
    }
    let chunk: Value = serde_json::from_slice(data).context("a stream chunk that is not JSON")?;
    if let Some(content) = chunk["choices"][0]["delta"]["content"].as_str() {
        text.push_str(content);
    }
    Ok(false)
}

/// Serves `/health` and the protocol on `/` until `shutdown` is cancelled.
pub async fn run(listener: TcpListener, relay: Arc<Relay>, shutdown: CancellationToken) -> Result<()> {
    // As in the real gateway: without TCP_NODELAY, small frames wait for delayed ACKs.
    let listener = axum::serve::ListenerExt::tap_io(listener, |stream: &mut tokio::net::TcpStream| {
        if let Err(error) = stream.set_nodelay(true) {
            eprintln!("null gateway: can't set TCP_NODELAY: {error}");
        }
    });
    let router = Router::new().route("/health", get(health)).route("/", get(upgrade)).with_state(relay);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .context("can't serve")
}

async fn health() -> &'static str {
    "ok"
}

async fn upgrade(State(relay): State<Arc<Relay>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| connection(relay, socket))
}

/// One client: the challenge, then its requests and its turns' final events until it
/// closes; its turns end with it.
async fn connection(relay: Arc<Relay>, mut socket: WebSocket) {
    let nonce = relay.connections.fetch_add(1, Ordering::Relaxed);
    let challenge = json!({
        "type": "event", "event": "connect.challenge",
        "payload": {"nonce": format!("null-gateway-{nonce}"), "ts": unix_millis()}, "seq": 1,
    });
    if let Err(error) = send(&mut socket, &challenge).await {
        eprintln!("null gateway: can't send the challenge: {error}");
        return;
    }
    let mut sequence = 1;
    let mut authenticated = false;
    let mut turns = JoinSet::new();
    loop {
        let frame = tokio::select! {
            received = socket.recv() => match received {
                Some(Ok(Message::Text(text))) => answer(&relay, text.as_str(), &mut authenticated, &mut turns),
                Some(Ok(Message::Binary(_) | Message::Ping(_) | Message::Pong(_))) => continue,
                Some(Ok(Message::Close(_))) | None => return,
                Some(Err(error)) => {
                    eprintln!("null gateway: can't read a frame: {error}");
                    return;
                }
            },
            Some(finished) = turns.join_next(), if !turns.is_empty() => match finished {
                Ok(payload) => {
                    sequence += 1;
                    json!({"type": "event", "event": "chat", "payload": payload, "seq": sequence})
                }
                Err(error) => {
                    eprintln!("null gateway: a turn failed: {error}");
                    continue;
                }
            },
        };
        if let Err(error) = send(&mut socket, &frame).await {
            eprintln!("null gateway: can't send a frame: {error}");
            return;
        }
    }
}

/// The response to one request frame; `chat.send` starts its turn in `turns`.
fn answer(relay: &Arc<Relay>, text: &str, authenticated: &mut bool, turns: &mut JoinSet<Value>) -> Value {
    let request: Value = match serde_json::from_str(text) {
        Ok(request) => request,
        Err(error) => return refusal(Value::Null, &format!("the frame is not JSON: {error}")),
    };
    let id = request["id"].clone();
    let params = &request["params"];
    match request["method"].as_str() {
        Some("connect") if params["auth"]["token"] == TOKEN => {
            *authenticated = true;
            json!({"type": "res", "id": id, "ok": true, "payload": {"type": "hello-ok", "protocol": 4}})
        }
        Some("connect") => refusal(id, "wrong token"),
        Some("chat.send") if !*authenticated => refusal(id, "connect first"),
        Some("chat.send") => {
            let field = |name: &str| params[name].as_str().unwrap_or_default().to_owned();
            let (run_id, session_key, message) = (field("idempotencyKey"), field("sessionKey"), field("message"));
            turns.spawn(turn(relay.clone(), run_id.clone(), session_key, message));
            json!({"type": "res", "id": id, "ok": true, "payload": {"runId": run_id, "status": "started"}})
        }
        _ => refusal(id, "unknown method"),
    }
}

fn refusal(id: Value, message: &str) -> Value {
    json!({"type": "res", "id": id, "ok": false, "error": {"code": "INVALID_REQUEST", "message": message}})
}

/// One turn: the provider's reply as the payload of the run's final `chat` event.
async fn turn(relay: Arc<Relay>, run_id: String, session_key: String, message: String) -> Value {
    match relay.complete(&message).await {
        Ok(text) => json!({
            "runId": run_id, "sessionKey": session_key, "state": "final",
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
        }),
        Err(error) => json!({
            "runId": run_id, "sessionKey": session_key, "state": "error", "errorMessage": format!("{error:#}"),
        }),
    }
}

async fn send(socket: &mut WebSocket, frame: &Value) -> Result<(), axum::Error> {
    socket.send(Message::Text(frame.to_string().into())).await
}

fn unix_millis() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis())
}
