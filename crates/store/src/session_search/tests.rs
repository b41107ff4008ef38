//! Tests of the transcripts' full-text index: kept in step on append, caught up from the
//! files, scoped by context, hostile queries read as words.

use squidbot_core::store::{Durability, SessionStore};
use squidbot_types::session::{HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionHeader};

use super::*;
use crate::JsonlSessionStore;

fn header(key: &str, context: &str) -> SessionHeader {
    SessionHeader {
        kind: HeaderTag::Header,
        version: SESSION_FORMAT_VERSION,
        id: format!("id-{key}"),
        key: key.into(),
        context: context.into(),
        created: "2026-01-01T00:00:00Z".into(),
    }
}

fn message(id: &str, content: &str) -> SessionEntry {
    SessionEntry {
        id: id.into(),
        parent: None,
        timestamp: "2026-01-01T00:00:01Z".into(),
        body: EntryBody::Message {
            role: MessageRole::User,
            content: content.into(),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        },
    }
}

#[tokio::test]
async fn files_written_elsewhere_are_caught_up_and_scoped_by_context() {
    let directory = tempfile::tempdir().unwrap();
    let files = JsonlSessionStore::new(directory.path().join("sessions"));
    let database = Database::open(&directory.path().join("db.sqlite")).unwrap();
    let index = SessionSearchIndex::new(database, directory.path().join("sessions"));
    for (key, context, text) in [("mine", "owner", "the walrus sings"), ("theirs", "alice", "a walrus dances")] {
        files.create(&header(key, context)).await.unwrap();
        files.append(key, &[message(&format!("{key}-1"), text)], Durability::Synced).await.unwrap();
    }
    let hits = index.search("walrus", SearchScope::Everything, 10).await.unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    let hits = index.search("WALRUS", SearchScope::Context("alice"), 10).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].key.as_str(), hits[0].entry_id.as_str()), ("theirs", "theirs-1"));
    assert!(hits[0].snippet.contains("**walrus**"), "{}", hits[0].snippet);

    // An append through the index is found without a sync; one behind its back after it.
    index.add("mine", None, &[message("mine-2", "penguins too")]).unwrap();
    assert_eq!(index.find("penguins", SearchScope::Everything, 10).unwrap().len(), 1);
    files.append("theirs", &[message("theirs-2", "penguins again")], Durability::Synced).await.unwrap();
    assert_eq!(index.search("penguins", SearchScope::Everything, 10).await.unwrap().len(), 2);

    assert!(files.remove("theirs").await.unwrap());
    assert_eq!(index.sync().unwrap().forgotten, 1);
    assert!(index.find("dances", SearchScope::Everything, 10).unwrap().is_empty());
    assert_eq!(index.reindex().unwrap().indexed, 1);
    assert_eq!(index.find("walrus", SearchScope::Everything, 10).unwrap().len(), 1);
}

#[tokio::test]
async fn query_syntax_is_read_as_words() {
    let directory = tempfile::tempdir().unwrap();
    let files = JsonlSessionStore::new(directory.path().join("sessions"));
    let index = SessionSearchIndex::new(
        Database::open(&directory.path().join("db.sqlite")).unwrap(),
        directory.path().join("sessions"),
    );
    files.create(&header("s", "owner")).await.unwrap();
    files.append("s", &[message("e1", "said \"hello\" OR NOT")], Durability::Synced).await.unwrap();
    for query in ["\"hello", "hello OR", "NOT*", "-hello", "hello)"] {
        assert!(index.search(query, SearchScope::Everything, 5).await.is_ok(), "{query}");
    }
    assert!(matches!(index.search("   ", SearchScope::Everything, 5).await, Err(SearchError::EmptyQuery)));
}
