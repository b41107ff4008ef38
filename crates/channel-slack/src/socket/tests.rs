//! Unit tests of one Socket Mode connection over an in-memory WebSocket, on paused time.

use std::time::Duration;

use futures_util::{SinkExt as _, StreamExt as _};
use squidbot_channels::{InboundMessage, InboundSink};
use squidbot_types::Secret;
use tokio::io::DuplexStream;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_util::sync::CancellationToken;

use super::*;

struct Harness {
    api: WebApi,
    inbound: InboundSink,
    received: mpsc::Receiver<InboundMessage>,
    shutdown: CancellationToken,
}

impl Harness {
    fn new() -> Self {
        let settings = SlackSettings {
            api_base: "http://127.0.0.1:9/api".to_owned(),
            ..SlackSettings::new("slack", Secret::new("xapp-1"), Secret::new("xoxb-1"))
        };
        let (inbound, received) = InboundSink::bounded(8);
        Self { api: WebApi::new(&settings).unwrap(), inbound, received, shutdown: CancellationToken::new() }
    }

    fn receiver(&self) -> Receiver<'_> {
        Receiver {
            api: &self.api,
            name: "slack",
            max_attachment_bytes: 1024,
            identity: Identity { user_id: "U0BOT".to_owned(), bot_id: "B0BOT".to_owned() },
            inbound: self.inbound.clone(),
            shutdown: self.shutdown.clone(),
            recent: RecentDeliveries::default(),
        }
    }
}

async fn socket_pair() -> (WebSocketStream<DuplexStream>, WebSocketStream<DuplexStream>) {
    let (client, server) = tokio::io::duplex(64 * 1024);
    let client = WebSocketStream::from_raw_socket(client, Role::Client, None).await;
    let server = WebSocketStream::from_raw_socket(server, Role::Server, None).await;
    (client, server)
}

#[tokio::test(start_paused = true)]
async fn a_silent_connection_is_pinged_then_given_up() {
    let harness = Harness::new();
    let mut receiver = harness.receiver();
    let (client, mut server) = socket_pair().await;
    let started = Instant::now();
    let (end, first_frame) = tokio::join!(receiver.session(client), async {
        let frame = server.next().await;
        (frame, started.elapsed())
    });
    let (frame, pinged_after) = first_frame;
    assert!(matches!(frame, Some(Ok(Message::Ping(_)))), "{frame:?}");
    assert_eq!(pinged_after, PING_AFTER_SILENCE);
    assert_eq!(started.elapsed(), 2 * PING_AFTER_SILENCE);
    match end {
        SessionEnd::Reconnect { reason, healthy } => {
            assert!(reason.contains("no frame"), "{reason}");
            assert!(!healthy);
        }
        other => panic!("expected a reconnect, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn answered_pings_keep_a_quiet_connection_open() {
    let harness = Harness::new();
    let mut receiver = harness.receiver();
    let (client, mut server) = socket_pair().await;
    let started = Instant::now();
    let (end, ()) = tokio::join!(receiver.session(client), async {
        server.send(Message::text(r#"{"type":"hello"}"#)).await.unwrap();
        // Reading answers the client's pings (the server side pongs automatically).
        let quiet = tokio::time::sleep(Duration::from_secs(100));
        tokio::pin!(quiet);
        loop {
            tokio::select! {
                () = &mut quiet => break,
                frame = server.next() => assert!(matches!(frame, Some(Ok(Message::Ping(_)))), "{frame:?}"),
            }
        }
        server.send(Message::text(r#"{"type":"disconnect","reason":"refresh_requested"}"#)).await.unwrap();
    });
    assert_eq!(started.elapsed(), Duration::from_secs(100));
    assert!(
        matches!(&end, SessionEnd::Reconnect { reason, healthy: true } if reason.contains("refresh_requested")),
        "{end:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn slacks_pings_are_answered_and_envelopes_acknowledged_first() {
    let mut harness = Harness::new();
    let mut receiver = harness.receiver();
    let (client, mut server) = socket_pair().await;
    let envelope = serde_json::json!({
        "envelope_id": "env-1", "type": "events_api", "retry_attempt": 0,
        "payload": {"event": {"type": "message", "channel": "D1", "channel_type": "im", "user": "U1", "text": "hi", "ts": "1.5"}}
    });
    let (end, frames) = tokio::join!(receiver.session(client), async {
        server.send(Message::Ping(Bytes::from_static(b"are you there"))).await.unwrap();
        server.send(Message::text(envelope.to_string())).await.unwrap();
        let pong = server.next().await;
        let acknowledgement = server.next().await;
        server.send(Message::text(r#"{"type":"disconnect","reason":"link_disabled"}"#)).await.unwrap();
        (pong, acknowledgement)
    });
    let (pong, acknowledgement) = frames;
    assert!(matches!(pong, Some(Ok(Message::Pong(payload))) if payload.as_ref() == b"are you there"));
    match acknowledgement {
        Some(Ok(Message::Text(text))) => assert_eq!(text.as_str(), r#"{"envelope_id":"env-1"}"#),
        other => panic!("expected the acknowledgement, got {other:?}"),
    }
    assert!(matches!(&end, SessionEnd::Fatal(error) if error.kind == ChannelErrorKind::Fatal), "{end:?}");
    let delivered = harness.received.try_recv().unwrap();
    assert_eq!(delivered.platform_message_id, "D1:1.5");
}

#[tokio::test(start_paused = true)]
async fn shutdown_ends_a_connection_at_once() {
    let harness = Harness::new();
    let mut receiver = harness.receiver();
    let (client, mut server) = socket_pair().await;
    harness.shutdown.cancel();
    let end = receiver.session(client).await;
    assert_eq!(end, SessionEnd::Shutdown);
    assert!(matches!(server.next().await, Some(Ok(Message::Close(_)))));
}

#[test]
fn backoff_doubles_up_to_its_cap() {
    assert_eq!(backoff(1), Duration::from_secs(1));
    assert_eq!(backoff(2), Duration::from_secs(2));
    assert_eq!(backoff(4), Duration::from_secs(8));
    assert_eq!(backoff(9), MAX_BACKOFF);
    assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
}

#[tokio::test]
async fn wss_urls_get_a_tls_handshake() {
    // A TCP listener that hangs up: the connection must fail as a TLS error, which
    // shows rustls is set up (a missing crypto provider would panic here instead).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (connection, _peer) = listener.accept().await.unwrap();
        drop(connection);
    });
    let result = tokio_tungstenite::connect_async(format!("wss://{address}/link")).await;
    assert!(result.is_err());
    server.await.unwrap();
}
