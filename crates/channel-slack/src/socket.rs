//! The Socket Mode receive loop: `auth.test`, `apps.connections.open`, one WebSocket at a
//! time, every envelope acknowledged as soon as it is read, reconnects on Slack's
//! request, on a dropped socket or after a long silence.

use std::time::Duration;

use futures_util::{Sink, SinkExt as _, Stream, StreamExt as _};
use jiff::Timestamp;
use serde_json::json;
use squidbot_channels::{Backoff, ChannelError, ChannelErrorKind, InboundMessage, InboundSink};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::{Bytes, Error as WebSocketError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use tokio_util::sync::CancellationToken;

use crate::attachments::download_all;
use crate::events::{Frame, Interpretation, ReceivedMessage, RecentDeliveries, interpret, read_frame};
use crate::settings::SlackSettings;
use crate::web_api::{Identity, WebApi};

/// How long opening the WebSocket may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// After this long without any frame the adapter pings Slack; after twice this long
/// it takes the connection for dead and opens a new one.
const PING_AFTER_SILENCE: Duration = Duration::from_secs(15);

/// How long closing a connection politely may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Connection attempts that fail in a row before the loop gives up and lets the manager
/// restart it with its longer backoff.
const MAX_FAILURES_IN_A_ROW: u32 = 6;

/// The wait after the first failed attempt; it doubles per failure up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A Socket Mode connection (TLS for Slack's `wss://` URLs).
type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How a connection ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionEnd {
    /// Shutdown was requested or the manager stopped taking messages.
    Shutdown,
    /// Open a new connection; `healthy` when this one worked for a while (so failures
    /// in a row start over).
    Reconnect { reason: String, healthy: bool },
    /// The app can't receive events as configured.
    Fatal(ChannelError),
}

/// What handling one frame leads to.
enum Step {
    Continue,
    /// The connection did something useful (hello, an envelope).
    Healthy,
    End(SessionEnd),
}

/// Runs the receive loop until `shutdown`.
pub(crate) async fn run(
    api: &WebApi,
    settings: &SlackSettings,
    inbound: InboundSink,
    shutdown: CancellationToken,
) -> Result<(), ChannelError> {
    let identity = tokio::select! {
        biased;
        () = shutdown.cancelled() => return Ok(()),
        identity = api.auth_test() => identity?,
    };
    tracing::info!(channel = %settings.name, bot_user = %identity.user_id, "connected to Slack");
    let mut receiver = Receiver {
        api,
        name: &settings.name,
        max_attachment_bytes: settings.max_attachment_bytes,
        identity,
        inbound,
        shutdown,
        recent: RecentDeliveries::default(),
    };
    receiver.run().await
}

/// The receive loop's state, kept across connections.
pub(crate) struct Receiver<'a> {
    pub api: &'a WebApi,
    pub name: &'a str,
    pub max_attachment_bytes: u64,
    pub identity: Identity,
    pub inbound: InboundSink,
    pub shutdown: CancellationToken,
    pub recent: RecentDeliveries,
}

impl Receiver<'_> {
    async fn run(&mut self) -> Result<(), ChannelError> {
        let mut failures: u32 = 0;
        loop {
            let outcome = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return Ok(()),
                outcome = self.connect() => outcome,
            };
            let reason = match outcome {
                Ok(socket) => match self.session(socket).await {
                    SessionEnd::Shutdown => return Ok(()),
                    SessionEnd::Fatal(error) => return Err(error),
                    SessionEnd::Reconnect { reason, healthy: true } => {
                        failures = 0;
                        tracing::info!(channel = %self.name, %reason, "opening a new Socket Mode connection");
                        continue;
                    }
                    SessionEnd::Reconnect { reason, healthy: false } => reason,
                },
                Err(error) => match error.kind {
                    ChannelErrorKind::Fatal => return Err(error),
                    ChannelErrorKind::RateLimited { retry_after } => {
                        tracing::warn!(channel = %self.name, %error, "waiting before opening a Socket Mode connection");
                        if !self.pause(retry_after).await {
                            return Ok(());
                        }
                        continue;
                    }
                    ChannelErrorKind::Transient | ChannelErrorKind::Rejected => error.message,
                },
            };
            failures += 1;
            if failures >= MAX_FAILURES_IN_A_ROW {
                return Err(ChannelError::transient(format!(
                    "can't keep a Socket Mode connection: {failures} attempts failed in a row, the last: {reason}"
                )));
            }
            let wait = backoff(failures);
            tracing::warn!(channel = %self.name, %reason, wait_seconds = wait.as_secs(), "Socket Mode connection failed; retrying");
            if !self.pause(wait).await {
                return Ok(());
            }
        }
    }

    /// Opens a new Socket Mode connection (a fresh URL each time: URLs are single use).
    async fn connect(&self) -> Result<Socket, ChannelError> {
        let url = self.api.open_connection().await?;
        match tokio::time::timeout(CONNECT_TIMEOUT, tokio_tungstenite::connect_async(url.as_str())).await {
            Ok(Ok((socket, _response))) => Ok(socket),
            // The URL carries a ticket; it stays out of the messages.
            Ok(Err(error)) => Err(ChannelError::transient(format!("can't connect to Slack's Socket Mode: {error}"))),
            Err(_elapsed) => Err(ChannelError::transient("can't connect to Slack's Socket Mode: timed out")),
        }
    }

    /// Waits `duration` unless shut down first; false on shutdown.
    async fn pause(&self, duration: Duration) -> bool {
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => false,
            () = tokio::time::sleep(duration) => true,
        }
    }

    /// Reads one connection until it ends.
    pub(crate) async fn session<S>(&mut self, mut socket: S) -> SessionEnd
    where
        S: Stream<Item = Result<Message, WebSocketError>> + Sink<Message, Error = WebSocketError> + Unpin,
    {
        let mut healthy = false;
        let mut pinged = false;
        loop {
            let next = tokio::select! {
                biased;
                () = self.shutdown.cancelled() => {
                    close(&mut socket).await;
                    return SessionEnd::Shutdown;
                }
                next = tokio::time::timeout(PING_AFTER_SILENCE, socket.next()) => next,
            };
            let message = match next {
                Err(_silence) if pinged => {
                    let reason = format!("no frame from Slack for {} s", 2 * PING_AFTER_SILENCE.as_secs());
                    return SessionEnd::Reconnect { reason, healthy };
                }
                Err(_silence) => {
                    pinged = true;
                    if let Err(error) = socket.send(Message::Ping(Bytes::from_static(b"squidbot"))).await {
                        return SessionEnd::Reconnect { reason: format!("can't ping Slack: {error}"), healthy };
                    }
                    continue;
                }
                Ok(None) => return SessionEnd::Reconnect { reason: "the connection closed".to_owned(), healthy },
                Ok(Some(Err(error))) => {
                    return SessionEnd::Reconnect { reason: format!("the connection broke: {error}"), healthy };
                }
                Ok(Some(Ok(message))) => message,
            };
            pinged = false;
            let step = match message {
                Message::Text(text) => self.handle_text(&mut socket, text.as_str()).await,
                Message::Ping(payload) => match socket.send(Message::Pong(payload)).await {
                    Ok(()) => Step::Continue,
                    Err(error) => Step::End(SessionEnd::Reconnect {
                        reason: format!("can't answer Slack's ping: {error}"),
                        healthy,
                    }),
                },
                Message::Pong(_) => Step::Continue,
                Message::Close(frame) => {
                    let reason = frame.map(|frame| frame.reason.to_string()).unwrap_or_default();
                    Step::End(SessionEnd::Reconnect {
                        reason: format!("Slack closed the connection ({reason})"),
                        healthy,
                    })
                }
                Message::Binary(_) | Message::Frame(_) => {
                    tracing::warn!(channel = %self.name, "skipping a binary Socket Mode frame");
                    Step::Continue
                }
            };
            match step {
                Step::Continue => {}
                Step::Healthy => healthy = true,
                Step::End(SessionEnd::Reconnect { reason, healthy: said_healthy }) => {
                    return SessionEnd::Reconnect { reason, healthy: healthy || said_healthy };
                }
                Step::End(end) => return end,
            }
        }
    }

    async fn handle_text<S>(&mut self, socket: &mut S, text: &str) -> Step
    where
        S: Sink<Message, Error = WebSocketError> + Unpin,
    {
        let frame = match read_frame(text) {
            Ok(frame) => frame,
            Err(reason) => {
                tracing::warn!(channel = %self.name, %reason, "skipping a malformed Socket Mode frame");
                return Step::Continue;
            }
        };
        match frame {
            Frame::Hello => {
                tracing::debug!(channel = %self.name, "Socket Mode connection ready");
                Step::Healthy
            }
            Frame::Disconnect { reason } if reason == "link_disabled" => {
                Step::End(SessionEnd::Fatal(ChannelError::fatal(
                    "can't receive Slack events: Socket Mode is turned off for the app (link_disabled)",
                )))
            }
            Frame::Disconnect { reason } => {
                close(socket).await;
                Step::End(SessionEnd::Reconnect {
                    reason: format!("Slack asked for a new connection ({reason})"),
                    healthy: true,
                })
            }
            Frame::Unknown { kind } => {
                tracing::debug!(channel = %self.name, %kind, "ignoring an unknown Socket Mode frame");
                Step::Continue
            }
            Frame::Envelope { envelope_id, kind, payload, retry_attempt } => {
                // Acknowledged before anything else: Slack redelivers envelopes that
                // aren't acknowledged within a few seconds.
                let acknowledgement = json!({"envelope_id": envelope_id}).to_string();
                if let Err(error) = socket.send(Message::text(acknowledgement)).await {
                    let reason = format!("can't acknowledge an envelope: {error}");
                    return Step::End(SessionEnd::Reconnect { reason, healthy: false });
                }
                if kind != "events_api" {
                    tracing::debug!(channel = %self.name, %kind, "ignoring a Socket Mode envelope");
                    return Step::Healthy;
                }
                match interpret(&payload, &self.identity) {
                    Ok(Interpretation::Deliver(received)) => {
                        if !self.recent.admit(&received.platform_message_id, received.kind) {
                            tracing::debug!(channel = %self.name, id = %received.platform_message_id, "dropping the second event of a mention");
                            return Step::Healthy;
                        }
                        if retry_attempt > 0 {
                            tracing::debug!(channel = %self.name, id = %received.platform_message_id, retry_attempt, "Slack redelivered an event");
                        }
                        self.deliver(received).await
                    }
                    Ok(Interpretation::Ignore(reason)) => {
                        tracing::debug!(channel = %self.name, %reason, "ignoring a Slack event");
                        Step::Healthy
                    }
                    Err(reason) => {
                        tracing::warn!(channel = %self.name, %reason, "skipping a malformed Slack event");
                        Step::Healthy
                    }
                }
            }
        }
    }

    /// Fetches the message's files and hands it to the manager.
    async fn deliver(&self, received: ReceivedMessage) -> Step {
        let downloaded = tokio::select! {
            biased;
            () = self.shutdown.cancelled() => return Step::End(SessionEnd::Shutdown),
            downloaded = download_all(self.api, &received.files, self.max_attachment_bytes) => downloaded,
        };
        let mut text = received.text;
        for note in downloaded.notes {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&note);
        }
        let message = InboundMessage {
            channel: self.name.to_owned(),
            platform_message_id: received.platform_message_id,
            conversation: received.conversation,
            sender: received.sender,
            text,
            mentions_bot: received.mentions_bot,
            attachments: downloaded.attachments,
            received_at: Timestamp::now(),
        };
        tokio::select! {
            biased;
            () = self.shutdown.cancelled() => Step::End(SessionEnd::Shutdown),
            delivered = self.inbound.deliver(message) => match delivered {
                Ok(()) => Step::Healthy,
                Err(closed) => {
                    tracing::info!(channel = %self.name, %closed, "stopping the Slack receive loop");
                    Step::End(SessionEnd::Shutdown)
                }
            },
        }
    }
}

/// Closes a connection politely, without waiting long for it.
async fn close<S>(socket: &mut S)
where
    S: Sink<Message, Error = WebSocketError> + Unpin,
{
    match tokio::time::timeout(CLOSE_TIMEOUT, socket.close()).await {
        Ok(Ok(())) | Err(_) => {}
        Ok(Err(error)) => tracing::debug!(%error, "can't close the Socket Mode connection cleanly"),
    }
}

/// The wait after `failures` failed attempts in a row.
fn backoff(failures: u32) -> Duration {
    Backoff::doubling(FIRST_BACKOFF, MAX_BACKOFF).nominal(failures)
}

#[cfg(test)]
mod tests;
