//! A minimal OpenClaw protocol client: the handshake, `chat.send`, and reading a run's
//! `chat` events until its final one.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use crate::processes::TOKEN;

/// An open protocol connection.
pub type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How long any single frame may take to arrive.
const FRAME_PATIENCE: Duration = Duration::from_secs(60);

/// The next text frame as JSON; an error when the server closed.
pub async fn next_frame(socket: &mut Socket) -> Result<Value> {
    next_frame_where(socket, |_| true).await
}

/// The next text frame whose raw text `wanted` accepts, as JSON; frames it refuses are
/// skipped unparsed. An error when the server closed.
async fn next_frame_where(socket: &mut Socket, wanted: impl Fn(&str) -> bool) -> Result<Value> {
    loop {
        let message = tokio::time::timeout(FRAME_PATIENCE, socket.next())
            .await
            .context("no frame within 60 s")?
            .context("the server closed the connection")?
            .context("can't read a frame")?;
        match message {
            Message::Text(text) if wanted(text.as_str()) => {
                return serde_json::from_str(text.as_str()).context("a frame that is not JSON");
            }
            Message::Text(_) | Message::Binary(_) | Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
            Message::Close(frame) => bail!("the server closed the connection: {frame:?}"),
        }
    }
}

/// Whether a raw frame may be a response or a `chat` event: the gateway writes compact
/// JSON, so every other frame (the `agent` events, ticks) lacks both markers and is
/// skipped without parsing. The clients share the cores with the gateway, so what they
/// spend shows up in its numbers.
fn may_be_chat_or_response(text: &str) -> bool {
    text.contains(r#""event":"chat""#) || text.contains(r#""type":"res""#)
}

/// Opens `url`, answers the challenge with the token and waits for `hello-ok`.
pub async fn connect(url: &str) -> Result<Socket> {
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.context("can't open the WebSocket")?;
    let challenge = next_frame(&mut socket).await?;
    if challenge["event"] != "connect.challenge" {
        bail!("expected connect.challenge, got {challenge}");
    }
    let connect = json!({
        "type": "req", "id": "connect", "method": "connect",
        "params": {
            "minProtocol": 4, "maxProtocol": 4,
            "client": {"id": "bench", "version": "1", "platform": "linux", "mode": "test"},
            "role": "operator", "scopes": ["operator.write"], "auth": {"token": TOKEN},
        },
    });
    socket.send(Message::Text(connect.to_string().into())).await.context("can't send connect")?;
    loop {
        let frame = next_frame(&mut socket).await?;
        if frame["type"] == "res" && frame["id"] == "connect" {
            if frame["ok"] != true || frame["payload"]["type"] != "hello-ok" {
                bail!("connect refused: {frame}");
            }
            return Ok(socket);
        }
    }
}

/// Sends `chat.send` for `session_key`; the run's id is `run_id`.
pub async fn send_chat(socket: &mut Socket, session_key: &str, message: &str, run_id: &str) -> Result<()> {
    let request = json!({
        "type": "req", "id": run_id, "method": "chat.send",
        "params": {"sessionKey": session_key, "message": message, "idempotencyKey": run_id},
    });
    socket.send(Message::Text(request.to_string().into())).await.context("can't send chat.send")
}

/// Reads until the final `chat` event of `run_id`, handing the message text of each of its
/// `chat` events to `on_text`; returns the final text. A refused request or a run that
/// ends in error or abort is an error.
pub async fn until_final(socket: &mut Socket, run_id: &str, mut on_text: impl FnMut(&str)) -> Result<String> {
    loop {
        let frame = next_frame_where(socket, may_be_chat_or_response).await?;
        if frame["type"] == "res" && frame["id"] == run_id {
            if frame["ok"] != true || frame["payload"]["status"] != "started" {
                bail!("chat.send refused: {frame}");
            }
            continue;
        }
        if frame["type"] != "event" || frame["event"] != "chat" || frame["payload"]["runId"] != run_id {
            continue;
        }
        let payload = &frame["payload"];
        let text = payload["message"]["content"][0]["text"].as_str().unwrap_or_default();
        match payload["state"].as_str() {
            Some("delta") => on_text(text),
            Some("final") => {
                on_text(text);
                return Ok(text.to_owned());
            }
            _ => bail!("the run ended badly: {payload}"),
        }
    }
}
