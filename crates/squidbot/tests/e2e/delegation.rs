//! Delegation with the real binary: the assistant hands work to a researcher sub-agent,
//! whose tool traces stay in its own session file.

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::harness::{Home, KEY, messages, offered_tools, tool_results};

/// The default mode, which the harness switches off for the tests that script tools.
const DELEGATE_MODE: (&str, &str) = ("SQUIDBOT__AGENTS__ASSISTANT__MODE", "delegate");

/// A marker only the file the worker reads contains.
const MARKER: &str = "ZX81-inventory-marker";

fn worker_session_of(result: &str) -> String {
    let start = result.find("worker:researcher:").expect("the result names the worker's session");
    result[start..].chars().take_while(|character| !matches!(character, ')' | ' ' | '\n')).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegated_work_stays_in_the_workers_session() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    std::fs::create_dir_all(home.workspace()).unwrap();
    std::fs::write(home.workspace().join("inventory.txt"), format!("widgets: 42\n{MARKER}\n")).unwrap();
    std::fs::write(home.workspace().join("SOUL.md"), "You are cheerful.").unwrap();
    server.push_all([
        // The assistant delegates...
        Reply::tool_call(
            "delegate",
            json!({"agent": "researcher", "task": "How many widgets are in inventory.txt?", "response_format": "a number"}),
        ),
        // ...the researcher reads the file and reports...
        Reply::tool_call("read_file", json!({"path": "inventory.txt"})),
        Reply::tool_call("set_status", json!({"status": "read it", "outcome": "done", "result": "42 widgets"})),
        // ...and the assistant answers.
        Reply::text("You have 42 widgets."),
    ]);
    let run = home.run_with(&["agent", "-m", "how many widgets do I have?"], &[DELEGATE_MODE]).await.success();
    assert_eq!(run.stdout, "You have 42 widgets.\n");
    server.assert_clean();
    server.assert_script_consumed();

    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let (assistant, worker) = ([&requests[0], &requests[3]], [&requests[1], &requests[2]]);
    for request in assistant {
        let system = messages(&request.body)[0]["content"].as_str().unwrap().to_owned();
        assert!(system.contains("You are cheerful.") && system.contains("## Delegation"), "{system}");
        let tools = offered_tools(&request.body);
        let has = |name: &str| tools.iter().any(|tool| tool == name);
        assert!(has("delegate") && !has("read_file") && !has("exec"), "{tools:?}");
        let conversation = serde_json::to_string(&messages(&request.body)[1..]).unwrap();
        assert!(!conversation.contains(MARKER), "the worker's tool output stayed out: {conversation}");
        assert!(!conversation.contains("read_file") && !conversation.contains("set_status"), "{conversation}");
    }
    let results = tool_results(&requests[3].body);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("42 widgets"), "{results:?}");
    let worker_session = worker_session_of(&results[0]);

    // The worker: a sub-agent prompt without the personality, a self-contained brief.
    let system = messages(&worker[0].body)[0]["content"].as_str().unwrap().to_owned();
    assert!(system.contains("researcher sub-agent") && !system.contains("You are cheerful."), "{system}");
    let brief = messages(&worker[0].body)[1]["content"].as_str().unwrap().to_owned();
    assert!(brief.contains("How many widgets") && brief.contains("correlation "), "{brief}");
    assert!(tool_results(&worker[1].body)[0].contains(MARKER));

    // Both sessions are listed; the worker's holds the traces, the assistant's doesn't.
    let run = home.run(&["sessions", "list", "--json"]).await.success();
    let sessions: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let keys: Vec<&str> = sessions.as_array().unwrap().iter().map(|session| session["key"].as_str().unwrap()).collect();
    assert!(keys.contains(&"cli:local") && keys.contains(&worker_session.as_str()), "{keys:?}");
    let shown = home.run(&["sessions", "show", &worker_session]).await.success().stdout;
    assert!(shown.contains("→ read_file") && shown.contains("→ set_status") && shown.contains(MARKER), "{shown}");
    let shown = home.run(&["sessions", "show", "cli:local"]).await.success().stdout;
    assert!(shown.contains("→ delegate") && !shown.contains(MARKER) && !shown.contains("read_file"), "{shown}");
    assert!(shown.contains(&worker_session), "the parent entry links the worker's session: {shown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_work_reports_after_the_reply_and_joins_the_session() {
    let assistant = ScriptedLlm::start().await;
    let researcher = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&assistant);
    researcher.expect_api_key(KEY);
    home.append_config(&format!(
        "[providers.second]\nkind = \"openai\"\napi_base = \"{}\"\napi_key = \"{KEY}\"\n\n\
         [agents.researcher]\nmodel = \"second/research-model\"\nsystem_prompt = \"Cite the file you used.\"\n",
        researcher.base_url()
    ));
    assistant.push_all([
        Reply::tool_call(
            "delegate",
            json!({"agent": "researcher", "task": "find the widget count", "priority": "background"}),
        ),
        Reply::text("I'm on it; the count will follow."),
    ]);
    researcher.push_all([Reply::tool_call(
        "set_status",
        json!({"status": "done", "outcome": "done", "result": "42 widgets (inventory.txt)"}),
    )
    .after(std::time::Duration::from_millis(300))]);
    let run = home.run_with(&["agent", "-m", "count my widgets in the background"], &[DELEGATE_MODE]).await.success();
    let (reply, later) = run.stdout.split_once("\n\n").expect("the reply, then the background result");
    assert_eq!(reply, "I'm on it; the count will follow.");
    assert!(
        later.starts_with("[background researcher ") && later.trim_end().ends_with("42 widgets (inventory.txt)"),
        "{later}"
    );
    assert!(run.stderr.contains("waiting for 1 background sub-agent"), "{}", run.stderr);
    assistant.assert_clean();
    researcher.assert_clean();
    let worker_request = &researcher.requests()[0].body;
    assert_eq!(worker_request["model"], "research-model");
    assert!(messages(worker_request)[0]["content"].as_str().unwrap().contains("Cite the file you used."));

    // The result is a distinct entry of the assistant's session, linked to the worker's.
    let lines = home.session_lines("cli:local");
    let delegate = lines.iter().find(|line| line["type"] == "delegate").expect("a delegate entry");
    assert_eq!(delegate["status"], "done");
    assert_eq!(delegate["result"], "42 widgets (inventory.txt)");
    let worker_session = delegate["session"].as_str().unwrap();
    assert!(home.session_lines(worker_session).iter().any(|line| line["name"] == "set_status"));

    // The next turn shows it to the model as a marked note.
    assistant.push(Reply::text("It's 42."));
    home.run_with(&["agent", "-m", "so?"], &[DELEGATE_MODE]).await.success();
    let conversation = serde_json::to_string(&messages(&assistant.last_request().unwrap().body)).unwrap();
    assert!(conversation.contains("[Background result: researcher worker"), "{conversation}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_role_config_names_the_key() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config(
        "[agents.researcher]\ntools = [\"read_file\", \"teleport\"]\n[agents.coder]\nsystem_prompt_file = \"CODER.md\"\n",
    );
    let run = home.run_with(&["agent", "-m", "hi"], &[DELEGATE_MODE]).await.failure();
    assert!(run.stderr.contains("agents.researcher.tools[1]"), "{}", run.stderr);
    assert!(run.stderr.contains("agents.coder.system_prompt_file"), "{}", run.stderr);
    let run = home.run(&["config", "validate"]).await.failure();
    assert!(run.stderr.contains("agents.researcher.tools[1]") && run.stderr.contains("CODER.md"), "{}", run.stderr);
    assert!(server.requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateway_shows_background_results_and_lists_and_cancels_workers() {
    use crate::protocol::Client;
    use tokio::io::AsyncBufReadExt as _;

    let assistant = ScriptedLlm::start().await;
    let researcher = ScriptedLlm::start().await;
    let home = crate::gateway::gateway_home(&assistant);
    home.append_config(&format!(
        "[providers.second]\nkind = \"openai\"\napi_base = \"{}\"\napi_key = \"{KEY}\"\n\n\
         [agents.researcher]\nmodel = \"second/research-model\"\n",
        researcher.base_url()
    ));
    let mut child = home.command(&["gateway", "--port", "0"]).env(DELEGATE_MODE.0, DELEGATE_MODE.1).spawn().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line()).await.unwrap().unwrap();
    let base = first.as_deref().and_then(|line| line.strip_prefix("listening on ")).expect("the gateway started");
    let running = crate::gateway::Running { child, base: base.to_owned() };

    assistant.push_all([
        Reply::tool_call("delegate", json!({"agent": "researcher", "task": "count widgets", "priority": "background"})),
        Reply::text("On it."),
        Reply::tool_call("delegate", json!({"agent": "researcher", "task": "wait forever", "priority": "background"})),
        Reply::text("Started another."),
    ]);
    researcher.push_all([
        Reply::tool_call("set_status", json!({"status": "done", "outcome": "done", "result": "42 widgets"}))
            .after(std::time::Duration::from_millis(300)),
        Reply::stall_stream(""),
    ]);
    let (mut client, _) = Client::connected(&running, 4, &["operator.write", "operator.read"]).await;
    let sent = client.call("chat.send", json!({"message": "count my widgets"})).await;
    let run_id = sent["payload"]["runId"].as_str().unwrap().to_owned();
    let reply = client.chat_final(&run_id).await;
    assert_eq!(reply["payload"]["message"]["content"][0]["text"], "On it.");
    let background =
        client.event_where(|event| event["event"] == "chat" && event["payload"]["stopReason"] == "background").await;
    let payload = &background["payload"];
    assert_eq!(payload["state"], "final");
    assert_eq!(payload["background"]["agent"], "researcher");
    assert_eq!(payload["background"]["status"], "done");
    let text = payload["message"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("[background researcher") && text.ends_with("42 widgets"), "{text}");
    let history = client.call("chat.history", json!({})).await;
    let messages = history["payload"]["messages"].as_array().unwrap();
    let note = messages.iter().find(|message| message.get("background").is_some()).expect("the result in the history");
    assert!(note["content"][0]["text"].as_str().unwrap().ends_with("42 widgets"), "{history}");

    // A second background worker that hangs: listed, then cancelled by a person.
    let sent = client.call("chat.send", json!({"message": "and wait"})).await;
    let run_id = sent["payload"]["runId"].as_str().unwrap().to_owned();
    client.chat_final(&run_id).await;
    let listed = client.call("workers.list", json!({})).await;
    let workers = listed["payload"]["workers"].as_array().unwrap().clone();
    assert_eq!(workers.len(), 2, "{listed}");
    let hanging = workers.iter().find(|worker| worker["state"] == "running").expect("a running worker");
    let status = client.call("status", json!({})).await;
    assert_eq!(status["payload"]["workers"]["running"], 1, "{status}");
    let cancelled = client.call("workers.cancel", json!({"id": hanging["id"]})).await;
    assert_eq!(cancelled["payload"]["ok"], true, "{cancelled}");
    let ended = client
        .event_where(|event| event["event"] == "chat" && event["payload"]["background"]["status"] == "cancelled")
        .await;
    assert_eq!(ended["payload"]["background"]["workerId"], hanging["id"]);
    let again = client.call("workers.cancel", json!({"id": hanging["id"]})).await;
    assert_eq!(again["error"]["code"], "INVALID_REQUEST", "{again}");
    assistant.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workers_command_lists_and_cancels_through_the_running_gateway() {
    use crate::bus::{bus_home, eventually, start_gateway_with};

    let assistant = ScriptedLlm::start().await;
    let home = bus_home(&assistant);
    let stopped = home.run(&["workers", "list"]).await.failure();
    assert!(
        stopped.stderr.contains("no gateway is running") && stopped.stderr.contains("squidbot gateway"),
        "{}",
        stopped.stderr
    );

    // The researcher has a server of its own, so which of the two asks first can't
    // change who gets which answer: the assistant says it started, the worker stalls.
    let researcher = ScriptedLlm::start().await;
    researcher.expect_api_key(KEY);
    home.append_config(&format!(
        "[providers.second]\nkind = \"openai\"\napi_base = \"{}\"\napi_key = \"{KEY}\"\n\n\
         [agents.researcher]\nmodel = \"second/research-model\"\n",
        researcher.base_url()
    ));
    assistant.push_all([
        Reply::tool_call(
            "delegate",
            json!({"agent": "researcher", "task": "read everything", "priority": "background"}),
        ),
        Reply::text("Started."),
    ]);
    researcher.push(Reply::stall_stream(""));
    let _gateway = start_gateway_with(&home, &[DELEGATE_MODE]).await;
    let (mut client, _) = crate::protocol::Client::connected(&_gateway, 4, &["operator.write", "operator.read"]).await;
    client.call("chat.send", json!({"message": "read everything in the background"})).await;
    let mut listed = serde_json::Value::Null;
    for _ in 0..100 {
        let run = home.run(&["workers", "list", "--json"]).await.success();
        listed = serde_json::from_str(run.stdout.trim()).unwrap();
        if listed.as_array().is_some_and(|workers| !workers.is_empty()) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let worker = listed[0].clone();
    assert_eq!((worker["role"].as_str(), worker["state"].as_str()), (Some("researcher"), Some("running")), "{listed}");
    assert_eq!(worker["background"], true);
    assert_eq!(worker["owner"], "agent:main:main");
    let id = worker["id"].as_str().unwrap().to_owned();
    let table = home.run(&["workers", "list"]).await.success().stdout;
    assert!(table.starts_with("ID") && table.contains(&id) && table.contains("background"), "{table}");

    let cancelled = home.run(&["workers", "cancel", &id]).await.success();
    assert!(cancelled.stdout.contains(&format!("cancelling researcher worker {id}")), "{}", cancelled.stdout);
    let ended = client
        .event_where(|event| event["event"] == "chat" && event["payload"]["background"]["status"] == "cancelled")
        .await;
    assert_eq!(ended["payload"]["background"]["workerId"], id.as_str());
    eventually("the cancelled result in the assistant's session", || {
        home.session_lines("agent:main:main")
            .iter()
            .any(|line| line["type"] == "delegate" && line["status"] == "cancelled")
    })
    .await;
    let again = home.run(&["workers", "cancel", &id]).await.failure();
    assert!(again.stderr.contains("already ended"), "{}", again.stderr);
    let unknown = home.run(&["workers", "cancel", "nope"]).await.failure();
    assert!(unknown.stderr.contains("can't find worker nope"), "{}", unknown.stderr);
}

/// The task of the cost comparison, as the user asks it.
const WRITE_HELLO: &str = "write hello into note.txt";

/// Bytes of every request body `server` received.
fn bytes_sent(server: &ScriptedLlm) -> usize {
    server
        .requests()
        .iter()
        .map(|request| {
            request
                .header("content-length")
                .and_then(|length| length.parse().ok())
                .unwrap_or_else(|| request.body.to_string().len())
        })
        .sum()
}

/// `agent -m WRITE_HELLO` in a fresh home, delegated to a worker that answers in plain
/// text or done directly by the assistant; returns the home and the bytes sent to the model.
async fn write_hello(delegated: bool) -> (Home, usize) {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let write = Reply::tool_call("write_file", json!({"path": "note.txt", "content": "hello"}));
    let mode = if delegated {
        server.push_all([
            Reply::tool_call("delegate", json!({"agent": "worker", "task": "Write the text hello into note.txt."})),
            write,
            Reply::text("done: wrote the file"),
            Reply::text("Done: note.txt says hello."),
        ]);
        DELEGATE_MODE
    } else {
        server.push_all([write, Reply::text("Done: note.txt says hello.")]);
        ("SQUIDBOT__AGENTS__ASSISTANT__MODE", "direct")
    };
    let run = home.run_with(&["agent", "-m", WRITE_HELLO], &[mode]).await.success();
    assert_eq!(run.stdout, "Done: note.txt says hello.\n");
    assert_eq!(std::fs::read_to_string(home.workspace().join("note.txt")).unwrap(), "hello");
    server.assert_clean();
    server.assert_script_consumed();
    let requests = server.requests();
    if delegated {
        assert_eq!(requests.len(), 4, "assistant, worker's tool call, worker's answer, assistant");
        let results = tool_results(&requests[3].body);
        assert_eq!(results.len(), 1);
        assert!(
            results[0].starts_with("[worker worker ") && results[0].ends_with("finished]\n\ndone: wrote the file"),
            "the plain answer is the result: {results:?}"
        );
        assert!(
            messages(&requests[2].body).iter().all(|message| !message.to_string().contains("You ended without")),
            "no reminder"
        );
    } else {
        assert_eq!(requests.len(), 2);
    }
    (home, bytes_sent(&server))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_answering_in_plain_words_hands_its_answer_back_for_at_most_1_3_times_the_bytes_of_direct_mode() {
    let (_, direct) = write_hello(false).await;
    let (home, delegated) = write_hello(true).await;
    let ratio = delegated as f64 / direct as f64;
    eprintln!("{WRITE_HELLO:?}: direct {direct} bytes, delegated {delegated} bytes, ratio {ratio:.3}");
    assert!(ratio <= 1.3, "delegating cost {ratio:.3} times the bytes of direct mode ({delegated} / {direct})");
    let worker = home
        .session_lines("cli:local")
        .into_iter()
        .find(|line| line["type"] == "tool_result" && line["name"] == "delegate")
        .expect("the delegate result in the assistant's session");
    assert!(!worker["is_error"].as_bool().unwrap_or(false), "{worker}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_reports_failed_is_failed_and_an_empty_answer_gets_exactly_one_reminder() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    server.push_all([
        Reply::tool_call("delegate", json!({"agent": "worker", "task": "Write hello into /etc/note.txt."})),
        Reply::tool_call("set_status", json!({"status": "stuck", "outcome": "failed", "result": "/etc is not mine"})),
        Reply::text("I couldn't: /etc is not mine."),
    ]);
    let run = home.run_with(&["agent", "-m", "write hello into /etc/note.txt"], &[DELEGATE_MODE]).await.success();
    assert_eq!(run.stdout, "I couldn't: /etc is not mine.\n");
    let results = tool_results(&server.requests()[2].body);
    assert!(results[0].contains("failed] /etc is not mine"), "{results:?}");

    // A worker that answers nothing: one reminder, then it fails; no third worker call.
    server.push_all([
        Reply::tool_call("delegate", json!({"agent": "worker", "task": "Summarise note.txt."})),
        Reply::text(""),
        Reply::text(""),
        Reply::text("The worker came back empty."),
    ]);
    let run = home.run_with(&["agent", "-m", "summarise note.txt"], &[DELEGATE_MODE]).await.success();
    assert_eq!(run.stdout, "The worker came back empty.\n");
    server.assert_clean();
    server.assert_script_consumed();
    let requests = server.requests();
    assert_eq!(requests.len(), 7);
    let reminder = messages(&requests[5].body).last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(reminder.starts_with("You ended without an answer."), "{reminder}");
    let results = tool_results(&requests[6].body);
    assert!(
        results.last().unwrap().contains("failed] it ended 2 times without an answer, even after a reminder"),
        "{results:?}"
    );
}
