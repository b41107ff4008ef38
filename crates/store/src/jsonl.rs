//! `JsonlSessionStore`: the `SessionStore` port over one append-only JSONL file per
//! session key.

mod contexts;
mod directory_sync;
mod file;
mod parse;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use squidbot_core::store::{Durability, LoadedSession, SessionStore, SessionSummary, StoreError};
use squidbot_core::sync::lock;
use squidbot_types::session::{LeafLine, SessionEntry, SessionHeader};
use tokio::sync::OwnedMutexGuard;

use crate::key::encode_key;
pub(crate) use contexts::{move_context_sessions, remove_context_sessions};
use directory_sync::DirectorySync;

/// Extension of session files.
const EXTENSION: &str = "jsonl";

/// Session trees stored as `<sessions_dir>/<encoded key>.jsonl`, one JSON value a line:
/// the header first, then entries in the order they were appended.
///
/// Writes to one key are serialized within this process; separate processes sharing a
/// directory are not coordinated.
///
/// Only synced appends wait for the disk, on the blocking pool; creating a file and
/// appending without a sync go to the operating system's cache straight from the async
/// task (microseconds, less than handing them to another thread).
#[derive(Debug)]
pub struct JsonlSessionStore {
    /// Directory holding the session files; created on the first `create`.
    sessions_dir: PathBuf,
    /// Per-file locks, so appends to one session never interleave while appends to
    /// different sessions run in parallel.
    locks: KeyLocks,
    /// Files created whose directory entry no sync has covered yet (by file stem).
    unsynced_entries: Arc<Mutex<HashSet<String>>>,
    /// Directory syncs, shared by sessions created together.
    directory_sync: Arc<DirectorySync>,
}

impl JsonlSessionStore {
    /// A store keeping its files in `sessions_dir` (created when the first session is).
    pub fn new(sessions_dir: PathBuf) -> Self {
        Self {
            sessions_dir,
            locks: KeyLocks::default(),
            unsynced_entries: Arc::default(),
            directory_sync: Arc::default(),
        }
    }

    /// The directory holding the session files.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    /// Deletes session `key`: its file and the `<key>.files` directory of its
    /// attachments, if any. False when there was no file.
    pub async fn remove(&self, key: &str) -> Result<bool, StoreError> {
        let file_stem = encode_key(key)?;
        let path = self.path_for(&file_stem);
        let attachments = self.sessions_dir.join(format!("{file_stem}.files"));
        // Holding the lock keeps a concurrent append from recreating half a file.
        let guard = self.locks.acquire(&file_stem).await;
        let owned_key = key.to_owned();
        run_blocking("delete", key, move || {
            let removed = match std::fs::remove_file(&path) {
                Ok(()) => true,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
                Err(error) => return Err(file::io_error("delete", &owned_key, &path, &error)),
            };
            match std::fs::remove_dir_all(&attachments) {
                Ok(()) => {}
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                Err(error) => return Err(file::io_error("delete", &owned_key, &attachments, &error)),
            }
            drop(guard);
            Ok(removed)
        })
        .await
    }

    /// Directory syncs run so far (tests).
    #[cfg(test)]
    fn directory_sync_count(&self) -> u64 {
        self.directory_sync.started()
    }

    /// Appends encoded lines (entries or a leaf line) under the file's lock.
    async fn append_encoded(&self, key: &str, lines: Vec<u8>, durability: Durability) -> Result<(), StoreError> {
        let file_stem = encode_key(key)?;
        let path = self.path_for(&file_stem);
        let guard = self.locks.acquire(&file_stem).await;
        match durability {
            Durability::Written => file::append_lines(&path, key, lines, Durability::Written),
            Durability::Synced => {
                let owned_key = key.to_owned();
                let directory = self.sessions_dir.clone();
                let unsynced_entries = Arc::clone(&self.unsynced_entries);
                let directory_sync = Arc::clone(&self.directory_sync);
                // The guard moves into the blocking task: if this future is dropped
                // mid-write the lock is still held until the write is finished.
                run_blocking("append to", key, move || {
                    file::append_lines(&path, &owned_key, lines, Durability::Synced)?;
                    let new_entry = lock(&unsynced_entries).contains(&file_stem);
                    if new_entry {
                        directory_sync
                            .sync(&directory)
                            .map_err(|error| file::io_error("append to", &owned_key, &directory, &error))?;
                        lock(&unsynced_entries).remove(&file_stem);
                    }
                    drop(guard);
                    Ok(())
                })
                .await
            }
        }
    }

    /// Path of the file holding the session whose encoded key is `file_stem`.
    fn path_for(&self, file_stem: &str) -> PathBuf {
        self.sessions_dir.join(format!("{file_stem}.{EXTENSION}"))
    }
}

/// The file of session `key` in `sessions_dir`.
pub(crate) fn session_path(sessions_dir: &Path, key: &str) -> Result<PathBuf, StoreError> {
    Ok(sessions_dir.join(format!("{}.{EXTENSION}", encode_key(key)?)))
}

/// Every session file in `sessions_dir` with its key.
pub(crate) fn session_files(sessions_dir: &Path) -> std::io::Result<Vec<(String, PathBuf)>> {
    file::session_files(sessions_dir)
}

/// Reads the session file at `path` (`Ok(None)` when it is gone).
pub(crate) fn read_session_file(path: &Path, key: &str) -> Result<Option<LoadedSession>, StoreError> {
    file::read_session(path, key)
}

/// Serializes one line per value, each ending in `\n`.
fn encode_lines<T: serde::Serialize>(values: &[T], key: &str, action: &'static str) -> Result<Vec<u8>, StoreError> {
    let mut buffer = Vec::new();
    for value in values {
        serde_json::to_writer(&mut buffer, value).map_err(|error| StoreError::Io {
            action,
            key: key.to_owned(),
            reason: format!("can't encode a line: {error}"),
        })?;
        buffer.push(b'\n');
    }
    Ok(buffer)
}

/// Runs blocking file work on tokio's blocking pool so async workers never wait on disk.
async fn run_blocking<T, Work>(action: &'static str, key: &str, work: Work) -> Result<T, StoreError>
where
    T: Send + 'static,
    Work: FnOnce() -> Result<T, StoreError> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(|join_error| StoreError::Io {
        action,
        key: key.to_owned(),
        reason: format!("the blocking file task failed: {join_error}"),
    })?
}

impl SessionStore for JsonlSessionStore {
    async fn load(&self, key: &str) -> Result<Option<LoadedSession>, StoreError> {
        let file_stem = encode_key(key)?;
        let path = self.path_for(&file_stem);
        // Holding the lock keeps a concurrent append from showing up as a torn line.
        let guard = self.locks.acquire(&file_stem).await;
        let owned_key = key.to_owned();
        run_blocking("read", key, move || {
            let loaded = file::read_session(&path, &owned_key);
            drop(guard);
            loaded
        })
        .await
    }

    async fn create(&self, header: &SessionHeader) -> Result<(), StoreError> {
        let key = header.key.as_str();
        let file_stem = encode_key(key)?;
        let path = self.path_for(&file_stem);
        let line = encode_lines(std::slice::from_ref(header), key, "create")?;
        let _guard = self.locks.acquire(&file_stem).await;
        file::create_session(&self.sessions_dir, &path, key, &line)?;
        lock(&self.unsynced_entries).insert(file_stem);
        Ok(())
    }

    async fn append(&self, key: &str, entries: &[SessionEntry], durability: Durability) -> Result<(), StoreError> {
        let lines = encode_lines(entries, key, "append to")?;
        self.append_encoded(key, lines, durability).await
    }

    async fn move_leaf(&self, key: &str, line: &LeafLine) -> Result<(), StoreError> {
        let lines = encode_lines(std::slice::from_ref(line), key, "append to")?;
        self.append_encoded(key, lines, Durability::Synced).await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let directory = self.sessions_dir.clone();
        run_blocking("list", file::LIST_KEY, move || file::list_sessions(&directory)).await
    }

    async fn remove(&self, key: &str) -> Result<bool, StoreError> {
        JsonlSessionStore::remove(self, key).await
    }
}

/// One async mutex per session file, created on demand and dropped once idle.
#[derive(Debug, Default)]
struct KeyLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeyLocks {
    /// Waits for exclusive use of the session file `file_stem`.
    async fn acquire(&self, file_stem: &str) -> OwnedMutexGuard<()> {
        let lock = {
            // The map is consistent after any panic (inserts and removals are atomic),
            // so a poisoned lock is safe to keep using.
            let mut locks = lock(&self.locks);
            // A lock only the map refers to has no holder and no waiter: drop it so the
            // map does not grow with every session ever touched.
            locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            Arc::clone(locks.entry(file_stem.to_owned()).or_default())
        };
        lock.lock_owned().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_removed_session_is_gone_with_its_attachments_and_others_stay() {
        let directory = tempfile::tempdir().unwrap();
        let store = JsonlSessionStore::new(directory.path().to_path_buf());
        for key in ["job:abc:1", "cli:local"] {
            let header = SessionHeader {
                kind: squidbot_types::session::HeaderTag::Header,
                version: 1,
                id: format!("id-{key}"),
                key: key.to_owned(),
                context: "owner".into(),
                created: "2026-11-27T00:00:00Z".into(),
            };
            store.create(&header).await.unwrap();
        }
        let attachments = directory.path().join(format!("{}.files", encode_key("job:abc:1").unwrap()));
        std::fs::create_dir_all(&attachments).unwrap();
        std::fs::write(attachments.join("photo.jpg"), b"jpeg").unwrap();
        assert!(store.remove("job:abc:1").await.unwrap());
        assert!(store.load("job:abc:1").await.unwrap().is_none());
        assert!(!attachments.exists());
        assert!(!store.remove("job:abc:1").await.unwrap(), "a second removal finds nothing");
        // A key can't reach outside its own file.
        assert!(!store.remove("../cli:local").await.unwrap());
        assert!(store.remove("").await.is_err());
        assert!(store.load("cli:local").await.unwrap().is_some());
    }

    #[tokio::test]
    async fn idle_locks_are_dropped() {
        let locks = KeyLocks::default();
        let first = locks.acquire("a").await;
        drop(first);
        let second = locks.acquire("b").await;
        let count = locks.locks.lock().unwrap().len();
        assert_eq!(count, 1, "the idle lock for `a` should be gone");
        drop(second);
    }

    #[tokio::test]
    async fn a_held_lock_blocks_the_same_key_only() {
        let locks = Arc::new(KeyLocks::default());
        let held = locks.acquire("a").await;
        let other = locks.acquire("b").await;
        drop(other);
        let waiter = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                drop(locks.acquire("a").await);
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(held);
        waiter.await.unwrap();
    }

    fn header(key: &str) -> SessionHeader {
        SessionHeader {
            kind: squidbot_types::session::HeaderTag::Header,
            version: squidbot_types::session::SESSION_FORMAT_VERSION,
            id: "s1".to_owned(),
            key: key.to_owned(),
            context: "owner".to_owned(),
            created: "2026-01-01T00:00:00Z".to_owned(),
        }
    }

    fn entry(id: &str) -> SessionEntry {
        SessionEntry {
            id: id.to_owned(),
            parent: None,
            timestamp: "2026-01-01T00:00:01Z".to_owned(),
            body: squidbot_types::session::EntryBody::Message {
                role: squidbot_types::session::MessageRole::User,
                content: "hello".to_owned(),
                images: Vec::new(),
                model: None,
                usage: None,
                interrupted: false,
            },
        }
    }

    #[tokio::test]
    async fn a_new_session_is_made_durable_by_its_first_synced_append() {
        let directory = tempfile::tempdir().unwrap();
        let store = JsonlSessionStore::new(directory.path().to_path_buf());
        store.create(&header("cli:local")).await.unwrap();
        let stem = encode_key("cli:local").unwrap();
        let unsynced = |store: &JsonlSessionStore| store.unsynced_entries.lock().unwrap().contains(&stem);
        assert!(unsynced(&store), "creating does not sync the directory");
        store.append("cli:local", &[entry("u1")], Durability::Written).await.unwrap();
        assert!(unsynced(&store), "an unsynced append does not either");
        // Written entries are readable at once, by this store and any other.
        let loaded = JsonlSessionStore::new(directory.path().to_path_buf()).load("cli:local").await.unwrap().unwrap();
        assert_eq!(loaded.entries.len(), 1);
        store.append("cli:local", &[entry("u2")], Durability::Synced).await.unwrap();
        assert!(!unsynced(&store), "the synced append covered the directory entry");
        assert_eq!(store.directory_sync_count(), 1);
        store.append("cli:local", &[entry("u3")], Durability::Synced).await.unwrap();
        assert_eq!(store.directory_sync_count(), 1, "later appends sync the file only");
        let loaded = store.load("cli:local").await.unwrap().unwrap();
        let ids: Vec<&str> = loaded.entries.iter().map(|entry| entry.id.as_str()).collect();
        assert_eq!(ids, ["u1", "u2", "u3"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_created_together_share_directory_syncs() {
        let directory = tempfile::tempdir().unwrap();
        let store = Arc::new(JsonlSessionStore::new(directory.path().to_path_buf()));
        let tasks: Vec<_> = (0..32)
            .map(|index| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    let key = format!("cli:user-{index}");
                    store.create(&header(&key)).await.unwrap();
                    store.append(&key, &[entry("u1")], Durability::Synced).await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert!(store.unsynced_entries.lock().unwrap().is_empty());
        let syncs = store.directory_sync_count();
        assert!((1..=32).contains(&syncs), "{syncs} directory syncs for 32 new sessions");
        assert_eq!(store.list().await.unwrap().len(), 32);
    }

    #[test]
    fn invalid_keys_are_refused_before_touching_disk() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = JsonlSessionStore::new(PathBuf::from("/nonexistent/squidbot-store"));
        let error = runtime.block_on(store.load("")).unwrap_err();
        assert!(matches!(error, StoreError::InvalidKey { .. }), "{error}");
    }
}
