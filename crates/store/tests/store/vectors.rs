//! Vector storage and nearest-neighbour search through sqlite-vec.

use squidbot_core::memory::MemoryStore;

use crate::memories::{NOW, memory, store};

/// A unit vector of `dimensions` pointing mostly along `axis`, tilted towards `tilt`.
fn vector(dimensions: usize, axis: usize, tilt: usize, amount: f32) -> Vec<f32> {
    let mut values = vec![0.0_f32; dimensions];
    values[axis] = 1.0;
    values[tilt] += amount;
    let norm = values.iter().map(|value| value * value).sum::<f32>().sqrt();
    values.iter().map(|value| value / norm).collect()
}

#[test]
fn nearest_vectors_come_first_with_their_cosine_distance() {
    for dimensions in [8, 12] {
        let (_directory, store) = store();
        let exact = store.insert(&memory("user:1", "exact"), Some(&vector(dimensions, 0, 1, 0.0)), NOW).unwrap();
        let close = store.insert(&memory("user:1", "close"), Some(&vector(dimensions, 0, 1, 0.3)), NOW).unwrap();
        let far = store.insert(&memory("user:1", "far"), Some(&vector(dimensions, 0, 1, 3.0)), NOW).unwrap();
        let opposite =
            store.insert(&memory("user:1", "orthogonal"), Some(&vector(dimensions, 2, 3, 0.0)), NOW).unwrap();
        store.insert(&memory("user:2", "other context"), Some(&vector(dimensions, 0, 1, 0.0)), NOW).unwrap();
        let hits = store.search_vector("user:1", &vector(dimensions, 0, 1, 0.0), 10).unwrap();
        assert_eq!(hits.iter().map(|hit| hit.id).collect::<Vec<_>>(), vec![exact, close, far, opposite]);
        assert!(hits[0].score.abs() < 1e-5, "{hits:?}");
        assert!((hits[3].score - 1.0).abs() < 1e-5, "orthogonal is at distance 1: {hits:?}");
        assert_eq!(store.search_vector("user:1", &vector(dimensions, 0, 1, 0.0), 2).unwrap().len(), 2);
        assert!(store.search_vector("user:1", &vector(dimensions, 0, 1, 0.0), 0).unwrap().is_empty());
        assert!(store.search_vector("user:1", &vector(dimensions + 8, 0, 1, 0.0), 10).unwrap().is_empty());
        assert!(store.search_vector("nobody", &vector(dimensions, 0, 1, 0.0), 10).unwrap().is_empty());
        assert_eq!(store.stats("user:1").unwrap().with_vectors, 4);
    }
}

#[test]
fn search_returns_nothing_before_the_first_vector() {
    let (_directory, store) = store();
    store.insert(&memory("user:1", "no vector yet"), None, NOW).unwrap();
    assert!(store.search_vector("user:1", &[1.0, 0.0], 5).unwrap().is_empty());
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 0);
    assert_eq!(store.missing_vectors(10).unwrap().len(), 1);
    assert!(store.insert(&memory("user:1", "empty vector"), Some(&[]), NOW).is_err());
}

#[test]
fn a_new_dimension_recreates_the_table_and_backfill_restores_search() {
    let (_directory, store) = store();
    let first = store.insert(&memory("user:1", "first"), Some(&vector(8, 0, 1, 0.0)), NOW).unwrap();
    let second = store.insert(&memory("user:1", "second"), Some(&vector(8, 1, 2, 0.0)), NOW).unwrap();
    assert_eq!(store.vector_dimensions().unwrap(), Some(8));
    assert!(store.missing_vectors(10).unwrap().is_empty());

    // The embedding model changed: a 16-dimension vector arrives.
    let third = store.insert(&memory("user:1", "third"), Some(&vector(16, 0, 1, 0.0)), NOW).unwrap();
    assert_eq!(store.vector_dimensions().unwrap(), Some(16));
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 1);
    assert!(store.search_vector("user:1", &vector(8, 0, 1, 0.0), 10).unwrap().is_empty());
    let missing = store.missing_vectors(10).unwrap();
    assert_eq!(missing, vec![(first, "first".to_owned()), (second, "second".to_owned())]);
    assert_eq!(store.missing_vectors(1).unwrap().len(), 1);

    for (id, _) in &missing {
        let axis = usize::try_from(*id).unwrap() % 4 + 4;
        store.set_vector(*id, &vector(16, axis, 0, 0.0)).unwrap();
    }
    assert!(store.missing_vectors(10).unwrap().is_empty());
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 3);
    let hits = store.search_vector("user:1", &vector(16, 0, 1, 0.0), 1).unwrap();
    assert_eq!(hits[0].id, third);
    // Replacing a vector keeps one per memory.
    store.set_vector(third, &vector(16, 9, 0, 0.0)).unwrap();
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 3);
    assert_eq!(store.search_vector("user:1", &vector(16, 9, 0, 0.0), 1).unwrap()[0].id, third);
    assert!(store.set_vector(9_999, &vector(16, 0, 1, 0.0)).is_err());
}

#[test]
fn deleting_or_expiring_a_memory_deletes_its_vector() {
    let (_directory, store) = store();
    let kept = store.insert(&memory("user:1", "kept"), Some(&vector(8, 0, 1, 0.0)), NOW).unwrap();
    let deleted = store.insert(&memory("user:1", "deleted"), Some(&vector(8, 0, 1, 0.1)), NOW).unwrap();
    let expiring = squidbot_types::memory::NewMemory { expires_at: Some(NOW + 10), ..memory("user:1", "expiring") };
    store.insert(&expiring, Some(&vector(8, 0, 1, 0.2)), NOW).unwrap();
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 3);
    assert!(store.delete("user:1", deleted).unwrap());
    assert_eq!(store.expire(NOW + 10).unwrap(), 1);
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 1);
    let hits = store.search_vector("user:1", &vector(8, 0, 1, 0.0), 10).unwrap();
    assert_eq!(hits.iter().map(|hit| hit.id).collect::<Vec<_>>(), vec![kept]);
    assert!(store.missing_vectors(10).unwrap().is_empty());
}

#[test]
fn updates_replace_the_vector_when_one_is_given() {
    let (_directory, store) = store();
    let id = store.insert(&memory("user:1", "moving"), Some(&vector(8, 0, 1, 0.0)), NOW).unwrap();
    let update = squidbot_core::memory::MemoryUpdate {
        content: "moved".into(),
        importance: 0.5,
        tags: Vec::new(),
        expires_at: None,
        links: Vec::new(),
    };
    store.update("user:1", id, &update, None, NOW).unwrap();
    assert!(store.search_vector("user:1", &vector(8, 0, 1, 0.0), 1).unwrap()[0].score.abs() < 1e-5);
    store.update("user:1", id, &update, Some(&vector(8, 5, 1, 0.0)), NOW).unwrap();
    let hit = store.search_vector("user:1", &vector(8, 5, 1, 0.0), 1).unwrap()[0];
    assert_eq!(hit.id, id);
    assert!(hit.score.abs() < 1e-5);
    assert_eq!(store.stats("user:1").unwrap().with_vectors, 1);
}
