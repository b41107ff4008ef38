//! Context merges (`users link`) and purges (`users purge`) on a real home directory:
//! memories, sessions, the memory document, the workspace, jobs and usage, read back
//! through the stores that use them.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use squidbot_core::clock::SystemClock;
use squidbot_core::jobs::{ContextMode, Job, JobKind, JobStatus};
use squidbot_core::memory::{MemoryDocuments, MemoryStore};
use squidbot_core::people::{UsageLedger, UsageSubject};
use squidbot_core::store::{Durability, SessionStore};
use squidbot_core::workspace::ContextWorkspaces;
use squidbot_store::{
    Bulletin, BulletinCache, ContextDirectories, ContextPaths, Database, FsMemoryDocuments, IndexedSessionStore,
    JsonlSessionStore, MergeSummary, PurgeSummary, SqliteJobStore, SqliteMemoryStore, SqliteSessionIndex, SqliteUsage,
    merge_context, purge_context,
};
use squidbot_types::memory::{LinkKind, MemoryLink};
use squidbot_types::people::UsageRecord;
use squidbot_types::session::{HeaderTag, SESSION_FORMAT_VERSION, SessionHeader};

use crate::memories::{NOW, memory};
use crate::user;

const STRANGER: &str = "user:telegram:42";
const ALICE: &str = "user:alice";

/// A squidbot home with every store over it.
struct Home {
    directory: tempfile::TempDir,
    database: Database,
    memories: SqliteMemoryStore,
    sessions: IndexedSessionStore,
    index: SqliteSessionIndex,
    documents: FsMemoryDocuments,
    workspaces: ContextDirectories,
    jobs: SqliteJobStore,
    usage: SqliteUsage,
    paths: ContextPaths,
}

impl Home {
    fn new() -> Home {
        let directory = tempfile::tempdir().unwrap();
        let home = directory.path();
        let owner_workspace = home.join("workspace");
        fs::create_dir_all(&owner_workspace).unwrap();
        fs::write(owner_workspace.join("SOUL.md"), "be kind").unwrap();
        let database = Database::open(&home.join("squidbot.db")).unwrap();
        let index = SqliteSessionIndex::new(database.clone());
        Home {
            memories: SqliteMemoryStore::new(database.clone()),
            sessions: IndexedSessionStore::new(
                JsonlSessionStore::new(home.join("sessions")),
                index.clone(),
                Arc::new(SystemClock),
            ),
            index,
            documents: FsMemoryDocuments::new(home.join("memory")),
            workspaces: ContextDirectories::new(home, &owner_workspace),
            jobs: SqliteJobStore::new(database.clone()),
            usage: SqliteUsage::new(database.clone()),
            paths: ContextPaths::new(home, &owner_workspace),
            database,
            directory,
        }
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.directory.path().join(relative)
    }

    /// The workspace of `context`, made (and seeded from the owner's) as the gateway would.
    fn workspace(&self, context: &str) -> PathBuf {
        self.workspaces.workspace(context).unwrap().unwrap().path
    }

    /// A session of `context` with two messages.
    async fn session(&self, key: &str, context: &str) {
        let header = SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: format!("id-{key}"),
            key: key.to_owned(),
            context: context.to_owned(),
            created: "2026-01-01T00:00:00Z".to_owned(),
        };
        self.sessions.create(&header).await.unwrap();
        let entries = [
            user("u1", None, &format!("hello from {key}"), "2026-01-01T00:00:01Z"),
            user("u2", Some("u1"), "and again", "2026-01-01T00:00:02Z"),
        ];
        self.sessions.append(key, &entries, Durability::Synced).await.unwrap();
    }

    fn job(&self, id: &str, kind: JobKind, context: &str) {
        self.jobs
            .insert_blocking(&Job {
                id: id.to_owned(),
                kind,
                name: format!("job {id}"),
                schedule: "every 1h".to_owned(),
                timezone: "UTC".to_owned(),
                message: "remind me".to_owned(),
                channel: None,
                context_mode: ContextMode::Isolated,
                owner_context: context.to_owned(),
                status: JobStatus::Active,
                next_run: Some(5_000),
                last_run: None,
                last_error: None,
                consecutive_failures: 0,
                created: 1_000,
                source_hash: None,
                seed: None,
                active_hours: None,
            })
            .unwrap();
    }

    fn call(&self, user: Option<&str>, context: &str) {
        self.usage
            .record(&UsageRecord {
                at_ms: 1_000,
                user: user.map(str::to_owned),
                context: context.to_owned(),
                session_key: "s".to_owned(),
                agent: "assistant".to_owned(),
                provider: "openai".to_owned(),
                model: "gpt-5".to_owned(),
                input_tokens: 10,
                output_tokens: 5,
                cache_read_tokens: 0,
                cache_write_tokens: 0,
                cost: Some(0.5),
            })
            .unwrap();
    }

    fn calls(&self, subject: UsageSubject) -> u64 {
        self.usage.totals(&subject, 0).unwrap().calls
    }

    fn owner_of_job(&self, id: &str) -> Option<String> {
        self.jobs.get_blocking(id).unwrap().map(|job| job.owner_context)
    }
}

fn vector(axis: usize) -> Vec<f32> {
    let mut values = vec![0.0_f32; 8];
    values[axis] = 1.0;
    values
}

fn files_under(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(directory) = pending.pop() {
        for entry in fs::read_dir(&directory).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else {
                found.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    found.sort();
    found
}

#[tokio::test]
async fn a_merge_moves_everything_of_a_context_and_loses_nothing() {
    let home = Home::new();
    // What the stranger left before they were known.
    let tea = home.memories.insert(&memory(STRANGER, "likes green tea"), Some(&vector(0)), NOW).unwrap();
    let mut linked = memory(STRANGER, "drinks it without sugar");
    linked.links = vec![MemoryLink { kind: LinkKind::RelatedTo, target: tea }];
    let sugar = home.memories.insert(&linked, Some(&vector(1)), NOW).unwrap();
    let porto = home.memories.insert(&memory(ALICE, "lives in Porto"), Some(&vector(2)), NOW).unwrap();
    home.session("telegram:42", STRANGER).await;
    home.session("alice:web", ALICE).await;
    // A session file older than the index, known only by its header.
    JsonlSessionStore::new(home.path("sessions"))
        .create(&SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: "old".to_owned(),
            key: "telegram:42:old".to_owned(),
            context: STRANGER.to_owned(),
            created: "2025-01-01T00:00:00Z".to_owned(),
        })
        .await
        .unwrap();
    let before = home.sessions.load("telegram:42").await.unwrap().unwrap();
    home.documents.write(STRANGER, "- likes tea\n").unwrap();
    home.documents.write(ALICE, "# Alice\n- lives in Porto\n").unwrap();
    let stranger_workspace = home.workspace(STRANGER);
    let alice_workspace = home.workspace(ALICE);
    fs::create_dir_all(stranger_workspace.join("notes")).unwrap();
    fs::write(stranger_workspace.join("notes/todo.md"), "buy tea").unwrap();
    fs::write(stranger_workspace.join("USER.md"), "a tea drinker").unwrap();
    fs::write(alice_workspace.join("USER.md"), "Alice").unwrap();
    home.job("remind", JobKind::User, STRANGER);
    home.call(None, STRANGER);
    BulletinCache::new(home.database.clone())
        .put(STRANGER, &Bulletin { content: "tea".into(), fingerprint: "f".into(), generated_at: 1 })
        .unwrap();

    let summary = merge_context(&home.database, &home.paths, STRANGER, ALICE).unwrap();
    assert_eq!(
        summary,
        MergeSummary { memories: 2, sessions: 2, files: 3, jobs: 1, usage: 1, document: true },
        "SOUL.md, notes/todo.md and USER.md"
    );

    // Memories are recalled in the new context, by text, by vector and with their links.
    let found = |query: &str| -> Vec<i64> {
        home.memories.search_text(ALICE, query, 10).unwrap().into_iter().map(|hit| hit.id).collect()
    };
    assert_eq!(found("green tea"), [tea]);
    assert_eq!(found("sugar"), [sugar]);
    let nearest = home.memories.search_vector(ALICE, &vector(1), 1).unwrap();
    assert_eq!(nearest[0].id, sugar);
    assert_eq!(home.memories.links(ALICE, &[sugar]).unwrap(), vec![(sugar, LinkKind::RelatedTo, tea)]);
    let stats = home.memories.stats(ALICE).unwrap();
    assert_eq!((stats.memories, stats.with_vectors), (3, 3));
    assert_eq!(home.memories.stats(STRANGER).unwrap().memories, 0);
    assert!(home.memories.search_text(STRANGER, "tea", 10).unwrap().is_empty());
    assert!(home.memories.search_vector(STRANGER, &vector(0), 5).unwrap().is_empty());
    assert_eq!(home.memories.get_many(ALICE, &[porto], NOW).unwrap().len(), 1);

    // Sessions: the header names the new context, the entries are intact.
    let after = home.sessions.load("telegram:42").await.unwrap().unwrap();
    assert_eq!(after.header.context, ALICE);
    assert_eq!(after.header.id, before.header.id);
    assert_eq!(after.entries, before.entries);
    assert!(after.warnings.is_empty(), "{:?}", after.warnings);
    assert_eq!(home.sessions.load("telegram:42:old").await.unwrap().unwrap().header.context, ALICE);
    assert_eq!(home.index.get("telegram:42").unwrap().unwrap().context, ALICE);
    assert_eq!(home.sessions.load("alice:web").await.unwrap().unwrap().header.context, ALICE);
    let leftovers: Vec<String> = files_under(&home.path("sessions"));
    assert_eq!(leftovers, ["alice:web.jsonl", "telegram:42.jsonl", "telegram:42:old.jsonl"], "no temporary files");

    // The memory document, appended under a heading.
    assert_eq!(
        home.documents.read(ALICE).unwrap().as_deref(),
        Some("# Alice\n- lives in Porto\n\n## Merged from user:telegram:42\n\n- likes tea\n")
    );
    assert_eq!(home.documents.read(STRANGER).unwrap(), None);
    assert!(!home.path("memory/user:telegram:42").exists());

    // The workspace: moved file by file, a clash kept beside, a duplicate dropped.
    assert_eq!(files_under(&alice_workspace), ["SOUL.md", "USER.md", "USER.md.merged", "notes/todo.md"]);
    assert_eq!(fs::read_to_string(alice_workspace.join("USER.md")).unwrap(), "Alice");
    assert_eq!(fs::read_to_string(alice_workspace.join("USER.md.merged")).unwrap(), "a tea drinker");
    assert_eq!(fs::read_to_string(alice_workspace.join("notes/todo.md")).unwrap(), "buy tea");
    assert!(!home.path("users/telegram:42").exists());

    // Jobs, usage and the bulletin.
    assert_eq!(home.owner_of_job("remind").as_deref(), Some(ALICE));
    assert_eq!(home.calls(UsageSubject::Context(ALICE.into())), 1);
    assert_eq!(home.calls(UsageSubject::Context(STRANGER.into())), 0);
    assert_eq!(BulletinCache::new(home.database.clone()).get(STRANGER).unwrap(), None);

    // Running it again finds nothing left to move.
    assert_eq!(merge_context(&home.database, &home.paths, STRANGER, ALICE).unwrap(), MergeSummary::default());
}

#[tokio::test]
async fn a_stranger_merged_into_the_owner_brings_their_files_to_the_main_workspace() {
    let home = Home::new();
    home.memories.insert(&memory(STRANGER, "likes tea"), None, NOW).unwrap();
    fs::write(home.workspace(STRANGER).join("notes.md"), "from the phone").unwrap();
    let summary = merge_context(&home.database, &home.paths, STRANGER, "owner").unwrap();
    assert_eq!((summary.memories, summary.files), (1, 2));
    assert_eq!(files_under(&home.path("workspace")), ["SOUL.md", "notes.md"]);
    assert_eq!(home.memories.stats("owner").unwrap().memories, 1);

    let refused = |from: &str, to: &str| merge_context(&home.database, &home.paths, from, to).unwrap_err().to_string();
    assert_eq!(
        refused("owner", ALICE),
        "can't merge the context owner into user:alice: the owner's context is never merged away"
    );
    assert!(refused(ALICE, ALICE).ends_with("they are the same context"));
    fs::write(home.workspace("user:bob").join("x.md"), "x").unwrap();
    assert!(refused("user:bob", "cli:local").contains("cli:local has no workspace"));
    assert!(home.path("users/bob/workspace/x.md").exists(), "nothing moved");
}

#[tokio::test]
async fn a_purge_deletes_one_context_and_leaves_the_others() {
    let home = Home::new();
    for (person, context) in [("bob", "user:bob"), ("carol", "user:carol")] {
        home.memories.insert(&memory(context, &format!("{person} likes chess")), Some(&vector(3)), NOW).unwrap();
        home.session(&format!("telegram:{person}"), context).await;
        let attachments = home.path(&format!("sessions/telegram:{person}.files"));
        fs::create_dir_all(&attachments).unwrap();
        fs::write(attachments.join("photo.jpg"), "jpeg").unwrap();
        home.documents.write(context, &format!("- {person}\n")).unwrap();
        fs::write(home.workspace(context).join("notes.md"), person).unwrap();
        home.job(&format!("job-{person}"), JobKind::User, context);
        home.call(Some(person), context);
        home.call(Some(person), "group:slack:C1");
        home.call(None, context);
    }
    // Someone else's call in bob's context stays theirs.
    home.call(Some("carol"), "user:bob");

    let summary = purge_context(&home.database, &home.paths, "user:bob", Some("bob")).unwrap();
    assert_eq!(summary, PurgeSummary { memories: 1, sessions: 1, files: 2, jobs: 1, usage: 3, document: true });

    assert_eq!(home.memories.stats("user:bob").unwrap().memories, 0);
    assert!(home.memories.search_vector("user:bob", &vector(3), 5).unwrap().is_empty());
    assert!(home.sessions.load("telegram:bob").await.unwrap().is_none());
    assert!(home.index.get("telegram:bob").unwrap().is_none());
    assert!(!home.path("sessions/telegram:bob.files").exists());
    assert_eq!(home.documents.read("user:bob").unwrap(), None);
    assert!(!home.path("users/bob").exists());
    assert_eq!(home.owner_of_job("job-bob"), None);
    assert_eq!(home.calls(UsageSubject::User("bob".into())), 0);
    assert_eq!(home.calls(UsageSubject::Context("user:bob".into())), 0);

    // Carol's is all there.
    assert_eq!(home.memories.stats("user:carol").unwrap().memories, 1);
    assert_eq!(home.memories.search_vector("user:carol", &vector(3), 5).unwrap().len(), 1);
    assert_eq!(home.sessions.load("telegram:carol").await.unwrap().unwrap().entries.len(), 2);
    assert!(home.index.get("telegram:carol").unwrap().is_some());
    assert!(home.path("sessions/telegram:carol.files/photo.jpg").exists());
    assert_eq!(home.documents.read("user:carol").unwrap().as_deref(), Some("- carol\n"));
    assert_eq!(fs::read_to_string(home.path("users/carol/workspace/notes.md")).unwrap(), "carol");
    assert_eq!(home.owner_of_job("job-carol").as_deref(), Some("user:carol"));
    assert_eq!(home.calls(UsageSubject::User("carol".into())), 3);
    assert_eq!(home.calls(UsageSubject::Context("user:carol".into())), 1);

    let error = purge_context(&home.database, &home.paths, "owner", None).unwrap_err().to_string();
    assert!(error.starts_with("can't purge the context owner: it is the owner's"), "{error}");
    assert!(home.path("workspace/SOUL.md").exists());
}

/// Writes `text` to `relative` under the home, making its directories.
fn put(home: &Home, relative: &str, text: &str) {
    let path = home.path(relative);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

#[tokio::test]
async fn a_merge_moves_a_persons_whole_directory_and_a_memory_document_left_at_the_old_place() {
    let home = Home::new();
    home.workspace(STRANGER);
    put(&home, "users/telegram:42/USER.md", "a tea drinker");
    put(&home, "users/telegram:42/HEARTBEAT.md", "- Is the kettle on?\n");
    put(&home, "users/telegram:42/skills/tea/SKILL.md", "---\nname: tea\n---\n");
    put(&home, "memory/user:telegram:42/memory.md", "- likes tea\n");
    put(&home, "users/alice/USER.md", "Alice");
    home.documents.write(ALICE, "# Alice\n").unwrap();

    let summary = merge_context(&home.database, &home.paths, STRANGER, ALICE).unwrap();
    assert!(summary.document);
    assert_eq!(summary.files, 4, "USER.md, HEARTBEAT.md, the skill and the seeded SOUL.md");
    let alice = home.path("users/alice");
    assert_eq!(
        files_under(&alice),
        ["HEARTBEAT.md", "USER.md", "USER.md.merged", "memory.md", "skills/tea/SKILL.md", "workspace/SOUL.md"]
    );
    assert_eq!(fs::read_to_string(alice.join("USER.md")).unwrap(), "Alice");
    assert_eq!(fs::read_to_string(alice.join("USER.md.merged")).unwrap(), "a tea drinker");
    assert_eq!(
        home.documents.read(ALICE).unwrap().as_deref(),
        Some("# Alice\n\n## Merged from user:telegram:42\n\n- likes tea\n")
    );
    assert!(!home.path("users/telegram:42").exists());
    assert!(!home.path("memory/user:telegram:42").exists());
    assert_eq!(merge_context(&home.database, &home.paths, STRANGER, ALICE).unwrap(), MergeSummary::default());
}

#[tokio::test]
async fn a_stranger_merged_into_the_owner_brings_their_profile_heartbeat_and_skills_beside_the_workspace_files() {
    let home = Home::new();
    put(&home, "workspace/USER.md", "the owner");
    put(&home, "users/telegram:42/USER.md", "me on my phone");
    put(&home, "users/telegram:42/HEARTBEAT.md", "- Any mail?\n");
    put(&home, "users/telegram:42/skills/tea/SKILL.md", "---\nname: tea\n---\n");
    put(&home, "users/telegram:42/workspace/notes.md", "from the phone");
    home.documents.write(STRANGER, "- likes tea\n").unwrap();

    let summary = merge_context(&home.database, &home.paths, STRANGER, "owner").unwrap();
    assert_eq!((summary.files, summary.document), (4, true));
    assert_eq!(
        files_under(&home.path("workspace")),
        ["HEARTBEAT.md", "SOUL.md", "USER.md", "USER.md.merged", "notes.md", "skills/tea/SKILL.md"]
    );
    assert_eq!(
        home.documents.read("owner").unwrap().as_deref(),
        Some("## Merged from user:telegram:42\n\n- likes tea\n")
    );
    assert!(home.path("memory/owner/memory.md").is_file(), "the owner's document stays under memory/");
    assert!(!home.path("users/telegram:42").exists());
}

#[tokio::test]
async fn a_purge_deletes_a_persons_whole_directory_and_their_document_at_both_places() {
    let home = Home::new();
    home.workspace("user:bob");
    put(&home, "users/bob/USER.md", "Bob");
    put(&home, "users/bob/HEARTBEAT.md", "- Water the basil?\n");
    put(&home, "users/bob/skills/chess/SKILL.md", "---\nname: chess\n---\n");
    home.documents.write("user:bob", "- new place\n").unwrap();
    put(&home, "memory/user:bob/memory.md", "- old place\n");
    home.job("bob-heartbeat", JobKind::Heartbeat, "user:bob");

    let summary = purge_context(&home.database, &home.paths, "user:bob", Some("bob")).unwrap();
    assert_eq!((summary.files, summary.document, summary.jobs), (4, true, 1), "with the seeded SOUL.md");
    assert!(!home.path("users/bob").exists());
    assert!(!home.path("memory/user:bob").exists());
    assert_eq!(home.owner_of_job("bob-heartbeat"), None);
}
