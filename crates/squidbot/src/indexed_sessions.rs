//! A session store that keeps the SQLite session index (status, activity) in step with
//! the JSONL transcripts it forwards to.

use squidbot_core::store::{LoadedSession, SessionStore, SessionSummary, StoreError};
use squidbot_store::{JsonlSessionStore, SqliteSessionIndex};
use squidbot_types::session::{EntryBody, SessionEntry, SessionHeader};

/// JSONL transcripts plus the index.
#[derive(Debug)]
pub struct IndexedSessionStore {
    files: JsonlSessionStore,
    index: SqliteSessionIndex,
}

impl IndexedSessionStore {
    /// Wraps the two.
    pub fn new(files: JsonlSessionStore, index: SqliteSessionIndex) -> Self {
        Self { files, index }
    }

    async fn record(&self, key: &str, context: &str, messages: u64) -> Result<(), StoreError> {
        let index = self.index.clone();
        let key = key.to_owned();
        let context = context.to_owned();
        let now = unix_now();
        tokio::task::spawn_blocking(move || index.record_activity(&key, &context, now, messages).map(|_| ()))
            .await
            .map_err(|error| StoreError::Io { action: "index", key: String::new(), reason: error.to_string() })?
            .map_err(|error| StoreError::Io { action: "index", key: String::new(), reason: error.to_string() })
    }
}

/// Now as Unix seconds.
pub fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_secs() as i64)
}

impl SessionStore for IndexedSessionStore {
    async fn load<'a>(&'a self, key: &'a str) -> Result<Option<LoadedSession>, StoreError> {
        self.files.load(key).await
    }

    async fn create<'a>(&'a self, header: &'a SessionHeader) -> Result<(), StoreError> {
        self.files.create(header).await?;
        self.record(&header.key, &header.context, 0).await
    }

    async fn append<'a>(&'a self, key: &'a str, entries: &'a [SessionEntry]) -> Result<(), StoreError> {
        self.files.append(key, entries).await?;
        let messages = entries.iter().filter(|entry| matches!(entry.body, EntryBody::Message { .. })).count() as u64;
        let context = match self.index.get(key) {
            Ok(Some(entry)) => entry.context,
            _ => match self.files.load(key).await? {
                Some(loaded) => loaded.header.context,
                None => return Ok(()),
            },
        };
        self.record(key, &context, messages).await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.files.list().await
    }
}
