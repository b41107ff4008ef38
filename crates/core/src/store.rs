//! The `SessionStore` port: durable, append-only session trees.

use std::future::Future;

use squidbot_types::session::{LeafLine, SessionEntry, SessionHeader};

use crate::BoxFuture;

/// Why a session store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The session does not exist.
    #[error("can't find session {key}")]
    NotFound {
        /// Session key.
        key: String,
    },
    /// `create` found the session already there.
    #[error("can't create session {key}: it already exists")]
    AlreadyExists {
        /// Session key.
        key: String,
    },
    /// The sessions directory could not be listed.
    #[error("can't list sessions in {directory}: {reason}")]
    List {
        /// The directory.
        directory: String,
        /// The underlying error.
        reason: String,
    },
    /// The key can't name a session (empty, too long).
    #[error("can't use session key {key:?}: {reason}")]
    InvalidKey {
        /// Session key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading or writing failed.
    #[error("can't {action} session {key}: {reason}")]
    Io {
        /// What was attempted ("read", "append to", …).
        action: &'static str,
        /// Session key.
        key: String,
        /// The underlying error.
        reason: String,
    },
}

/// A session read back from storage.
#[derive(Debug, Clone)]
pub struct LoadedSession {
    /// The header line.
    pub header: SessionHeader,
    /// Every readable entry in file order.
    pub entries: Vec<SessionEntry>,
    /// The last leaf line, when it comes after the last entry: the active leaf was moved
    /// there (a branch switch or fork) after the last entry was written.
    pub moved_leaf: Option<LeafLine>,
    /// Lines that could not be read (a torn last line after a crash, hand edits), each
    /// described; they are skipped, never fatal.
    pub warnings: Vec<String>,
}

/// One row of a session listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// Session key.
    pub key: String,
    /// Context the session belongs to.
    pub context: String,
    /// Creation time, RFC 3339.
    pub created: String,
    /// Time of the last entry (or creation), RFC 3339.
    pub updated: String,
    /// Number of entries.
    pub entry_count: usize,
    /// Number of user and assistant messages.
    pub message_count: usize,
    /// Start of the last user message, for display.
    pub preview: String,
}

/// When appended entries must be on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Flushed and synced (with the file's directory entry, for a new session) before
    /// `append` returns: what a reply or a tool call needs before anyone acts on it.
    Synced,
    /// Handed to the operating system only; the next [`Durability::Synced`] append to the
    /// same session makes them durable too. For entries written mid-turn (the user's
    /// message before the model call): a crash of the machine before the turn's synced
    /// append may lose them, as it would lose the turn itself, while a crash of the
    /// process loses nothing. Saves one disk sync per step of a turn.
    Written,
}

/// Durable storage of session trees.
pub trait SessionStore: Send + Sync {
    /// Reads a session, `Ok(None)` when it does not exist.
    fn load<'a>(&'a self, key: &'a str) -> impl Future<Output = Result<Option<LoadedSession>, StoreError>> + Send + 'a;
    /// Creates a session with the given header; fails if it already exists. The new
    /// session is durable once the first [`Durability::Synced`] append to it returns.
    fn create<'a>(&'a self, header: &'a SessionHeader) -> impl Future<Output = Result<(), StoreError>> + Send + 'a;
    /// Appends entries, on disk when this returns if `durability` is
    /// [`Durability::Synced`].
    fn append<'a>(
        &'a self,
        key: &'a str,
        entries: &'a [SessionEntry],
        durability: Durability,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'a;
    /// Records that the active leaf moved (a branch switch or a fork) without adding an
    /// entry, durably when this returns; the next load starts from there.
    fn move_leaf<'a>(
        &'a self,
        key: &'a str,
        line: &'a LeafLine,
    ) -> impl Future<Output = Result<(), StoreError>> + Send + 'a;
    /// Lists every session, most recently updated first.
    fn list(&self) -> impl Future<Output = Result<Vec<SessionSummary>, StoreError>> + Send + '_;
    /// Deletes a session and everything stored with it; `Ok(false)` when there was none.
    fn remove<'a>(&'a self, key: &'a str) -> impl Future<Output = Result<bool, StoreError>> + Send + 'a;
}

/// Object-safe companion of [`SessionStore`].
pub trait DynSessionStore: Send + Sync {
    /// See [`SessionStore::load`].
    fn load_boxed<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<LoadedSession>, StoreError>>;
    /// See [`SessionStore::create`].
    fn create_boxed<'a>(&'a self, header: &'a SessionHeader) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`SessionStore::append`].
    fn append_boxed<'a>(
        &'a self,
        key: &'a str,
        entries: &'a [SessionEntry],
        durability: Durability,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`SessionStore::move_leaf`].
    fn move_leaf_boxed<'a>(&'a self, key: &'a str, line: &'a LeafLine) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`SessionStore::list`].
    fn list_boxed(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, StoreError>>;
    /// See [`SessionStore::remove`].
    fn remove_boxed<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, StoreError>>;
}

impl<T: SessionStore> DynSessionStore for T {
    fn load_boxed<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<LoadedSession>, StoreError>> {
        Box::pin(self.load(key))
    }

    fn create_boxed<'a>(&'a self, header: &'a SessionHeader) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.create(header))
    }

    fn append_boxed<'a>(
        &'a self,
        key: &'a str,
        entries: &'a [SessionEntry],
        durability: Durability,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.append(key, entries, durability))
    }

    fn move_leaf_boxed<'a>(&'a self, key: &'a str, line: &'a LeafLine) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(self.move_leaf(key, line))
    }

    fn list_boxed(&self) -> BoxFuture<'_, Result<Vec<SessionSummary>, StoreError>> {
        Box::pin(self.list())
    }

    fn remove_boxed<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(self.remove(key))
    }
}

pub mod index;
pub mod memory;
pub mod search;
