//! A running worker's inbox: messages other agents send it (over the agent bus), which its
//! loop takes at the next safe point, the end of a turn. An urgent message first stops the
//! turn in progress (at the turn's next await point, like a person's abort), so it is read
//! next; the worker itself keeps running.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

/// One message for a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxMessage {
    /// What the worker reads: the bus envelope `(ROLE #N): [TAG] body`.
    pub text: String,
    /// Stop the worker's current turn so this is read now.
    pub urgent: bool,
    /// The correlation id the message carries: the worker's turn that reads it carries
    /// it on (into its tool calls, bus messages and log lines); `None` keeps the worker's.
    pub correlation_id: Option<String>,
}

/// The waiting messages, taken as one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Taken {
    /// Their texts, in arrival order.
    pub(super) text: String,
    /// The correlation id of the latest message that had one.
    pub(super) correlation_id: Option<String>,
}

/// Why a message was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InboxError {
    /// The worker ended; nothing reads this inbox any more.
    #[error("can't deliver to worker {id}: it has ended")]
    Closed {
        /// The worker.
        id: String,
    },
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<InboxMessage>,
    /// Stops the turn in progress, while one runs.
    turn: Option<CancellationToken>,
    /// Set when an urgent message stopped the current turn.
    interrupted: bool,
    closed: bool,
}

/// The inbox of one worker; clones share it.
#[derive(Debug, Clone)]
pub struct WorkerInbox {
    id: String,
    state: Arc<Mutex<State>>,
}

impl WorkerInbox {
    /// An open, empty inbox of worker `id`.
    pub fn new(id: impl Into<String>) -> Self {
        Self { id: id.into(), state: Arc::new(Mutex::new(State::default())) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        crate::sync::lock(&self.state)
    }

    /// The worker this inbox belongs to.
    pub fn worker_id(&self) -> &str {
        &self.id
    }

    /// Queues `message`; an urgent one stops the turn in progress.
    pub fn deliver(&self, message: InboxMessage) -> Result<(), InboxError> {
        let mut state = self.lock();
        if state.closed {
            return Err(InboxError::Closed { id: self.id.clone() });
        }
        if message.urgent
            && let Some(turn) = &state.turn
        {
            turn.cancel();
            state.interrupted = true;
        }
        state.queue.push_back(message);
        Ok(())
    }

    /// True once the worker ended.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Messages waiting.
    pub fn pending(&self) -> usize {
        self.lock().queue.len()
    }

    /// The token of a turn about to start: a child of the worker's own, which an urgent
    /// message cancels.
    pub(super) fn begin_turn(&self, worker: &CancellationToken) -> CancellationToken {
        let turn = worker.child_token();
        let mut state = self.lock();
        state.turn = Some(turn.clone());
        state.interrupted = false;
        turn
    }

    /// The turn ended; returns true when an urgent message stopped it.
    pub(super) fn end_turn(&self) -> bool {
        let mut state = self.lock();
        state.turn = None;
        std::mem::take(&mut state.interrupted)
    }

    /// Takes every waiting message as one input, `None` when there is none.
    pub(super) fn take_input(&self) -> Option<Taken> {
        let mut state = self.lock();
        if state.queue.is_empty() {
            return None;
        }
        let mut texts = Vec::with_capacity(state.queue.len());
        let mut correlation_id = None;
        for message in state.queue.drain(..) {
            texts.push(message.text);
            if let Some(id) = message.correlation_id.filter(|id| !id.trim().is_empty()) {
                correlation_id = Some(id);
            }
        }
        Some(Taken { text: texts.join("\n\n"), correlation_id })
    }

    /// Closes the inbox; returns what was never read.
    pub(super) fn close(&self) -> Vec<InboxMessage> {
        let mut state = self.lock();
        state.closed = true;
        state.turn = None;
        state.queue.drain(..).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urgent_messages_stop_the_turn_and_everything_is_read_in_order() {
        let inbox = WorkerInbox::new("w1");
        let worker = CancellationToken::new();
        inbox
            .deliver(InboxMessage { text: "(ASSISTANT #1): first".into(), urgent: false, correlation_id: None })
            .unwrap();
        let turn = inbox.begin_turn(&worker);
        let second = InboxMessage {
            text: "(ASSISTANT #2): second".into(),
            urgent: false,
            correlation_id: Some("corr-2".into()),
        };
        inbox.deliver(second).unwrap();
        assert!(!turn.is_cancelled(), "a normal message waits for the turn's end");
        inbox
            .deliver(InboxMessage { text: "(ASSISTANT #3): [URGENT] stop".into(), urgent: true, correlation_id: None })
            .unwrap();
        assert!(turn.is_cancelled() && !worker.is_cancelled(), "an urgent one stops the turn, not the worker");
        assert!(inbox.end_turn());
        let taken = inbox.take_input().unwrap();
        assert_eq!(taken.text, "(ASSISTANT #1): first\n\n(ASSISTANT #2): second\n\n(ASSISTANT #3): [URGENT] stop");
        assert_eq!(taken.correlation_id.as_deref(), Some("corr-2"), "the latest message that carried one");
        assert_eq!(inbox.take_input(), None);
        let next = inbox.begin_turn(&worker);
        assert!(!next.is_cancelled() && !inbox.end_turn());
    }

    #[test]
    fn a_closed_inbox_refuses_and_hands_back_what_was_unread() {
        let inbox = WorkerInbox::new("w2");
        inbox.deliver(InboxMessage { text: "unread".into(), urgent: false, correlation_id: None }).unwrap();
        assert_eq!(inbox.close().len(), 1);
        assert!(inbox.is_closed());
        assert_eq!(
            inbox.deliver(InboxMessage { text: "late".into(), urgent: true, correlation_id: None }),
            Err(InboxError::Closed { id: "w2".into() })
        );
    }
}
