//! Memory vectors in sqlite-vec's `vec0` table: created on the first vector, rebuilt
//! when the dimension changes, searched by cosine distance within a context.
//!
//! Each vector is stored twice: as `f32`s (`embedding`) and as one sign bit per
//! dimension (`embedding_bits`). sqlite-vec compares `f32` vectors with scalar code
//! (its SIMD paths are not compiled by the crate), ~0.55 µs per 384-dimension vector:
//! contexts of up to [`EXACT_SEARCH_LIMIT`] memories are searched exactly, but 100,000
//! would take 55 ms. Larger contexts scan the bits instead (Hamming distance, 32 times
//! less data) for `OVERSAMPLE` candidates per result and rank those by exact cosine
//! distance. Trade-off: that search misses true neighbours whose sign pattern happens
//! to be far from the query's (the benchmark prints how many), and vectors take 1/32
//! more space. Dimensions not divisible by 8 have no bit column and are always searched
//! exactly.

use rusqlite::{Connection, OptionalExtension, params};
use squidbot_core::memory::Ranked;

use crate::database::{read_meta, write_meta};

/// `meta` key holding the dimension of the vectors in `memory_vectors`.
pub(crate) const DIMENSIONS_KEY: &str = "vector_dimensions";

/// Largest `k` sqlite-vec accepts in a KNN query.
const MAX_NEIGHBOURS: usize = 4096;

/// Candidates read from the bit vectors per result wanted. sqlite-vec 0.1.9 selects
/// the nearest `k` of each 1,024-vector chunk by repeated minimum search, `k × 1024`
/// steps per chunk, so over 100,000 vectors each extra 50 candidates (re-ranked by
/// cosine) add ~7 ms to a search: measured at 100,000 memories, 1× gives 12 ms hybrid
/// recall p50 and finds 51 % of the true 10 nearest, 2× 19 ms / 62 %, 4× 34 ms / 73 %.
const OVERSAMPLE: usize = 1;

/// Contexts with at most this many memories are searched exactly: ~0.55 µs a vector,
/// so ≤ 11 ms.
const EXACT_SEARCH_LIMIT: u64 = 20_000;

/// Dimension of the stored vectors, `None` before the first vector.
pub(super) fn dimensions(connection: &Connection) -> rusqlite::Result<Option<usize>> {
    Ok(read_meta(connection, DIMENSIONS_KEY)?.and_then(|value| value.parse().ok()))
}

/// Whether vectors of `dimensions` get a bit column (sqlite-vec needs whole bytes).
fn has_bits(dimensions: usize) -> bool {
    dimensions.is_multiple_of(8)
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
    let bits = if has_bits(wanted) { format!(", embedding_bits BIT[{wanted}]") } else { String::new() };
    connection.execute_batch(&format!(
        "CREATE VIRTUAL TABLE memory_vectors USING vec0 (
             memory_id INTEGER PRIMARY KEY,
             context TEXT PARTITION KEY,
             embedding FLOAT[{wanted}] distance_metric=cosine{bits}
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

/// Stores the vector of a new memory `id` of `context`. Run inside a transaction.
pub(super) fn insert(connection: &Connection, id: i64, context: &str, embedding: &[f32]) -> rusqlite::Result<()> {
    ensure_table(connection, embedding.len())?;
    let sql = if has_bits(embedding.len()) {
        "INSERT INTO memory_vectors (memory_id, context, embedding, embedding_bits) \
         VALUES (?1, ?2, ?3, vec_quantize_binary(?3))"
    } else {
        "INSERT INTO memory_vectors (memory_id, context, embedding) VALUES (?1, ?2, ?3)"
    };
    connection.prepare_cached(sql)?.execute(params![id, context, blob(embedding)])?;
    Ok(())
}

/// Stores or replaces the vector of memory `id` of `context`. Run inside a transaction.
pub(super) fn replace(connection: &Connection, id: i64, context: &str, embedding: &[f32]) -> rusqlite::Result<()> {
    if dimensions(connection)?.is_some() {
        connection.prepare_cached("DELETE FROM memory_vectors WHERE memory_id = ?1")?.execute([id])?;
    }
    insert(connection, id, context, embedding)
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
    let (memories, _) = super::context_counts(connection, context)?;
    let strategy =
        if has_bits(embedding.len()) && memories > EXACT_SEARCH_LIMIT { Search::Bits } else { Search::Exact };
    search(connection, context, embedding, limit, strategy)
}

/// How [`nearest`] finds neighbours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Search {
    /// Cosine distance to every vector of the context.
    Exact,
    /// Hamming distance of the sign bits, then cosine distance of the candidates.
    Bits,
}

fn search(
    connection: &Connection,
    context: &str,
    embedding: &[f32],
    limit: usize,
    strategy: Search,
) -> rusqlite::Result<Vec<Ranked>> {
    let (sql, candidates) = match strategy {
        Search::Exact => (
            "SELECT memory_id, distance FROM memory_vectors WHERE embedding MATCH ?1 AND k = ?2 AND context = ?3",
            limit,
        ),
        Search::Bits => (
            "SELECT memory_id, vec_distance_cosine(embedding, ?1) FROM memory_vectors \
             WHERE embedding_bits MATCH vec_quantize_binary(?1) AND k = ?2 AND context = ?3",
            limit.saturating_mul(OVERSAMPLE),
        ),
    };
    let candidates = i64::try_from(candidates.min(MAX_NEIGHBOURS)).unwrap_or(0);
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map(params![blob(embedding), candidates, context], |row| {
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
        // NOT IN reads the vector ids once; a per-row lookup would load each vector.
        "SELECT m.id, m.content FROM memories m \
         WHERE m.id NOT IN (SELECT memory_id FROM memory_vectors) ORDER BY m.id LIMIT ?1"
    } else {
        "SELECT m.id, m.content FROM memories m ORDER BY m.id LIMIT ?1"
    };
    let mut statement = connection.prepare_cached(sql)?;
    let rows = statement.query_map([limit], |row| Ok((row.get(0)?, row.get(1)?)))?;
    rows.collect()
}

/// Moves the vectors of `from` into `to`'s partition (sqlite-vec can't change a row's
/// partition key in place: each is read, deleted and written again); how many moved.
/// Run inside a transaction.
pub(super) fn move_context(connection: &Connection, from: &str, to: &str) -> rusqlite::Result<usize> {
    if dimensions(connection)?.is_none() {
        return Ok(0);
    }
    let vectors: Vec<(i64, Vec<u8>)> = {
        let mut statement =
            connection.prepare_cached("SELECT memory_id, embedding FROM memory_vectors WHERE context = ?1")?;
        let rows = statement.query_map([from], |row| Ok((row.get(0)?, row.get(1)?)))?;
        rows.collect::<rusqlite::Result<_>>()?
    };
    for (id, bytes) in &vectors {
        let embedding: Vec<f32> =
            bytes.chunks_exact(4).map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]])).collect();
        replace(connection, *id, to, &embedding)?;
    }
    Ok(vectors.len())
}

/// The context of memory `id`, `None` when there is no such memory.
pub(super) fn context_of(connection: &Connection, id: i64) -> rusqlite::Result<Option<String>> {
    connection
        .prepare_cached("SELECT context FROM memories WHERE id = ?1")?
        .query_row([id], |row| row.get(0))
        .optional()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::Database;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = values.iter().map(|value| value * value).sum::<f32>().sqrt();
        values.iter().map(|value| value / norm).collect()
    }

    #[test]
    fn the_bit_search_ranks_its_candidates_by_exact_cosine_distance() {
        let directory = tempfile::tempdir().unwrap();
        let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
        database.with_connection(|connection| {
            connection
                .execute_batch(
                    "INSERT INTO memories (id, context, type, content, importance, source, created_at, updated_at, normalized)
                     VALUES (1, 'c', 'fact', 'a', 0.5, 't', 0, 0, 'a'), (2, 'c', 'fact', 'b', 0.5, 't', 0, 0, 'b'),
                            (3, 'c', 'fact', 'c', 0.5, 't', 0, 0, 'c'), (4, 'd', 'fact', 'd', 0.5, 't', 0, 0, 'd')",
                )
                .unwrap();
            let query = unit(&[1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]);
            // Same signs as the query, at growing angles from it; 3 has opposite signs.
            insert(connection, 1, "c", &unit(&[1.0, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2])).unwrap();
            insert(connection, 2, "c", &query).unwrap();
            insert(connection, 3, "c", &unit(&[-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0])).unwrap();
            insert(connection, 4, "d", &query).unwrap();
            let hits = search(connection, "c", &query, 3, Search::Bits).unwrap();
            assert_eq!(hits.iter().map(|hit| hit.id).collect::<Vec<_>>(), vec![2, 1, 3]);
            assert!(hits[0].score.abs() < 1e-5, "{hits:?}");
            let exact = search(connection, "c", &query, 3, Search::Exact).unwrap();
            for (bits, exact) in hits.iter().zip(&exact) {
                assert_eq!(bits.id, exact.id);
                assert!((bits.score - exact.score).abs() < 1e-5, "{bits:?} {exact:?}");
            }
        });
    }
}
