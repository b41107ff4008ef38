//! The `BusJournal` port: every message and what became of it, one entry per attempt
//! (a message sent to a trigger file and delivered later has two). SQLite implements it
//! in squidbot-store; [`MemoryJournal`] serves tests and processes without a database.

use std::future::Future;
use std::sync::Mutex;

use serde::Serialize;
use squidbot_core::BoxFuture;
use squidbot_core::sync::lock;

use crate::envelope::Priority;

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalEntry {
    /// Milliseconds since the Unix epoch.
    pub time_ms: i64,
    /// The sender's id.
    pub from: String,
    /// The target as resolved (as given when it did not resolve).
    pub to: String,
    /// The sender's sequence number; `None` when the message was refused before it got one.
    pub seq: Option<u64>,
    /// The tag.
    pub priority: Priority,
    /// The body.
    pub body: String,
    /// The correlation id.
    pub correlation_id: String,
    /// `delivered.verified`, `accepted.unverified`, `fallback.triggered` or an error code.
    pub result: String,
    /// More about the result: run id, reason, `trigger file`.
    pub detail: Option<String>,
}

/// Why the journal could not record an entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    /// The storage failed; the message itself is unaffected and the failure is logged.
    #[error("can't record a bus message: {0}")]
    Storage(String),
}

/// Where bus messages are recorded.
pub trait BusJournal: Send + Sync {
    /// Appends `entry`.
    fn record<'a>(&'a self, entry: &'a JournalEntry) -> impl Future<Output = Result<(), JournalError>> + Send + 'a;
}

/// Object-safe companion of [`BusJournal`].
pub trait DynBusJournal: Send + Sync {
    /// Boxed form of [`BusJournal::record`].
    fn record_boxed<'a>(&'a self, entry: &'a JournalEntry) -> BoxFuture<'a, Result<(), JournalError>>;
}

impl<T: BusJournal> DynBusJournal for T {
    fn record_boxed<'a>(&'a self, entry: &'a JournalEntry) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(self.record(entry))
    }
}

/// A journal in memory.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    entries: Mutex<Vec<JournalEntry>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entries so far, oldest first.
    pub fn entries(&self) -> Vec<JournalEntry> {
        lock(&self.entries).clone()
    }
}

impl BusJournal for MemoryJournal {
    async fn record(&self, entry: &JournalEntry) -> Result<(), JournalError> {
        lock(&self.entries).push(entry.clone());
        Ok(())
    }
}
