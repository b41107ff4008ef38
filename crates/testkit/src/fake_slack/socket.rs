//! The fake's Socket Mode WebSocket: checks the ticket from `apps.connections.open`,
//! says hello, sends envelopes, records acknowledgements and pongs.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use serde_json::json;
use tokio::sync::mpsc;

use super::APP_ID;
use super::state::{Shared, SocketCommand, SocketLink};

/// `GET /link/?ticket=…`: upgrades to the Socket Mode WebSocket if the ticket is valid
/// (each ticket works once, as Slack's do).
pub(crate) async fn upgrade(
    State(shared): State<Arc<Shared>>,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let ticket = query.get("ticket").cloned().unwrap_or_default();
    if !shared.lock().tickets.remove(&ticket) {
        return (StatusCode::UNAUTHORIZED, "invalid or used ticket").into_response();
    }
    upgrade.on_upgrade(move |socket| session(socket, shared))
}

/// One connection: hello first, then whatever the fake is told to send, until the client
/// closes it, the fake drops it or the fake stops.
async fn session(mut socket: WebSocket, shared: Arc<Shared>) {
    let (commands, mut received_commands) = mpsc::unbounded_channel();
    let id = {
        let mut state = shared.lock();
        state.sockets_accepted += 1;
        let id = state.sockets_accepted;
        let hello = json!({
            "type": "hello",
            "num_connections": 1,
            "debug_info": {"host": "fake-slack", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID}
        });
        // Queued before the link is public, so hello goes out first.
        let link = SocketLink { id, commands: commands.clone() };
        link.send(SocketCommand::Frame(hello.to_string()));
        state.attach(link);
        id
    };
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => break,
            command = received_commands.recv() => match command {
                Some(SocketCommand::Frame(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(SocketCommand::Ping(payload)) => {
                    if socket.send(Message::Ping(payload.into())).await.is_err() {
                        break;
                    }
                }
                // Dropping the socket ends the TCP connection without a close frame.
                Some(SocketCommand::Drop) | None => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(text))) => shared.lock().receive_frame(text.as_str()),
                Some(Ok(Message::Pong(payload))) => shared.lock().pongs.push(payload.to_vec()),
                Some(Ok(Message::Ping(_) | Message::Binary(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
        }
    }
    drop(commands);
    let mut state = shared.lock();
    if state.current.as_ref().is_some_and(|link| link.id == id) {
        state.current = None;
    }
}
