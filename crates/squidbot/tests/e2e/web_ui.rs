//! The web UI in real headless Chromium, driven by Selenium (`web_ui.py`): log in, chat
//! with a streamed reply and a tool call, stop a running reply, open every panel, add a
//! cron job from the Cron panel's form and pause, resume and remove it, and a refused
//! login. Screenshots land in `target/artifacts/web-ui/`. scripts/test installs
//! Chromium, chromedriver and Selenium and names the Python in `SQUIDBOT_TEST_PYTHON`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{TOKEN, gateway_home, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_ui_works_in_headless_chromium() {
    let python = std::env::var("SQUIDBOT_TEST_PYTHON")
        .expect("SQUIDBOT_TEST_PYTHON must name a Python with selenium; scripts/test sets it up");
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    let running = start(&home).await;
    server.push(Reply::tool_call("list_dir", json!({})));
    server.push(Reply::text("The workspace is tidy and the browser sees this reply."));
    server.push(Reply::StallStream { text: "this reply will be stopped".into() });

    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let screenshots = manifest.join("../../target/artifacts/web-ui");
    std::fs::create_dir_all(&screenshots).unwrap();
    for old in std::fs::read_dir(&screenshots).unwrap().flatten() {
        std::fs::remove_file(old.path()).unwrap();
    }
    let driver = manifest.join("tests/e2e/web_ui.py");
    let output = tokio::process::Command::new(python)
        .arg(driver)
        .args(["--url", &running.base, "--token", TOKEN, "--screenshots"])
        .arg(&screenshots)
        .args(["--expect-reply", "the browser sees this reply", "--expect-tool", "list_dir"])
        .args(["--stop-message", "tell me a very long story"])
        .arg("--expect-cron")
        .kill_on_drop(true)
        .output();
    let output =
        tokio::time::timeout(Duration::from_secs(300), output).await.expect("the browser test finished").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "web_ui.py failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    for name in
        ["01-login", "02-chat", "03-sessions", "04-memory", "05-skills", "06-cron", "07-status", "08-login-rejected"]
    {
        let path = screenshots.join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        assert!(bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"), "{} is not a screenshot", path.display());
    }
    let models_seen = server.requests().len();
    assert!(models_seen >= 3, "the chat reached the model ({models_seen} requests)");
}
