//! Whole contexts' memories moved into another context or deleted, inside the caller's
//! transaction (context merges and purges); triggers keep the per-context counters, the
//! full-text index and the links in step.

use rusqlite::Connection;

use super::vectors;

/// Moves every memory of `from`, with its vector, into `to`; how many moved. Links move
/// with them (they only join memories of one context).
pub(crate) fn move_context_memories(connection: &Connection, from: &str, to: &str) -> rusqlite::Result<usize> {
    let moved =
        connection.prepare_cached("UPDATE memories SET context = ?2 WHERE context = ?1")?.execute([from, to])?;
    vectors::move_context(connection, from, to)?;
    Ok(moved)
}

/// Deletes every memory of `context` (their vectors, full-text rows and links go by
/// trigger and cascade); how many went.
pub(crate) fn delete_context_memories(connection: &Connection, context: &str) -> rusqlite::Result<usize> {
    connection.prepare_cached("DELETE FROM memories WHERE context = ?1")?.execute([context])
}
