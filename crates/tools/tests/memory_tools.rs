//! The memory tools through `DynTool` with a real `Memories` service over in-memory ports.

mod fakes;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use squidbot_core::memory::{DOCUMENT_CAP, DynEmbedder, Memories};
use squidbot_core::tool::{DynTool, ToolContext, ToolError, ToolOutput};
use squidbot_tools::memory_tools;
use squidbot_types::memory::MemoryType;
use tokio_util::sync::CancellationToken;

use fakes::{DownEmbedder, FakeEmbedder, InMemoryDocuments, InMemoryStore, ManualClock, START};

const DAY: i64 = 86_400;

struct Fixture {
    store: Arc<InMemoryStore>,
    documents: Arc<InMemoryDocuments>,
    clock: Arc<ManualClock>,
    tools: Vec<Arc<dyn DynTool>>,
}

impl Fixture {
    fn new() -> Self {
        Self::with(None, DOCUMENT_CAP)
    }

    fn with(embedder: Option<Arc<dyn DynEmbedder>>, document_cap: usize) -> Self {
        let store = Arc::new(InMemoryStore::default());
        let documents = Arc::new(InMemoryDocuments::default());
        let clock = Arc::new(ManualClock::new());
        let memories = Memories::new(store.clone(), embedder, clock.clone());
        let leaks = squidbot_core::leaks::LeakScanner::new(["memory-secret-4f2a9c".to_owned()]);
        let tools = memory_tools(memories, documents.clone(), document_cap, leaks);
        Self { store, documents, clock, tools }
    }

    async fn call(&self, context: &str, name: &str, arguments: Value) -> Result<ToolOutput, ToolError> {
        let tool = self.tools.iter().find(|tool| tool.spec().name == name).unwrap_or_else(|| panic!("no tool {name}"));
        let context = ToolContext {
            workspace: std::env::temp_dir(),
            session_key: format!("{context}-session"),
            context: context.to_owned(),
            cancel: CancellationToken::new(),
            correlation_id: String::new(),
            actor: None,
            skills_in_use: Default::default(),
        };
        tool.call_boxed(arguments, &context).await
    }

    async fn ok(&self, context: &str, name: &str, arguments: Value) -> String {
        match self.call(context, name, arguments.clone()).await {
            Ok(output) => output.content,
            Err(error) => panic!("{name} {arguments} failed: {error:?}"),
        }
    }

    async fn refused(&self, context: &str, name: &str, arguments: Value) -> String {
        match self.call(context, name, arguments.clone()).await {
            Err(ToolError::RespondToModel(message)) => message,
            other => panic!("{name} {arguments}: expected a refusal, got {other:?}"),
        }
    }
}

// ---- memory_save ----

#[tokio::test]
async fn save_stores_defaults_and_every_field() {
    let fixture = Fixture::new();
    assert_eq!(
        fixture.ok("alice", "memory_save", json!({"content": "Alice lives in Porto"})).await,
        "saved memory #1 (fact)"
    );
    let saved = fixture
        .ok(
            "alice",
            "memory_save",
            json!({"content": "User prefers dark mode", "type": "Preference", "importance": 0.8, "tags": [" ui ", "ui", "", "theme"], "ttl_days": 2}),
        )
        .await;
    assert_eq!(saved, "saved memory #2 (preference)");
    let all = fixture.store.all();
    assert_eq!((all[0].context.as_str(), all[0].kind, all[0].importance), ("alice", MemoryType::Fact, 0.5));
    assert_eq!((all[0].source.as_str(), all[0].expires_at), ("tool", None));
    assert!(all[0].tags.is_empty());
    assert_eq!((all[1].kind, all[1].importance), (MemoryType::Preference, 0.8));
    assert_eq!(all[1].tags, vec!["ui", "theme"]);
    assert_eq!(all[1].expires_at, Some(START + 2 * DAY));
}

#[tokio::test]
async fn secrets_are_redacted_before_memory_keeps_them() {
    let fixture = Fixture::new();
    let saved = fixture.ok("alice", "memory_save", json!({"content": "The door code is memory-secret-4f2a9c"})).await;
    assert_eq!(saved, "saved memory #1 (fact) (1 secret(s) were redacted before it was stored)");
    let stored = &fixture.store.all()[0].content;
    assert!(!stored.contains("memory-secret-4f2a9c") && stored.contains("[REDACTED"), "{stored}");

    let written = fixture.ok("alice", "memory_write", json!({"content": "# Notes\nkey memory-secret-4f2a9c"})).await;
    assert!(written.ends_with("(1 secret(s) were redacted before it was stored)"), "{written}");
    let document = fixture.documents.text("alice").unwrap();
    assert!(!document.contains("memory-secret-4f2a9c") && document.contains("[REDACTED"), "{document}");
}

#[tokio::test]
async fn saving_nearly_the_same_again_updates_the_memory() {
    let fixture = Fixture::new();
    fixture.ok("alice", "memory_save", json!({"content": "User prefers dark mode.", "importance": 0.4})).await;
    let again =
        fixture.ok("alice", "memory_save", json!({"content": "the user prefers dark mode", "importance": 0.9})).await;
    assert_eq!(again, "updated memory #1 (it said nearly the same)");
    let all = fixture.store.all();
    assert_eq!(all.len(), 1);
    assert_eq!((all[0].content.as_str(), all[0].importance), ("the user prefers dark mode", 0.9));
}

#[tokio::test]
async fn invalid_save_arguments_are_explained() {
    let fixture = Fixture::new();
    let kind = fixture.refused("alice", "memory_save", json!({"content": "x y z", "type": "opinion"})).await;
    assert_eq!(
        kind,
        "can't save the memory: unknown type \"opinion\"; use one of fact, preference, decision, identity, event, observation, todo"
    );
    let high = fixture.refused("alice", "memory_save", json!({"content": "x", "importance": 1.5})).await;
    assert_eq!(high, "can't save the memory: importance 1.5 is outside 0..1");
    let low = fixture.refused("alice", "memory_save", json!({"content": "x", "importance": -0.1})).await;
    assert_eq!(low, "can't save the memory: importance -0.1 is outside 0..1");
    for days in [0.0, -3.0] {
        let ttl = fixture.refused("alice", "memory_save", json!({"content": "x", "ttl_days": days})).await;
        assert!(ttl.contains("is not a positive number of days"), "{ttl}");
    }
    let empty = fixture.refused("alice", "memory_save", json!({"content": "   "})).await;
    assert_eq!(empty, "can't save the memory: the content is empty");
    let missing = fixture.refused("alice", "memory_save", json!({"type": "fact"})).await;
    assert!(missing.starts_with("invalid arguments") && missing.contains("content"), "{missing}");
    let tags = fixture.refused("alice", "memory_save", json!({"content": "x", "tags": "ui"})).await;
    assert!(tags.starts_with("invalid arguments"), "{tags}");
    assert!(fixture.store.all().is_empty());
}

// ---- memory_recall ----

#[tokio::test]
async fn full_text_recall_lists_compact_lines_after_a_mode_note() {
    let fixture = Fixture::new();
    fixture
        .ok(
            "alice",
            "memory_save",
            json!({"content": "User prefers dark mode", "type": "preference", "importance": 0.8, "tags": ["ui"]}),
        )
        .await;
    fixture.ok("alice", "memory_save", json!({"content": "User likes\nlong walks in the mode park"})).await;
    fixture.clock.advance(3 * DAY);
    let recalled = fixture.ok("alice", "memory_recall", json!({"query": "dark mode"})).await;
    assert_eq!(
        recalled,
        "[search: full-text only (no embedder configured)]\n\
         #1 [preference 0.8] User prefers dark mode · tags: ui · 3d ago\n\
         #2 [fact 0.5] User likes long walks in the mode park · 3d ago"
    );
    let none = fixture.ok("alice", "memory_recall", json!({"query": "bicycles"})).await;
    assert_eq!(none, "[search: full-text only (no embedder configured)]\nno memories match");
    let empty = fixture.refused("alice", "memory_recall", json!({"query": " "})).await;
    assert_eq!(empty, "can't recall memories: the query is empty");
}

#[tokio::test]
async fn hybrid_recall_finds_by_meaning_without_a_note() {
    let fixture = Fixture::with(Some(Arc::new(FakeEmbedder)), DOCUMENT_CAP);
    fixture.ok("alice", "memory_save", json!({"content": "I drive a red car"})).await;
    fixture.ok("alice", "memory_save", json!({"content": "Tomorrow brings sunny weather"})).await;
    let recalled = fixture.ok("alice", "memory_recall", json!({"query": "automobile"})).await;
    assert_eq!(recalled, "#1 [fact 0.5] I drive a red car · just now");
    assert!(fixture.store.all()[0].accessed_at.is_some(), "recall records access");
}

#[tokio::test]
async fn a_failing_embedder_degrades_to_keywords_with_a_warning() {
    let fixture = Fixture::with(Some(Arc::new(DownEmbedder)), DOCUMENT_CAP);
    assert_eq!(
        fixture.ok("alice", "memory_save", json!({"content": "Alice plays chess"})).await,
        "saved memory #1 (fact)"
    );
    let recalled = fixture.ok("alice", "memory_recall", json!({"query": "chess"})).await;
    let lines: Vec<&str> = recalled.lines().collect();
    assert!(lines[0].starts_with("[vector search unavailable: can't call down: HTTP 503"), "{recalled}");
    assert!(lines[0].ends_with("; keyword matches only]"), "{recalled}");
    assert_eq!(lines[1], "#1 [fact 0.5] Alice plays chess · just now");
}

#[tokio::test]
async fn recall_limits_default_to_8_and_cap_at_50() {
    let fixture = Fixture::new();
    for number in 0..55 {
        fixture.ok("alice", "memory_save", json!({"content": format!("coffee order {number} placed")})).await;
    }
    let count = |text: &str| text.lines().filter(|line| line.starts_with('#')).count();
    assert_eq!(count(&fixture.ok("alice", "memory_recall", json!({"query": "coffee"})).await), 8);
    assert_eq!(count(&fixture.ok("alice", "memory_recall", json!({"query": "coffee", "limit": 3})).await), 3);
    assert_eq!(count(&fixture.ok("alice", "memory_recall", json!({"query": "coffee", "limit": 500})).await), 50);
    assert_eq!(count(&fixture.ok("alice", "memory_recall", json!({"query": "coffee", "limit": 0})).await), 1);
}

// ---- memory_delete ----

#[tokio::test]
async fn delete_forgets_and_unknown_ids_are_refused() {
    let fixture = Fixture::new();
    fixture.ok("alice", "memory_save", json!({"content": "Alice has a cat"})).await;
    assert_eq!(fixture.ok("alice", "memory_delete", json!({"id": 1})).await, "deleted memory #1");
    assert!(fixture.store.all().is_empty());
    let again = fixture.refused("alice", "memory_delete", json!({"id": 1})).await;
    assert_eq!(again, "can't delete memory #1: there is no such memory; use memory_recall to find ids");
    let text = fixture.refused("alice", "memory_delete", json!({"id": "#1"})).await;
    assert!(text.starts_with("invalid arguments"), "{text}");
}

// ---- contexts ----

#[tokio::test]
async fn memories_of_one_context_are_invisible_to_another() {
    let fixture = Fixture::with(Some(Arc::new(FakeEmbedder)), DOCUMENT_CAP);
    fixture.ok("alice", "memory_save", json!({"content": "The door code is 4321"})).await;
    assert_eq!(fixture.ok("bob", "memory_recall", json!({"query": "door code"})).await, "no memories match");
    let delete = fixture.refused("bob", "memory_delete", json!({"id": 1})).await;
    assert!(delete.contains("no such memory"), "{delete}");
    assert_eq!(fixture.store.all().len(), 1);
    let saved = fixture.ok("bob", "memory_save", json!({"content": "The door code is 4321"})).await;
    assert_eq!(saved, "saved memory #2 (fact)", "not merged into alice's memory");
    assert!(fixture.ok("alice", "memory_recall", json!({"query": "door code"})).await.starts_with("#1 "));
}

// ---- memory_write ----

#[tokio::test]
async fn write_replaces_appends_and_edits_sections() {
    let fixture = Fixture::new();
    let written = fixture.ok("alice", "memory_write", json!({"content": "# Memory\n\n## People\n- Ana"})).await;
    assert_eq!(written, "updated memory.md: now 26 of 12000 characters");
    assert_eq!(fixture.documents.text("alice").unwrap(), "# Memory\n\n## People\n- Ana\n");
    fixture.ok("alice", "memory_write", json!({"content": "- Bruno", "mode": "append", "section": "## People"})).await;
    let section = fixture.ok("alice", "memory_write", json!({"content": "- tea", "section": "Likes"})).await;
    assert_eq!(section, "updated memory.md (section Likes): now 50 of 12000 characters");
    assert_eq!(fixture.documents.text("alice").unwrap(), "# Memory\n\n## People\n- Ana\n- Bruno\n\n## Likes\n- tea\n");
    fixture.ok("alice", "memory_write", json!({"content": "- coffee", "mode": "REPLACE", "section": "Likes"})).await;
    assert!(fixture.documents.text("alice").unwrap().ends_with("## Likes\n- coffee\n"));
    fixture.ok("alice", "memory_write", json!({"content": "fresh start"})).await;
    assert_eq!(fixture.documents.text("alice").unwrap(), "fresh start\n");
    let mode = fixture.refused("alice", "memory_write", json!({"content": "x", "mode": "prepend"})).await;
    assert_eq!(mode, "can't write memory.md: mode \"prepend\" is neither replace nor append");
    let empty = fixture.refused("alice", "memory_write", json!({"content": " ", "mode": "append"})).await;
    assert_eq!(empty, "can't write memory.md: the content is empty, so there is nothing to append");
    assert_eq!(fixture.documents.text("alice").unwrap(), "fresh start\n");
    assert!(fixture.documents.text("bob").is_none(), "documents are per context");
}

#[tokio::test]
async fn writes_past_the_cap_are_refused_and_change_nothing() {
    let fixture = Fixture::with(None, 40);
    fixture.documents.set("alice", "## Notes\n- one\n");
    let refusal = fixture.refused("alice", "memory_write", json!({"content": "x".repeat(40), "mode": "append"})).await;
    assert_eq!(
        refusal,
        "can't write memory.md: the result would be 57 characters, over the cap of 40 (it is 15 now); nothing was written. Condense it: rewrite the document or a section shorter with mode replace"
    );
    assert_eq!(fixture.documents.text("alice").unwrap(), "## Notes\n- one\n");
    let condensed = fixture.ok("alice", "memory_write", json!({"content": "- one, two", "section": "Notes"})).await;
    assert_eq!(condensed, "updated memory.md (section Notes): now 20 of 40 characters");
}

#[tokio::test]
async fn document_failures_reach_the_model() {
    let fixture = Fixture::new();
    fixture.documents.broken.store(true, Ordering::SeqCst);
    let failure = fixture.refused("alice", "memory_write", json!({"content": "x"})).await;
    assert_eq!(failure, "can't read memories: disk full");
}

// ---- specs ----

#[tokio::test]
async fn memory_specs_are_lean_and_flag_mutation() {
    let fixture = Fixture::new();
    let names: Vec<String> = fixture.tools.iter().map(|tool| tool.spec().name).collect();
    assert_eq!(names, ["memory_save", "memory_recall", "memory_delete", "memory_write"]);
    let mutating: Vec<bool> = fixture.tools.iter().map(|tool| tool.mutates()).collect();
    assert_eq!(mutating, [true, false, true, true]);
    let size = squidbot_tools::tool_specs_size(&fixture.tools);
    for tool in &fixture.tools {
        let text = serde_json::to_string(&tool.spec()).unwrap();
        println!("{text}");
        for noise in ["$schema", "\"title\"", "\"format\"", "null"] {
            assert!(!text.contains(noise), "{text} contains {noise}");
        }
    }
    println!("memory tool specs: {size} characters");
    assert!(size < 1_400, "memory tool specs take {size} characters");
    let save = fixture.tools[0].spec();
    assert_eq!(save.parameters["required"], json!(["content"]));
    assert!(save.parameters["properties"]["type"]["description"].as_str().unwrap().contains("observation"));
}
