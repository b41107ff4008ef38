//! Password auth on the real gateway: `gateway hash-password` makes the hash, the password
//! is the bearer credential of `/v1/chat/completions`, wrong passwords and unusable hashes
//! are refused, and the WebSocket protocol takes the password in `connect`.

use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::json;
use squidbot_testkit::{Reply, ScriptedLlm};
use tokio::io::AsyncWriteExt;

use crate::gateway::start;
use crate::harness::Home;
use crate::protocol::{Client, connect_params};

const PASSWORD: &str = "correct horse battery staple";

/// Runs `squidbot gateway hash-password` with `input` on standard input.
async fn hash_password(home: &Home, input: &str) -> Output {
    let mut command = home.command(&["gateway", "hash-password"]);
    command.stdin(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    tokio::time::timeout(Duration::from_secs(30), child.wait_with_output()).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hashed_password_is_the_bearer_credential_and_wrong_ones_get_401() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);

    let empty = hash_password(&home, "\n").await;
    assert!(!empty.status.success());
    assert!(String::from_utf8_lossy(&empty.stderr).contains("empty password"), "{empty:?}");

    let hashed = hash_password(&home, &format!("{PASSWORD}\n")).await;
    let stdout = String::from_utf8_lossy(&hashed.stdout);
    let stderr = String::from_utf8_lossy(&hashed.stderr);
    assert!(hashed.status.success(), "{stderr}");
    let hash = stdout.trim();
    assert!(hash.starts_with("$argon2id$v=19$"), "{stdout}");
    assert!(stderr.contains(&format!("password_hash = \"{hash}\"")), "the hint shows the config line: {stderr}");
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));

    home.append_config(&format!("[gateway.auth]\nmode = \"password\"\npassword_hash = \"{hash}\"\n"));
    let shown = home.run(&["config", "show"]).await.success();
    assert!(!shown.stdout.contains(hash), "config show redacts the hash: {}", shown.stdout);
    home.run(&["config", "validate"]).await.success();

    let running = start(&home).await;
    let base = running.base.clone();
    let client = reqwest::Client::new();
    let completions = format!("{base}/v1/chat/completions");
    let body = json!({"model": "local/test-model", "user": "pat", "messages": [{"role": "user", "content": "hi"}]});

    let wrong =
        client.post(&completions).bearer_auth("correct horse battery stapler").json(&body).send().await.unwrap();
    assert_eq!(wrong.status(), 401);
    let missing = client.post(&completions).json(&body).send().await.unwrap();
    assert_eq!(missing.status(), 401);

    server.push(Reply::text("Hello with a password."));
    let reply: serde_json::Value =
        client.post(&completions).bearer_auth(PASSWORD).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "Hello with a password.", "{reply}");

    let after_success = client.post(&completions).bearer_auth("Correct horse battery staple").json(&body).send();
    assert_eq!(after_success.await.unwrap().status(), 401, "a remembered password lets no near miss in");
    server.push(Reply::text("Again."));
    let again: serde_json::Value =
        client.post(&completions).bearer_auth(PASSWORD).json(&body).send().await.unwrap().json().await.unwrap();
    assert_eq!(again["choices"][0]["message"]["content"], "Again.", "{again}");

    let (mut socket, _) = Client::open(&running).await;
    let refused = socket.call("connect", connect_params(4, &["operator.read"], json!({"password": "nope"}))).await;
    assert_eq!(refused["error"]["details"]["code"], "AUTH_PASSWORD_MISMATCH", "{refused}");
    let (mut socket, _) = Client::open(&running).await;
    let hello = socket.call("connect", connect_params(4, &["operator.read"], json!({"password": PASSWORD}))).await;
    assert_eq!(hello["payload"]["type"], "hello-ok", "{hello}");
    assert_eq!(socket.call("health", json!({})).await["payload"]["ok"], true);

    let mut child = running.child;
    child.kill().await.unwrap();
    let output = child.wait_with_output().await.unwrap();
    let logs = String::from_utf8_lossy(&output.stderr);
    assert!(!logs.contains(PASSWORD) && !logs.contains(hash), "{logs}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_password_hash_stops_the_gateway_at_start() {
    let server = ScriptedLlm::start().await;
    let home = Home::with_minimal_config(&server);
    home.append_config("[gateway.auth]\nmode = \"password\"\n");
    let missing = home.run(&["gateway", "--port", "0"]).await.failure();
    assert!(missing.stderr.contains("gateway.auth.password_hash"), "{}", missing.stderr);

    let garbage = Home::with_minimal_config(&server);
    garbage.append_config("[gateway.auth]\nmode = \"password\"\npassword_hash = \"hunter2-not-a-hash\"\n");
    let refused = garbage.run(&["gateway", "--port", "0"]).await.failure();
    assert!(refused.stderr.contains("gateway.auth.password_hash"), "{}", refused.stderr);
    assert!(!refused.stderr.contains("hunter2"), "the error does not echo the secret: {}", refused.stderr);
    let validated = garbage.run(&["config", "validate"]).await.failure();
    assert!(validated.stderr.contains("gateway.auth.password_hash"), "{}", validated.stderr);

    let from_env = Home::with_minimal_config(&server);
    from_env.append_config("[gateway.auth]\nmode = \"password\"\npassword_hash_env = \"GATEWAY_HASH\"\n");
    let argon2i = "$argon2i$v=19$m=16,t=2,p=1$c2FsdHNhbHQ$2YzvB0fcB8PVYfxlBcEgjw";
    let refused = from_env.run_with(&["gateway", "--port", "0"], &[("GATEWAY_HASH", argon2i)]).await.failure();
    assert!(refused.stderr.contains("gateway.auth.password_hash_env"), "{}", refused.stderr);
    assert!(refused.stderr.contains("argon2id"), "{}", refused.stderr);
}
