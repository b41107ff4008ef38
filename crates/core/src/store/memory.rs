//! A session store held in memory: for tests and benchmarks, never for real data.

use std::collections::BTreeMap;
use std::sync::Mutex;

use squidbot_types::session::{EntryBody, LeafLine, SessionEntry, SessionHeader};

use super::{Durability, LoadedSession, SessionStore, SessionSummary, StoreError};

/// Sessions kept in a map.
#[derive(Debug, Default)]
pub struct MemorySessionStore {
    sessions: Mutex<BTreeMap<String, Stored>>,
    /// Each append's entry ids and durability, in order, for tests of when a turn syncs.
    appends: Mutex<Vec<(Vec<String>, Durability)>>,
}

/// A session's header, its entries and the leaf line written after the last of them.
type Stored = (SessionHeader, Vec<SessionEntry>, Option<LeafLine>);

impl MemorySessionStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every append so far: the ids of its entries and the durability asked for.
    pub fn appends(&self) -> Vec<(Vec<String>, Durability)> {
        self.appends.lock().map(|appends| appends.clone()).unwrap_or_default()
    }

    fn poisoned(key: &str) -> StoreError {
        StoreError::Io { action: "lock", key: key.to_owned(), reason: "the store lock is poisoned".into() }
    }
}

impl SessionStore for MemorySessionStore {
    async fn load<'a>(&'a self, key: &'a str) -> Result<Option<LoadedSession>, StoreError> {
        let sessions = self.sessions.lock().map_err(|_| Self::poisoned(key))?;
        Ok(sessions.get(key).map(|(header, entries, moved_leaf)| LoadedSession {
            header: header.clone(),
            entries: entries.clone(),
            moved_leaf: moved_leaf.clone(),
            warnings: Vec::new(),
        }))
    }

    async fn create<'a>(&'a self, header: &'a SessionHeader) -> Result<(), StoreError> {
        let mut sessions = self.sessions.lock().map_err(|_| Self::poisoned(&header.key))?;
        if sessions.contains_key(&header.key) {
            return Err(StoreError::AlreadyExists { key: header.key.clone() });
        }
        sessions.insert(header.key.clone(), (header.clone(), Vec::new(), None));
        Ok(())
    }

    async fn append<'a>(
        &'a self,
        key: &'a str,
        entries: &'a [SessionEntry],
        durability: Durability,
    ) -> Result<(), StoreError> {
        let mut sessions = self.sessions.lock().map_err(|_| Self::poisoned(key))?;
        let (_, stored, moved_leaf) =
            sessions.get_mut(key).ok_or_else(|| StoreError::NotFound { key: key.to_owned() })?;
        stored.extend_from_slice(entries);
        if !entries.is_empty() {
            *moved_leaf = None;
        }
        let ids = entries.iter().map(|entry| entry.id.clone()).collect();
        self.appends.lock().map_err(|_| Self::poisoned(key))?.push((ids, durability));
        Ok(())
    }

    async fn move_leaf<'a>(&'a self, key: &'a str, line: &'a LeafLine) -> Result<(), StoreError> {
        let mut sessions = self.sessions.lock().map_err(|_| Self::poisoned(key))?;
        let (_, _, moved_leaf) = sessions.get_mut(key).ok_or_else(|| StoreError::NotFound { key: key.to_owned() })?;
        *moved_leaf = Some(line.clone());
        Ok(())
    }

    async fn list(&self) -> Result<Vec<SessionSummary>, StoreError> {
        let sessions = self.sessions.lock().map_err(|_| Self::poisoned("*"))?;
        Ok(sessions
            .iter()
            .map(|(key, (header, entries, _))| SessionSummary {
                key: key.clone(),
                context: header.context.clone(),
                created: header.created.clone(),
                updated: entries.last().map_or_else(|| header.created.clone(), |entry| entry.timestamp.clone()),
                entry_count: entries.len(),
                message_count: entries.iter().filter(|entry| matches!(entry.body, EntryBody::Message { .. })).count(),
                preview: String::new(),
            })
            .collect())
    }

    async fn remove<'a>(&'a self, key: &'a str) -> Result<bool, StoreError> {
        let mut sessions = self.sessions.lock().map_err(|_| Self::poisoned(key))?;
        Ok(sessions.remove(key).is_some())
    }
}
