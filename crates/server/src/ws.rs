//! The OpenClaw gateway protocol over WebSocket, on the root path of the gateway's port
//! (a plain `GET /` serves the web UI instead).
//!
//! A connection gets `connect.challenge`, must answer with a `connect` request carrying
//! its credentials, and then sends `req` frames answered by `res` frames, while turn
//! events of the sessions it works with arrive as `agent` and `chat` events. Every frame
//! the server sends goes through one bounded queue: a client that stops reading is
//! disconnected instead of buffering without limit.

mod chat;
mod connect;
mod cron;
#[cfg(test)]
pub(crate) mod fixture;
pub mod frame;
mod memory;
pub(crate) mod methods;
mod outbox;
pub(crate) mod params;
mod people;
mod session_tree;
mod sessions;
mod translate;
mod workers;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, State};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use squidbot_core::events::{Filter, Subscription, Watchlist};
use tokio::sync::mpsc;

use crate::Gateway;
use connect::ConnectError;
use frame::{ClientFrame, FrameError, MethodError};
use outbox::{MAX_WRITE_BUFFER, OUT_QUEUE, Outbox, WRITE_BUFFER};

/// Protocol versions spoken.
pub const PROTOCOL_MIN: u64 = 3;
/// The newest protocol version.
pub const PROTOCOL_MAX: u64 = 4;

/// Interval of `tick` events.
const TICK: Duration = Duration::from_secs(15);

/// Time a client has to send `connect`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Largest message the WebSocket layer reads at all; the protocol limits are lower and
/// answered with an error frame.
const MAX_WIRE_MESSAGE: usize = 16 * 1024 * 1024;

/// `GET /`: the protocol for WebSocket upgrades, the web UI otherwise.
pub async fn root(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match upgrade {
        Ok(upgrade) => configured(upgrade).on_upgrade(move |socket| {
            let connections = gateway.connections.clone();
            connections.track_future(serve(gateway, socket, peer))
        }),
        Err(_) => crate::ui::index().await,
    }
}

/// The WebSocket layer's limits and buffers for a client.
fn configured(upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
    upgrade
        .max_message_size(MAX_WIRE_MESSAGE)
        .max_frame_size(MAX_WIRE_MESSAGE)
        // Small buffers per connection: the defaults (128 KiB, zero-filled) add up to
        // hundreds of MB with a thousand clients. The write buffer grows on demand.
        .read_buffer_size(4096)
        .write_buffer_size(WRITE_BUFFER)
        .max_write_buffer_size(MAX_WRITE_BUFFER)
}

async fn sleep_until_or_never(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_millis() as u64)
}

/// Which operations a connection may call; each level includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Access {
    /// `operator.read`: reading.
    Read,
    /// `operator.write` (or `.admin`): running turns and changing things.
    Write,
    /// `operator.admin` held by an admin (the owner's credentials count as one): the
    /// people's admin methods and `config.get`, when people are on.
    Admin,
}

/// Counts the connection while it lives.
struct OpenGuard(Arc<Gateway>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.ws_open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why the connection loop stopped.
enum Stop {
    /// The client closed or vanished.
    Gone,
    /// Close with this code and reason.
    Close(u16, &'static str),
    /// The client does not read; drop it without ceremony.
    NotReading,
}

/// One client connection.
pub(crate) struct Connection {
    gateway: Arc<Gateway>,
    peer: SocketAddr,
    conn_id: String,
    outbox: Outbox,
    protocol: u64,
    access: Access,
    scopes: Vec<String>,
    /// Who the credentials were: the owner, or a person who sees only their own context.
    caller: crate::people::Caller,
    /// The sessions this connection receives events of, kept in the hub's index; `None`
    /// until the handshake succeeded.
    watched: Option<Watchlist>,
    runs: translate::Runs,
}

async fn serve(gateway: Arc<Gateway>, socket: WebSocket, peer: SocketAddr) {
    gateway.ws_open.fetch_add(1, Ordering::Relaxed);
    gateway.metrics.ws_connected();
    let _open = OpenGuard(gateway.clone());
    let (sink, mut stream) = socket.split();
    let (out, queue) = mpsc::channel::<Message>(OUT_QUEUE);
    let writer = tokio::spawn(outbox::write(sink, queue));
    let mut connection = Connection {
        gateway: gateway.clone(),
        peer,
        conn_id: squidbot_core::ids::session_id(),
        outbox: Outbox::new(out),
        protocol: PROTOCOL_MAX,
        access: Access::Read,
        scopes: Vec::new(),
        caller: crate::people::Caller::Owner,
        watched: None,
        runs: translate::Runs::default(),
    };
    let stop = match connection.handshake(&mut stream).await {
        Ok(()) => {
            let events = gateway.runner.hub().subscribe(Filter::Watched);
            connection.watched = Some(events.watchlist());
            connection.main_loop(&mut stream, events).await
        }
        Err(stop) => stop,
    };
    match stop {
        Stop::NotReading => {
            tracing::warn!(peer = %connection.peer, "dropped a WebSocket client that stopped reading");
            gateway.metrics.error("ws_slow_client");
            writer.abort();
        }
        Stop::Close(code, reason) => {
            connection.outbox.push(Message::Close(Some(CloseFrame { code, reason: Utf8Bytes::from_static(reason) })));
            drop(connection);
            let _finished = tokio::time::timeout(Duration::from_secs(5), writer).await;
        }
        Stop::Gone => {
            drop(connection);
            let _finished = tokio::time::timeout(Duration::from_secs(5), writer).await;
        }
    }
}

impl Connection {
    fn respond(&mut self, id: &str, result: Result<Value, MethodError>) {
        match result {
            Ok(payload) => self.outbox.respond_ok(id, &payload),
            Err(error) => self.outbox.respond_error(Some(id), &error),
        }
    }

    fn frame_error(&mut self, error: &FrameError) {
        self.gateway.metrics.error("ws_frame");
        tracing::debug!(peer = %self.peer, %error, "bad WebSocket frame");
        self.outbox.respond_error(error.request_id(), &MethodError::invalid(error.to_string()));
    }

    /// Sends the challenge and waits for a valid `connect`.
    async fn handshake(&mut self, stream: &mut futures_util::stream::SplitStream<WebSocket>) -> Result<(), Stop> {
        let nonce = squidbot_core::ids::session_id();
        self.outbox.send_event("connect.challenge", &json!({"nonce": nonce, "ts": unix_ms()}));
        let deadline = tokio::time::sleep(CONNECT_TIMEOUT);
        tokio::pin!(deadline);
        loop {
            let message = tokio::select! {
                () = &mut deadline => return Err(Stop::Close(1008, "connect timeout")),
                () = self.gateway.shutdown.cancelled() => return Err(Stop::Close(1001, "gateway stopping")),
                message = stream.next() => message,
            };
            let text = match message {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Err(Stop::Gone),
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Binary(_))) => {
                    self.frame_error(&FrameError::Binary);
                    return Err(Stop::Close(1003, "binary frames are not supported"));
                }
                Some(Ok(_)) => continue,
            };
            match frame::parse(text.as_str(), frame::MAX_PRE_AUTH_BYTES) {
                Ok(ClientFrame::Request { id, method, params }) => {
                    let connected = match method.as_str() {
                        "connect" => self.connect(params).await,
                        _ => Err(ConnectError::NotConnect(method)),
                    };
                    return match connected {
                        Ok(()) => {
                            let hello = self.hello().await;
                            self.respond(&id, Ok(hello));
                            Ok(())
                        }
                        Err(error) => {
                            self.respond(&id, Err(MethodError::from(&error)));
                            let (code, reason) = error.close();
                            Err(Stop::Close(code, reason))
                        }
                    };
                }
                Ok(ClientFrame::Cancel { .. }) => continue,
                Err(error @ FrameError::TooLarge { .. }) => {
                    self.frame_error(&error);
                    return Err(Stop::Close(1009, "frame too large"));
                }
                Err(error) => {
                    self.frame_error(&error);
                    return Err(Stop::Close(1008, "malformed frame before connect"));
                }
            }
        }
    }

    async fn hello(&self) -> Value {
        let health = crate::health::report(&self.gateway).await;
        // A person's requests that name no session go to their own main session.
        let (main_key, main_session) = match self.caller.person() {
            Some(actor) => (crate::people::main_key(actor), crate::people::main_session(actor)),
            None => ("main".to_owned(), methods::MAIN_SESSION.to_owned()),
        };
        let mut auth = json!({"role": "operator", "scopes": self.scopes});
        if let Some(actor) = self.caller.person() {
            auth["user"] = methods::person_json(actor);
        }
        let mut features = json!({"methods": methods::NAMES, "events": translate::EVENTS});
        if self.gateway.people().is_some() {
            // Tells clients (the web UI) that the people's panels have something to show.
            features["people"] = Value::Bool(true);
        }
        json!({
            "type": "hello-ok",
            "protocol": self.protocol,
            "server": {"version": env!("CARGO_PKG_VERSION"), "connId": self.conn_id, "name": "squidbot"},
            "features": features,
            "snapshot": {
                "presence": [],
                "health": health,
                "stateVersion": {"presence": 0, "health": 0},
                "uptimeMs": self.gateway.started.elapsed().as_millis() as u64,
                "sessionDefaults": {"defaultAgentId": "main", "mainKey": main_key, "mainSessionKey": main_session},
            },
            "auth": auth,
            "policy": {
                "maxPayload": frame::MAX_FRAME_BYTES,
                "maxBufferedBytes": frame::MAX_FRAME_BYTES * 8,
                "tickIntervalMs": TICK.as_millis() as u64,
            },
        })
    }

    /// Watches a session's (or run's) events from now on.
    pub(crate) fn watch(&self, key: &str) {
        if let Some(watched) = &self.watched {
            // A key watched here has always matched run ids as well as session keys.
            watched.watch_session(key);
            watched.watch_run(key);
        }
    }

    async fn main_loop(
        &mut self,
        stream: &mut futures_util::stream::SplitStream<WebSocket>,
        mut events: Subscription,
    ) -> Stop {
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + TICK, TICK);
        loop {
            if self.outbox.not_reading() {
                return Stop::NotReading;
            }
            let flush_at = self.runs.next_flush();
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => self.forward(&event),
                    None => return Stop::NotReading,
                },
                () = self.gateway.shutdown.cancelled() => {
                    // Turns have finished by now; deliver what they published, then close.
                    while let Some(event) = events.try_recv() {
                        self.forward(&event);
                    }
                    self.flush_due();
                    return Stop::Close(1012, "gateway restarting");
                }
                () = sleep_until_or_never(flush_at) => self.flush_due(),
                _ = tick.tick() => {
                    if !self.still_allowed() {
                        return Stop::Close(1008, "access revoked");
                    }
                    self.outbox.send_event("tick", &json!({"ts": unix_ms()}));
                }
                message = stream.next() => {
                    let text = match message {
                        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Stop::Gone,
                        Some(Ok(Message::Text(text))) => text,
                        Some(Ok(Message::Binary(_))) => {
                            self.frame_error(&FrameError::Binary);
                            continue;
                        }
                        Some(Ok(_)) => continue,
                    };
                    match frame::parse(text.as_str(), frame::MAX_FRAME_BYTES) {
                        Ok(ClientFrame::Request { id, method, params }) => {
                            if let Some(stop) = self.request(&id, &method, params).await {
                                return stop;
                            }
                        }
                        Ok(ClientFrame::Cancel { .. }) => {}
                        Err(error @ FrameError::TooLarge { .. }) => {
                            self.frame_error(&error);
                            return Stop::Close(1009, "frame too large");
                        }
                        Err(error) => self.frame_error(&error),
                    }
                }
            }
        }
    }

    /// Answers one request; `Some` when the connection must end instead (a person whose
    /// access was revoked since they logged in).
    async fn request(&mut self, id: &str, method: &str, params: Map<String, Value>) -> Option<Stop> {
        if !self.still_allowed() {
            let revoked = MethodError::new(frame::ErrorCode::Forbidden, "your gateway access was revoked")
                .with_details(json!({"code": "ACCESS_REVOKED"}));
            self.respond(id, Err(revoked));
            return Some(Stop::Close(1008, "access revoked"));
        }
        match methods::read(&self.gateway, method, self.access, self.caller.person().is_none(), params) {
            Ok((method, request)) => {
                if let Some(result) = methods::call(self, id, method, request).await {
                    self.respond(id, result);
                }
            }
            Err(error) => self.respond(id, Err(error)),
        }
        None
    }
}
