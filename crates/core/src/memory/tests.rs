//! Unit tests of the memory service's policy over a small in-memory store.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use squidbot_types::memory::{LinkKind, MemoryLink, MemoryType, NewMemory};

use super::in_memory::InMemoryMemoryStore;
use super::*;
use crate::clock::FixedClock;

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

fn service(store: Arc<InMemoryMemoryStore>) -> Memories {
    let clock = FixedClock(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000));
    Memories::new(store, None, Arc::new(clock))
}

#[tokio::test]
async fn a_linked_memory_comes_along_with_a_lower_score() {
    let store = Arc::new(InMemoryMemoryStore::default());
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
    assert!(store.all().iter().all(|row| row.access_count == 1), "returned memories are touched");
}

#[tokio::test]
async fn importance_breaks_ties_and_other_contexts_stay_out() {
    let store = Arc::new(InMemoryMemoryStore::default());
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
    let store = Arc::new(InMemoryMemoryStore::default());
    let memories = service(store.clone());
    let first = memories.save(memory("User prefers dark mode", 0.4, Vec::new())).await.unwrap();
    let second = memories.save(memory("the user prefers dark mode.", 0.7, Vec::new())).await.unwrap();
    assert_eq!(second, SaveOutcome::Updated(first.id()));
    assert_eq!(store.all()[0].importance, 0.7);
    assert!(matches!(memories.save(memory("  ", 0.5, Vec::new())).await, Err(MemoryError::Invalid(_))));
    assert!(matches!(memories.save(memory("x", 1.5, Vec::new())).await, Err(MemoryError::Invalid(_))));
}

#[tokio::test]
async fn a_batch_merges_exact_rewordings_within_itself_and_with_the_store() {
    let store = Arc::new(InMemoryMemoryStore::default());
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
    assert_eq!(store.all().len(), 2);
    assert!(memories.save_many(vec![memory(" ", 0.5, Vec::new())]).await.is_err());
}
