//! The gateway session: connect, HELLO, IDENTIFY or RESUME, heartbeats, dispatches into
//! the inbound sink, and reconnecting (resuming where possible) until shutdown.
//!
//! A dispatch's sequence number counts as handled only once its message is in the sink:
//! if the connection drops while a message is still being downloaded or queued, the
//! RESUME asks for it again instead of losing it. While a message is on its way, frames
//! are still read (ACKs, RECONNECT) and later dispatches wait in a backlog; when the
//! backlog is full, reading pauses, and if that outlasts a heartbeat the missing ACK
//! makes the adapter resume, which replays everything not yet handled.

mod payload;
mod socket;

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use jiff::Timestamp;
use squidbot_channels::{
    Backoff, ChannelError, ChannelErrorKind, InboundSink, RandomSource, SeededRandom, SinkClosed, SystemRandom,
};
use tokio::time::{Instant, sleep, sleep_until, timeout, timeout_at};
use tokio_tungstenite::connect_async;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::attachments;
use crate::inbound::{self, MessageCreate, Threads};
use crate::rest::Rest;
use crate::settings::DiscordSettings;
use payload::{Frame, Hello, Ready};
use socket::{CLOSE_NORMAL, CLOSE_TO_RESUME, Socket, close, ended};

/// A message on its way into the sink (attachments downloading, or the queue full).
type Delivery<'a> = Pin<Box<dyn Future<Output = Result<(), SinkClosed>> + Send + 'a>>;

/// Dispatches held while a message is being delivered.
const MAX_BACKLOG: usize = 256;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
const HELLO_TIMEOUT: Duration = Duration::from_secs(30);
/// Connections in a row that may fail before the loop gives up and lets the manager
/// restart it with its own, longer backoff.
const MAX_FAILURES: u32 = 6;
/// Tries of `GET /gateway/bot` when Discord answers 429.
const GATEWAY_URL_ATTEMPTS: u32 = 3;

/// Runs the gateway until `shutdown` (Ok), a fatal close or refusal (Fatal), or too many
/// failed connections in a row (Transient).
pub(crate) async fn run(
    settings: &DiscordSettings,
    rest: &Rest,
    inbound: &InboundSink,
    shutdown: &CancellationToken,
) -> Result<(), ChannelError> {
    let mut gateway = Gateway {
        settings,
        rest,
        inbound,
        shutdown,
        session: None,
        sequence: None,
        bot_id: String::new(),
        threads: Threads::default(),
        random: SeededRandom::new(SystemRandom.next_u64()),
    };
    gateway.run().await
}

/// The state kept across connections of one `run`.
struct Gateway<'a> {
    settings: &'a DiscordSettings,
    rest: &'a Rest,
    inbound: &'a InboundSink,
    shutdown: &'a CancellationToken,
    /// The session to resume, once READY named it.
    session: Option<Session>,
    /// The sequence number of the last dispatch handled.
    sequence: Option<u64>,
    /// The bot's own user id, from READY.
    bot_id: String,
    threads: Threads,
    /// Heartbeat and INVALID_SESSION jitter.
    random: SeededRandom,
}

struct Session {
    id: String,
    resume_url: String,
}

/// Why a connection ended, and what comes next.
pub(super) enum Outcome {
    Shutdown,
    SinkClosed,
    /// Reconnect and resume the session (or identify, when there is none yet).
    Resume,
    /// Forget the session, wait `delay`, connect and identify.
    NewSession {
        delay: Duration,
    },
    Fatal(ChannelError),
}

/// One open connection.
struct Connection<'a> {
    socket: Socket,
    interval: Duration,
    next_beat: Instant,
    awaiting_ack: bool,
    /// The message being delivered and its dispatch's sequence number.
    delivery: Option<(Option<u64>, Delivery<'a>)>,
    /// Dispatches that came while a message was being delivered, in order.
    backlog: VecDeque<Frame>,
    /// Whether READY or RESUMED came on this connection.
    established: bool,
}

impl<'a> Gateway<'a> {
    async fn run(&mut self) -> Result<(), ChannelError> {
        let Some(base_url) = self.base_url().await? else {
            return Ok(());
        };
        let mut failures = 0_u32;
        let mut last_problem = String::from("the connection kept ending before READY");
        loop {
            let url =
                payload::with_query(self.session.as_ref().map_or(base_url.as_str(), |session| &session.resume_url));
            let connected = tokio::select! {
                () = self.shutdown.cancelled() => return Ok(()),
                result = timeout(CONNECT_TIMEOUT, connect_async(url.as_str())) => result,
            };
            let (outcome, established) = match connected {
                Ok(Ok((socket, _response))) => self.converse(socket).await,
                Ok(Err(error)) => {
                    last_problem = error.to_string();
                    tracing::warn!(%error, "can't connect to the Discord gateway");
                    (Outcome::Resume, false)
                }
                Err(_elapsed) => {
                    last_problem = format!("no connection within {} s", CONNECT_TIMEOUT.as_secs());
                    tracing::warn!("can't connect to the Discord gateway: {last_problem}");
                    (Outcome::Resume, false)
                }
            };
            failures = if established { 0 } else { failures + 1 };
            let mut wait = Duration::ZERO;
            match outcome {
                Outcome::Shutdown | Outcome::SinkClosed => return Ok(()),
                Outcome::Fatal(error) => return Err(error),
                Outcome::Resume => {}
                Outcome::NewSession { delay } => {
                    self.session = None;
                    self.sequence = None;
                    wait = delay;
                }
            }
            if failures >= MAX_FAILURES {
                return Err(ChannelError::transient(format!(
                    "can't connect to the Discord gateway: {failures} attempts in a row failed, the last with: {last_problem}"
                )));
            }
            if failures > 0 {
                wait = wait.max(backoff(failures));
            }
            if !wait.is_zero() {
                tracing::info!(wait_ms = wait.as_millis() as u64, "reconnecting to the Discord gateway after a pause");
                tokio::select! {
                    () = self.shutdown.cancelled() => return Ok(()),
                    () = sleep(wait) => {}
                }
            }
        }
    }

    /// The configured gateway URL, or Discord's answer to `GET /gateway/bot`; `None`
    /// when shutdown came first.
    async fn base_url(&self) -> Result<Option<String>, ChannelError> {
        if let Some(url) = &self.settings.gateway_url {
            return Ok(Some(url.clone()));
        }
        let mut attempt = 0;
        loop {
            attempt += 1;
            let answer = tokio::select! {
                () = self.shutdown.cancelled() => return Ok(None),
                answer = self.rest.gateway_bot() => answer,
            };
            let error = match answer {
                Ok(bot) => {
                    if let Some(limit) = &bot.session_start_limit
                        && limit.remaining == 0
                    {
                        return Err(ChannelError::rate_limited(
                            Duration::from_millis(limit.reset_after),
                            "can't start a Discord gateway session: today's session starts are used up",
                        ));
                    }
                    return Ok(Some(bot.url));
                }
                Err(error) => error,
            };
            match error.kind {
                ChannelErrorKind::RateLimited { retry_after } if attempt < GATEWAY_URL_ATTEMPTS => {
                    tracing::warn!(retry_after_ms = retry_after.as_millis() as u64, "{error}");
                    tokio::select! {
                        () = self.shutdown.cancelled() => return Ok(None),
                        () = sleep(retry_after) => {}
                    }
                }
                // Refused outright (403 and the like): only a new configuration helps.
                ChannelErrorKind::Rejected => return Err(ChannelError::fatal(error.message)),
                ChannelErrorKind::RateLimited { .. } | ChannelErrorKind::Transient | ChannelErrorKind::Fatal => {
                    return Err(error);
                }
            }
        }
    }

    /// Runs one connection to its end; also says whether it got to READY or RESUMED.
    async fn converse(&mut self, mut socket: Socket) -> (Outcome, bool) {
        let interval = match self.hello(&mut socket).await {
            Ok(interval) => interval,
            Err(outcome) => return (outcome, false),
        };
        let token = self.settings.token.expose();
        let opening = match &self.session {
            Some(session) => payload::resume(token, &session.id, self.sequence),
            None => {
                self.sequence = None;
                payload::identify(token, self.settings.intents)
            }
        };
        if let Err(error) = socket.send(Message::text(opening)).await {
            tracing::warn!(%error, "can't open a Discord gateway session");
            return (Outcome::Resume, false);
        }
        // The first heartbeat comes after a random part of the interval, so bots that
        // reconnect together don't beat together.
        let jitter = self.random.next_u64() as f64 / u64::MAX as f64;
        let mut connection = Connection {
            socket,
            interval,
            next_beat: Instant::now() + interval.mul_f64(jitter),
            awaiting_ack: false,
            delivery: None,
            backlog: VecDeque::new(),
            established: false,
        };
        let outcome = self.drive(&mut connection).await;
        (outcome, connection.established)
    }

    /// Waits for HELLO and returns its heartbeat interval.
    async fn hello(&self, socket: &mut Socket) -> Result<Duration, Outcome> {
        let deadline = Instant::now() + HELLO_TIMEOUT;
        loop {
            let received = tokio::select! {
                () = self.shutdown.cancelled() => {
                    close(socket, CLOSE_NORMAL, "shutting down").await;
                    return Err(Outcome::Shutdown);
                }
                received = timeout_at(deadline, socket.next()) => received,
            };
            let Ok(frame) = received else {
                tracing::warn!("the Discord gateway sent no HELLO within {} s", HELLO_TIMEOUT.as_secs());
                return Err(Outcome::Resume);
            };
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                other => match ended(other) {
                    Some(outcome) => return Err(outcome),
                    None => continue,
                },
            };
            match serde_json::from_str::<Frame>(text.as_str()) {
                Ok(frame) if frame.op == payload::HELLO => match serde_json::from_value::<Hello>(frame.d) {
                    Ok(hello) if hello.heartbeat_interval > 0 => {
                        return Ok(Duration::from_millis(hello.heartbeat_interval));
                    }
                    Ok(_zero) => tracing::warn!("skipping a HELLO with a zero heartbeat interval"),
                    Err(error) => tracing::warn!(%error, "skipping a malformed HELLO"),
                },
                Ok(frame) => tracing::debug!(op = frame.op, "ignoring a gateway frame before HELLO"),
                Err(error) => tracing::warn!(%error, "skipping a malformed Discord gateway frame"),
            }
        }
    }

    async fn drive(&mut self, connection: &mut Connection<'a>) -> Outcome {
        loop {
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => {
                    close(&mut connection.socket, CLOSE_NORMAL, "shutting down").await;
                    return Outcome::Shutdown;
                }
                () = sleep_until(connection.next_beat) => {
                    if let Some(outcome) = self.beat(connection).await {
                        return outcome;
                    }
                }
                (sequence, delivered) = finish(&mut connection.delivery) => {
                    connection.delivery = None;
                    if delivered.is_err() {
                        tracing::info!("the channel manager stopped taking messages; leaving the Discord gateway");
                        close(&mut connection.socket, CLOSE_NORMAL, "shutting down").await;
                        return Outcome::SinkClosed;
                    }
                    self.handled(sequence);
                    while connection.delivery.is_none()
                        && let Some(frame) = connection.backlog.pop_front()
                    {
                        if let Some(outcome) = self.dispatch(connection, frame) {
                            return outcome;
                        }
                    }
                }
                frame = connection.socket.next(), if connection.backlog.len() < MAX_BACKLOG => {
                    let outcome = match frame {
                        Some(Ok(Message::Text(text))) => self.handle_text(connection, text.as_str()).await,
                        other => ended(other),
                    };
                    if let Some(outcome) = outcome {
                        return outcome;
                    }
                }
            }
        }
    }

    /// Sends a heartbeat, or ends the connection when the last one was never ACKed.
    async fn beat(&mut self, connection: &mut Connection<'a>) -> Option<Outcome> {
        if connection.awaiting_ack {
            tracing::warn!("the Discord gateway did not acknowledge the last heartbeat; reconnecting to resume");
            close(&mut connection.socket, CLOSE_TO_RESUME, "heartbeat not acknowledged").await;
            return Some(Outcome::Resume);
        }
        if let Err(error) = connection.socket.send(Message::text(payload::heartbeat(self.sequence))).await {
            tracing::warn!(%error, "can't send a heartbeat to the Discord gateway; reconnecting");
            return Some(Outcome::Resume);
        }
        connection.awaiting_ack = true;
        connection.next_beat = Instant::now() + connection.interval;
        None
    }

    async fn handle_text(&mut self, connection: &mut Connection<'a>, text: &str) -> Option<Outcome> {
        let frame: Frame = match serde_json::from_str(text) {
            Ok(frame) => frame,
            Err(error) => {
                tracing::warn!(%error, "skipping a malformed Discord gateway frame");
                return None;
            }
        };
        match frame.op {
            payload::DISPATCH if connection.delivery.is_some() || !connection.backlog.is_empty() => {
                connection.backlog.push_back(frame);
                None
            }
            payload::DISPATCH => self.dispatch(connection, frame),
            payload::HEARTBEAT => {
                // The server asks for a beat now; it doesn't move the schedule.
                if let Err(error) = connection.socket.send(Message::text(payload::heartbeat(self.sequence))).await {
                    tracing::warn!(%error, "can't send a heartbeat to the Discord gateway; reconnecting");
                    return Some(Outcome::Resume);
                }
                None
            }
            payload::HEARTBEAT_ACK => {
                connection.awaiting_ack = false;
                None
            }
            payload::RECONNECT => {
                tracing::info!("the Discord gateway asked to reconnect; resuming");
                close(&mut connection.socket, CLOSE_TO_RESUME, "reconnect requested").await;
                Some(Outcome::Resume)
            }
            payload::INVALID_SESSION => {
                if frame.d.as_bool() == Some(true) && self.session.is_some() {
                    tracing::info!("the Discord gateway session was interrupted; resuming");
                    close(&mut connection.socket, CLOSE_TO_RESUME, "resuming").await;
                    return Some(Outcome::Resume);
                }
                // Discord asks for a random 1 to 5 s before identifying again.
                let delay = Duration::from_millis(1000 + self.random.next_u64() % 4001);
                tracing::info!(
                    delay_ms = delay.as_millis() as u64,
                    "the Discord gateway session is invalid; starting a new one"
                );
                close(&mut connection.socket, CLOSE_NORMAL, "new session").await;
                Some(Outcome::NewSession { delay })
            }
            payload::HELLO => None,
            other => {
                tracing::debug!(op = other, "ignoring an unknown Discord gateway opcode");
                None
            }
        }
    }

    fn dispatch(&mut self, connection: &mut Connection<'a>, frame: Frame) -> Option<Outcome> {
        let sequence = frame.s;
        if let (Some(sequence), Some(last)) = (sequence, self.sequence)
            && sequence <= last
        {
            tracing::debug!(sequence, last, "skipping a Discord dispatch already handled");
            return None;
        }
        let event = frame.t.unwrap_or_default();
        match event.as_str() {
            "READY" => match serde_json::from_value::<Ready>(frame.d) {
                Ok(ready) => {
                    tracing::info!(session = %ready.session_id, bot = %ready.user.id, "connected to the Discord gateway");
                    self.bot_id = ready.user.id;
                    self.session = Some(Session { id: ready.session_id, resume_url: ready.resume_gateway_url });
                    connection.established = true;
                }
                Err(error) => {
                    tracing::warn!(%error, "the Discord gateway sent a malformed READY; starting over");
                    return Some(Outcome::NewSession { delay: Duration::ZERO });
                }
            },
            "RESUMED" => {
                tracing::info!("resumed the Discord gateway session");
                connection.established = true;
            }
            "MESSAGE_CREATE" => {
                self.message(connection, sequence, frame.d);
                return None;
            }
            other => {
                if !self.threads.observe(other, &frame.d) {
                    tracing::debug!(event = other, "ignoring a Discord gateway event");
                }
            }
        }
        self.handled(sequence);
        None
    }

    /// Starts delivering a MESSAGE_CREATE, or marks it handled when it is not for the
    /// manager.
    fn message(&mut self, connection: &mut Connection<'a>, sequence: Option<u64>, data: serde_json::Value) {
        let event: MessageCreate = match serde_json::from_value(data) {
            Ok(event) => event,
            Err(error) => {
                tracing::warn!(%error, "skipping a malformed MESSAGE_CREATE");
                self.handled(sequence);
                return;
            }
        };
        match inbound::prepare(&self.settings.name, event, &self.bot_id, &self.threads, Timestamp::now()) {
            Err(skip) => {
                tracing::debug!(?skip, "not delivering a Discord message");
                self.handled(sequence);
            }
            Ok(prepared) => {
                let inbound: &'a InboundSink = self.inbound;
                let rest: &'a Rest = self.rest;
                let max_bytes = self.settings.max_attachment_bytes;
                let delivery: Delivery<'a> = Box::pin(async move {
                    let mut message = prepared.message;
                    if !prepared.attachments.is_empty() {
                        attachments::download_into(rest.downloader(), &mut message, prepared.attachments, max_bytes)
                            .await;
                    }
                    inbound.deliver(message).await
                });
                connection.delivery = Some((sequence, delivery));
            }
        }
    }

    fn handled(&mut self, sequence: Option<u64>) {
        if let Some(sequence) = sequence {
            self.sequence = Some(self.sequence.map_or(sequence, |last| last.max(sequence)));
        }
    }
}

/// Waits for the pending delivery, or forever when there is none.
async fn finish(slot: &mut Option<(Option<u64>, Delivery<'_>)>) -> (Option<u64>, Result<(), SinkClosed>) {
    match slot {
        Some((sequence, delivery)) => (*sequence, delivery.as_mut().await),
        None => std::future::pending().await,
    }
}

/// The pause after `failures` failed connections in a row: 1, 2, 4, 8, 16 s.
fn backoff(failures: u32) -> Duration {
    Backoff::doubling(Duration::from_secs(1), Duration::from_secs(16)).nominal(failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_connections_back_off_doubling() {
        let pauses: Vec<u64> = (1..=6).map(|failures| backoff(failures).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 16]);
    }
}
