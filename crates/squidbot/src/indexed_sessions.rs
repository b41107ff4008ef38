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

    /// Records activity off the async workers. With `context` unknown, the index's own
    /// entry supplies it; returns false when the session is not indexed yet.
    async fn record(&self, key: &str, context: Option<&str>, messages: u64) -> Result<bool, StoreError> {
        let index = self.index.clone();
        let key = key.to_owned();
        let context = context.map(str::to_owned);
        let now = unix_now();
        let failed = |reason: String| StoreError::Io { action: "index", key: String::new(), reason };
        tokio::task::spawn_blocking(move || {
            let context = match context {
                Some(context) => context,
                None => match index.get(&key)? {
                    Some(entry) => entry.context,
                    None => return Ok(false),
                },
            };
            index.record_activity(&key, &context, now, messages).map(|_| true)
        })
        .await
        .map_err(|error| failed(error.to_string()))?
        .map_err(|error: squidbot_store::DatabaseError| failed(error.to_string()))
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
        self.record(&header.key, Some(&header.context), 0).await.map(|_| ())
    }

    async fn append<'a>(&'a self, key: &'a str, entries: &'a [SessionEntry]) -> Result<(), StoreError> {
        self.files.append(key, entries).await?;
        let messages = entries.iter().filter(|entry| matches!(entry.body, EntryBody::Message { .. })).count() as u64;
        if self.record(key, None, messages).await? {
            return Ok(());
        }
        // A session written before the index existed: its header names the context.
        match self.files.load(key).await? {
            Some(loaded) => self.record(key, Some(&loaded.header.context), messages).await.map(|_| ()),
            None => Ok(()),
        }
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.files.list().await
    }
}
