//! Full-text search: turning any text into a safe FTS5 query, keeping its cost bounded,
//! and ranking by BM25.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use rusqlite::Connection;
use squidbot_core::memory::Ranked;
use squidbot_core::sync::lock;

/// Distinct words of a query used at most; the rest add cost and little ranking.
const MAX_QUERY_WORDS: usize = 64;

/// Document frequencies remembered at most; the cache starts over past this.
const MAX_CACHED_TERMS: usize = 100_000;

/// The distinct lower-case words of `text` (runs of letters and digits, as
/// `normalize` splits them), in order of appearance, at most [`MAX_QUERY_WORDS`].
pub(crate) fn query_words(text: &str) -> Vec<String> {
    let mut seen = HashSet::new();
    text.split(|character: char| !character.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .filter(|word| seen.insert(word.clone()))
        .take(MAX_QUERY_WORDS)
        .collect()
}

/// An FTS5 MATCH expression finding rows that contain any of `words`, `None` when
/// there are none. Each word is written as a double-quoted string, so FTS5 syntax in
/// the text — quotes, `*`, `^`, `:`, `-`, parentheses, `AND`/`OR`/`NOT`/`NEAR` — is
/// only ever searched for, never parsed.
pub(crate) fn match_expression<Word: AsRef<str>>(words: &[Word]) -> Option<String> {
    let quoted: Vec<String> = words.iter().map(|word| format!("\"{}\"", word.as_ref().replace('"', "\"\""))).collect();
    (!quoted.is_empty()).then(|| quoted.join(" OR "))
}

/// How many rows contain each word, cached: FTS5 reads every row containing any query
/// word to rank them, so a query's cost is the sum of its words' frequencies.
#[derive(Debug, Default)]
pub(super) struct TermFrequencies {
    counts: Mutex<HashMap<String, Counted>>,
}

#[derive(Debug, Clone, Copy)]
struct Counted {
    /// Rows containing the word (all contexts: the cost does not depend on scope).
    rows: u64,
    /// Highest memory id when counted; the count is redone once the table grew a quarter.
    at_size: u64,
}

impl Counted {
    fn is_fresh(self, size: u64) -> bool {
        size < self.at_size + self.at_size / 4 + 64
    }
}

impl TermFrequencies {
    /// Rows containing `word`.
    fn rows(&self, connection: &Connection, word: &str, size: u64) -> rusqlite::Result<u64> {
        let cached = lock(&self.counts).get(word).copied();
        if let Some(counted) = cached.filter(|counted| counted.is_fresh(size)) {
            return Ok(counted.rows);
        }
        let expression = match_expression(&[word]).unwrap_or_default();
        let rows: i64 = connection
            .prepare_cached("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?1")?
            .query_row([expression], |row| row.get(0))?;
        let rows = u64::try_from(rows).unwrap_or(0);
        let mut counts = lock(&self.counts);
        if counts.len() >= MAX_CACHED_TERMS {
            counts.clear();
        }
        counts.insert(word.to_owned(), Counted { rows, at_size: size });
        Ok(rows)
    }

    /// The words of `text` worth searching for within `budget` rows read: rarest first,
    /// adding words while the rows they match stay within the budget (the rarest is
    /// always kept). The words left out are the most common ones, which also weigh least
    /// in BM25 (their inverse document frequency is lowest).
    pub(super) fn select(&self, connection: &Connection, text: &str, budget: u64) -> rusqlite::Result<Vec<String>> {
        let words = query_words(text);
        if words.len() <= 1 {
            return Ok(words);
        }
        let size: i64 =
            connection.prepare_cached("SELECT coalesce(max(id), 0) FROM memories")?.query_row([], |row| row.get(0))?;
        let size = u64::try_from(size).unwrap_or(0);
        let mut counted = Vec::with_capacity(words.len());
        for word in words {
            let rows = self.rows(connection, &word, size)?;
            counted.push((word, rows));
        }
        counted.sort_by_key(|(_, rows)| *rows);
        let mut total: u64 = 0;
        let mut selected = Vec::new();
        for (word, rows) in counted {
            if !selected.is_empty() && total.saturating_add(rows) > budget {
                break;
            }
            total = total.saturating_add(rows);
            selected.push(word);
        }
        Ok(selected)
    }
}

/// BM25 weight of `content` and `tags`: a word in the text counts more than a tag.
const SCORE: &str = "bm25(memories_fts, 1.0, 0.5)";

/// The best full-text matches of `words` in `context`, best (lowest BM25) first.
pub(super) fn search(
    connection: &Connection,
    context: &str,
    words: &[String],
    limit: usize,
) -> rusqlite::Result<Vec<Ranked>> {
    let Some(expression) = match_expression(words) else { return Ok(Vec::new()) };
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut statement = connection.prepare_cached(&format!(
        "SELECT m.id, {SCORE} AS score FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid \
         WHERE memories_fts MATCH ?1 AND m.context = ?2 ORDER BY score, m.id LIMIT ?3"
    ))?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = statement.query_map(rusqlite::params![expression, context, limit], |row| {
        Ok(Ranked { id: row.get(0)?, score: row.get(1)? })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expression(text: &str) -> Option<String> {
        match_expression(&query_words(text))
    }

    #[test]
    fn words_are_quoted_deduplicated_and_joined_by_or() {
        assert_eq!(expression("Dark mode, dark MODE!").as_deref(), Some(r#""dark" OR "mode""#));
        assert_eq!(expression(r#"NEAR(a b) AND "x"*"#).as_deref(), Some(r#""near" OR "a" OR "b" OR "and" OR "x""#));
        assert_eq!(expression("col:val ^start -x").as_deref(), Some(r#""col" OR "val" OR "start" OR "x""#));
    }

    #[test]
    fn text_without_words_has_no_expression() {
        for text in ["", "   ", "\"", "*", "()", "-:^", "!?"] {
            assert_eq!(expression(text), None, "{text:?}");
        }
    }

    #[test]
    fn long_queries_are_capped() {
        let text: Vec<String> = (0..500).map(|index| format!("word{index}")).collect();
        assert_eq!(query_words(&text.join(" ")).len(), MAX_QUERY_WORDS);
    }

    #[test]
    fn the_most_common_words_are_left_out_past_the_budget() {
        use squidbot_core::memory::MemoryStore;
        use squidbot_types::memory::{MemoryType, NewMemory};

        let directory = tempfile::tempdir().unwrap();
        let database = crate::Database::open(&directory.path().join("squidbot.db")).unwrap();
        let store = crate::SqliteMemoryStore::new(database.clone());
        for index in 0..30 {
            let content = if index == 0 { "the rare zebra".to_owned() } else { format!("the common note {index}") };
            let memory = NewMemory {
                context: "c".into(),
                kind: MemoryType::Fact,
                content,
                importance: 0.5,
                tags: Vec::new(),
                source: "test".into(),
                expires_at: None,
                links: Vec::new(),
            };
            store.insert(&memory, None, 0).unwrap();
        }
        let terms = TermFrequencies::default();
        database.with_connection(|connection| {
            assert_eq!(terms.select(connection, "the zebra", 10).unwrap(), vec!["zebra".to_owned()]);
            assert_eq!(terms.select(connection, "the zebra", 100).unwrap(), vec!["zebra".to_owned(), "the".to_owned()]);
            // The rarest word is kept even over the budget.
            assert_eq!(terms.select(connection, "the", 1).unwrap(), vec!["the".to_owned()]);
            assert_eq!(terms.select(connection, "the common", 1).unwrap(), vec!["common".to_owned()]);
        });
    }

    #[test]
    fn counts_are_redone_once_the_table_grew() {
        let counted = Counted { rows: 3, at_size: 1000 };
        assert!(counted.is_fresh(1100));
        assert!(!counted.is_fresh(1400));
    }
}
