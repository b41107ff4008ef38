//! People from the command line, on the real binary and a real home: `users` (add, role,
//! link with the merge of a stranger's context, show, token, budget, disable, unlink,
//! pairing approvals as a user, purge), `approvals` deciding requests the way a waiting
//! gateway reads them, `usage`, and `audit` with `audit verify` catching an edited row,
//! deleted rows and a chain recomputed without the key. The helpers here make homes and
//! leave behind what the gateway would have written; `users` and `oversight` hold the tests,
//! `acceptance` the end-to-end acceptance on a running gateway, `layout` a person's
//! own directory (`users/<id>/`) read into their turns.

mod acceptance;
mod layout;
mod oversight;
mod users;

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use squidbot_channels::{direct_session_key, stranger_context};
use squidbot_core::clock::{SystemClock, unix_millis};
use squidbot_core::memory::{MemoryDocuments, MemoryStore};
use squidbot_core::people::UsageLedger;
use squidbot_core::store::{Durability, SessionStore};
use squidbot_core::workspace::ContextWorkspaces;
use squidbot_store::{
    ContextDirectories, Database, FsMemoryDocuments, IndexedSessionStore, JsonlSessionStore, SqliteMemoryStore,
    SqliteSessionIndex, SqliteUsage,
};
use squidbot_testkit::ScriptedLlm;
use squidbot_types::memory::{MemoryType, NewMemory};
use squidbot_types::people::UsageRecord;
use squidbot_types::session::{EntryBody, HeaderTag, MessageRole, SESSION_FORMAT_VERSION, SessionEntry, SessionHeader};

use crate::harness::{Home, Run};

/// A home with a Telegram channel (owner `1000`) and a webhook channel `hook`.
async fn people_home() -> (ScriptedLlm, Home) {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config(
        "[channels.telegram]\ntoken = \"1:telegram-token\"\nowners = [\"1000\"]\n\n\
         [channels.hook]\nkind = \"webhook\"\nsecret = \"hook-secret-0123\"\npolicy = \"pairing\"\n",
    );
    std::fs::create_dir_all(home.workspace()).unwrap();
    (server, home)
}

fn database(home: &Home) -> Database {
    Database::open(&home.path().join("squidbot.db")).unwrap()
}

fn now_ms() -> i64 {
    unix_millis(SystemTime::now())
}

fn parsed(run: &Run) -> Value {
    serde_json::from_str(&run.stdout).unwrap_or_else(|error| panic!("not JSON ({error}): {}", run.stdout))
}

/// Runs `arguments` expecting one `error: …` line and exit code `code`; the line.
async fn refused(home: &Home, arguments: &[&str], code: i32) -> String {
    let run = home.run(arguments).await.failure();
    assert_eq!(run.status.code(), Some(code), "{arguments:?}: {}", run.stderr);
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    if code == 1 {
        let lines: Vec<&str> = run.stderr.lines().filter(|line| !line.starts_with("note: ")).collect();
        assert_eq!(lines.len(), 1, "{arguments:?}: one line: {}", run.stderr);
        assert!(lines[0].starts_with("error: "), "{}", run.stderr);
        lines[0].to_owned()
    } else {
        assert!(run.stderr.starts_with("error: "), "{}", run.stderr);
        run.stderr
    }
}

async fn json_of(home: &Home, arguments: &[&str]) -> Value {
    parsed(&home.run(arguments).await.success())
}

/// The user `id` as `users list --json` shows them.
async fn listed_user(home: &Home, id: &str) -> Option<Value> {
    let listed = json_of(home, &["users", "list", "--json"]).await;
    listed["users"].as_array().unwrap().iter().find(|user| user["id"] == id).cloned()
}

/// The audit rows (JSON), oldest first.
async fn audit_rows(home: &Home, extra: &[&str]) -> Vec<Value> {
    let mut arguments = vec!["audit", "--json", "--limit", "1000"];
    arguments.extend_from_slice(extra);
    json_of(home, &arguments).await.as_array().unwrap().clone()
}

/// What a stranger writing from `channel:sender` left: a session, a memory, memory.md,
/// a workspace file and a usage record, through the stores the gateway writes with.
/// Returns their context.
async fn stranger_was_here(home: &Home, channel: &str, sender: &str, memory: &str) -> String {
    let context = stranger_context(channel, sender);
    let key = direct_session_key(channel, sender);
    let database = database(home);
    let sessions = IndexedSessionStore::new(
        JsonlSessionStore::new(home.path().join("sessions")),
        SqliteSessionIndex::new(database.clone()),
        Arc::new(SystemClock),
    );
    sessions
        .create(&SessionHeader {
            kind: HeaderTag::Header,
            version: SESSION_FORMAT_VERSION,
            id: format!("id-{key}"),
            key: key.clone(),
            context: context.clone(),
            created: "2026-01-01T00:00:00Z".to_owned(),
        })
        .await
        .unwrap();
    let entry = SessionEntry {
        id: "m1".to_owned(),
        parent: None,
        timestamp: "2026-01-01T00:00:01Z".to_owned(),
        body: EntryBody::Message {
            role: MessageRole::User,
            content: format!("hello, it's {sender}"),
            images: Vec::new(),
            model: None,
            usage: None,
            interrupted: false,
        },
    };
    sessions.append(&key, &[entry], Durability::Synced).await.unwrap();
    let new = NewMemory {
        context: context.clone(),
        kind: MemoryType::Fact,
        content: memory.to_owned(),
        importance: 0.5,
        tags: Vec::new(),
        source: "test".to_owned(),
        expires_at: None,
        links: Vec::new(),
    };
    SqliteMemoryStore::new(database.clone()).insert(&new, None, now_ms() / 1000).unwrap();
    FsMemoryDocuments::new(home.path().join("memory")).write(&context, "- likes tea\n").unwrap();
    let workspace = ContextDirectories::new(home.path(), &home.workspace()).workspace(&context).unwrap().unwrap().path;
    std::fs::write(workspace.join("shopping.txt"), "milk\n").unwrap();
    record_usage(home, None, &context, 0, Some(0.01));
    context
}

/// Records one model call `days_ago` days back.
fn record_usage(home: &Home, user: Option<&str>, context: &str, days_ago: i64, cost: Option<f64>) {
    SqliteUsage::new(database(home))
        .record(&UsageRecord {
            at_ms: now_ms() - days_ago * 86_400_000,
            user: user.map(str::to_owned),
            context: context.to_owned(),
            session_key: "telegram:1".to_owned(),
            agent: "assistant".to_owned(),
            provider: "local".to_owned(),
            model: if cost.is_some() { "priced" } else { "free" }.to_owned(),
            input_tokens: 100,
            output_tokens: 20,
            cache_read_tokens: 5,
            cache_write_tokens: 1,
            cost,
        })
        .unwrap();
}

fn memory_contexts(home: &Home, content: &str) -> Vec<String> {
    let connection = rusqlite::Connection::open(home.path().join("squidbot.db")).unwrap();
    let mut statement = connection.prepare("SELECT context FROM memories WHERE content = ?1").unwrap();
    statement.query_map([content], |row| row.get(0)).unwrap().map(Result::unwrap).collect()
}

async fn session_context(home: &Home, key: &str) -> Option<String> {
    let sessions = json_of(home, &["sessions", "list", "--json"]).await;
    sessions
        .as_array()
        .unwrap()
        .iter()
        .find(|session| session["key"] == key)
        .map(|session| session["context"].as_str().unwrap().to_owned())
}
