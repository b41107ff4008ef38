//! `IndexedSessionStore`: a session store that keeps the SQLite session index (status,
//! activity) in step with the JSONL transcripts it forwards to.

use std::sync::{Arc, Mutex};

use squidbot_core::clock::Clock;
use squidbot_core::store::{Durability, LoadedSession, SessionStore, SessionSummary, StoreError};
use squidbot_core::sync::lock;
use squidbot_types::session::{EntryBody, LeafLine, SessionEntry, SessionHeader};
use tokio::sync::oneshot;

use crate::jsonl::JsonlSessionStore;
use crate::session_index::{ActivityUpdate, SqliteSessionIndex};
use crate::session_search::SessionSearchIndex;

/// JSONL transcripts plus the index.
pub struct IndexedSessionStore {
    files: JsonlSessionStore,
    index: Arc<IndexWriter>,
    clock: Arc<dyn Clock>,
    /// The transcripts' full-text index, kept in step on every append when present.
    search: Option<SessionSearchIndex>,
}

impl std::fmt::Debug for IndexedSessionStore {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("IndexedSessionStore").field("files", &self.files).finish_non_exhaustive()
    }
}

impl IndexedSessionStore {
    /// The transcripts in `files` indexed in `index`, activity stamped with the `clock`'s
    /// time.
    pub fn new(files: JsonlSessionStore, index: SqliteSessionIndex, clock: Arc<dyn Clock>) -> Self {
        Self { files, index: Arc::new(IndexWriter { index, pending: Mutex::default() }), clock, search: None }
    }

    /// The same store also adding what is appended to the full-text index `search`.
    pub fn with_search(mut self, search: SessionSearchIndex) -> Self {
        self.search = Some(search);
        self
    }

    /// Adds appended entries to the full-text index. A failure is logged, not returned:
    /// the transcript is written, and the next search catches the index up from it.
    async fn index_text(&self, key: &str, context: Option<&str>, entries: &[SessionEntry]) {
        let Some(search) = self.search.clone() else { return };
        let (key, context, entries) = (key.to_owned(), context.map(str::to_owned), entries.to_vec());
        let added = tokio::task::spawn_blocking(move || {
            search.add(&key, context.as_deref(), &entries).map_err(|error| (key, error.to_string()))
        })
        .await;
        match added {
            Ok(Ok(())) => {}
            Ok(Err((key, error))) => tracing::warn!(session = %key, %error, "can't add to the search index"),
            Err(error) => tracing::warn!(%error, "the search index task failed"),
        }
    }

    /// Records activity; returns once it is in the index. With `context` unknown, the
    /// index's own entry supplies it; returns false when the session is not indexed yet.
    async fn record(&self, key: &str, context: Option<&str>, messages: u64) -> Result<bool, StoreError> {
        let update = ActivityUpdate {
            key: key.to_owned(),
            context: context.map(str::to_owned),
            at_unix: self.clock.unix_seconds(),
            messages_added: messages,
        };
        let recorded = IndexWriter::submit(&self.index, update);
        recorded.await.unwrap_or_else(|_| Err("the index writer stopped".to_owned())).map_err(|reason| StoreError::Io {
            action: "index",
            key: key.to_owned(),
            reason,
        })
    }
}

/// Writes index updates in batches: turns that finish together would otherwise each take
/// a blocking thread and a transaction of their own, one after another on the database's
/// single connection. The first update to arrive starts a writer on the blocking pool; it
/// commits everything queued meanwhile in one transaction, and repeats until the queue
/// is empty.
#[derive(Debug)]
struct IndexWriter {
    index: SqliteSessionIndex,
    pending: Mutex<Pending>,
}

/// An update and who waits for it.
type Waiting = (ActivityUpdate, oneshot::Sender<Result<bool, String>>);

#[derive(Debug, Default)]
struct Pending {
    updates: Vec<Waiting>,
    /// Whether a writer is running (it takes what is queued before it stops).
    writing: bool,
}

impl IndexWriter {
    fn submit(writer: &Arc<Self>, update: ActivityUpdate) -> oneshot::Receiver<Result<bool, String>> {
        let (done, recorded) = oneshot::channel();
        let start = {
            let mut pending = lock(&writer.pending);
            pending.updates.push((update, done));
            !std::mem::replace(&mut pending.writing, true)
        };
        if start {
            let writer = Arc::clone(writer);
            // Not awaited: the callers wait on their own answers, and the writer clears
            // `writing` itself when the queue is empty.
            drop(tokio::task::spawn_blocking(move || writer.write_all()));
        }
        recorded
    }

    fn write_all(&self) {
        loop {
            let batch = {
                let mut pending = lock(&self.pending);
                if pending.updates.is_empty() {
                    pending.writing = false;
                    return;
                }
                std::mem::take(&mut pending.updates)
            };
            let (updates, waiting): (Vec<ActivityUpdate>, Vec<_>) = batch.into_iter().unzip();
            match self.index.record_activities(&updates) {
                Ok(recorded) => {
                    for (done, recorded) in waiting.into_iter().zip(recorded) {
                        // A caller that gave up waiting needs no answer.
                        drop(done.send(Ok(recorded)));
                    }
                }
                Err(error) => {
                    let reason = error.to_string();
                    for done in waiting {
                        drop(done.send(Err(reason.clone())));
                    }
                }
            }
        }
    }
}

impl SessionStore for IndexedSessionStore {
    async fn load<'a>(&'a self, key: &'a str) -> Result<Option<LoadedSession>, StoreError> {
        self.files.load(key).await
    }

    async fn create<'a>(&'a self, header: &'a SessionHeader) -> Result<(), StoreError> {
        self.files.create(header).await?;
        self.index_text(&header.key, Some(&header.context), &[]).await;
        self.record(&header.key, Some(&header.context), 0).await.map(|_| ())
    }

    async fn append<'a>(
        &'a self,
        key: &'a str,
        entries: &'a [SessionEntry],
        durability: Durability,
    ) -> Result<(), StoreError> {
        self.files.append(key, entries, durability).await?;
        self.index_text(key, None, entries).await;
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

    async fn move_leaf<'a>(&'a self, key: &'a str, line: &'a LeafLine) -> Result<(), StoreError> {
        self.files.move_leaf(key, line).await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        self.files.list().await
    }

    async fn remove<'a>(&'a self, key: &'a str) -> Result<bool, StoreError> {
        let removed = self.files.remove(key).await?;
        if let Some(search) = self.search.clone() {
            let owned_key = key.to_owned();
            tokio::task::spawn_blocking(move || search.forget(&owned_key))
                .await
                .map_err(|error| error.to_string())
                .and_then(|forgotten| forgotten.map_err(|error| error.to_string()))
                .map_err(|reason| StoreError::Io { action: "forget", key: key.to_owned(), reason })?;
        }
        let writer = Arc::clone(&self.index);
        let owned_key = key.to_owned();
        tokio::task::spawn_blocking(move || writer.index.remove(&owned_key))
            .await
            .map_err(|error| error.to_string())
            .and_then(|forgotten| forgotten.map_err(|error| error.to_string()))
            .map_err(|reason| StoreError::Io { action: "forget", key: key.to_owned(), reason })?;
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use squidbot_core::clock::SystemClock;
    use squidbot_types::session::{HeaderTag, MessageRole, SESSION_FORMAT_VERSION};

    use super::*;
    use crate::database::Database;

    fn header(key: &str) -> SessionHeader {
        SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: format!("id-{key}"),
            key: key.to_owned(),
            context: "owner".to_owned(),
            created: "2026-01-01T00:00:00Z".to_owned(),
        }
    }

    fn message(id: &str) -> SessionEntry {
        SessionEntry {
            id: id.to_owned(),
            parent: None,
            timestamp: "2026-01-01T00:00:01Z".to_owned(),
            body: EntryBody::Message {
                role: MessageRole::User,
                content: "hello".to_owned(),
                images: Vec::new(),
                model: None,
                usage: None,
                interrupted: false,
            },
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sessions_are_all_indexed() {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        let index = SqliteSessionIndex::new(database);
        let store = Arc::new(IndexedSessionStore::new(
            JsonlSessionStore::new(directory.path().join("sessions")),
            index.clone(),
            Arc::new(SystemClock),
        ));
        let tasks: Vec<_> = (0..50)
            .map(|number| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let key = format!("cli:user-{number}");
                    store.create(&header(&key)).await.unwrap();
                    store.append(&key, &[message("u1")], Durability::Written).await.unwrap();
                    store.append(&key, &[message("a1"), message("a2")], Durability::Synced).await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        // Every append returned after its update was committed.
        let entries = index.list().unwrap();
        assert_eq!(entries.len(), 50);
        assert!(entries.iter().all(|entry| entry.message_count == 3 && entry.context == "owner"), "{entries:?}");
        // The writer answers a batch, then finds the queue empty and stops: give it that
        // moment (the last answer can arrive before it looks again).
        let mut writing = true;
        for _ in 0..200 {
            writing = store.index.pending.lock().unwrap().writing;
            if !writing {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(!writing, "the writer stops once the queue is empty");
    }

    #[tokio::test]
    async fn a_session_older_than_the_index_gets_its_context_from_the_header() {
        let directory = tempfile::tempdir().unwrap();
        let files = JsonlSessionStore::new(directory.path().join("sessions"));
        files.create(&header("cli:old")).await.unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        let index = SqliteSessionIndex::new(database);
        let store = IndexedSessionStore::new(files, index.clone(), Arc::new(SystemClock));
        store.append("cli:old", &[message("u1")], Durability::Synced).await.unwrap();
        let entry = index.get("cli:old").unwrap().unwrap();
        assert_eq!((entry.context.as_str(), entry.message_count), ("owner", 1));
    }
}

#[cfg(test)]
mod removal_tests {
    use std::time::{Duration, SystemTime};

    use squidbot_core::clock::FixedClock;
    use squidbot_types::session::{HeaderTag, SESSION_FORMAT_VERSION};

    use super::*;
    use crate::database::Database;

    #[tokio::test]
    async fn activity_is_stamped_by_the_clock_and_removal_forgets_the_index_entry() {
        let directory = tempfile::tempdir().unwrap();
        let index = SqliteSessionIndex::new(Database::open(&directory.path().join("squidbot.db")).unwrap());
        let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        let store = IndexedSessionStore::new(
            JsonlSessionStore::new(directory.path().join("sessions")),
            index.clone(),
            Arc::new(clock),
        );
        let header = SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: "id-1".to_owned(),
            key: "cli:gone".to_owned(),
            context: "owner".to_owned(),
            created: "2026-01-01T00:00:00Z".to_owned(),
        };
        store.create(&header).await.unwrap();
        assert_eq!(index.get("cli:gone").unwrap().map(|entry| entry.updated_at), Some(1_700_000_000));

        assert!(SessionStore::remove(&store, "cli:gone").await.unwrap());
        assert!(store.load("cli:gone").await.unwrap().is_none());
        assert!(index.get("cli:gone").unwrap().is_none());
        assert!(!SessionStore::remove(&store, "cli:gone").await.unwrap());
    }
}
