//! Long-term memory end to end: the memory CLI, memory tools driven by the model,
//! hybrid recall, compaction, archival, bulletin, TTL expiry, faults.

use std::time::Duration;

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, messages, tool_results};

fn memory_json(home_output: &str) -> serde_json::Value {
    serde_json::from_str(home_output).expect("JSON output")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_cli_round_trip_merges_duplicates_and_survives_hostile_queries() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let run =
        home.run(&["memory", "add", "User prefers dark mode", "--type", "preference", "--tags", "ui"]).await.success();
    assert_eq!(run.stdout.trim(), "saved memory #1");
    let run = home.run(&["memory", "add", "The user prefers dark mode.", "--type", "preference"]).await.success();
    assert!(run.stdout.contains("updated memory #1"), "{}", run.stdout);
    home.run(&["memory", "add", "Meeting with Ana on Friday", "--type", "event"]).await.success();
    let rows = memory_json(&home.run(&["memory", "list", "--json"]).await.success().stdout);
    assert_eq!(rows.as_array().unwrap().len(), 2);
    let rows = memory_json(&home.run(&["memory", "list", "--type", "preference", "--json"]).await.success().stdout);
    assert_eq!(rows[0]["content"], "The user prefers dark mode.");
    assert_eq!(rows[0]["tags"], json!(["ui"]));

    let found = memory_json(&home.run(&["memory", "search", "dark", "--json"]).await.success().stdout);
    assert_eq!(found["hits"][0]["memory"]["id"], 1);
    assert!(found["mode"].as_str().unwrap().contains("full-text only"), "{found}");
    for hostile in ["\"unbalanced", "foo*", "NEAR(a b)", "a AND (", "-x", "col:val", "^start", "", "()*:\"'"] {
        let run = home.run(&["memory", "search", "--json", "--", hostile]).await;
        assert!(run.status.success(), "query {hostile:?} failed: {}", run.stderr);
    }
    home.run(&["memory", "rm", "1"]).await.success();
    let run = home.run(&["memory", "rm", "1"]).await.failure();
    assert!(run.stderr.contains("can't find memory 1"), "{}", run.stderr);
    let run = home.run(&["memory", "add", "x", "--type", "gossip"]).await.failure();
    assert!(run.stderr.contains("unknown memory type"), "{}", run.stderr);
    let status = memory_json(&home.run(&["status", "--json"]).await.success().stdout);
    assert_eq!(status["memory"]["memories"], 1);
    assert!(status["memory"]["recall"].as_str().unwrap().contains("full-text only"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_saves_recalls_and_maintains_memory_md() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::tool_calls(vec![
        ("memory_save", json!({"content": "User's sister is Ana, she lives in Porto", "type": "fact", "importance": 0.8, "tags": ["family"]})),
        ("memory_write", json!({"content": "- Sister: Ana (Porto)", "section": "People"})),
    ]));
    server.push(Reply::text("I'll remember that."));
    home.run(&["agent", "-m", "my sister Ana lives in Porto"]).await.success();
    let results = tool_results(&server.requests()[1].body);
    assert!(results[0].contains("saved memory #1"), "{results:?}");
    assert!(results[1].contains("updated memory.md"), "{results:?}");

    server.push(Reply::tool_call("memory_recall", json!({"query": "where does my sister live"})));
    server.push(Reply::text("Ana lives in Porto."));
    let run = home.run(&["agent", "-m", "where does my sister live?", "--session", "other"]).await.success();
    assert_eq!(run.stdout, "Ana lives in Porto.\n");
    let requests = server.requests();
    let recall = tool_results(&requests[3].body);
    assert!(recall[0].contains("#1") && recall[0].contains("Porto"), "{recall:?}");
    let system = messages(&requests[2].body)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("## People\n- Sister: Ana (Porto)"), "memory.md is in the prompt: {system}");
    let doc = home.run(&["memory", "doc"]).await.success();
    assert!(doc.stdout.contains("- Sister: Ana (Porto)"));
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hybrid_recall_finds_meaning_that_full_text_misses() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[memory]\nembedding_model = \"local/fake-embed\"\n");
    home.run(&["memory", "add", "I drive a red car to work"]).await.success();
    home.run(&["memory", "add", "Dinner with the team on Thursday"]).await.success();
    let found = memory_json(&home.run(&["memory", "search", "automobile", "--json"]).await.success().stdout);
    assert!(found["mode"].as_str().unwrap().contains("hybrid"), "{found}");
    assert_eq!(found["hits"][0]["memory"]["content"], "I drive a red car to work", "{found}");
    assert_eq!(found["hits"][0]["found"], "vector");
    let status = memory_json(&home.run(&["status", "--json"]).await.success().stdout);
    assert_eq!(status["memory"]["with_vectors"], 2);

    let plain = Home::with_minimal_config(&server);
    plain.run(&["memory", "add", "I drive a red car to work"]).await.success();
    let found = memory_json(&plain.run(&["memory", "search", "automobile", "--json"]).await.success().stdout);
    assert_eq!(found["hits"].as_array().unwrap().len(), 0, "full-text alone can't see synonyms: {found}");
    server.assert_clean();
}

/// A home whose context window is sized so the fourth turn of ~450-character messages
/// lands past the compaction threshold.
async fn crowded_home(server: &ScriptedLlm) -> Home {
    let home = Home::with_minimal_config(server);
    home.append_config("[agents.assistant]\nmax_turns = 3\n");
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.write_config(&config.replace("[llm]\n", "[llm]\nmax_tokens = 100\n"));
    for turn in 1..=3 {
        server.push(Reply::text(format!("reply {turn}")));
        let message = format!("message {turn}: {}", "words to fill the window ".repeat(18));
        home.run(&["agent", "-m", &message]).await.success();
    }
    let third = server.requests()[2].body.to_string().len() as f64 / 4.0;
    let window = (third / 0.82).ceil() as u64;
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    home.write_config(
        &config.replace("[providers.local]\n", &format!("[providers.local]\ncontext_window = {window}\n")),
    );
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_summarises_in_the_background_and_extracts_memories() {
    let server = ScriptedLlm::start().await;
    let home = crowded_home(&server).await;
    server.push(Reply::text("reply 4"));
    server.push(Reply::text(
        json!({"summary": "The user sent three long messages about filling the window.",
               "memories": [{"type": "preference", "content": "User likes long messages", "importance": 0.6}]})
        .to_string(),
    ));
    let run = home.run(&["agent", "-m", &format!("message 4: {}", "more words ".repeat(40))]).await.success();
    assert_eq!(run.stdout, "reply 4\n", "the reply is printed before compaction finishes");
    let summary_request = &server.requests()[4];
    assert!(summary_request.body["tools"].is_null(), "the summary call has no tools");
    let lines = home.session_lines("cli:local");
    let compaction = lines.iter().find(|line| line["type"] == "compaction").expect("a compaction entry");
    assert!(compaction["method"] == "summary" || compaction["method"] == "aggressive", "{compaction}");
    let first_kept = compaction["first_kept"].as_str().unwrap();
    let kept = lines.iter().find(|line| line["id"] == first_kept).unwrap();
    assert_eq!(kept["role"], "user", "cuts happen at user messages");

    let rows = memory_json(&home.run(&["memory", "list", "--json"]).await.success().stdout);
    assert_eq!(rows[0]["content"], "User likes long messages");
    assert_eq!(rows[0]["source"], "compaction");

    server.push(Reply::text("reply 5"));
    home.run(&["agent", "-m", "message 5"]).await.success();
    let sent = messages(&server.requests().last().unwrap().body);
    assert!(sent[1]["content"].as_str().unwrap().contains("three long messages"), "{sent:?}");
    assert!(!sent.iter().any(|message| message["content"].as_str().is_some_and(|text| text.starts_with("message 1"))));
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_compaction_applies_nothing_and_loses_nothing() {
    let server = ScriptedLlm::start().await;
    let home = crowded_home(&server).await;
    server.push(Reply::text("reply 4"));
    server.push(
        Reply::text(json!({"summary": "never applied", "memories": []}).to_string()).after(Duration::from_secs(30)),
    );
    let child = home.command(&["agent", "-m", "message 4 with more text to push it over"]).spawn().unwrap();
    let pid = child.id().unwrap();
    for _ in 0..400 {
        if server.requests().len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(server.requests().len(), 5, "the compaction call started");
    assert!(std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap().success());
    let output = child.wait_with_output().await.unwrap();
    assert!(!output.status.success());
    let lines = home.session_lines("cli:local");
    assert!(!lines.iter().any(|line| line["type"] == "compaction"), "no half-done compaction");
    assert_eq!(lines.iter().filter(|line| line["type"] == "message").count(), 8, "all four turns are there");
    let run = home.run(&["sessions", "show", "cli:local"]).await.success();
    assert!(!run.stderr.contains("warning"), "{}", run.stderr);
    home.run(&["memory", "list"]).await.success();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archival_extracts_memories_and_a_used_session_resumes() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("Noted, tea it is."));
    home.run(&["agent", "-m", "I always drink green tea in the morning"]).await.success();
    server.push(Reply::text(
        json!({"summary": "Tea talk.", "memories": [{"type": "preference", "content": "Drinks green tea every morning", "importance": 0.7}]}).to_string(),
    ));
    let run = home.run(&["sessions", "archive", "cli:local"]).await.success();
    assert!(run.stdout.contains("1 memories extracted"), "{}", run.stdout);
    let sessions = memory_json(&home.run(&["sessions", "list", "--json"]).await.success().stdout);
    assert_eq!(sessions[0]["status"], "archived");
    let rows = memory_json(&home.run(&["memory", "list", "--json"]).await.success().stdout);
    assert_eq!(rows[0]["source"], "archive");

    server.push(Reply::text("Good morning!"));
    let run = home.run(&["agent", "-m", "morning"]).await.success();
    assert!(run.stderr.contains("was archived; resuming it"), "{}", run.stderr);
    let sessions = memory_json(&home.run(&["sessions", "list", "--json"]).await.success().stdout);
    assert_eq!(sessions[0]["status"], "active");
    let history = messages(&server.requests().last().unwrap().body);
    assert!(history.iter().any(|message| message["content"] == "I always drink green tea in the morning"));
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_archive_and_the_bulletin_is_written_once_per_change() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[sessions]\narchive_after = \"1s\"\n[memory]\nbulletin_interval_secs = 1\n");
    server.push(Reply::text("Sure."));
    home.run(&["agent", "-m", "I'm Sam and I use vim"]).await.success();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    server.push(Reply::text(
        json!({"summary": "Intro.", "memories": [{"type": "identity", "content": "The user is called Sam", "importance": 0.9}]}).to_string(),
    ));
    server.push(Reply::text("- Identity: Sam, uses vim"));
    let run = home.run(&["maintenance"]).await.success();
    assert!(run.stdout.contains("archive_idle: 1 idle sessions archived"), "{}", run.stdout);
    assert!(run.stdout.contains("memory_bulletin: 1 bulletins refreshed"), "{}", run.stdout);
    let bulletin_request = server.requests().last().unwrap().clone();
    assert!(bulletin_request.body.to_string().contains("The user is called Sam"));

    tokio::time::sleep(Duration::from_millis(1100)).await;
    let run = home.run(&["maintenance"]).await.success();
    assert!(
        run.stdout.contains("memory_bulletin: 0 bulletins refreshed"),
        "unchanged memories skip it: {}",
        run.stdout
    );

    server.push(Reply::text("Hi Sam."));
    home.run(&["agent", "-m", "hi"]).await.success();
    let system = messages(&server.requests().last().unwrap().body)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("- Identity: Sam, uses vim"), "the bulletin is in the prompt: {system}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_memories_are_deleted_by_the_ttl_job() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::tool_call("memory_save", json!({"content": "Parking spot 42 today", "ttl_days": 0.00001})));
    server.push(Reply::text("Saved for today."));
    home.run(&["agent", "-m", "I parked at 42"]).await.success();
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let rows = memory_json(&home.run(&["memory", "list", "--json"]).await.success().stdout);
    assert_eq!(rows.as_array().unwrap().len(), 0, "expired memories are never listed");
    let run = home.run(&["maintenance"]).await.success();
    assert!(run.stdout.contains("ttl_expiry: 1 expired memories deleted"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_database_is_named_and_transcripts_are_untouched() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push(Reply::text("first"));
    home.run(&["agent", "-m", "hello"]).await.success();
    std::fs::write(home.path().join("squidbot.db"), b"this is not a database, just some text").unwrap();
    for wal in ["squidbot.db-wal", "squidbot.db-shm"] {
        let path = home.path().join(wal);
        if path.exists() {
            std::fs::remove_file(path).unwrap();
        }
    }
    let run = home.run(&["agent", "-m", "hello again"]).await.failure();
    assert!(run.stderr.contains("squidbot.db"), "{}", run.stderr);
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
    let run = home.run(&["memory", "list"]).await.failure();
    assert!(run.stderr.contains("squidbot.db"), "{}", run.stderr);
    let run = home.run(&["sessions", "show", "cli:local"]).await.success();
    assert!(run.stdout.contains("hello"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memories_import_in_bulk_and_a_bad_line_imports_nothing() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.run(&["memory", "add", "Allergic to peanuts"]).await.success();
    let file = home.path().join("memories.jsonl");
    std::fs::write(
        &file,
        "{\"content\": \"allergic to peanuts!\", \"importance\": 0.9}\n\n\
         {\"content\": \"Prefers trains over planes\", \"type\": \"preference\", \"tags\": [\"travel\"]}\n",
    )
    .unwrap();
    let run = home.run(&["memory", "import", file.to_str().unwrap()]).await.success();
    assert_eq!(run.stdout.trim(), "imported 2 memories (1 new, 1 merged into existing ones)");
    let rows = memory_json(&home.run(&["memory", "list", "--json"]).await.success().stdout);
    assert_eq!(rows.as_array().unwrap().len(), 2);

    std::fs::write(&file, "{\"content\": \"fine\"}\n{\"content\": \"bad\", \"type\": \"gossip\"}\n").unwrap();
    let run = home.run(&["memory", "import", file.to_str().unwrap()]).await.failure();
    assert!(run.stderr.contains("line 2") && run.stderr.contains("nothing was imported"), "{}", run.stderr);
    let rows = memory_json(&home.run(&["memory", "list", "--json"]).await.success().stdout);
    assert_eq!(rows.as_array().unwrap().len(), 2, "the good first line was not imported either");
}
