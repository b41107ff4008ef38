//! `SqliteMemoryStore` rows, links, full-text search, expiry, fingerprints and the
//! context boundary, on a real database file.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use squidbot_core::clock::FixedClock;
use squidbot_core::memory::{ListFilter, Memories, MemoryError, MemoryStore, MemoryUpdate, SaveOutcome};
use squidbot_store::{Database, SqliteMemoryStore};
use squidbot_types::memory::{LinkKind, MemoryLink, MemoryType, NewMemory};

pub(crate) const NOW: i64 = 1_750_000_000;

pub(crate) fn store() -> (tempfile::TempDir, SqliteMemoryStore) {
    let directory = tempfile::tempdir().unwrap();
    let database = Database::open(&directory.path().join("squidbot.db")).unwrap();
    (directory, SqliteMemoryStore::new(database))
}

pub(crate) fn memory(context: &str, content: &str) -> NewMemory {
    NewMemory {
        context: context.to_owned(),
        kind: MemoryType::Fact,
        content: content.to_owned(),
        importance: 0.5,
        tags: Vec::new(),
        source: "test".to_owned(),
        expires_at: None,
        links: Vec::new(),
    }
}

fn ids(store: &SqliteMemoryStore, context: &str, query: &str) -> Vec<i64> {
    store.search_text(context, query, 10).unwrap().into_iter().map(|hit| hit.id).collect()
}

#[test]
fn memories_round_trip_with_tags_links_and_expiry() {
    let (_directory, store) = store();
    let sister = store.insert(&memory("user:1", "Ana is my sister"), None, NOW).unwrap();
    let new = NewMemory {
        kind: MemoryType::Preference,
        importance: 0.9,
        tags: vec!["family".into(), "porto \"north\"".into()],
        source: "cli".into(),
        expires_at: Some(NOW + 3600),
        links: vec![MemoryLink { kind: LinkKind::RelatedTo, target: sister }],
        ..memory("user:1", "Ana lives in Porto")
    };
    let id = store.insert(&new, None, NOW).unwrap();
    let loaded = store.get_many("user:1", &[id, sister], NOW).unwrap();
    assert_eq!(loaded.len(), 2);
    let porto = loaded.iter().find(|memory| memory.id == id).unwrap();
    assert_eq!(porto.kind, MemoryType::Preference);
    assert_eq!(porto.content, "Ana lives in Porto");
    assert!((porto.importance - 0.9).abs() < 1e-6);
    assert_eq!(porto.tags, new.tags);
    assert_eq!(porto.source, "cli");
    assert_eq!(porto.expires_at, Some(NOW + 3600));
    assert_eq!((porto.created_at, porto.updated_at, porto.accessed_at, porto.access_count), (NOW, NOW, None, 0));
    assert_eq!(porto.links, new.links);

    store.touch("user:1", &[id], NOW + 5).unwrap();
    store.touch("user:1", &[id], NOW + 6).unwrap();
    let touched = &store.get_many("user:1", &[id], NOW + 7).unwrap()[0];
    assert_eq!((touched.accessed_at, touched.access_count), (Some(NOW + 6), 2));

    // Links read in both directions.
    let expected = vec![(id, LinkKind::RelatedTo, sister)];
    assert_eq!(store.links("user:1", &[sister]).unwrap(), expected);
    assert_eq!(store.links("user:1", &[id]).unwrap(), expected);

    // Expired memories are not read, and expire deletes them with their links.
    assert!(store.get_many("user:1", &[id], NOW + 3600).unwrap().is_empty());
    assert_eq!(store.list("user:1", &ListFilter::default(), NOW + 3600).unwrap().len(), 1);
    assert_eq!(store.expire(NOW + 3599).unwrap(), 0);
    assert_eq!(store.expire(NOW + 3600).unwrap(), 1);
    assert!(store.links("user:1", &[sister]).unwrap().is_empty());
    assert_eq!(store.stats("user:1").unwrap().memories, 1);
}

#[test]
fn updates_replace_fields_and_add_links() {
    let (_directory, store) = store();
    let first = store.insert(&memory("user:1", "likes tea"), None, NOW).unwrap();
    let other = store.insert(&memory("user:1", "drinks it at five"), None, NOW).unwrap();
    let update = MemoryUpdate {
        content: "likes green tea".into(),
        importance: 0.8,
        tags: vec!["drinks".into()],
        expires_at: Some(NOW + 60),
        links: vec![MemoryLink { kind: LinkKind::Updates, target: other }],
    };
    store.update("user:1", first, &update, None, NOW + 10).unwrap();
    let updated = &store.get_many("user:1", &[first], NOW + 11).unwrap()[0];
    assert_eq!(updated.content, "likes green tea");
    assert_eq!(updated.tags, vec!["drinks".to_owned()]);
    assert_eq!((updated.created_at, updated.updated_at, updated.expires_at), (NOW, NOW + 10, Some(NOW + 60)));
    assert_eq!(updated.links, update.links);
    assert_eq!(ids(&store, "user:1", "green"), vec![first], "the full-text index follows updates");
    assert!(ids(&store, "user:1", "likes tea").contains(&first));
    assert!(matches!(store.update("user:1", 9_999, &update, None, NOW), Err(MemoryError::NotFound { id: 9_999 })));
}

#[test]
fn links_must_point_at_memories_of_the_same_context() {
    let (_directory, store) = store();
    let own = store.insert(&memory("user:1", "mine"), None, NOW).unwrap();
    let foreign = store.insert(&memory("user:2", "theirs"), None, NOW).unwrap();
    for target in [foreign, 12_345] {
        let linked = NewMemory { links: vec![MemoryLink { kind: LinkKind::PartOf, target }], ..memory("user:1", "x") };
        let error = store.insert(&linked, None, NOW).unwrap_err();
        assert!(matches!(error, MemoryError::Invalid(_)), "{error}");
    }
    let update = MemoryUpdate {
        content: "mine".into(),
        importance: 0.5,
        tags: Vec::new(),
        expires_at: None,
        links: vec![MemoryLink { kind: LinkKind::RelatedTo, target: own }],
    };
    assert!(matches!(store.update("user:1", own, &update, None, NOW), Err(MemoryError::Invalid(_))));
    // The failed inserts left nothing behind.
    assert_eq!(store.stats("user:1").unwrap().memories, 1);
}

#[test]
fn hostile_queries_never_error() {
    let (_directory, store) = store();
    store.insert(&memory("user:1", "foo bar start val x near and the col"), None, NOW).unwrap();
    let long = "word ".repeat(5_000);
    let queries = [
        "\"unbalanced",
        "foo*",
        "NEAR(a b)",
        "a AND (",
        "-x",
        "col:val",
        "^start",
        "",
        "   ",
        "!!! ??? ...",
        "\"",
        "*",
        "()",
        "OR",
        "AND NOT OR",
        "content:foo",
        "tags:",
        "{col} : foo",
        "foo\0bar",
        "e\u{301}t\u{e9} caf\u{e9} \u{bd} \u{b2} 日本語 🦑",
        long.as_str(),
    ];
    for query in queries {
        if let Err(error) = store.search_text("user:1", query, 10) {
            panic!("{query:?} failed: {error}");
        }
        if let Err(error) = store.candidates("user:1", query, 5) {
            panic!("{query:?} failed as candidate text: {error}");
        }
    }
    assert!(store.search_text("user:1", "", 10).unwrap().is_empty());
    assert!(store.search_text("user:1", "!!! ... ???", 10).unwrap().is_empty());
    assert_eq!(ids(&store, "user:1", "NEAR(a b)").len(), 1, "`near` is searched as a word");
    assert_eq!(ids(&store, "user:1", "col:val").len(), 1);
    assert_eq!(ids(&store, "user:1", "\"unbalanced foo*").len(), 1);
}

#[test]
fn full_text_ranking_prefers_more_matching_words() {
    let (_directory, store) = store();
    let both = store.insert(&memory("user:1", "the user prefers dark mode in the editor"), None, NOW).unwrap();
    let one = store.insert(&memory("user:1", "dark chocolate is a favourite"), None, NOW).unwrap();
    store.insert(&memory("user:1", "unrelated note about taxes"), None, NOW).unwrap();
    let hits = store.search_text("user:1", "dark mode editor", 10).unwrap();
    assert_eq!(hits.iter().map(|hit| hit.id).collect::<Vec<_>>(), vec![both, one]);
    assert!(hits[0].score < hits[1].score, "lower BM25 is better: {hits:?}");
    assert_eq!(ids(&store, "user:1", "preferring"), vec![both], "porter stemming");
}

#[test]
fn every_read_stays_inside_its_context() {
    let (_directory, store) = store();
    let mine = store.insert(&memory("user:1", "the garden needs water"), None, NOW).unwrap();
    let theirs = store.insert(&memory("user:2", "the garden needs water"), None, NOW).unwrap();
    let linked_theirs = NewMemory {
        links: vec![MemoryLink { kind: LinkKind::RelatedTo, target: theirs }],
        ..memory("user:2", "water it daily")
    };
    let their_link = store.insert(&linked_theirs, None, NOW).unwrap();

    assert_eq!(ids(&store, "user:1", "garden water"), vec![mine]);
    let candidates = store.candidates("user:1", "The garden needs water!", 5).unwrap();
    assert_eq!(candidates.iter().map(|memory| memory.id).collect::<Vec<_>>(), vec![mine]);
    assert_eq!(store.get_many("user:1", &[mine, theirs, their_link], NOW).unwrap().len(), 1);
    assert!(store.links("user:1", &[theirs, their_link]).unwrap().is_empty());
    assert_eq!(store.links("user:2", &[theirs]).unwrap().len(), 1);
    let listed = store.list("user:1", &ListFilter::default(), NOW).unwrap();
    assert_eq!(listed.iter().map(|memory| memory.id).collect::<Vec<_>>(), vec![mine]);
    assert_eq!(store.stats("user:1").unwrap().memories, 1);
    assert_eq!(store.stats("user:2").unwrap().memories, 2);
    assert_eq!(store.stats("nobody").unwrap().memories, 0);

    store.touch("user:1", &[theirs], NOW + 1).unwrap();
    assert_eq!(store.get_many("user:2", &[theirs], NOW).unwrap()[0].access_count, 0);
    assert!(!store.delete("user:1", theirs).unwrap());
    let update = MemoryUpdate {
        content: "hijacked".into(),
        importance: 1.0,
        tags: Vec::new(),
        expires_at: None,
        links: Vec::new(),
    };
    assert!(matches!(store.update("user:1", theirs, &update, None, NOW), Err(MemoryError::NotFound { .. })));
    assert_eq!(store.get_many("user:2", &[theirs], NOW).unwrap()[0].content, "the garden needs water");
    assert!(store.delete("user:2", theirs).unwrap());
    assert!(store.links("user:2", &[their_link]).unwrap().is_empty(), "links go with the memory");
}

#[test]
fn candidates_put_the_same_normalized_text_first() {
    let (_directory, store) = store();
    let similar = store.insert(&memory("user:1", "user prefers dark mode in editors"), None, NOW).unwrap();
    let same = store.insert(&memory("user:1", "User prefers DARK mode."), None, NOW).unwrap();
    let found = store.candidates("user:1", "user prefers dark mode", 5).unwrap();
    assert_eq!(found.iter().map(|memory| memory.id).collect::<Vec<_>>(), vec![same, similar]);
    assert_eq!(store.candidates("user:1", "user prefers dark mode", 1).unwrap().len(), 1);
    assert!(store.candidates("user:1", "user prefers dark mode", 0).unwrap().is_empty());
}

#[test]
fn list_filters_by_type_and_pages_newest_first() {
    let (_directory, store) = store();
    let mut ids = Vec::new();
    for (index, kind) in
        [MemoryType::Fact, MemoryType::Todo, MemoryType::Fact, MemoryType::Event].into_iter().enumerate()
    {
        let new = NewMemory { kind, ..memory("user:1", &format!("memory number {index}")) };
        ids.push(store.insert(&new, None, NOW + i64::try_from(index).unwrap()).unwrap());
    }
    let all = store.list("user:1", &ListFilter::default(), NOW + 10).unwrap();
    assert_eq!(all.iter().map(|memory| memory.id).collect::<Vec<_>>(), vec![ids[3], ids[2], ids[1], ids[0]]);
    let facts = ListFilter { types: vec![MemoryType::Fact], limit: 10, offset: 0 };
    let listed = store.list("user:1", &facts, NOW + 10).unwrap();
    assert_eq!(listed.iter().map(|memory| memory.id).collect::<Vec<_>>(), vec![ids[2], ids[0]]);
    let page = ListFilter { types: Vec::new(), limit: 2, offset: 1 };
    let listed = store.list("user:1", &page, NOW + 10).unwrap();
    assert_eq!(listed.iter().map(|memory| memory.id).collect::<Vec<_>>(), vec![ids[2], ids[1]]);
}

#[test]
fn the_fingerprint_changes_with_every_change_but_not_with_recall() {
    let (_directory, store) = store();
    let mut seen = vec![store.fingerprint("user:1").unwrap()];
    let changed = |store: &SqliteMemoryStore, seen: &mut Vec<String>, what: &str| {
        let fingerprint = store.fingerprint("user:1").unwrap();
        assert!(!seen.contains(&fingerprint), "{what} kept fingerprint {fingerprint}");
        seen.push(fingerprint);
    };
    let first = store.insert(&memory("user:1", "first"), None, NOW).unwrap();
    changed(&store, &mut seen, "insert");
    let second = store.insert(&memory("user:1", "second"), None, NOW).unwrap();
    changed(&store, &mut seen, "second insert in the same second");
    let update = MemoryUpdate {
        content: "first, reworded".into(),
        importance: 0.5,
        tags: Vec::new(),
        expires_at: None,
        links: vec![MemoryLink { kind: LinkKind::RelatedTo, target: second }],
    };
    store.update("user:1", first, &update, None, NOW).unwrap();
    changed(&store, &mut seen, "update in the same second");
    let before_recall = store.fingerprint("user:1").unwrap();
    store.touch("user:1", &[first, second], NOW + 1).unwrap();
    assert_eq!(store.fingerprint("user:1").unwrap(), before_recall, "recall bookkeeping is not a change");
    let other = store.fingerprint("user:2").unwrap();
    store.insert(&memory("user:2", "elsewhere"), None, NOW).unwrap();
    assert_eq!(store.fingerprint("user:1").unwrap(), before_recall, "other contexts do not count");
    assert_ne!(store.fingerprint("user:2").unwrap(), other);
    store.delete("user:1", second).unwrap();
    changed(&store, &mut seen, "delete");
    let expiring = NewMemory { expires_at: Some(NOW + 5), ..memory("user:1", "soon gone") };
    store.insert(&expiring, None, NOW).unwrap();
    changed(&store, &mut seen, "insert of an expiring memory");
    store.expire(NOW + 5).unwrap();
    changed(&store, &mut seen, "expiry");
}

fn service(store: &SqliteMemoryStore) -> Memories {
    let clock = Arc::new(FixedClock(UNIX_EPOCH + Duration::from_secs(NOW as u64)));
    Memories::new(Arc::new(store.clone()), None, clock)
}

#[tokio::test]
async fn rewordings_merge_through_the_service_among_many_memories() {
    let (_directory, store) = store();
    let memories = service(&store);
    let cities = ["Porto", "Lisbon", "Berlin", "Paris", "Rome", "Oslo", "Vienna", "Prague"];
    let jobs = ["nurse", "teacher", "pilot", "baker", "lawyer", "chef", "architect", "dentist"];
    let mut originals = Vec::new();
    for index in 0..600_usize {
        let content = format!(
            "The user's friend number {index} lives in {} and works as a {} since the year {}",
            cities[index % cities.len()],
            jobs[index / cities.len() % jobs.len()],
            1950 + index % 70
        );
        let new = NewMemory { context: "user:1".into(), ..memory("user:1", &content) };
        let SaveOutcome::Created(id) = memories.save(new).await.unwrap() else { panic!("{content} merged") };
        originals.push((id, content));
    }
    for (id, content) in originals.iter().step_by(7) {
        let reworded = format!("{}.", content.replace("The user's", "the user's").replace(" and ", " and also "));
        let outcome = memories.save(memory("user:1", &reworded)).await.unwrap();
        assert_eq!(outcome, SaveOutcome::Updated(*id), "{reworded}");
    }
    assert_eq!(store.stats("user:1").unwrap().memories, 600);
}

#[tokio::test]
async fn a_bulk_save_is_one_transaction_that_merges_exact_rewordings() {
    let (_directory, store) = store();
    let memories = service(&store);
    let existing = memories.save(memory("owner", "Allergic to peanuts")).await.unwrap().id();
    let batch = vec![
        memory("owner", "allergic to PEANUTS."),
        memory("owner", "Runs every Tuesday"),
        memory("owner", "runs every tuesday"),
        memory("group:x", "Runs every Tuesday"),
    ];
    let outcomes = memories.save_many(batch).await.unwrap();
    assert_eq!(outcomes[0], SaveOutcome::Updated(existing));
    let created = outcomes[1].id();
    assert!(matches!(outcomes[1], SaveOutcome::Created(_)));
    assert_eq!(outcomes[2], SaveOutcome::Updated(created));
    assert!(matches!(outcomes[3], SaveOutcome::Created(id) if id != created), "other contexts never merge");
    assert_eq!(store.stats("owner").unwrap().memories, 2);
    assert_eq!(ids(&store, "owner", "tuesday"), vec![created]);
    assert_eq!(store.find_same("owner", "runs every tuesday").unwrap().map(|memory| memory.id), Some(created));
    assert!(store.find_same("owner", "runs on mondays").unwrap().is_none());
}
