//! The agent bus end to end: `squidbot send` with and without a running gateway, trigger
//! files delivered when the gateway starts (malformed lines quarantined), the journal in
//! the real database, refusals, background workers sending as themselves under owner
//! binding, and the `user` target.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{Running, TOKEN, gateway_home};
use crate::harness::{Home, messages};
use crate::protocol::{Client, connect_params};

/// A port nothing listens on right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A gateway home whose `squidbot send` finds the gateway on a fixed port.
pub(crate) fn bus_home(server: &ScriptedLlm) -> Home {
    let home = gateway_home(server);
    home.append_config(&format!("[gateway]\nport = {}\n", free_port()));
    home
}

/// Starts the gateway on the configured port.
pub(crate) async fn start_gateway(home: &Home) -> Running {
    start_gateway_with(home, &[]).await
}

/// Starts the gateway on the configured port with extra environment variables.
pub(crate) async fn start_gateway_with(home: &Home, environment: &[(&str, &str)]) -> Running {
    let mut command = home.command(&["gateway"]);
    for (name, value) in environment {
        command.env(name, value);
    }
    crate::gateway::started(command).await
}

/// `bus.health {target}` over the WebSocket protocol.
async fn bus_health(gateway: &Running, target: &str) -> Value {
    let (mut client, _) = Client::open(gateway).await;
    let connected = client.call("connect", connect_params(4, &["operator.read"], json!({"token": TOKEN}))).await;
    assert_eq!(connected["ok"], true, "{connected}");
    let response = client.call("bus.health", json!({"target": target})).await;
    assert_eq!(response["ok"], true, "{response}");
    response["payload"].clone()
}

fn trigger_file(home: &Home, name: &str) -> PathBuf {
    home.path().join("triggers").join(name)
}

/// The user messages of every request the scripted model received.
pub(crate) fn user_messages(server: &ScriptedLlm) -> Vec<String> {
    server
        .requests()
        .iter()
        .flat_map(|request| messages(&request.body))
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str().map(str::to_owned))
        .collect()
}

/// Waits until `done` holds, up to 20 s.
pub(crate) async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

/// The journal rows, oldest first.
pub(crate) fn journal(home: &Home) -> Vec<squidbot_bus::JournalEntry> {
    let database = squidbot_store::Database::open(&home.path().join("squidbot.db")).unwrap();
    squidbot_store::SqliteBusJournal::new(database).recent(100).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_gateway_the_message_waits_in_the_trigger_file_until_the_gateway_starts() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let run = home.run(&["send", "assistant", "check the backups"]).await.success();
    assert!(run.stdout.starts_with("fallback.triggered: (USER #1) to assistant"), "{}", run.stdout);
    let pending = std::fs::read_to_string(trigger_file(&home, "assistant.txt")).unwrap();
    let line: Value = serde_json::from_str(pending.trim_end()).unwrap();
    assert_eq!(
        (line["from"].as_str(), line["seq"].as_u64(), line["body"].as_str()),
        (Some("user"), Some(1), Some("check the backups"))
    );
    assert!(line["correlation_id"].as_str().is_some_and(|id| !id.is_empty()), "{line}");

    server.push(Reply::text("Backups are fine."));
    let _gateway = start_gateway(&home).await;
    eventually("the model to get the message", || {
        user_messages(&server).iter().any(|text| text == "(USER #1): check the backups")
    })
    .await;
    eventually("the trigger file to be emptied", || !trigger_file(&home, "assistant.txt").exists()).await;
    assert!(!trigger_file(&home, "assistant.processing").exists());
    let rows = journal(&home);
    let results: Vec<&str> = rows.iter().map(|row| row.result.as_str()).collect();
    assert_eq!(results, ["fallback.triggered", "delivered.verified"], "{rows:?}");
    assert_eq!(rows[0].correlation_id, rows[1].correlation_id);
    assert!(rows[1].detail.as_deref().is_some_and(|detail| detail.starts_with("from the trigger file")), "{rows:?}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_gateway_running_a_send_is_verified_and_journaled() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let gateway = start_gateway(&home).await;
    server.push_all([Reply::text("Status: all green."), Reply::text("Disks are fine.")]);
    let run = home.run(&["send", "main", "status report please", "--priority", "urgent", "--json"]).await.success();
    let result: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(result["status"], "delivered.verified", "{result}");
    assert_eq!(result["target"], "assistant");
    assert_eq!(result["envelope"], "(USER #1): [URGENT] status report please");
    assert!(result["detail"].as_str().is_some_and(|run| !run.is_empty()), "the run id is the acknowledgement");
    eventually("the model to get the message", || {
        user_messages(&server).iter().any(|text| text == "(USER #1): [URGENT] status report please")
    })
    .await;

    let second = home.run(&["send", "assistant", "and the disks?"]).await.success();
    assert!(second.stdout.starts_with("delivered.verified: (USER #2) to assistant"), "{}", second.stdout);

    let refused = home.run(&["send", "nobody", "hello?"]).await.failure();
    assert!(refused.stderr.contains("invalid_target"), "{}", refused.stderr);
    let refused = home.run(&["send", "nobody", "hello?", "--json"]).await.failure();
    let body: Value = serde_json::from_str(refused.stdout.trim()).unwrap();
    assert_eq!(body["status"], "invalid_target");

    let rows = journal(&home);
    let summary: Vec<(&str, &str)> = rows.iter().map(|row| (row.to.as_str(), row.result.as_str())).collect();
    assert_eq!(
        summary,
        [
            ("assistant", "delivered.verified"),
            ("assistant", "delivered.verified"),
            ("nobody", "invalid_target"),
            ("nobody", "invalid_target"),
        ]
    );
    assert_eq!(rows[0].correlation_id, result["correlationId"].as_str().unwrap());
    assert_eq!(
        (rows[0].from.as_str(), rows[0].seq, rows[0].priority),
        ("user", Some(1), squidbot_bus::Priority::Urgent)
    );
    assert!(!trigger_file(&home, "assistant.txt").exists(), "nothing fell back");

    let health = bus_health(&gateway, "main").await;
    assert_eq!(health["health"], "healthy", "{health}");
    assert_eq!(bus_health(&gateway, "coder").await["health"], "no_route");
    assert_eq!(bus_health(&gateway, "nobody").await["health"], "invalid_target");
    server.push(Reply::text("ok"));
    eventually("the second turn", || user_messages(&server).iter().any(|text| text == "(USER #2): and the disks?"))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_target_is_refused_without_a_gateway_too() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    let run = home.run(&["send", "ghost", "boo"]).await.failure();
    assert!(run.stderr.contains("error: invalid_target: no target named \"ghost\""), "{}", run.stderr);
    assert!(!home.path().join("triggers").join("ghost.txt").exists());
    let empty = home.run(&["send", "assistant", "   "]).await.failure();
    assert!(empty.stderr.contains("empty_message"), "{}", empty.stderr);
    let results: Vec<String> = journal(&home).into_iter().map(|row| row.result).collect();
    assert_eq!(results, ["invalid_target", "empty_message"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_trigger_line_is_quarantined_and_the_valid_ones_are_delivered() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.run(&["send", "assistant", "first from the cli", "--priority", "fyi"]).await.success();
    let path = trigger_file(&home, "assistant.txt");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("this line is not json\n");
    text.push_str("{\"from\":\"user\",\"body\":\"second, by a script\"}\n");
    std::fs::write(&path, text).unwrap();

    server.push_all([Reply::text("Noted."), Reply::text("Noted too.")]);
    let _gateway = start_gateway(&home).await;
    eventually("both valid messages to reach the model", || {
        let seen = user_messages(&server);
        seen.iter().any(|text| text == "(USER #1): [FYI] first from the cli")
            && seen.iter().any(|text| text.ends_with("): second, by a script"))
    })
    .await;
    eventually("the trigger file to be emptied", || !path.exists()).await;
    let bad = std::fs::read_to_string(trigger_file(&home, "assistant.bad")).unwrap();
    assert_eq!(bad, "this line is not json\n");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bus_alias_to_nothing_is_a_config_error() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config("[bus]\naliases = { ops = \"nobody\" }\n");
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(run.stderr.contains("bus.aliases") || run.stdout.contains("bus.aliases"), "{}{}", run.stdout, run.stderr);
    let run = home.run(&["send", "ops", "hi"]).await.failure();
    assert!(run.stderr.contains("points at \"nobody\""), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_worker_sends_as_itself_to_its_owner_and_nowhere_else() {
    let assistant = ScriptedLlm::start().await;
    let coder = ScriptedLlm::start().await;
    let home = bus_home(&assistant);
    coder.expect_api_key(crate::harness::KEY);
    home.append_config(&format!(
        "[providers.second]\nkind = \"openai\"\napi_base = \"{}\"\napi_key = \"{}\"\n\n\
         [agents.coder]\nmodel = \"second/code-model\"\ntools = [\"read_file\", \"send\"]\n",
        coder.base_url(),
        crate::harness::KEY
    ));
    assistant.push_all([
        Reply::tool_call("delegate", json!({"agent": "coder", "task": "build it", "priority": "background"})),
        Reply::text("On it."),
        Reply::text("The coder says the tests pass."),
    ]);
    coder.push_all([
        Reply::tool_call("send", json!({"target": "main", "message": "tests pass", "priority": "fyi"}))
            .after(Duration::from_millis(200)),
        Reply::tool_call("send", json!({"target": "user", "message": "psst"})),
        Reply::tool_call("set_status", json!({"status": "done", "outcome": "done", "result": "built"})),
    ]);
    let gateway = start_gateway_with(&home, &[("SQUIDBOT__AGENTS__ASSISTANT__MODE", "delegate")]).await;
    let (mut client, _) = Client::connected(&gateway, 4, &["operator.write", "operator.read"]).await;
    let sent = client.call("chat.send", json!({"message": "build it in the background"})).await;
    let run_id = sent["payload"]["runId"].as_str().unwrap().to_owned();
    client.chat_final(&run_id).await;
    let listed = client.call("workers.list", json!({})).await;
    let worker = listed["payload"]["workers"][0].clone();
    let worker_id = worker["id"].as_str().unwrap().to_owned();

    // The owner gets the message as a turn of the session that spawned the worker.
    eventually("the assistant to read the coder's message", || {
        user_messages(&assistant).iter().any(|text| text == "(CODER #1): [FYI] tests pass")
    })
    .await;
    client.event_where(|event| event["event"] == "chat" && event["payload"]["background"]["status"] == "done").await;
    let rows = journal(&home);
    let from_worker: Vec<(&str, &str, Option<u64>)> = rows
        .iter()
        .filter(|row| row.from == worker_id)
        .map(|row| (row.to.as_str(), row.result.as_str(), row.seq))
        .collect();
    assert_eq!(
        from_worker,
        [("assistant", "delivered.verified", Some(1)), ("user", "owner_binding_violation", None)],
        "{rows:?}"
    );
    let delivered = rows.iter().find(|row| row.from == worker_id).unwrap();
    assert_eq!(delivered.correlation_id, worker["correlationId"].as_str().unwrap(), "the worker's correlation id");

    // The worker saw both outcomes as tool results.
    let results = crate::harness::tool_results(&coder.requests()[2].body);
    assert_eq!(results[0], "delivered.verified: (CODER #1) to assistant", "{results:?}");
    assert!(results[1].contains("owner_binding_violation") && results[1].contains("may message only assistant"));

    // Once it ended, its id is a target without a route.
    let health = bus_health(&gateway, &worker_id).await;
    assert_eq!(health["health"], "no_route", "{health}");
    // A message to it is refused, not queued in a trigger file nobody would read.
    let late = client.call("bus.send", json!({"target": worker_id, "message": "still there?"})).await;
    assert_eq!(late["ok"], false, "{late}");
    assert_eq!(late["error"]["details"]["status"], "no_route", "{late}");
    assert!(!trigger_file(&home, &format!("{worker_id}.txt")).exists(), "nothing queued for an ended worker");
    let metrics = gateway.metrics().await;
    assert!(metrics.contains("squidbot_bus_messages_total{result=\"owner_binding_violation\"} 1"), "{metrics}");
    assert!(metrics.contains("squidbot_workers_finished_total{role=\"coder\",outcome=\"done\"} 1"), "{metrics}");
    assistant.assert_clean();
    coder.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_to_the_user_is_shown_at_once_and_kept_in_the_session() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    server.push_all([
        Reply::tool_call("send", json!({"target": "user", "message": "heads up: this takes a while"})),
        Reply::text("Done now."),
    ]);
    let gateway = start_gateway(&home).await;
    let (mut client, _) = Client::connected(&gateway, 4, &["operator.write", "operator.read"]).await;
    let sent = client.call("chat.send", json!({"message": "do the long thing"})).await;
    let run_id = sent["payload"]["runId"].as_str().unwrap().to_owned();
    let shown = client.event_where(|event| event["event"] == "chat" && event["payload"]["stopReason"] == "bus").await;
    let payload = &shown["payload"];
    assert_eq!(payload["state"], "final");
    assert_eq!(payload["sessionKey"], "agent:main:main");
    assert_eq!(payload["message"]["content"][0]["text"], "(ASSISTANT #1): heads up: this takes a while");
    assert_eq!(payload["bus"]["from"], "assistant");
    assert_ne!(payload["runId"], run_id.as_str(), "a message of its own, not part of the turn");
    client.chat_final(&run_id).await;
    eventually("the message in the session file", || {
        home.session_lines("agent:main:main")
            .iter()
            .any(|line| line["type"] == "message" && line["content"] == "(ASSISTANT #1): heads up: this takes a while")
    })
    .await;
    let rows = journal(&home);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].to.as_str(), rows[0].result.as_str()), ("user", "delivered.verified"));
    assert!(rows[0].detail.as_deref().is_some_and(|detail| detail.contains("agent:main:main")), "{rows:?}");
    server.assert_clean();
}
