//! `JsonlSessionStore`: the `SessionStore` port over one append-only JSONL file per
//! session key.

mod file;
mod parse;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use squidbot_core::store::{LoadedSession, SessionStore, SessionSummary, StoreError};
use squidbot_types::session::{SessionEntry, SessionHeader};
use tokio::sync::OwnedMutexGuard;

use crate::key::encode_key;

/// Extension of session files.
const EXTENSION: &str = "jsonl";

/// Session trees stored as `<sessions_dir>/<encoded key>.jsonl`, one JSON value a line:
/// the header first, then entries in the order they were appended.
///
/// Writes to one key are serialized within this process; separate processes sharing a
/// directory are not coordinated.
#[derive(Debug)]
pub struct JsonlSessionStore {
    /// Directory holding the session files; created on the first `create`.
    sessions_dir: PathBuf,
    /// Per-file locks, so appends to one session never interleave while appends to
    /// different sessions run in parallel.
    locks: KeyLocks,
}

impl JsonlSessionStore {
    /// A store keeping its files in `sessions_dir` (created when the first session is).
    pub fn new(sessions_dir: PathBuf) -> Self {
        Self { sessions_dir, locks: KeyLocks::default() }
    }

    /// The directory holding the session files.
    pub fn sessions_dir(&self) -> &Path {
        &self.sessions_dir
    }

    /// Path of the file holding the session whose encoded key is `file_stem`.
    fn path_for(&self, file_stem: &str) -> PathBuf {
        self.sessions_dir.join(format!("{file_stem}.{EXTENSION}"))
    }
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
        let directory = self.sessions_dir.clone();
        let guard = self.locks.acquire(&file_stem).await;
        let owned_key = key.to_owned();
        run_blocking("create", key, move || {
            let created = file::create_session(&directory, &path, &owned_key, &line);
            drop(guard);
            created
        })
        .await
    }

    async fn append(&self, key: &str, entries: &[SessionEntry]) -> Result<(), StoreError> {
        let file_stem = encode_key(key)?;
        let path = self.path_for(&file_stem);
        let lines = encode_lines(entries, key, "append to")?;
        // The guard moves into the blocking task: if this future is dropped mid-write
        // the lock is still held until the write is finished.
        let guard = self.locks.acquire(&file_stem).await;
        let owned_key = key.to_owned();
        run_blocking("append to", key, move || {
            let appended = file::append_lines(&path, &owned_key, lines);
            drop(guard);
            appended
        })
        .await
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let directory = self.sessions_dir.clone();
        run_blocking("list", file::LIST_KEY, move || file::list_sessions(&directory)).await
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
            let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
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

    #[test]
    fn invalid_keys_are_refused_before_touching_disk() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let store = JsonlSessionStore::new(PathBuf::from("/nonexistent/squidbot-store"));
        let error = runtime.block_on(store.load("")).unwrap_err();
        assert!(matches!(error, StoreError::InvalidKey { .. }), "{error}");
    }
}
