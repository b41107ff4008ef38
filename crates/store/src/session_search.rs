//! `SessionSearchIndex`: full-text search over the JSONL transcripts in SQLite FTS5,
//! core's `SessionSearch` port. Entries are added as they are appended
//! ([`crate::IndexedSessionStore`]); before every search the index catches up with files
//! that changed size since they were indexed (another process wrote, a leaf line, a
//! session from before the index) and forgets deleted ones, so it never needs to be
//! right, only to be fast. `reindex` rebuilds it from the files.

use std::path::{Path, PathBuf};

use rusqlite::{OptionalExtension, TransactionBehavior, params};
use squidbot_core::store::search::{SearchError, SearchHit, SearchScope, SessionSearch};
use squidbot_types::session::{EntryBody, SessionEntry};

use crate::database::{Database, DatabaseError};
use crate::jsonl;

/// Largest number of hits one search returns.
pub const MAX_SEARCH_HITS: usize = 200;

/// The transcripts' full-text index in the shared database. Calls block.
#[derive(Debug, Clone)]
pub struct SessionSearchIndex {
    database: Database,
    sessions_dir: PathBuf,
}

/// What bringing the index in step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Session files read again.
    pub indexed: usize,
    /// Sessions whose file is gone, dropped from the index.
    pub forgotten: usize,
}

impl SessionSearchIndex {
    /// The index in `database` of the sessions in `sessions_dir`.
    pub fn new(database: Database, sessions_dir: PathBuf) -> Self {
        Self { database, sessions_dir }
    }

    /// Adds freshly appended `entries` of session `key` (in `context`, or the context the
    /// index knows for it). A session the index has not read yet is left for the next
    /// [`Self::sync`], which reads the whole file.
    pub fn add(&self, key: &str, context: Option<&str>, entries: &[SessionEntry]) -> Result<(), DatabaseError> {
        let action = "index session text";
        let size = jsonl::session_path(&self.sessions_dir, key).ok().and_then(|path| file_size(&path));
        self.database.with_connection(|connection| {
            let transaction = connection
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(DatabaseError::query(action))?;
            let known: Option<String> = transaction
                .prepare_cached("SELECT context FROM session_text_files WHERE key = ?1")
                .and_then(|mut statement| statement.query_row([key], |row| row.get(0)).optional())
                .map_err(DatabaseError::query(action))?;
            let context = match (known, context) {
                (Some(known), _) => known,
                (None, Some(context)) => context.to_owned(),
                (None, None) => return Ok(()),
            };
            insert_entries(&transaction, key, &context, entries).map_err(DatabaseError::query(action))?;
            if let Some(size) = size {
                transaction
                    .prepare_cached(
                        "INSERT INTO session_text_files (key, context, size) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (key) DO UPDATE SET size = excluded.size",
                    )
                    .and_then(|mut statement| statement.execute(params![key, context, size]))
                    .map_err(DatabaseError::query(action))?;
            }
            transaction.commit().map_err(DatabaseError::query(action))
        })
    }

    /// Reads again every session file whose size differs from the one indexed, and drops
    /// the sessions whose file is gone.
    pub fn sync(&self) -> Result<SyncReport, DatabaseError> {
        let action = "bring the session index in step";
        let files = jsonl::session_files(&self.sessions_dir)
            .map_err(|error| DatabaseError::Query { action, reason: error.to_string() })?;
        let indexed: std::collections::HashMap<String, i64> = self.database.with_connection(|connection| {
            connection
                .prepare("SELECT key, size FROM session_text_files")
                .and_then(|mut statement| {
                    statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?.collect::<Result<_, _>>()
                })
                .map_err(DatabaseError::query(action))
        })?;
        let mut report = SyncReport::default();
        let present: std::collections::HashSet<&str> = files.iter().map(|(key, _)| key.as_str()).collect();
        for key in indexed.keys().filter(|key| !present.contains(key.as_str())) {
            self.forget(key)?;
            report.forgotten += 1;
        }
        for (key, path) in &files {
            let Some(size) = file_size(path) else { continue };
            if indexed.get(key) == Some(&size) {
                continue;
            }
            let loaded = match jsonl::read_session_file(path, key) {
                Ok(Some(loaded)) => loaded,
                Ok(None) => continue,
                Err(error) => {
                    tracing::warn!(session = %key, %error, "can't index an unreadable session file; skipping it");
                    continue;
                }
            };
            self.database.with_connection(|connection| {
                let transaction = connection
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(DatabaseError::query(action))?;
                insert_entries(&transaction, key, &loaded.header.context, &loaded.entries)
                    .map_err(DatabaseError::query(action))?;
                transaction
                    .execute(
                        "INSERT INTO session_text_files (key, context, size) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (key) DO UPDATE SET context = excluded.context, size = excluded.size",
                        params![key, loaded.header.context, size],
                    )
                    .map_err(DatabaseError::query(action))?;
                transaction.commit().map_err(DatabaseError::query(action))
            })?;
            report.indexed += 1;
        }
        Ok(report)
    }

    /// Forgets everything and reads every session file again.
    pub fn reindex(&self) -> Result<SyncReport, DatabaseError> {
        let action = "clear the session index";
        self.database.with_connection(|connection| {
            connection
                .execute_batch("DELETE FROM session_texts; DELETE FROM session_text_files;")
                .map_err(DatabaseError::query(action))
        })?;
        self.sync()
    }

    /// Drops session `key` from the index.
    pub fn forget(&self, key: &str) -> Result<(), DatabaseError> {
        let action = "forget session text";
        self.database.with_connection(|connection| {
            let transaction = connection.transaction().map_err(DatabaseError::query(action))?;
            transaction
                .execute("DELETE FROM session_texts WHERE key = ?1", [key])
                .map_err(DatabaseError::query(action))?;
            transaction
                .execute("DELETE FROM session_text_files WHERE key = ?1", [key])
                .map_err(DatabaseError::query(action))?;
            transaction.commit().map_err(DatabaseError::query(action))
        })
    }

    /// Up to `limit` entries matching every word of `query` in `scope`, best first,
    /// without catching up first (see [`SessionSearch::search`] for that).
    pub fn find(&self, query: &str, scope: SearchScope<'_>, limit: usize) -> Result<Vec<SearchHit>, SearchError> {
        let Some(expression) = match_expression(query) else { return Err(SearchError::EmptyQuery) };
        let limit = i64::try_from(limit.clamp(1, MAX_SEARCH_HITS)).unwrap_or(20);
        let context = match scope {
            SearchScope::Everything => None,
            SearchScope::Context(context) => Some(context),
        };
        self.database.with_connection(|connection| {
            connection
                .prepare_cached(
                    "SELECT t.key, t.context, t.entry_id, t.timestamp, t.kind, \
                     snippet(session_texts_fts, 0, '**', '**', '…', 16) \
                     FROM session_texts_fts JOIN session_texts t ON t.id = session_texts_fts.rowid \
                     WHERE session_texts_fts MATCH ?1 AND (?2 IS NULL OR t.context = ?2) \
                     ORDER BY bm25(session_texts_fts), t.timestamp DESC LIMIT ?3",
                )
                .and_then(|mut statement| {
                    statement
                        .query_map(params![expression, context, limit], |row| {
                            Ok(SearchHit {
                                key: row.get(0)?,
                                context: row.get(1)?,
                                entry_id: row.get(2)?,
                                timestamp: row.get(3)?,
                                kind: row.get(4)?,
                                snippet: row.get(5)?,
                            })
                        })?
                        .collect()
                })
                .map_err(|error| SearchError::Index(error.to_string()))
        })
    }
}

impl SessionSearch for SessionSearchIndex {
    async fn search<'a>(
        &'a self,
        query: &'a str,
        scope: SearchScope<'a>,
        limit: usize,
    ) -> Result<Vec<SearchHit>, SearchError> {
        let index = self.clone();
        let query = query.to_owned();
        let context = match scope {
            SearchScope::Everything => None,
            SearchScope::Context(context) => Some(context.to_owned()),
        };
        tokio::task::spawn_blocking(move || {
            index.sync().map_err(|error| SearchError::Index(error.to_string()))?;
            let scope = context.as_deref().map_or(SearchScope::Everything, SearchScope::Context);
            index.find(&query, scope, limit)
        })
        .await
        .map_err(|error| SearchError::Index(format!("the search task failed: {error}")))?
    }
}

/// Every word of `query` as a quoted FTS5 term (so `"`, `-`, `*` or `OR` typed by
/// someone are words, never syntax), all required; `None` without a word.
fn match_expression(query: &str) -> Option<String> {
    let terms: Vec<String> =
        query.split_whitespace().map(|word| format!("\"{}\"", word.replace('"', "\"\""))).collect();
    (!terms.is_empty()).then(|| terms.join(" "))
}

/// The searchable text of an entry (`None`: nothing worth finding).
fn text_of(body: &EntryBody) -> Option<String> {
    match body {
        EntryBody::Message { content, .. } => Some(content.clone()),
        EntryBody::ToolCall { name, arguments, .. } => Some(format!("{name} {arguments}")),
        EntryBody::ToolResult { content, .. } => Some(content.clone()),
        EntryBody::Compaction { summary, .. } => Some(summary.clone()),
        EntryBody::Delegate { task, result, .. } => Some(format!("{task}\n{result}")),
        EntryBody::ModelChange { .. } => None,
    }
    .filter(|text| !text.trim().is_empty())
}

fn insert_entries(
    transaction: &rusqlite::Transaction<'_>,
    key: &str,
    context: &str,
    entries: &[SessionEntry],
) -> rusqlite::Result<()> {
    let mut statement = transaction.prepare_cached(
        "INSERT OR IGNORE INTO session_texts (key, context, entry_id, timestamp, kind, text) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for entry in entries {
        if let Some(text) = text_of(&entry.body) {
            statement.execute(params![key, context, entry.id, entry.timestamp, entry.body.type_name(), text])?;
        }
    }
    Ok(())
}

fn file_size(path: &Path) -> Option<i64> {
    std::fs::metadata(path).ok().and_then(|metadata| i64::try_from(metadata.len()).ok())
}

#[cfg(test)]
mod tests;
