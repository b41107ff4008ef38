//! The web UI's people panels in real headless Chromium, driven by Selenium
//! (`web_ui_people.py`, which reuses `web_ui.py`'s helpers). A person, bob (role `user`),
//! is made with the real CLI and given a `sqb_` token; his turn through the gateway calls
//! `exec`, which waits for an admin. The owner (the gateway token) sees bob in the Users
//! panel, his request in the Approvals panel, approves it there (and bob's turn goes on,
//! running the command in the sandbox), sees the usage chart and the audit trail, and
//! Verify finds the chain intact. Bob, with his own token, is offered the Usage panel,
//! with only his own usage (the owner's shows the owner's turn too), and none of the
//! admin panels. Neither browser logs a console
//! error. Screenshots land in `target/artifacts/web-ui-people/`. Needs a sandbox backend
//! (`exec` for a person runs only in one); backends named in
//! `SQUIDBOT_TEST_SANDBOX_UNAVAILABLE` are skipped, and with none left, so is the test.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{TOKEN, gateway_home, start};
use crate::harness::{Home, tool_results};

/// What bob's command prints, and so what his approval request shows.
const MARKER: &str = "approved-in-the-browser";

/// The first sandbox backend not declared unavailable here, or `None` with a notice.
fn sandbox_backend() -> Option<&'static str> {
    let declared = std::env::var("SQUIDBOT_TEST_SANDBOX_UNAVAILABLE").unwrap_or_default();
    let unavailable = |backend: &str| declared.split(',').any(|name| name.trim() == backend);
    let backend = ["landlock", "bubblewrap"].into_iter().find(|backend| !unavailable(backend));
    if backend.is_none() {
        eprintln!("NOT TESTED: SQUIDBOT_TEST_SANDBOX_UNAVAILABLE declares landlock and bubblewrap unavailable");
    }
    backend
}

async fn json_of(home: &Home, arguments: &[&str]) -> Value {
    let run = home.run(arguments).await.success();
    serde_json::from_str(&run.stdout)
        .unwrap_or_else(|error| panic!("{arguments:?} is not JSON ({error}): {}", run.stdout))
}

/// Waits for the first pending approval request; it, as `approvals list --json` shows it.
async fn pending_request(home: &Home) -> Value {
    for _ in 0..100 {
        let listed = json_of(home, &["approvals", "list", "--json"]).await;
        if let Some(first) = listed.as_array().unwrap().first() {
            return first.clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no approval request waits");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_people_panels_work_in_headless_chromium_for_the_owner_and_a_person() {
    let python = std::env::var("SQUIDBOT_TEST_PYTHON")
        .expect("SQUIDBOT_TEST_PYTHON must name a Python with selenium; scripts/test sets it up");
    let Some(backend) = sandbox_backend() else { return };
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    home.append_config(&format!("[agents.assistant]\nmode = \"direct\"\n\n[sandbox]\nbackend = \"{backend}\"\n"));
    std::fs::create_dir_all(home.workspace()).unwrap();
    home.run(&["users", "add", "bob", "--role", "user"]).await.success();
    let bob_token = home.run(&["users", "token", "bob"]).await.success().stdout.trim().to_owned();
    assert!(bob_token.starts_with("sqb_"), "{bob_token}");
    let gateway = start(&home).await;

    // The owner's own turn, so the owner's usage is everyone's and bob's only his.
    server.push(Reply::text("Hello, owner."));
    let owner_turn = gateway
        .chat_completions(&json!({"model": "local/test-model", "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert!(owner_turn.status().is_success(), "{}", owner_turn.text().await.unwrap());

    // Bob's turn: `exec` waits for an admin (the default rule for the role `user`).
    server.push(Reply::tool_call("exec", json!({"command": format!("echo {MARKER}")})));
    server.push(Reply::text("The command ran once the owner approved it."));
    let turn = tokio::spawn(
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", gateway.base))
            .bearer_auth(&bob_token)
            .json(&json!({"model": "local/test-model", "messages": [{"role": "user", "content": "run my command"}]}))
            .send(),
    );
    let waiting = pending_request(&home).await;
    assert_eq!((&waiting["tool"], &waiting["user"]), (&json!("exec"), &json!("bob")), "{waiting}");
    let id = waiting["id"].as_str().unwrap().to_owned();

    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let screenshots = manifest.join("../../target/artifacts/web-ui-people");
    std::fs::create_dir_all(&screenshots).unwrap();
    for old in std::fs::read_dir(&screenshots).unwrap().flatten() {
        std::fs::remove_file(old.path()).unwrap();
    }
    let driver = manifest.join("tests/e2e/web_ui_people.py");
    let output = tokio::process::Command::new(python)
        .arg("-B")
        .arg(driver)
        .args(["--url", &gateway.base, "--owner-token", TOKEN, "--user-token", &bob_token, "--user", "bob"])
        .args(["--approval-id", &id, "--screenshots"])
        .arg(&screenshots)
        .kill_on_drop(true)
        .output();
    let output =
        tokio::time::timeout(Duration::from_secs(120), output).await.expect("the browser test finished").unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "web_ui_people.py failed\nstdout:\n{stdout}\nstderr:\n{stderr}");
    for name in ["01-owner-users", "02-owner-approvals", "03-owner-usage", "04-owner-audit", "05-user-usage"] {
        let path = screenshots.join(format!("{name}.png"));
        let bytes = std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        assert!(bytes.len() > 1000 && bytes.starts_with(b"\x89PNG"), "{} is not a screenshot", path.display());
    }

    // The browser's Approve settled the request as the owner, and bob's turn went on.
    let all = json_of(&home, &["approvals", "list", "--all", "--json"]).await;
    let settled = all.as_array().unwrap().iter().find(|request| request["id"] == id.as_str()).unwrap();
    assert_eq!((&settled["status"], &settled["decided_by"]), (&json!("approved"), &json!("owner")), "{settled}");
    let response = tokio::time::timeout(Duration::from_secs(20), turn).await.unwrap().unwrap().unwrap();
    let reply: Value = response.json().await.unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "The command ran once the owner approved it.", "{reply}");
    let ran = tool_results(&server.requests()[2].body);
    assert!(ran.iter().any(|result| result.contains(MARKER)), "the approved command ran: {ran:?}");
    home.run(&["audit", "verify"]).await.success();
    server.assert_clean();
    drop(gateway);
}
