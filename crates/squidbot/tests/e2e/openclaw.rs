//! Acceptance with the real `openclaw` CLI (npm `openclaw@2026.9.6`, protocol 4) against
//! the real gateway: `gateway call health`, `gateway call status`, `agent --message`,
//! a method call with params, and a wrong token. scripts/test installs the CLI and the
//! Node it needs and names them in `SQUIDBOT_TEST_OPENCLAW` and `SQUIDBOT_TEST_NODE_BIN`.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{Running, TOKEN, gateway_home, start};

struct Cli {
    program: String,
    path: String,
}

impl Cli {
    fn from_env() -> Cli {
        let program = std::env::var("SQUIDBOT_TEST_OPENCLAW")
            .expect("SQUIDBOT_TEST_OPENCLAW must name the openclaw CLI; scripts/test installs it");
        let node = std::env::var("SQUIDBOT_TEST_NODE_BIN")
            .expect("SQUIDBOT_TEST_NODE_BIN must name the folder of a Node >= 24 binary; scripts/test installs it");
        let path = format!("{node}:{}", std::env::var("PATH").unwrap_or_default());
        Cli { program, path }
    }

    /// Runs the CLI with `home` as its HOME; returns (success, stdout, stderr).
    async fn run(&self, home: &Path, arguments: &[&str]) -> (bool, String, String) {
        let config = home.join("openclaw.json");
        let output = tokio::process::Command::new(&self.program)
            .args(arguments)
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", home)
            .env("OPENCLAW_CONFIG_PATH", &config)
            .env("NO_COLOR", "1")
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(120), output).await.expect("openclaw finished").unwrap();
        (
            output.status.success(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }
}

fn json_of(stdout: &str, stderr: &str) -> Value {
    let start = stdout.find('{').unwrap_or_else(|| panic!("no JSON in stdout {stdout:?}, stderr {stderr:?}"));
    serde_json::from_str(&stdout[start..]).unwrap_or_else(|error| panic!("{error}: {stdout}"))
}

fn ws(running: &Running) -> String {
    running.base.replace("http://", "ws://")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_openclaw_cli_calls_health_status_and_runs_an_agent_turn() {
    let cli = Cli::from_env();
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;
    let client_home = tempfile::tempdir().unwrap();
    let url = ws(&running);

    let (ok, stdout, stderr) =
        cli.run(client_home.path(), &["gateway", "call", "health", "--url", &url, "--token", TOKEN, "--json"]).await;
    assert!(ok, "health failed: {stdout} {stderr}");
    let health = json_of(&stdout, &stderr);
    assert_eq!(health["ok"], true, "{health}");
    assert_eq!(health["components"]["agent"]["model"], "local/test-model", "{health}");

    let (ok, stdout, stderr) =
        cli.run(client_home.path(), &["gateway", "call", "status", "--url", &url, "--token", TOKEN, "--json"]).await;
    assert!(ok, "status failed: {stdout} {stderr}");
    let status = json_of(&stdout, &stderr);
    assert_eq!(status["model"], "local/test-model", "{status}");
    assert!(status["uptimeMs"].as_u64().is_some(), "{status}");

    std::fs::write(
        client_home.path().join("openclaw.json"),
        serde_json::json!({"gateway": {"mode": "remote", "remote": {"url": url, "token": TOKEN}}}).to_string(),
    )
    .unwrap();
    server.push(Reply::text("Hello from squidbot over the OpenClaw protocol."));
    let (ok, stdout, stderr) =
        cli.run(client_home.path(), &["agent", "--agent", "main", "--message", "hello there", "--json"]).await;
    assert!(ok, "agent failed: {stdout} {stderr}");
    let result = json_of(&stdout, &stderr);
    assert_eq!(result["status"], "ok", "{result}");
    assert_eq!(result["result"]["payloads"][0]["text"], "Hello from squidbot over the OpenClaw protocol.", "{result}");
    let requests = server.requests();
    let last = requests.last().expect("the model was called");
    assert!(last.body.to_string().contains("hello there"), "the CLI's message reached the model");

    let (ok, stdout, stderr) = cli
        .run(
            client_home.path(),
            &[
                "gateway",
                "call",
                "chat.history",
                "--url",
                &url,
                "--token",
                TOKEN,
                "--json",
                "--params",
                r#"{"sessionKey":"agent:main:main"}"#,
            ],
        )
        .await;
    assert!(ok, "chat.history failed: {stdout} {stderr}");
    let history = json_of(&stdout, &stderr);
    let texts: Vec<&str> = history["messages"]
        .as_array()
        .unwrap_or_else(|| panic!("{history}"))
        .iter()
        .filter_map(|message| message["content"][0]["text"].as_str())
        .collect();
    assert_eq!(texts, ["hello there", "Hello from squidbot over the OpenClaw protocol."]);

    let (ok, stdout, stderr) =
        cli.run(client_home.path(), &["gateway", "call", "health", "--url", &url, "--token", "wrong", "--json"]).await;
    assert!(!ok, "a wrong token must fail: {stdout}");
    let said = format!("{stdout}{stderr}").to_lowercase();
    assert!(said.contains("unauthorized") || said.contains("token"), "{said}");
}
