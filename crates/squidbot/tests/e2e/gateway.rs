//! The gateway process: `/health`, `/v1/models`, `/v1/chat/completions` plain and
//! streamed, auth, bad requests, refusing an open bind, graceful stop.

use std::time::Duration;

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::harness::{Home, messages};

pub(crate) const TOKEN: &str = "gw-test-token";

/// A running gateway and its base URL.
pub(crate) struct Running {
    pub(crate) child: tokio::process::Child,
    pub(crate) base: String,
}

impl Running {
    /// `GET /metrics` with the gateway token, as text.
    pub(crate) async fn metrics(&self) -> String {
        reqwest::Client::new()
            .get(format!("{}/metrics", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// `POST /v1/chat/completions` with `body` and the gateway token.
    pub(crate) async fn chat_completions(&self, body: &serde_json::Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.base))
            .bearer_auth(TOKEN)
            .json(body)
            .send()
            .await
            .unwrap()
    }
}

pub(crate) async fn start(home: &Home) -> Running {
    started(home.command(&["gateway", "--port", "0"])).await
}

/// Spawns `command` (a `gateway` command) and waits for its `listening on` line.
pub(crate) async fn started(mut command: tokio::process::Command) -> Running {
    let mut child = command.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line()).await.unwrap().unwrap();
    let Some(base) = first.as_deref().and_then(|line| line.strip_prefix("listening on ")) else {
        let output = child.wait_with_output().await.unwrap();
        panic!("the gateway did not start: {first:?}\n{}", String::from_utf8_lossy(&output.stderr));
    };
    Running { child, base: base.to_owned() }
}

pub(crate) fn gateway_home(server: &ScriptedLlm) -> Home {
    let home = Home::with_minimal_config(server);
    home.append_config(&format!("[gateway.auth]\ntoken = \"{TOKEN}\"\n"));
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_api_answers_plain_and_streamed_with_sessions_per_user() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;
    let client = reqwest::Client::new();

    let health: serde_json::Value =
        client.get(format!("{}/health", running.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");

    let refused = client.get(format!("{}/v1/models", running.base)).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let models: serde_json::Value = client
        .get(format!("{}/v1/models", running.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "local/test-model");

    server.push(Reply::text("Hello Ana."));
    let body =
        json!({"model": "local/test-model", "user": "ana", "messages": [{"role": "user", "content": "I am Ana"}]});
    let reply: serde_json::Value = running.chat_completions(&body).await.json().await.unwrap();
    assert_eq!(reply["object"], "chat.completion");
    assert_eq!(reply["choices"][0]["message"]["content"], "Hello Ana.");
    assert!(reply["usage"]["total_tokens"].as_u64().unwrap() > 0);

    server.push(Reply::text("You are Ana, streaming."));
    let body = json!({"model": "local/test-model", "user": "ana", "stream": true, "stream_options": {"include_usage": true},
                      "messages": [{"role": "user", "content": "who am I?"}]});
    let response = running.chat_completions(&body).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let events: Vec<&str> = text.lines().filter_map(|line| line.strip_prefix("data: ")).collect();
    assert_eq!(events.last(), Some(&"[DONE]"), "{text}");
    let chunks: Vec<serde_json::Value> =
        events.iter().filter(|event| **event != "[DONE]").map(|event| serde_json::from_str(event).unwrap()).collect();
    let streamed: String = chunks.iter().filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(streamed, "You are Ana, streaming.");
    assert!(chunks.iter().any(|chunk| chunk["choices"][0]["finish_reason"] == "stop"));
    assert!(chunks.last().unwrap()["usage"]["total_tokens"].as_u64().unwrap() > 0, "include_usage adds a usage chunk");
    let history = messages(&server.requests()[1].body);
    assert!(history.iter().any(|message| message["content"] == "I am Ana"), "the user's session kept the history");

    let bad = client
        .post(format!("{}/v1/chat/completions", running.base))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let bad: serde_json::Value = bad.json().await.unwrap();
    assert!(bad["error"]["message"].as_str().unwrap().contains("invalid JSON"));
    server.assert_clean();

    let pid = running.child.id().unwrap();
    assert!(std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap().success());
    let output =
        tokio::time::timeout(Duration::from_secs(20), running.child.wait_with_output()).await.unwrap().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stderr).contains("gateway stopped"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_bind_without_auth_or_a_missing_token_is_refused() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    let run = home.run(&["gateway", "--port", "0"]).await.failure();
    assert!(run.stderr.contains("gateway.auth.token"), "{}", run.stderr);
    home.append_config("[gateway.auth]\nmode = \"none\"\n");
    let run = home.run(&["gateway", "--port", "0", "--bind", "0.0.0.0"]).await.failure();
    assert!(run.stderr.contains("refusing to listen on 0.0.0.0 without authentication"), "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_openai_python_sdk_works_plain_and_streaming() {
    let python = std::env::var("SQUIDBOT_TEST_PYTHON")
        .expect("SQUIDBOT_TEST_PYTHON must name a Python with the `openai` package; scripts/test sets it up");
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let mut running = start(&home).await;
    // The first turn delegates (direct mode's `spawn`) before it lists the directory, so
    // /metrics has a finished sub-agent to count.
    server.push(Reply::tool_call("spawn", json!({"task": "say hi"})));
    server.push(Reply::tool_call("set_status", json!({"status": "done", "outcome": "done", "result": "hi"})));
    server.push(Reply::tool_call("list_dir", json!({})));
    server.push(Reply::text("plain answer"));
    server.push(Reply::text("streamed answer in pieces"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/e2e/openai_sdk.py");
    let output = tokio::process::Command::new(python)
        .arg(script)
        .env("GATEWAY_BASE", &running.base)
        .env("GATEWAY_TOKEN", TOKEN)
        .output()
        .await
        .unwrap();
    running.child.kill().await.unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(result["models"][0], "local/test-model");
    assert_eq!(result["plain"], "plain answer");
    assert!(result["plain_usage"].as_u64().unwrap() > 0);
    assert_eq!(result["stream"], "streamed answer in pieces");
    assert!(result["stream_usage"].as_u64().unwrap() > 0, "{result}");
    assert_eq!(result["wrong_key_refused"], true);
    let streamed = messages(&server.requests()[4].body);
    assert!(streamed.iter().any(|message| message["content"] == "plain question"), "one session for user sdk");
    let metrics = &result["metrics"];
    let sample = |key: &str| metrics[key].as_f64().unwrap_or_else(|| panic!("no sample {key}: {metrics}"));
    assert_eq!(sample(r#"squidbot_turns_total{"model": "local/test-model", "outcome": "completed"}"#), 2.0);
    assert_eq!(sample(r#"squidbot_tool_calls_total{"result": "ok", "tool": "list_dir"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_turn_duration_seconds_count{"model": "local/test-model"}"#), 2.0);
    assert!(sample(r#"squidbot_llm_tokens_total{"direction": "input", "model": "local/test-model"}"#) > 0.0);
    assert_eq!(sample(r#"squidbot_http_requests_total{"route": "/v1/chat/completions", "status": "200"}"#), 2.0);
    assert_eq!(sample(r#"squidbot_http_requests_total{"route": "/v1/models", "status": "401"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_sessions_open{}"#), 1.0);
    // The worker's model call is not a turn event: three for the assistant's turns.
    assert_eq!(sample(r#"squidbot_llm_calls_total{"model": "test-model", "provider": "local", "result": "ok"}"#), 4.0);
    assert_eq!(sample(r#"squidbot_llm_call_duration_seconds_count{"model": "test-model", "provider": "local"}"#), 4.0);
    assert_eq!(sample(r#"squidbot_workers_started_total{"role": "worker"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_workers_finished_total{"outcome": "done", "role": "worker"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_delegation_duration_seconds_count{"role": "worker"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_delegation_duration_seconds_bucket{"le": "900", "role": "worker"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_workers_running{}"#), 0.0);
    assert_eq!(sample(r#"squidbot_tool_calls_total{"result": "ok", "tool": "spawn"}"#), 1.0);
    assert_eq!(sample(r#"squidbot_ws_connections{}"#), 0.0);
    assert_eq!(sample(r#"squidbot_errors_total{"kind": "auth"}"#), 1.0, "the wrong key");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_wrong_tokens_are_refused_but_never_the_right_one() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let mut running = start(&home).await;
    let client = reqwest::Client::new();
    let models = format!("{}/v1/models", running.base);
    for attempt in 1..=10 {
        let response = client.get(&models).bearer_auth("guess").send().await.unwrap();
        assert_eq!(response.status(), 401, "attempt {attempt}");
    }
    let locked = client.get(&models).bearer_auth("guess").send().await.unwrap();
    assert_eq!(locked.status(), 429);
    let wait: u64 = locked.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    // The owner is never locked out by someone else's guesses from the same address.
    let right = client.get(&models).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(right.status(), 200, "the right token still works during the attack");
    let health = client.get(format!("{}/health", running.base)).send().await.unwrap();
    assert_eq!(health.status(), 200, "health stays reachable");
    running.child.kill().await.unwrap();
}

/// Starts the gateway with the test provider marked vision-capable, so images reach it.
pub(crate) async fn start_with_vision(home: &Home) -> Running {
    let mut command = home.command(&["gateway", "--port", "0"]);
    command.env("SQUIDBOT__PROVIDERS__LOCAL__VISION", "true");
    started(command).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_api_passes_data_url_images_and_refuses_remote_ones() {
    use base64::Engine as _;
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let mut running = start_with_vision(&home).await;
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.resize(512, 3);
    let data_url = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(&png));

    server.push(Reply::text("A small picture."));
    let body = json!({"model": "local/test-model", "user": "pics", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in this picture?"},
        {"type": "image_url", "image_url": {"url": data_url}},
    ]}]});
    let response = running.chat_completions(&body).await;
    assert_eq!(response.status(), 200);
    let reply: serde_json::Value = response.json().await.unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "A small picture.");
    let asked = messages(&server.requests()[0].body).last().unwrap()["content"].clone();
    let text = asked[0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("what is in this picture?") && text.contains("saved at"), "{asked}");
    assert_eq!(asked[1]["type"], "image_url", "{asked}");
    assert_eq!(asked[1]["image_url"]["url"], data_url.as_str(), "{asked}");
    let saved: Vec<_> = std::fs::read_dir(home.path().join("sessions"))
        .unwrap()
        .flatten()
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".files"))
        .flat_map(|directory| std::fs::read_dir(directory.path()).unwrap().flatten())
        .map(|entry| std::fs::read(entry.path()).unwrap())
        .collect();
    assert_eq!(saved, vec![png], "the image is kept in the session's files directory");

    for url in ["https://example.com/cat.png", "HTTP://example.com/cat.png"] {
        let body = json!({"model": "local/test-model", "user": "pics", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "and this one?"},
            {"type": "image_url", "image_url": {"url": url}},
        ]}]});
        let response = running.chat_completions(&body).await;
        assert_eq!(response.status(), 400, "{url}");
        let refused: serde_json::Value = response.json().await.unwrap();
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("remote images are not fetched"), "{message}");
    }
    let oversized = format!("data:image/png;base64,{}", "A".repeat(1024 * 1024));
    let body = json!({"model": "local/test-model", "user": "pics", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": oversized}},
    ]}]});
    assert_eq!(running.chat_completions(&body).await.status(), 400, "past the size cap");
    assert_eq!(server.requests().len(), 1, "refused requests never reach the model");
    server.assert_clean();
    running.child.kill().await.unwrap();
}
