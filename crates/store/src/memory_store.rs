//! `SqliteMemoryStore`: the `MemoryStore` port over the shared SQLite database —
//! rows in `memories`, FTS5 for text, sqlite-vec for vectors, links with cascades.

mod contexts;
mod rows;
mod text_search;
mod vectors;

use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use squidbot_core::memory::{ListFilter, MemoryError, MemoryStats, MemoryStore, MemoryUpdate, Ranked, normalize};
use squidbot_types::memory::{LinkKind, Memory, MemoryLink, NewMemory};

use crate::database::Database;
pub(crate) use contexts::{delete_context_memories, move_context_memories};
use rows::{MEMORY_COLUMNS, ids_json, link_kind, query_memories, tags_json};
use text_search::TermFrequencies;

/// Long-term memories in SQLite. Cheap to clone; all clones share the connection.
#[derive(Debug, Clone)]
pub struct SqliteMemoryStore {
    database: Database,
    terms: Arc<TermFrequencies>,
}

/// Rows a recall's full-text search reads at most (past its rarest word): bounds its
/// latency whatever the query, at the cost of ignoring the most common query words.
const SEARCH_BUDGET: u64 = 5_000;

/// Rows the duplicate check's full-text search reads at most: it runs on every save,
/// and a rewording shares the rare words that keep it within this budget.
const CANDIDATE_BUDGET: u64 = 1_500;

impl SqliteMemoryStore {
    /// A store over `database`.
    pub fn new(database: Database) -> Self {
        Self { database, terms: Arc::default() }
    }

    /// Dimension of the stored vectors, `None` before the first one.
    pub fn vector_dimensions(&self) -> Result<Option<usize>, MemoryError> {
        self.read("read the vector settings of", vectors::dimensions)
    }

    /// Runs `work` on the connection, naming `action` in its error.
    fn read<T>(
        &self,
        action: &'static str,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, MemoryError> {
        self.database.with_connection(|connection| work(connection)).map_err(store_error(action))
    }

    /// Runs `work` in one write transaction, committed only when it succeeds.
    fn write<T>(
        &self,
        action: &'static str,
        work: impl FnOnce(&Connection) -> Result<T, MemoryError>,
    ) -> Result<T, MemoryError> {
        self.database.with_connection(|connection| {
            let transaction =
                connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(store_error(action))?;
            let value = work(&transaction)?;
            transaction.commit().map_err(store_error(action))?;
            Ok(value)
        })
    }
}

/// Inserts one memory with its links and vector inside the caller's transaction.
fn insert_row(
    connection: &Connection,
    memory: &NewMemory,
    embedding: Option<&[f32]>,
    now: i64,
) -> Result<i64, MemoryError> {
    let id = connection
        .prepare_cached(
            "INSERT INTO memories (context, type, content, importance, tags, source, expires_at, \
             created_at, updated_at, access_count, normalized) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, 0, ?9) RETURNING id",
        )
        .and_then(|mut statement| {
            statement.query_row(
                params![
                    memory.context,
                    memory.kind.as_str(),
                    memory.content,
                    f64::from(memory.importance),
                    tags_json(&memory.tags),
                    memory.source,
                    memory.expires_at,
                    now,
                    normalize(&memory.content),
                ],
                |row| row.get::<_, i64>(0),
            )
        })
        .map_err(store_error("save"))?;
    add_links(connection, &memory.context, id, &memory.links)?;
    if let Some(embedding) = embedding {
        vectors::insert(connection, id, &memory.context, embedding).map_err(store_error("save"))?;
    }
    Ok(id)
}

/// Wraps an SQLite error of `action` ("save", "search", …).
fn store_error(action: &'static str) -> impl Fn(rusqlite::Error) -> MemoryError {
    move |error| MemoryError::Store { action, reason: error.to_string() }
}

/// The ids bound as a JSON array in `?1`. Lookups by id write the context test as
/// `+context` so SQLite fetches the few ids by primary key instead of scanning the
/// context's index.
const IDS: &str = "SELECT value FROM json_each(?1)";

/// SQLite's "no limit" for `LIMIT`.
const NO_LIMIT: i64 = -1;

/// Refuses vectors sqlite-vec can't store.
fn check_embedding(embedding: Option<&[f32]>) -> Result<(), MemoryError> {
    match embedding {
        Some([]) => Err(MemoryError::Invalid("the vector is empty".into())),
        Some(_) | None => Ok(()),
    }
}

/// Adds links from `source`; each target must be another memory of `context`.
fn add_links(connection: &Connection, context: &str, source: i64, links: &[MemoryLink]) -> Result<(), MemoryError> {
    for link in links {
        if link.target == source {
            return Err(MemoryError::Invalid(format!("memory {source} would link to itself")));
        }
        let exists = connection
            .prepare_cached("SELECT 1 FROM memories WHERE id = ?1 AND context = ?2")
            .and_then(|mut statement| statement.exists(params![link.target, context]))
            .map_err(store_error("link"))?;
        if !exists {
            return Err(MemoryError::Invalid(format!("the linked memory {} does not exist here", link.target)));
        }
        connection
            .prepare_cached("INSERT OR IGNORE INTO memory_links (source, target, kind) VALUES (?1, ?2, ?3)")
            .and_then(|mut statement| statement.execute(params![source, link.target, link.kind.as_str()]))
            .map_err(store_error("link"))?;
    }
    Ok(())
}

/// Memories in `context` and changes made to them so far (kept by triggers).
pub(super) fn context_counts(connection: &Connection, context: &str) -> rusqlite::Result<(u64, u64)> {
    let counts: Option<(i64, i64)> = connection
        .prepare_cached("SELECT memories, changes FROM memory_contexts WHERE context = ?1")?
        .query_row([context], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    let (memories, changes) = counts.unwrap_or((0, 0));
    Ok((u64::try_from(memories).unwrap_or(0), u64::try_from(changes).unwrap_or(0)))
}

/// The memories of `context` whose normalized text is exactly `normalized`.
fn same_normalized(connection: &Connection, context: &str, normalized: &str) -> rusqlite::Result<Vec<Memory>> {
    query_memories(
        connection,
        &format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.context = ?1 AND m.normalized = ?2"),
        params![context, normalized],
    )
    .map(|mut memories| {
        // Sorted here: an ORDER BY would tempt SQLite into the (context, updated_at)
        // index and a scan of the whole context.
        memories.sort_by(|left, right| right.updated_at.cmp(&left.updated_at).then(right.id.cmp(&left.id)));
        memories
    })
}

impl MemoryStore for SqliteMemoryStore {
    fn insert(&self, memory: &NewMemory, embedding: Option<&[f32]>, now: i64) -> Result<i64, MemoryError> {
        check_embedding(embedding)?;
        self.write("save", |connection| insert_row(connection, memory, embedding, now))
    }

    fn insert_many(&self, memories: &[(NewMemory, Option<Vec<f32>>)], now: i64) -> Result<Vec<i64>, MemoryError> {
        for (_, embedding) in memories {
            check_embedding(embedding.as_deref())?;
        }
        self.write("save", |connection| {
            memories
                .iter()
                .map(|(memory, embedding)| insert_row(connection, memory, embedding.as_deref(), now))
                .collect()
        })
    }

    fn find_same(&self, context: &str, normalized: &str) -> Result<Option<Memory>, MemoryError> {
        self.read("search", |connection| Ok(same_normalized(connection, context, normalized)?.into_iter().next()))
    }

    fn update(
        &self,
        context: &str,
        id: i64,
        update: &MemoryUpdate,
        embedding: Option<&[f32]>,
        now: i64,
    ) -> Result<(), MemoryError> {
        check_embedding(embedding)?;
        self.write("update", |connection| {
            let changed = connection
                .prepare_cached(
                    "UPDATE memories SET content = ?3, importance = ?4, tags = ?5, expires_at = ?6, \
                     updated_at = ?7, normalized = ?8 WHERE id = ?1 AND context = ?2",
                )
                .and_then(|mut statement| {
                    statement.execute(params![
                        id,
                        context,
                        update.content,
                        f64::from(update.importance),
                        tags_json(&update.tags),
                        update.expires_at,
                        now,
                        normalize(&update.content),
                    ])
                })
                .map_err(store_error("update"))?;
            if changed == 0 {
                return Err(MemoryError::NotFound { id });
            }
            add_links(connection, context, id, &update.links)?;
            if let Some(embedding) = embedding {
                vectors::replace(connection, id, context, embedding).map_err(store_error("update"))?;
            }
            Ok(())
        })
    }

    fn candidates(&self, context: &str, content: &str, limit: usize) -> Result<Vec<Memory>, MemoryError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        self.read("search", |connection| {
            let mut found = same_normalized(connection, context, &normalize(content))?;
            found.truncate(limit);
            let wanted = limit - found.len();
            if wanted == 0 {
                return Ok(found);
            }
            // Ask for more: the exact matches found above are among the text matches too.
            let words = self.terms.select(connection, content, CANDIDATE_BUDGET)?;
            let ranked = text_search::search(connection, context, &words, wanted + found.len())?;
            let ids: Vec<i64> = ranked
                .iter()
                .map(|hit| hit.id)
                .filter(|id| !found.iter().any(|memory| memory.id == *id))
                .take(wanted)
                .collect();
            let mut matches = query_memories(
                connection,
                &format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({IDS})"),
                [ids_json(&ids)],
            )?;
            matches.sort_by_key(|memory| ids.iter().position(|id| *id == memory.id));
            found.extend(matches);
            Ok(found)
        })
    }

    fn search_text(&self, context: &str, query: &str, limit: usize) -> Result<Vec<Ranked>, MemoryError> {
        self.read("search", |connection| {
            let words = self.terms.select(connection, query, SEARCH_BUDGET)?;
            text_search::search(connection, context, &words, limit)
        })
    }

    fn search_vector(&self, context: &str, embedding: &[f32], limit: usize) -> Result<Vec<Ranked>, MemoryError> {
        self.read("search", |connection| vectors::nearest(connection, context, embedding, limit))
    }

    fn links(&self, context: &str, ids: &[i64]) -> Result<Vec<(i64, LinkKind, i64)>, MemoryError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read("read links of", |connection| {
            // Two indexed halves (links from the ids, links to them) and the joins in
            // written order: with OR, SQLite would scan every memory of the context.
            let half = |side: &str| {
                format!(
                    "SELECT l.source, l.kind, l.target FROM memory_links l \
                     CROSS JOIN memories s ON s.id = l.source CROSS JOIN memories t ON t.id = l.target \
                     WHERE l.{side} IN (SELECT value FROM json_each(?1)) AND s.context = ?2 AND t.context = ?2"
                )
            };
            let mut statement =
                connection.prepare_cached(&format!("{} UNION {} ORDER BY 1, 2, 3", half("source"), half("target")))?;
            let rows = statement
                .query_map(params![ids_json(ids), context], |row| Ok((row.get(0)?, link_kind(row, 1)?, row.get(2)?)))?;
            rows.collect()
        })
    }

    fn get_many(&self, context: &str, ids: &[i64], now: i64) -> Result<Vec<Memory>, MemoryError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        self.read("read", |connection| {
            query_memories(
                connection,
                &format!(
                    "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.id IN ({IDS}) \
                     AND +m.context = ?2 AND (m.expires_at IS NULL OR m.expires_at > ?3) ORDER BY m.id"
                ),
                params![ids_json(ids), context, now],
            )
        })
    }

    fn touch(&self, context: &str, ids: &[i64], now: i64) -> Result<(), MemoryError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.read("touch", |connection| {
            connection
                .prepare_cached(&format!(
                    "UPDATE memories SET accessed_at = ?3, access_count = access_count + 1 \
                     WHERE id IN ({IDS}) AND +context = ?2"
                ))?
                .execute(params![ids_json(ids), context, now])?;
            Ok(())
        })
    }

    fn delete(&self, context: &str, id: i64) -> Result<bool, MemoryError> {
        // Links go by cascade, the vector and full-text rows by triggers.
        self.write("delete", |connection| {
            connection
                .prepare_cached("DELETE FROM memories WHERE id = ?1 AND context = ?2")
                .and_then(|mut statement| statement.execute(params![id, context]))
                .map(|deleted| deleted > 0)
                .map_err(store_error("delete"))
        })
    }

    fn list(&self, context: &str, filter: &ListFilter, now: i64) -> Result<Vec<Memory>, MemoryError> {
        let types: Vec<&str> = filter.types.iter().map(|kind| kind.as_str()).collect();
        let types = serde_json::Value::from(types).to_string();
        // A zero limit (the default filter) lists everything.
        let limit = if filter.limit == 0 { NO_LIMIT } else { i64::try_from(filter.limit).unwrap_or(NO_LIMIT) };
        let offset = i64::try_from(filter.offset).unwrap_or(i64::MAX);
        self.read("list", |connection| {
            query_memories(
                connection,
                &format!(
                    "SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.context = ?1 \
                     AND (m.expires_at IS NULL OR m.expires_at > ?2) \
                     AND (?3 = '[]' OR m.type IN (SELECT value FROM json_each(?3))) \
                     ORDER BY m.updated_at DESC, m.id DESC LIMIT ?4 OFFSET ?5"
                ),
                params![context, now, types, limit, offset],
            )
        })
    }

    fn expire(&self, now: i64) -> Result<usize, MemoryError> {
        self.write("expire", |connection| {
            connection
                .prepare_cached("DELETE FROM memories WHERE expires_at IS NOT NULL AND expires_at <= ?1")
                .and_then(|mut statement| statement.execute([now]))
                .map_err(store_error("expire"))
        })
    }

    fn fingerprint(&self, context: &str) -> Result<String, MemoryError> {
        self.read("fingerprint", |connection| {
            let (count, changes) = context_counts(connection, context)?;
            let latest: Option<i64> = connection
                .prepare_cached("SELECT max(updated_at) FROM memories WHERE context = ?1")?
                .query_row([context], |row| row.get(0))?;
            Ok(format!("{count}-{}-{changes}", latest.unwrap_or(0)))
        })
    }

    fn stats(&self, context: &str) -> Result<MemoryStats, MemoryError> {
        self.read("count", |connection| {
            let (memories, _) = context_counts(connection, context)?;
            let with_vectors = vectors::count(connection, context)?;
            Ok(MemoryStats { memories, with_vectors })
        })
    }

    fn missing_vectors(&self, limit: usize) -> Result<Vec<(i64, String)>, MemoryError> {
        self.read("list vectors of", |connection| vectors::missing(connection, limit))
    }

    fn set_vector(&self, id: i64, embedding: &[f32]) -> Result<(), MemoryError> {
        check_embedding(Some(embedding))?;
        self.write("store vectors of", |connection| {
            let context = vectors::context_of(connection, id).map_err(store_error("store vectors of"))?;
            let Some(context) = context else { return Err(MemoryError::NotFound { id }) };
            vectors::replace(connection, id, &context, embedding).map_err(store_error("store vectors of"))
        })
    }
}
