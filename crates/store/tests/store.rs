//! Integration tests of squidbot-store against real temporary directories and
//! database files.

#![allow(clippy::unwrap_used, reason = "test helpers outside #[test] fail loudly")]

#[path = "store/bus_journal.rs"]
mod bus_journal;
#[path = "store/crash.rs"]
mod crash;
#[path = "store/database.rs"]
mod database;
#[path = "store/documents.rs"]
mod documents;
#[path = "store/jobs.rs"]
mod jobs;
#[path = "store/ledgers.rs"]
mod ledgers;
#[path = "store/memories.rs"]
mod memories;
#[path = "store/people.rs"]
mod people;
#[path = "store/people_contexts.rs"]
mod people_contexts;
#[path = "store/vault.rs"]
mod vault;
#[path = "store/vectors.rs"]
mod vectors;

use std::collections::BTreeSet;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use squidbot_core::store::{Durability, DynSessionStore, SessionStore, StoreError};
use squidbot_core::workspace::WorkspaceFiles;
use squidbot_store::{FsWorkspace, JsonlSessionStore, MAX_WORKSPACE_FILE_BYTES, encode_key};
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};

/// Drops what schemas 8 to 10 (people, daily usage, the vault) added, for tests that turn a new database back into an
/// older one.
const DROP_PEOPLE: &str = "DROP TABLE identities; DROP TABLE users; DROP TABLE usage; DROP TABLE usage_notices; \
     DROP TABLE approvals; DROP TABLE audit_log; DROP TABLE audit_head; DROP TABLE usage_daily; \
     DROP TABLE vault_secrets; DROP TABLE session_texts; DROP TABLE session_texts_fts; \
     DROP TABLE session_text_files;";

fn header(key: &str, created: &str) -> SessionHeader {
    SessionHeader {
        kind: HeaderTag::Header,
        version: SESSION_FORMAT_VERSION,
        id: format!("id-{key}"),
        key: key.to_owned(),
        context: "local".to_owned(),
        created: created.to_owned(),
    }
}

fn message(id: &str, parent: Option<&str>, role: MessageRole, content: &str, timestamp: &str) -> SessionEntry {
    SessionEntry {
        id: id.to_owned(),
        parent: parent.map(str::to_owned),
        timestamp: timestamp.to_owned(),
        body: EntryBody::Message {
            role,
            content: content.to_owned(),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        },
    }
}

fn user(id: &str, parent: Option<&str>, content: &str, timestamp: &str) -> SessionEntry {
    message(id, parent, MessageRole::User, content, timestamp)
}

fn session_file(directory: &Path, key: &str) -> std::path::PathBuf {
    match encode_key(key) {
        Ok(stem) => directory.join(format!("{stem}.jsonl")),
        Err(error) => panic!("test key {key:?} is invalid: {error}"),
    }
}

/// Creates the session `key` in `store`.
async fn create(store: &JsonlSessionStore, key: &str, created: &str) {
    if let Err(error) = store.create(&header(key, created)).await {
        panic!("can't create session {key}: {error}");
    }
}

#[tokio::test]
async fn tree_round_trips_through_create_append_load() {
    let directory = tempfile::tempdir().unwrap();
    // A directory that does not exist yet: create makes it.
    let store = JsonlSessionStore::new(directory.path().join("sessions"));
    let header = header("cli:local", "2026-01-01T00:00:00Z");
    store.create(&header).await.unwrap();

    let trunk = vec![
        user("u1", None, "hello", "2026-01-01T00:00:01Z"),
        message("a1", Some("u1"), MessageRole::Assistant, "hi", "2026-01-01T00:00:02Z"),
    ];
    let branches = vec![
        user("u2", Some("a1"), "first branch", "2026-01-01T00:00:03Z"),
        SessionEntry {
            id: "c1".into(),
            parent: Some("u2".into()),
            timestamp: "2026-01-01T00:00:04Z".into(),
            body: EntryBody::ToolCall {
                call_id: "call_1".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"x\\ny\"}".into(),
            },
        },
        user("u3", Some("a1"), "second branch\nwith two lines", "2026-01-01T00:00:05Z"),
    ];
    store.append("cli:local", &trunk, Durability::Synced).await.unwrap();
    store.append("cli:local", &branches, Durability::Synced).await.unwrap();

    let loaded = store.load("cli:local").await.unwrap().unwrap();
    assert_eq!(loaded.header, header);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let expected: Vec<SessionEntry> = trunk.into_iter().chain(branches).collect();
    assert_eq!(loaded.entries, expected);
    let children_of_a1 = loaded.entries.iter().filter(|entry| entry.parent.as_deref() == Some("a1")).count();
    assert_eq!(children_of_a1, 2);

    let text = fs::read_to_string(session_file(&directory.path().join("sessions"), "cli:local")).unwrap();
    assert_eq!(text.lines().count(), 6, "{text}");
    assert!(text.ends_with('\n'));
}

#[tokio::test]
async fn creating_twice_fails_and_keeps_the_first() {
    let directory = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(directory.path().to_path_buf());
    create(&store, "telegram:12345", "2026-01-01T00:00:00Z").await;
    store
        .append("telegram:12345", &[user("u1", None, "kept", "2026-01-01T00:00:01Z")], Durability::Synced)
        .await
        .unwrap();
    let error = store.create(&header("telegram:12345", "2026-02-02T00:00:00Z")).await.unwrap_err();
    assert!(matches!(&error, StoreError::AlreadyExists { key } if key == "telegram:12345"), "{error}");
    assert!(error.to_string().contains("already exists"), "{error}");
    let loaded = store.load("telegram:12345").await.unwrap().unwrap();
    assert_eq!(loaded.header.created, "2026-01-01T00:00:00Z");
    assert_eq!(loaded.entries.len(), 1);
}

#[tokio::test]
async fn missing_sessions_and_invalid_keys() {
    let directory = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(directory.path().to_path_buf());
    assert!(store.load("cli:nobody").await.unwrap().is_none());
    let error = store
        .append("cli:nobody", &[user("u1", None, "x", "2026-01-01T00:00:01Z")], Durability::Synced)
        .await
        .unwrap_err();
    assert!(matches!(error, StoreError::NotFound { .. }), "{error}");
    assert!(!session_file(directory.path(), "cli:nobody").exists());

    for key in [String::new(), "x".repeat(201)] {
        let error = store.create(&header(&key, "2026-01-01T00:00:00Z")).await.unwrap_err();
        assert!(matches!(error, StoreError::InvalidKey { .. }), "{error}");
        let error = store.load(&key).await.unwrap_err();
        assert!(matches!(error, StoreError::InvalidKey { .. }), "{error}");
    }
    assert_eq!(fs::read_dir(directory.path()).unwrap().count(), 0);

    fs::write(session_file(directory.path(), "cli:local"), "garbage\n").unwrap();
    let error = store.load("cli:local").await.unwrap_err();
    assert!(error.to_string().contains("cli:local.jsonl"), "{error}");
}

#[tokio::test]
async fn append_after_a_torn_line_starts_a_new_line() {
    let directory = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(directory.path().to_path_buf());
    create(&store, "cli:local", "2026-01-01T00:00:00Z").await;
    store.append("cli:local", &[user("u1", None, "before", "2026-01-01T00:00:01Z")], Durability::Synced).await.unwrap();

    // A crash in the middle of a write leaves half a line and no newline.
    let path = session_file(directory.path(), "cli:local");
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(br#"{"id":"a1","parent":"u1","timestamp":"2026-01-01T00:00:02Z","type":"mess"#).unwrap();
    drop(file);

    let torn = store.load("cli:local").await.unwrap().unwrap();
    assert_eq!(torn.entries.len(), 1);
    assert_eq!(torn.warnings.len(), 1, "{:?}", torn.warnings);
    assert!(torn.warnings[0].contains("line 3"), "{:?}", torn.warnings);

    let after = vec![
        user("u2", Some("u1"), "after one", "2026-01-01T00:00:03Z"),
        user("u3", Some("u2"), "after two", "2026-01-01T00:00:04Z"),
    ];
    store.append("cli:local", &after, Durability::Synced).await.unwrap();

    let loaded = store.load("cli:local").await.unwrap().unwrap();
    let ids: Vec<&str> = loaded.entries.iter().map(|entry| entry.id.as_str()).collect();
    assert_eq!(ids, ["u1", "u2", "u3"]);
    assert_eq!(loaded.entries[1..], after[..]);
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("line 3"), "{:?}", loaded.warnings);
    assert_eq!(fs::read_to_string(&path).unwrap().lines().count(), 5);
}

#[tokio::test]
async fn garbage_lines_are_skipped_with_warnings() {
    let directory = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(directory.path().to_path_buf());
    create(&store, "email:a@b.c", "2026-01-01T00:00:00Z").await;
    store.append("email:a@b.c", &[user("u1", None, "one", "2026-01-01T00:00:01Z")], Durability::Synced).await.unwrap();
    let path = session_file(directory.path(), "email:a@b.c");
    let mut file = OpenOptions::new().append(true).open(&path).unwrap();
    file.write_all(
        b"this is not json\n{\"id\":\"x\",\"parent\":null,\"timestamp\":\"t\",\"type\":\"from_the_future\"}\n[1,2,3]\n",
    )
    .unwrap();
    drop(file);
    store
        .append("email:a@b.c", &[user("u2", Some("u1"), "two", "2026-01-01T00:00:02Z")], Durability::Synced)
        .await
        .unwrap();

    let loaded = store.load("email:a@b.c").await.unwrap().unwrap();
    let ids: Vec<&str> = loaded.entries.iter().map(|entry| entry.id.as_str()).collect();
    assert_eq!(ids, ["u1", "u2"]);
    assert_eq!(loaded.warnings.len(), 3, "{:?}", loaded.warnings);
    for (warning, line) in loaded.warnings.iter().zip(["line 3", "line 4", "line 5"]) {
        assert!(warning.contains(line), "{warning}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appends_to_one_key_stay_intact() {
    const TASKS: usize = 8;
    const APPENDS: usize = 25;
    let directory = tempfile::tempdir().unwrap();
    // Through the object-safe companion, as the binary wires it.
    let store: Arc<dyn DynSessionStore> = Arc::new(JsonlSessionStore::new(directory.path().to_path_buf()));
    let header = header("cli:local", "2026-01-01T00:00:00Z");
    store.create_boxed(&header).await.unwrap();

    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            // Long content makes each write large enough to tear if writes interleaved.
            let content = format!("task {task} ").repeat(500);
            for index in 0..APPENDS {
                let entry = user(&format!("t{task}-{index}"), None, &content, "2026-01-01T00:00:01Z");
                // Synced and unsynced appends mixed: both go through the same lock.
                let durability = if index % 2 == 0 { Durability::Written } else { Durability::Synced };
                store.append_boxed("cli:local", &[entry], durability).await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }

    let loaded = store.load_boxed("cli:local").await.unwrap().unwrap();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(loaded.entries.len(), TASKS * APPENDS);
    for task in 0..TASKS {
        let prefix = format!("t{task}-");
        let order: Vec<usize> =
            loaded.entries.iter().filter_map(|entry| entry.id.strip_prefix(&prefix)?.parse().ok()).collect();
        assert_eq!(order, (0..APPENDS).collect::<Vec<_>>(), "task {task}");
    }
    let text = fs::read_to_string(session_file(directory.path(), "cli:local")).unwrap();
    assert_eq!(text.lines().count(), 1 + TASKS * APPENDS);
}

#[tokio::test]
async fn list_orders_by_update_and_previews_the_last_user_message() {
    let directory = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(directory.path().to_path_buf());
    assert!(JsonlSessionStore::new(directory.path().join("absent")).list().await.unwrap().is_empty());

    create(&store, "cli:old", "2026-01-01T00:00:00Z").await;
    store
        .append("cli:old", &[user("u1", None, "old question", "2026-01-02T00:00:00Z")], Durability::Synced)
        .await
        .unwrap();

    create(&store, "cli:new", "2026-01-01T00:00:00Z").await;
    let long = format!("latest\nquestion {}", "x".repeat(100));
    store
        .append(
            "cli:new",
            &[
                user("u1", None, "earlier question", "2026-01-03T00:00:00Z"),
                user("u2", Some("u1"), &long, "2026-01-03T00:00:01Z"),
                message("a1", Some("u2"), MessageRole::Assistant, "answer", "2026-01-03T00:00:02Z"),
                SessionEntry {
                    id: "m1".into(),
                    parent: Some("a1".into()),
                    timestamp: "2026-01-03T00:00:03Z".into(),
                    body: EntryBody::ModelChange { previous: "a/x".into(), new: "b/y".into() },
                },
            ],
            Durability::Synced,
        )
        .await
        .unwrap();

    // Never appended to: `updated` is its creation time.
    create(&store, "cli:empty", "2026-01-02T12:00:00Z").await;

    // Files that are not sessions, or can't be read, are skipped.
    fs::write(directory.path().join("notes.txt"), "hello").unwrap();
    fs::write(directory.path().join(".hidden.jsonl"), "hello").unwrap();
    fs::write(directory.path().join("broken.jsonl"), "not a header\n").unwrap();
    fs::create_dir(directory.path().join("folder.jsonl")).unwrap();

    let summaries = store.list().await.unwrap();
    let keys: Vec<&str> = summaries.iter().map(|summary| summary.key.as_str()).collect();
    assert_eq!(keys, ["cli:new", "cli:empty", "cli:old"]);

    let newest = &summaries[0];
    assert_eq!(newest.updated, "2026-01-03T00:00:03Z");
    assert_eq!(newest.created, "2026-01-01T00:00:00Z");
    assert_eq!(newest.context, "local");
    assert_eq!(newest.entry_count, 4);
    assert_eq!(newest.message_count, 3);
    assert_eq!(newest.preview.chars().count(), 60);
    assert!(newest.preview.starts_with("latest question xxx"), "{}", newest.preview);
    assert!(!newest.preview.contains('\n'));

    let empty = &summaries[1];
    assert_eq!(empty.updated, "2026-01-02T12:00:00Z");
    assert_eq!((empty.entry_count, empty.message_count), (0, 0));
    assert_eq!(empty.preview, "");

    assert_eq!(summaries[2].preview, "old question");
}

#[tokio::test]
async fn tricky_keys_round_trip_through_list() {
    let directory = tempfile::tempdir().unwrap();
    let store = JsonlSessionStore::new(directory.path().to_path_buf());
    let keys = [
        "cli:local",
        "telegram:12345",
        "matrix:@user:example.org",
        "email:a@b.c",
        "../../etc/passwd",
        ".hidden",
        "100%",
        "webhook:a/b c",
        "ünïcødé:日本",
    ];
    for key in keys {
        create(&store, key, "2026-01-01T00:00:00Z").await;
    }
    // Every file landed inside the directory, none hidden.
    let names: BTreeSet<String> = fs::read_dir(directory.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names.len(), keys.len());
    assert!(names.iter().all(|name| !name.starts_with('.') && name.ends_with(".jsonl")));
    assert!(names.contains("matrix:@user:example.org.jsonl"), "{names:?}");

    let listed: BTreeSet<String> = store.list().await.unwrap().into_iter().map(|summary| summary.key).collect();
    let expected: BTreeSet<String> = keys.iter().map(|key| (*key).to_owned()).collect();
    assert_eq!(listed, expected);
    for key in keys {
        assert_eq!(store.load(key).await.unwrap().unwrap().header.key, key);
    }
}

#[test]
fn workspace_reads_only_plain_small_files_inside_root() {
    let directory = tempfile::tempdir().unwrap();
    let root = directory.path().join("workspace");
    fs::create_dir_all(root.join("prompts")).unwrap();
    fs::write(directory.path().join("x"), "outside").unwrap();
    fs::write(root.join("SOUL.md"), "soul").unwrap();
    fs::write(root.join("prompts/system.md"), "system").unwrap();
    let limit = usize::try_from(MAX_WORKSPACE_FILE_BYTES).unwrap();
    fs::write(root.join("exact.md"), "a".repeat(limit)).unwrap();
    fs::write(root.join("big.md"), "a".repeat(limit + 1)).unwrap();
    let workspace = FsWorkspace::new(root.clone());

    assert_eq!(workspace.read("SOUL.md").as_deref(), Some("soul"));
    assert_eq!(workspace.read("prompts/system.md").as_deref(), Some("system"));
    assert_eq!(workspace.read("exact.md").map(|text| text.len()), Some(limit));
    assert_eq!(workspace.read("../x"), None);
    assert_eq!(workspace.read("prompts/../../x"), None);
    let absolute = root.join("SOUL.md");
    assert_eq!(workspace.read(absolute.to_str().unwrap()), None);
    assert_eq!(workspace.read("big.md"), None);
    assert_eq!(workspace.read("missing.md"), None);
}
