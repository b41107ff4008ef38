//! The fake gateway WebSocket: HELLO, IDENTIFY → READY, RESUME → replay and RESUMED,
//! heartbeats and their ACKs, and the close codes Discord sends for client mistakes.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::http::Uri;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::state::{Control, Shared};

/// `GET /gateway` and `GET /resume-gateway`: upgrades to the gateway protocol.
pub(super) async fn upgrade(
    State(shared): State<Arc<Shared>>,
    uri: Uri,
    Query(query): Query<HashMap<String, String>>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let path = uri.path().to_owned();
    let raw_query = uri.query().unwrap_or_default().to_owned();
    upgrade.on_upgrade(move |socket| async move {
        let connection = shared.update(|state| state.open_connection(&path, &raw_query));
        serve(&shared, connection, &query, socket).await;
        shared.update(|state| state.close_connection(connection));
    })
}

/// What the client's frame calls for.
enum Reply {
    Nothing,
    Close(u16, &'static str),
}

async fn serve(shared: &Arc<Shared>, connection: u64, query: &HashMap<String, String>, mut socket: WebSocket) {
    if query.get("v").map(String::as_str) != Some("10") {
        close(&mut socket, 4012, "Invalid API version.").await;
        return;
    }
    if query.get("encoding").map(String::as_str) != Some("json") {
        close(&mut socket, 4002, "Error while decoding payload.").await;
        return;
    }
    let hello = json!({"op": 10, "d": {"heartbeat_interval": shared.heartbeat_interval.as_millis() as u64}, "s": null, "t": null});
    if socket.send(Message::Text(hello.to_string().into())).await.is_err() {
        return;
    }
    let (control, mut controls) = mpsc::unbounded_channel();
    let mut authenticated = false;
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            next = controls.recv() => match next {
                Some(Control::Send(text)) => {
                    if socket.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                Some(Control::Close(code, reason)) => {
                    close_owned(&mut socket, code, reason).await;
                    return;
                }
                Some(Control::Drop) | None => return,
            },
            received = socket.recv() => match received {
                Some(Ok(Message::Text(text))) => {
                    match client_frame(shared, connection, &control, &mut authenticated, text.as_str()) {
                        Reply::Nothing => {}
                        Reply::Close(code, reason) => {
                            close(&mut socket, code, reason).await;
                            return;
                        }
                    }
                }
                Some(Ok(Message::Close(frame))) => {
                    let code = frame.map_or(1005, |frame| frame.code);
                    shared.update(|state| state.client_close_codes.push(code));
                    return;
                }
                Some(Ok(Message::Binary(_))) => {
                    close(&mut socket, 4002, "Error while decoding payload.").await;
                    return;
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Err(_)) | None => return,
            },
        }
    }
}

/// Handles one frame from the client, answering through `control` so answers stay in
/// order with dispatches.
fn client_frame(
    shared: &Arc<Shared>,
    connection: u64,
    control: &mpsc::UnboundedSender<Control>,
    authenticated: &mut bool,
    text: &str,
) -> Reply {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        return Reply::Close(4002, "Error while decoding payload.");
    };
    let Some(op) = frame.get("op").and_then(Value::as_u64) else {
        return Reply::Close(4002, "Error while decoding payload.");
    };
    let data = frame.get("d").cloned().unwrap_or(Value::Null);
    match op {
        1 => {
            let acking = shared.update(|state| {
                state.record_heartbeat(connection, data.as_u64());
                state.is_acking(connection)
            });
            if acking && control.send(Control::Send(json!({"op": 11, "d": null}).to_string())).is_err() {
                return Reply::Close(4000, "Unknown error.");
            }
            Reply::Nothing
        }
        2 => {
            if *authenticated {
                return Reply::Close(4005, "Already authenticated.");
            }
            if data.get("token").and_then(Value::as_str) != Some(shared.token.as_str()) {
                shared.update(|state| state.identifies.push(data));
                return Reply::Close(4004, "Authentication failed.");
            }
            let well_formed = data.get("intents").is_some_and(Value::is_u64)
                && ["os", "browser", "device"].iter().all(|key| {
                    data.get("properties").and_then(|properties| properties.get(key)).is_some_and(Value::is_string)
                });
            if !well_formed {
                return Reply::Close(4002, "Error while decoding payload.");
            }
            *authenticated = true;
            let resume_url = shared.resume_url();
            shared.update(|state| {
                state.identifies.push(data);
                state.identify(connection, control, resume_url);
            });
            Reply::Nothing
        }
        6 => {
            if *authenticated {
                return Reply::Close(4005, "Already authenticated.");
            }
            if data.get("token").and_then(Value::as_str) != Some(shared.token.as_str()) {
                return Reply::Close(4004, "Authentication failed.");
            }
            let session_id = data.get("session_id").and_then(Value::as_str).unwrap_or_default().to_owned();
            let sequence = data.get("seq").and_then(Value::as_u64);
            *authenticated = shared.update(|state| {
                state.resumes.push(data.clone());
                state.resume(connection, control, &session_id, sequence)
            });
            Reply::Nothing
        }
        _ if !*authenticated => Reply::Close(4003, "Not authenticated."),
        // Presence, voice state and guild member requests: accepted and ignored.
        3 | 4 | 8 => Reply::Nothing,
        _ => Reply::Close(4001, "Unknown opcode."),
    }
}

async fn close(socket: &mut WebSocket, code: u16, reason: &'static str) {
    close_owned(socket, code, reason.to_owned()).await;
}

async fn close_owned(socket: &mut WebSocket, code: u16, reason: String) {
    let frame = CloseFrame { code, reason: reason.into() };
    if socket.send(Message::Close(Some(frame))).await.is_err() {
        // The client is gone already; nothing left to tell it.
    }
}
