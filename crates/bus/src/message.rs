//! Who sends (`Sender`, with the owner a background worker is bound to) and what travels
//! on the bus (`BusMessage`), the same data live, in trigger files and in the journal.

use serde::{Deserialize, Serialize};

use crate::envelope::{self, Priority};

/// The target name and role of people.
pub const USER: &str = "user";

/// Who sends a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sender {
    /// The sender's own target name (`assistant`, `worker-3`, `user`): its sequence
    /// numbers count per id.
    pub id: String,
    /// Its canonical role (`assistant`, `worker`, `user`), shown upper-cased in headers.
    pub role: String,
    /// For a background worker, the agent that spawned it: the only target it may message.
    pub owner: Option<String>,
}

impl Sender {
    /// A person (the CLI, an operator client): `USER` in headers.
    pub fn user() -> Self {
        Self { id: USER.to_owned(), role: USER.to_owned(), owner: None }
    }

    /// An agent with its own target name and role.
    pub fn agent(id: impl Into<String>, role: impl Into<String>) -> Self {
        Self { id: id.into(), role: role.into(), owner: None }
    }

    /// The agent whose role name is also its target name (`assistant`).
    pub fn role(role: impl Into<String>) -> Self {
        let role = role.into();
        Self { id: role.clone(), role, owner: None }
    }

    /// Binds a background worker to the agent that spawned it.
    pub fn owned_by(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }
}

/// One message on the bus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BusMessage {
    /// Unique id; a trigger-file reader skips ids it already delivered.
    pub id: String,
    /// The sender's id.
    pub from: String,
    /// The sender's role (header).
    pub role: String,
    /// The canonical target.
    pub target: String,
    /// The sender's sequence number.
    pub seq: u64,
    /// The tag.
    pub priority: Priority,
    /// The text after header and tag.
    pub body: String,
    /// The id of the inbound user message this traces back to.
    pub correlation_id: String,
    /// When it was sent.
    pub time: jiff::Timestamp,
    /// The conversation the sender works in (for a worker, its owner's): a message to
    /// `user` goes to that session's people; the main session's when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

impl BusMessage {
    /// The envelope the target reads: `(ROLE #N): [TAG] body`.
    pub fn envelope(&self) -> String {
        envelope::format(&self.role, self.seq, self.priority, &self.body)
    }

    /// Milliseconds since the Unix epoch of [`BusMessage::time`].
    pub fn time_ms(&self) -> i64 {
        self.time.as_millisecond()
    }
}

/// A fresh random id (messages, correlation ids).
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}
