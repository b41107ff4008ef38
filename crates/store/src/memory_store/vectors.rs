//! Memory vectors in sqlite-vec's `vec0` table: created on the first vector, rebuilt
//! when the dimension changes, searched by cosine distance within a context.

use rusqlite::{Connection, OptionalExtension, params};
use squidbot_core::memory::Ranked;

use crate::database::{read_meta, write_meta};

/// `meta` key holding the dimension of the vectors in `memory_vectors`.
pub(crate) const DIMENSIONS_KEY: &str = "vector_dimensions";

/// Largest `k` sqlite-vec accepts in a KNN query.
const MAX_NEIGHBOURS: usize = 4096;

/// Dimension of the stored vectors, `None` before the first vector.
pub(super) fn dimensions(connection: &Connection) -> rusqlite::Result<Option<usize>> {
    Ok(read_meta(connection, DIMENSIONS_KEY)?.and_then(|value| value.parse().ok()))
}

/// Makes sure `memory_vectors` holds vectors of `wanted` dimensions, creating it or —
/// when the embedding model changed — dropping every stored vector and recreating it.
/// Run inside the caller's transaction.
fn ensure_table(connection: &Connection, wanted: usize) -> rusqlite::Result<()> {
    match dimensions(connection)? {
        Some(current) if current == wanted => return Ok(()),
        Some(current) => {
            tracing::warn!(
                old_dimensions = current,
                new_dimensions = wanted,
                "the embedding dimension changed; dropping every stored vector (backfill re-embeds the memories)"
            );
            connection.execute_batch(
                "DROP TRIGGER IF EXISTS memory_vectors_after_delete; DROP TABLE IF EXISTS memory_vectors;",
            )?;
        }
        None => {}
    }
    connection.execute_batch(&format!(
        "CREATE VIRTUAL TABLE memory_vectors USING vec0 (
             memory_id INTEGER PRIMARY KEY,
             context TEXT PARTITION KEY,
             embedding FLOAT[{wanted}] distance_metric=cosine,
             embedding_bits BIT[{wanted}]
         );
         CREATE TRIGGER memory_vectors_after_delete AFTER DELETE ON memories BEGIN
             DELETE FROM memory_vectors WHERE memory_id = old.id;
         END;"
    ))?;
    write_meta(connection, DIMENSIONS_KEY, &wanted.to_string())
}

/// A vector as sqlite-vec reads it: little-endian `f32`s.
fn blob(embedding: &[f32]) -> Vec<u8> {
    embedding.iter().flat_map(|value| value.to_le_bytes()).collect()
}

/// Stores (or replaces) the vector of memory `id` of `context`. Run inside a transaction.
pub(super) fn store(connection: &Connection, id: i64, context: &str, embedding: &[f32]) -> rusqlite::Result<()> {
    ensure_table(connection, embedding.len())?;
    connection.prepare_cached("DELETE FROM memory_vectors WHERE memory_id = ?1")?.execute([id])?;
    connection
        .prepare_cached(
            "INSERT INTO memory_vectors (memory_id, context, embedding, embedding_bits) \
             VALUES (?1, ?2, ?3, vec_quantize_binary(?3))",
        )?
        .execute(params![id, context, blob(embedding)])?;
    Ok(())
}

/// The `limit` vectors of `context` nearest to `embedding`, nearest first, with their
/// cosine distance; nothing when no vector of this dimension is stored.
pub(super) fn nearest(
    connection: &Connection,
    context: &str,
    embedding: &[f32],
    limit: usize,
) -> rusqlite::Result<Vec<Ranked>> {
    if limit == 0 || dimensions(connection)? != Some(embedding.len()) {
        return Ok(Vec::new());
    }
    let neighbours = i64::try_from(limit.min(MAX_NEIGHBOURS)).unwrap_or(0);
    let variant = std::env::var("SQUIDBOT_VARIANT").unwrap_or_default();
    let sql = if variant == "coarse_only" {
        "SELECT memory_id, distance FROM memory_vectors \
         WHERE embedding_bits MATCH vec_quantize_binary(?1) AND k = ?2 * ?4 AND context = ?3 AND ?4 > 0"
    } else if variant == "exact" {
        "SELECT memory_id, distance FROM memory_vectors \
         WHERE embedding MATCH ?1 AND k = ?2 AND context = ?3 AND ?4 > 0"
    } else {
        "SELECT memory_id, vec_distance_cosine(embedding, ?1) FROM memory_vectors \
         WHERE embedding_bits MATCH vec_quantize_binary(?1) AND k = ?2 * ?4 AND context = ?3"
    };
    let mut statement = connection.prepare_cached(sql)?;
    let oversample: i64 = std::env::var("SQUIDBOT_OVERSAMPLE").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let rows = statement.query_map(params![blob(embedding), neighbours, context, oversample], |row| {
        Ok(Ranked { id: row.get(0)?, score: row.get(1)? })
    })?;
    let mut ranked = rows.collect::<rusqlite::Result<Vec<_>>>()?;
    ranked.sort_by(|left, right| left.score.total_cmp(&right.score).then(left.id.cmp(&right.id)));
    ranked.truncate(limit);
    Ok(ranked)
}

/// Vectors stored for `context`.
pub(super) fn count(connection: &Connection, context: &str) -> rusqlite::Result<u64> {
    if dimensions(connection)?.is_none() {
        return Ok(0);
    }
    let count: i64 = connection
        .prepare_cached("SELECT count(*) FROM memory_vectors WHERE context = ?1")?
        .query_row([context], |row| row.get(0))?;
    Ok(u64::try_from(count).unwrap_or(0))
}

/// Up to `limit` memories (any context) without a vector, oldest first, as (id, content).
pub(super) fn missing(connection: &Connection, limit: usize) -> rusqlite::Result<Vec<(i64, String)>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let sql = if dimensions(connection)?.is_some() {
        "SELECT m.id, m.content FROM memories m \
         WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v WHERE v.memory_id = m.id) ORDER BY m.id LIMIT ?1"
    } else {
        "SELECT m.id, m.content FROM memories m ORDER BY m.id LIMIT ?1"
    };
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map([limit], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// The context of memory `id`, `None` when there is no such memory.
pub(super) fn context_of(connection: &Connection, id: i64) -> rusqlite::Result<Option<String>> {
    connection.prepare_cached("SELECT context FROM memories WHERE id = ?1")?.query_row([id], |row| row.get(0)).optional()
}
