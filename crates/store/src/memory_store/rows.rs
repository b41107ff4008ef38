//! Reading memory rows (with their links) and the JSON forms of tags and id lists.

use std::collections::HashMap;

use rusqlite::types::Type;
use rusqlite::{Connection, Row};
use squidbot_types::memory::{LinkKind, Memory, MemoryLink, MemoryType};

/// Columns of `memories` read into a [`Memory`], in the order [`memory_from_row`] expects.
pub(super) const MEMORY_COLUMNS: &str = "m.id, m.context, m.type, m.content, m.importance, m.tags, m.source, \
     m.expires_at, m.created_at, m.updated_at, m.accessed_at, m.access_count";

/// A conversion failure of column `index`, as rusqlite reports them.
fn conversion_error(index: usize, reason: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(index, Type::Text, reason.into())
}

/// Reads one row selected with [`MEMORY_COLUMNS`]; links are filled in later.
pub(super) fn memory_from_row(row: &Row<'_>) -> rusqlite::Result<Memory> {
    let kind: String = row.get(2)?;
    let kind = MemoryType::parse(&kind).ok_or_else(|| conversion_error(2, format!("unknown memory type {kind:?}")))?;
    let tags: String = row.get(5)?;
    let tags =
        serde_json::from_str(&tags).map_err(|error| conversion_error(5, format!("tags are not a list: {error}")))?;
    let importance: f64 = row.get(4)?;
    let access_count: i64 = row.get(11)?;
    Ok(Memory {
        id: row.get(0)?,
        context: row.get(1)?,
        kind,
        content: row.get(3)?,
        importance: importance as f32,
        tags,
        source: row.get(6)?,
        expires_at: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
        accessed_at: row.get(10)?,
        access_count: u64::try_from(access_count).unwrap_or(0),
        links: Vec::new(),
    })
}

/// Tags as stored: a JSON array of strings.
pub(super) fn tags_json(tags: &[String]) -> String {
    serde_json::Value::from(tags.to_vec()).to_string()
}

/// Ids as a JSON array, for `json_each` (one statement whatever the number of ids).
pub(super) fn ids_json(ids: &[i64]) -> String {
    serde_json::Value::from(ids.to_vec()).to_string()
}

/// Parses a stored link kind.
pub(super) fn link_kind(row: &Row<'_>, index: usize) -> rusqlite::Result<LinkKind> {
    let kind: String = row.get(index)?;
    LinkKind::parse(&kind).ok_or_else(|| conversion_error(index, format!("unknown link kind {kind:?}")))
}

/// Fills in the outgoing links of `memories`.
pub(super) fn attach_links(connection: &Connection, memories: &mut [Memory]) -> rusqlite::Result<()> {
    if memories.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = memories.iter().map(|memory| memory.id).collect();
    let mut statement = connection.prepare_cached(
        "SELECT source, kind, target FROM memory_links \
         WHERE source IN (SELECT value FROM json_each(?1))",
    )?;
    let mut links: HashMap<i64, Vec<MemoryLink>> = HashMap::new();
    let rows = statement.query_map([ids_json(&ids)], |row| {
        Ok((row.get::<_, i64>(0)?, MemoryLink { kind: link_kind(row, 1)?, target: row.get(2)? }))
    })?;
    for row in rows {
        let (source, link) = row?;
        links.entry(source).or_default().push(link);
    }
    for memory in memories {
        memory.links = links.remove(&memory.id).unwrap_or_default();
        memory.links.sort_by_key(|link| (link.kind, link.target));
    }
    Ok(())
}

/// Runs a query selecting [`MEMORY_COLUMNS`] and returns the memories with their links.
pub(super) fn query_memories(
    connection: &Connection,
    sql: &str,
    parameters: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Memory>> {
    let mut statement = connection.prepare_cached(sql)?;
    let mut memories = statement.query_map(parameters, memory_from_row)?.collect::<rusqlite::Result<Vec<_>>>()?;
    attach_links(connection, &mut memories)?;
    Ok(memories)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_ids_are_json_arrays() {
        assert_eq!(tags_json(&["a \"b\"".to_owned(), "c".to_owned()]), r#"["a \"b\"","c"]"#);
        assert_eq!(tags_json(&[]), "[]");
        assert_eq!(ids_json(&[3, -1]), "[3,-1]");
    }
}
