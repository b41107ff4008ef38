//! Unit tests of the memory service's policy over a small in-memory store.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use squidbot_types::memory::{LinkKind, Memory, MemoryLink, MemoryType, NewMemory};

use super::*;
use crate::clock::FixedClock;

/// Substring "full-text" search over a vector of memories.
#[derive(Default)]
struct ListStore {
    rows: Mutex<Vec<Memory>>,
}

impl MemoryStore for ListStore {
    fn insert(&self, memory: &NewMemory, _embedding: Option<&[f32]>, now: i64) -> Result<i64, MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        let id = rows.len() as i64 + 1;
        rows.push(Memory {
            id,
            context: memory.context.clone(),
            kind: memory.kind,
            content: memory.content.clone(),
            importance: memory.importance,
            tags: memory.tags.clone(),
            source: memory.source.clone(),
            expires_at: memory.expires_at,
            created_at: now,
            updated_at: now,
            accessed_at: None,
            access_count: 0,
            links: memory.links.clone(),
        });
        Ok(id)
    }

    fn update(&self, _: &str, id: i64, update: &MemoryUpdate, _: Option<&[f32]>, now: i64) -> Result<(), MemoryError> {
        let mut rows = self.rows.lock().unwrap();
        let row = rows.iter_mut().find(|row| row.id == id).ok_or(MemoryError::NotFound { id })?;
        row.content = update.content.clone();
        row.importance = update.importance;
        row.updated_at = now;
        Ok(())
    }

    fn candidates(&self, context: &str, _: &str, _: usize) -> Result<Vec<Memory>, MemoryError> {
        Ok(self.rows.lock().unwrap().iter().filter(|row| row.context == context).cloned().collect())
    }

    fn search_text(&self, context: &str, query: &str, limit: usize) -> Result<Vec<Ranked>, MemoryError> {
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        Ok(self
            .rows
            .lock()
            .unwrap()
            .iter()
            .filter(|row| row.context == context && words.iter().any(|word| row.content.to_lowercase().contains(word)))
            .take(limit)
            .map(|row| Ranked { id: row.id, score: 0.0 })
            .collect())
    }

    fn search_vector(&self, _: &str, _: &[f32], _: usize) -> Result<Vec<Ranked>, MemoryError> {
        Ok(Vec::new())
    }

    fn links(&self, context: &str, ids: &[i64]) -> Result<Vec<(i64, LinkKind, i64)>, MemoryError> {
        let rows = self.rows.lock().unwrap();
        Ok(rows
            .iter()
            .filter(|row| row.context == context)
            .flat_map(|row| row.links.iter().map(move |link| (row.id, link.kind, link.target)))
            .filter(|(from, _, to)| ids.contains(from) || ids.contains(to))
            .collect())
    }

    fn get_many(&self, context: &str, ids: &[i64], now: i64) -> Result<Vec<Memory>, MemoryError> {
        Ok(self
            .rows
            .lock()
            .unwrap()
            .iter()
            .filter(|row| row.context == context && ids.contains(&row.id))
            .filter(|row| row.expires_at.is_none_or(|expiry| expiry > now))
            .cloned()
            .collect())
    }

    fn touch(&self, _: &str, ids: &[i64], now: i64) -> Result<(), MemoryError> {
        for row in self.rows.lock().unwrap().iter_mut().filter(|row| ids.contains(&row.id)) {
            row.accessed_at = Some(now);
            row.access_count += 1;
        }
        Ok(())
    }

    fn delete(&self, _: &str, _: i64) -> Result<bool, MemoryError> {
        Ok(false)
    }

    fn list(&self, _: &str, _: &ListFilter, _: i64) -> Result<Vec<Memory>, MemoryError> {
        Ok(Vec::new())
    }

    fn expire(&self, _: i64) -> Result<usize, MemoryError> {
        Ok(0)
    }

    fn fingerprint(&self, _: &str) -> Result<String, MemoryError> {
        Ok(String::new())
    }

    fn stats(&self, _: &str) -> Result<MemoryStats, MemoryError> {
        Ok(MemoryStats::default())
    }

    fn missing_vectors(&self, _: usize) -> Result<Vec<(i64, String)>, MemoryError> {
        Ok(Vec::new())
    }

    fn set_vector(&self, _: i64, _: &[f32]) -> Result<(), MemoryError> {
        Ok(())
    }
}

fn memory(content: &str, importance: f32, links: Vec<MemoryLink>) -> NewMemory {
    NewMemory {
        context: "owner".into(),
        kind: MemoryType::Fact,
        content: content.into(),
        importance,
        tags: Vec::new(),
        source: "test".into(),
        expires_at: None,
        links,
    }
}

fn service(store: Arc<ListStore>) -> Memories {
    let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    Memories::new(store, None, Arc::new(clock))
}

#[tokio::test]
async fn a_linked_memory_comes_along_with_a_lower_score() {
    let store = Arc::new(ListStore::default());
    let memories = service(store.clone());
    let project = memories.save(memory("Project Falcon ships in March", 0.5, Vec::new())).await.unwrap().id();
    let link = MemoryLink { kind: LinkKind::PartOf, target: project };
    memories.save(memory("The launch party is at the harbour", 0.5, vec![link])).await.unwrap();
    let recall = memories.recall("owner", "party", 10, &[]).await.unwrap();
    let found: Vec<(&str, Found)> = recall.hits.iter().map(|hit| (hit.memory.content.as_str(), hit.found)).collect();
    assert_eq!(
        found,
        [("The launch party is at the harbour", Found::Text), ("Project Falcon ships in March", Found::Link)]
    );
    assert!(recall.hits[1].score < recall.hits[0].score);
    assert_eq!(recall.mode, RecallMode::FullTextOnly);
    assert!(store.rows.lock().unwrap().iter().all(|row| row.access_count == 1), "returned memories are touched");
}

#[tokio::test]
async fn importance_breaks_ties_and_other_contexts_stay_out() {
    let store = Arc::new(ListStore::default());
    let memories = service(store);
    memories.save(memory("tea in the morning", 0.1, Vec::new())).await.unwrap();
    memories.save(memory("tea after lunch, always green", 0.9, Vec::new())).await.unwrap();
    memories
        .save(NewMemory { context: "group:x".into(), ..memory("tea for the group", 1.0, Vec::new()) })
        .await
        .unwrap();
    let recall = memories.recall("owner", "tea", 10, &[]).await.unwrap();
    assert_eq!(recall.hits.len(), 2);
    assert!(recall.hits.iter().all(|hit| hit.memory.context == "owner"));
}

#[tokio::test]
async fn a_rewording_updates_instead_of_duplicating_and_bad_input_is_refused() {
    let store = Arc::new(ListStore::default());
    let memories = service(store.clone());
    let first = memories.save(memory("User prefers dark mode", 0.4, Vec::new())).await.unwrap();
    let second = memories.save(memory("the user prefers dark mode.", 0.7, Vec::new())).await.unwrap();
    assert_eq!(second, SaveOutcome::Updated(first.id()));
    assert_eq!(store.rows.lock().unwrap()[0].importance, 0.7);
    assert!(matches!(memories.save(memory("  ", 0.5, Vec::new())).await, Err(MemoryError::Invalid(_))));
    assert!(matches!(memories.save(memory("x", 1.5, Vec::new())).await, Err(MemoryError::Invalid(_))));
}

#[tokio::test]
async fn a_batch_merges_exact_rewordings_within_itself_and_with_the_store() {
    let store = Arc::new(ListStore::default());
    let memories = service(store.clone());
    let stored = memories.save(memory("Likes green tea", 0.5, Vec::new())).await.unwrap().id();
    let outcomes = memories
        .save_many(vec![
            memory("likes GREEN tea!", 0.9, Vec::new()),
            memory("Owns a bicycle", 0.5, Vec::new()),
            memory("owns a bicycle.", 0.5, Vec::new()),
        ])
        .await
        .unwrap();
    assert_eq!(outcomes[0], SaveOutcome::Updated(stored));
    assert!(matches!(outcomes[1], SaveOutcome::Created(_)));
    assert_eq!(outcomes[2], SaveOutcome::Updated(outcomes[1].id()));
    assert_eq!(store.rows.lock().unwrap().len(), 2);
    assert!(memories.save_many(vec![memory(" ", 0.5, Vec::new())]).await.is_err());
}
