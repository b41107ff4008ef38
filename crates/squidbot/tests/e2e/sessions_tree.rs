//! The session tree from the CLI and through the gateway: fork at a reply, a turn on the
//! fork, the tree with two branches, switching back, HTML and Markdown exports with
//! hostile text escaped, and full-text search scoped by context.

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{gateway_home, start};
use crate::harness::Home;
use crate::protocol::Client;

const HOSTILE: &str = "<script>alert(1)</script> \"><img src=x onerror=alert(2)>";

fn tree_of(run: &str) -> Vec<Value> {
    serde_json::from_str::<Value>(run).expect("tree JSON").as_array().cloned().expect("rows")
}

fn id_of(rows: &[Value], text: &str) -> String {
    rows.iter().find(|row| row["text"] == text).unwrap_or_else(|| panic!("no row {text:?} in {rows:?}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A session in another context, written as the gateway would have.
fn write_foreign_session(home: &Home) {
    let header = json!({"type": "header", "version": 1, "id": "other", "key": "telegram:99", "context": "alice",
        "created": "2026-11-21T00:00:00Z"});
    let entry = json!({"id": "f1", "parent": null, "timestamp": "2026-11-21T00:00:01Z", "type": "message",
        "role": "user", "content": "zebra stripes are private"});
    std::fs::write(home.path().join("sessions").join("telegram:99.jsonl"), format!("{header}\n{entry}\n")).unwrap();
}

/// Three turns in `cli:local`, the first with a tool call whose arguments and result are
/// hostile HTML.
async fn three_turns(server: &ScriptedLlm, home: &Home) {
    server.push(Reply::tool_call("write_file", json!({"path": "page.html", "content": HOSTILE})));
    server.push(Reply::tool_call("read_file", json!({"path": "page.html"})));
    server.push(Reply::text(format!("first reply {HOSTILE}")));
    server.push(Reply::text("second reply"));
    server.push(Reply::text("third reply"));
    for message in ["turn one", "turn two about a zebra", "turn three"] {
        home.run(&["agent", "-m", message]).await.success();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_fork_switch_export_and_search_from_the_cli() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    three_turns(&server, &home).await;

    let rows = tree_of(&home.run(&["sessions", "tree", "cli:local", "--json"]).await.success().stdout);
    let first_reply = rows
        .iter()
        .find(|row| row["role"] == "assistant" && row["text"].as_str().unwrap().starts_with("first reply"))
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let third_reply = id_of(&rows, "third reply");
    let second_turn = id_of(&rows, "turn two about a zebra");

    let fork = home.run(&["sessions", "fork", "cli:local", "--at", &first_reply]).await.success();
    assert!(fork.stdout.contains("forked cli:local"), "{}", fork.stdout);
    server.push(Reply::text("reply on the fork"));
    home.run(&["agent", "-m", "a turn on the fork"]).await.success();
    let on_fork = server.requests().last().unwrap().body["messages"].to_string();
    assert!(on_fork.contains("turn one") && !on_fork.contains("turn two"), "the fork continues from the reply");

    let rows = tree_of(&home.run(&["sessions", "tree", "cli:local", "--json"]).await.success().stdout);
    let branch_points: Vec<&Value> = rows.iter().filter(|row| row["children"].as_u64() > Some(1)).collect();
    assert_eq!(branch_points.len(), 1, "{rows:?}");
    assert_eq!(branch_points[0]["id"], first_reply.as_str());
    let leaf = rows.iter().find(|row| row["leaf"] == true).unwrap();
    assert_eq!(leaf["text"], "reply on the fork");
    assert!(rows.iter().any(|row| row["id"] == third_reply.as_str() && row["active"] == false));
    let text = home.run(&["sessions", "tree", "cli:local"]).await.success().stdout;
    assert!(text.contains("(2 branches)") && text.contains("<- leaf"), "{text}");

    home.run(&["sessions", "switch", "cli:local", "--to", &second_turn]).await.success();
    let rows = tree_of(&home.run(&["sessions", "tree", "cli:local", "--json"]).await.success().stdout);
    assert_eq!(rows.iter().find(|row| row["leaf"] == true).unwrap()["id"], third_reply.as_str());
    let show = home.run(&["sessions", "show", "cli:local"]).await.success().stdout;
    assert!(show.contains("third reply") && !show.contains("reply on the fork"), "{show}");

    let file = home.path().join("export.html");
    let file_argument = file.to_str().unwrap();
    home.run(&["sessions", "export", "cli:local", "--format", "html", "-o", file_argument]).await.success();
    let html = std::fs::read_to_string(&file).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("<style>"));
    assert!(!html.contains("<script") && !html.contains("<img"), "hostile text escaped");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(html.contains("Branch 1 of 2") && html.contains("Branch 2 of 2"));
    assert!(html.contains("reply on the fork") && html.contains("third reply"));
    assert!(html.contains("<details") && html.contains("read_file"));
    let markdown = home.run(&["sessions", "export", "cli:local", "--format", "md"]).await.success().stdout;
    assert!(markdown.starts_with("# Session cli:local") && markdown.contains("reply on the fork"), "{markdown}");

    write_foreign_session(&home);
    let search = home.run(&["sessions", "search", "zebra", "--json"]).await.success().stdout;
    let hits: Vec<Value> = serde_json::from_str(&search).unwrap();
    let mine: Vec<&Value> = hits.iter().filter(|hit| hit["key"] == "cli:local").collect();
    assert_eq!(mine.len(), 1, "{hits:?}");
    assert_eq!(mine[0]["entryId"], second_turn.as_str());
    assert!(mine[0]["snippet"].as_str().unwrap().contains("**zebra**"));
    assert!(hits.iter().any(|hit| hit["context"] == "alice"), "the owner's CLI sees every context");
    let reindexed = home.run(&["sessions", "search", "zebra", "--reindex"]).await.success();
    assert!(reindexed.stdout.contains("cli:local"), "{}", reindexed.stdout);

    // Clear errors, nothing lost.
    let lines = home.session_lines("cli:local").len();
    let unknown = home.run(&["sessions", "fork", "cli:local", "--at", "nope"]).await.failure();
    assert!(unknown.stderr.contains("can't find entry nope"), "{}", unknown.stderr);
    let format = home.run(&["sessions", "export", "cli:local", "--format", "pdf"]).await.failure();
    assert!(format.stderr.contains("html and md"), "{}", format.stderr);
    let missing = home.run(&["sessions", "tree", "nobody"]).await.failure();
    assert!(missing.stderr.contains("can't find session nobody"), "{}", missing.stderr);
    assert_eq!(home.session_lines("cli:local").len(), lines);

    home.run(&["sessions", "fork", "cli:local", "--at", &first_reply, "--as", "cli:copy"]).await.success();
    assert_eq!(
        home.session_lines("cli:copy").len(),
        1 + rows.iter().position(|row| row["id"] == first_reply.as_str()).unwrap() + 1
    );
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_tree_methods_through_the_gateway() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    three_turns(&server, &home).await;
    write_foreign_session(&home);
    let running = start(&home).await;
    let (mut client, hello) = Client::connected(&running, 3, &["operator.read", "operator.write"]).await;
    let methods = hello["features"]["methods"].to_string();
    for method in ["sessions.tree", "sessions.fork", "sessions.switch", "sessions.export", "sessions.search"] {
        assert!(methods.contains(method), "{method} advertised: {methods}");
    }

    let tree = client.call("sessions.tree", json!({"key": "cli:local"})).await;
    assert_eq!(tree["ok"], true, "{tree}");
    let nodes = tree["payload"]["nodes"].as_array().unwrap().clone();
    let first_reply = nodes
        .iter()
        .find(|node| node["role"] == "assistant" && node["text"].as_str().unwrap().starts_with("first reply"))
        .unwrap()["id"]
        .clone();
    let third_reply = id_of(&nodes, "third reply");

    let fork = client.call("sessions.fork", json!({"key": "cli:local", "entryId": first_reply})).await;
    assert_eq!(fork["payload"]["leaf"], first_reply, "{fork}");
    let tree = client.call("sessions.tree", json!({"key": "cli:local"})).await;
    assert_eq!(tree["payload"]["leaf"], first_reply);
    let switch = client.call("sessions.switch", json!({"key": "cli:local", "entryId": first_reply})).await;
    assert_eq!(switch["payload"]["leaf"], third_reply.as_str(), "{switch}");
    let unknown = client.call("sessions.switch", json!({"key": "cli:local", "entryId": "nope"})).await;
    assert_eq!(unknown["error"]["code"], "NOT_FOUND", "{unknown}");

    let export = client.call("sessions.export", json!({"key": "cli:local", "format": "html"})).await;
    let html = export["payload"]["text"].as_str().unwrap();
    assert!(html.contains("&lt;script&gt;") && !html.contains("<script"), "{html}");
    let bad = client.call("sessions.export", json!({"key": "cli:local", "format": "pdf"})).await;
    assert_eq!(bad["ok"], false);

    let search = client.call("sessions.search", json!({"query": "zebra"})).await;
    let hits = search["payload"]["hits"].as_array().unwrap();
    assert!(hits.iter().any(|hit| hit["key"] == "cli:local" && hit["kind"] == "message"), "{search}");

    let copy =
        client.call("sessions.fork", json!({"key": "cli:local", "entryId": first_reply, "as": "cli:copy"})).await;
    assert_eq!(copy["payload"]["key"], "cli:copy", "{copy}");
    let again =
        client.call("sessions.fork", json!({"key": "cli:local", "entryId": first_reply, "as": "cli:copy"})).await;
    assert_eq!(again["error"]["code"], "CONFLICT", "{again}");

    let (mut reader, _) = Client::connected(&running, 3, &["operator.read"]).await;
    let refused = reader.call("sessions.fork", json!({"key": "cli:local", "entryId": first_reply})).await;
    assert_eq!(refused["error"]["code"], "FORBIDDEN", "{refused}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_in_the_repl_fork_tree_model_and_compact() {
    use tokio::io::AsyncWriteExt;

    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    for reply in ["a1", "a2", "a2 again"] {
        server.push(Reply::text(reply));
    }
    server.push(Reply::text("{\"summary\": \"They said q1.\", \"memories\": []}"));
    let mut command = home.command(&["agent"]);
    command.stdin(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"q1\nq2\n/fork\nq2 differently\n/tree\n/model\n/model nowhere/none\n/compact\n/quit\n")
        .await
        .unwrap();
    drop(stdin);
    let output =
        tokio::time::timeout(std::time::Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("(forked at ") && stdout.contains("(2 branches)"), "{stdout}");
    assert!(stdout.contains("* local/test-model"), "{stdout}");
    assert!(stderr.contains("can't switch to nowhere/none"), "{stderr}");
    assert!(stdout.contains("condensed 2 older messages"), "{stdout}");
    let third = server.requests()[2].body["messages"].to_string();
    assert!(third.contains("q1") && third.contains("q2 differently") && !third.contains("\"q2\""), "{third}");
    let lines = home.session_lines("cli:local");
    assert!(lines.iter().any(|line| line["type"] == "compaction"), "{lines:?}");
    server.assert_clean();
}
