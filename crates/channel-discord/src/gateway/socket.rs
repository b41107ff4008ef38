//! The WebSocket underneath the gateway: its type, closing it, and what a frame that
//! isn't text (a close code, an error, the end) means for the session.

use std::time::Duration;

use squidbot_channels::ChannelError;
use tokio::net::TcpStream;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::{Error as SocketError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::Outcome;
use super::payload::{self, CloseMeaning};

/// A gateway connection, plain (tests) or TLS.
pub(super) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// What we close with to resume later: any code but 1000 and 1001 keeps the session.
pub(super) const CLOSE_TO_RESUME: u16 = 4000;
/// What we close with when the session is over (shutdown, session invalidated).
pub(super) const CLOSE_NORMAL: u16 = 1000;
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a frame that isn't text means: the end of the connection (with its close code's
/// meaning), or nothing (pings, binary frames).
pub(super) fn ended(frame: Option<Result<Message, SocketError>>) -> Option<Outcome> {
    match frame {
        None => {
            tracing::warn!("the Discord gateway connection ended; reconnecting");
            Some(Outcome::Resume)
        }
        Some(Err(error)) => {
            tracing::warn!(%error, "the Discord gateway connection failed; reconnecting");
            Some(Outcome::Resume)
        }
        Some(Ok(Message::Close(frame))) => {
            let code = frame.as_ref().map(|frame| u16::from(frame.code));
            let Some(code) = code else {
                tracing::warn!("the Discord gateway closed the connection without a code; reconnecting");
                return Some(Outcome::Resume);
            };
            match payload::close_meaning(code) {
                CloseMeaning::Fatal(reason) => Some(Outcome::Fatal(ChannelError::fatal(format!(
                    "can't stay connected to the Discord gateway: closed with {code}, {reason}"
                )))),
                CloseMeaning::NewSession => {
                    tracing::warn!(code, "the Discord gateway ended the session; starting a new one");
                    Some(Outcome::NewSession { delay: Duration::ZERO })
                }
                CloseMeaning::Resume => {
                    tracing::warn!(code, "the Discord gateway closed the connection; resuming");
                    Some(Outcome::Resume)
                }
            }
        }
        Some(Ok(Message::Binary(_))) => {
            tracing::warn!("skipping a binary Discord gateway frame (compression is off)");
            None
        }
        Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => None,
        Some(Ok(Message::Text(_))) => None,
    }
}

/// Sends a close frame, waiting briefly; a failure only means the socket is gone already.
pub(super) async fn close(socket: &mut Socket, code: u16, reason: &str) {
    let frame = CloseFrame { code: CloseCode::from(code), reason: reason.to_owned().into() };
    match timeout(CLOSE_TIMEOUT, socket.close(Some(frame))).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::debug!(%error, "can't close the Discord gateway connection cleanly"),
        Err(_elapsed) => tracing::debug!("closing the Discord gateway connection timed out"),
    }
}

#[cfg(test)]
mod tests {
    use tokio_tungstenite::connect_async;

    use super::*;

    #[tokio::test]
    async fn wss_urls_go_through_rustls() {
        // Without a TLS backend tungstenite refuses wss URLs outright; with rustls but no
        // crypto provider it panics. Either would break the real gateway.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (stream, _peer) = listener.accept().await.unwrap();
            drop(stream);
        });
        let error = connect_async(format!("wss://{address}/gateway")).await.unwrap_err();
        assert!(matches!(error, SocketError::Io(_) | SocketError::Tls(_)), "{error:?}");
    }
}
