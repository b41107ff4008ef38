//! The sending side of a connection: the bounded frame queue with its event sequence
//! numbers, and the writer task that drains the queue into the socket in batches.

use axum::extract::ws::Message;
use futures_util::{Sink, SinkExt};
use serde::Serialize;
use tokio::sync::mpsc;

use super::frame::{self, MethodError};

/// Frames queued for a client before it counts as not reading.
pub(super) const OUT_QUEUE: usize = 1024;

/// Frames the writer takes from the queue before it flushes: more than a turn's burst,
/// few enough that a flush never waits long behind a busy producer.
const BATCH: usize = 64;

/// Bytes the WebSocket layer gathers before it writes to the socket. Frames fed together
/// leave in one write when they fit; the flush after each batch writes the rest. The
/// buffer is a vector that grows on demand, so an idle connection does not pay for it.
pub(super) const WRITE_BUFFER: usize = 8 * 1024;

/// Ceiling of the WebSocket layer's write buffer. While the socket keeps up it holds at
/// most [`WRITE_BUFFER`] and one frame (the sink waits for the socket before taking
/// another); the ceiling only has to admit the largest single frame the gateway sends (a
/// long `chat.history`). It limits, it does not allocate.
pub(super) const MAX_WRITE_BUFFER: usize = 64 * 1024 * 1024;

/// Frames on their way to one client.
pub(crate) struct Outbox {
    queue: mpsc::Sender<Message>,
    /// The `seq` of the last event sent.
    seq: u64,
    /// Set once the queue was full; nothing is queued afterwards.
    not_reading: bool,
}

impl Outbox {
    /// An outbox feeding `queue`.
    pub(super) fn new(queue: mpsc::Sender<Message>) -> Self {
        Self { queue, seq: 0, not_reading: false }
    }

    /// True once the client let its queue fill up.
    pub(super) fn not_reading(&self) -> bool {
        self.not_reading
    }

    /// Queues a frame; a full queue marks the client as not reading.
    pub(super) fn push(&mut self, message: Message) {
        if self.not_reading {
            return;
        }
        if self.queue.try_send(message).is_err() {
            self.not_reading = true;
        }
    }

    fn send_text(&mut self, text: Result<String, serde_json::Error>) {
        match text {
            Ok(text) => self.push(Message::Text(text.into())),
            // Only a payload with a non-string map key or a failing `Serialize` gets here,
            // none of the gateway's do; a frame missing is better than a connection lost.
            Err(error) => tracing::error!(%error, "can't serialize a frame; it is not sent"),
        }
    }

    /// Sends an event with the next sequence number.
    pub(crate) fn send_event<P: Serialize + ?Sized>(&mut self, name: &str, payload: &P) {
        let seq = self.seq + 1;
        match frame::event(name, payload, seq) {
            Ok(text) => {
                self.seq = seq;
                self.push(Message::Text(text.into()));
            }
            // A number the client never sees would read as a lost event.
            Err(error) => tracing::error!(%error, event = name, "can't serialize an event; it is not sent"),
        }
    }

    /// Answers a request successfully.
    pub(crate) fn respond_ok<P: Serialize + ?Sized>(&mut self, id: &str, payload: &P) {
        self.send_text(frame::ok_response(id, payload));
    }

    /// Answers a request (or, without an id, a frame that could not be read) with an error.
    pub(crate) fn respond_error(&mut self, id: Option<&str>, error: &MethodError) {
        self.send_text(frame::error_response(id, error));
    }
}

/// Writes the queued frames to `sink` until the queue closes, a write fails or a `Close`
/// went out. Whatever is queued when the task wakes is fed in one go and flushed once, so
/// the frames of a turn that arrive together leave in one write instead of a system call
/// (and a wake-up) each.
pub(super) async fn write<S>(mut sink: S, mut queue: mpsc::Receiver<Message>)
where
    S: Sink<Message> + Unpin,
{
    while let Some(message) = queue.recv().await {
        let mut closing = matches!(message, Message::Close(_));
        if sink.feed(message).await.is_err() {
            return;
        }
        let mut batched = 1;
        while !closing && batched < BATCH {
            let Ok(message) = queue.try_recv() else { break };
            closing = matches!(message, Message::Close(_));
            if sink.feed(message).await.is_err() {
                return;
            }
            batched += 1;
        }
        if sink.flush().await.is_err() || closing {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
