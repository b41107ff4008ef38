//! The webhook channel in the real gateway: a signed request gets the reply in the
//! response; a redelivered one isn't answered twice; a forged, stale or malformed one
//! is refused without a turn; a long turn answers `202` and posts the reply to the
//! callback URL; a file the assistant sends comes back in the response; the channel
//! shows in `/health` and `/metrics`; the sender gets a context and workspace of their
//! own.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};
use sha2::Sha256;
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::bus::{bus_home, eventually, start_gateway};

const SECRET: &str = "hook-secret-0123";

fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    let hex: String = mac.finalize().into_bytes().iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256={hex}")
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

async fn post(base: &str, body: &Value, secret: &str, timestamp: u64) -> (u16, Value) {
    let bytes = serde_json::to_vec(body).unwrap();
    let response = reqwest::Client::new()
        .post(format!("{base}/webhook/hook"))
        .header("content-type", "application/json")
        .header("x-squidbot-timestamp", timestamp.to_string())
        .header("x-squidbot-signature", signature(secret, timestamp, &bytes))
        .body(bytes)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A server recording the JSON bodies posted to it.
async fn callback_server() -> (String, Arc<Mutex<Vec<Value>>>) {
    let received = Arc::new(Mutex::new(Vec::new()));
    let store = received.clone();
    let app = axum::Router::new().route(
        "/done",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let store = store.clone();
            async move {
                store.lock().unwrap().push(body);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}/done"), received)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_request_is_answered_once_and_forged_ones_are_refused() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.hook]\nkind = \"webhook\"\nsecret = \"{SECRET}\"\npolicy = \"open\"\nreply_timeout_secs = 2\n"
    ));
    let gateway = start_gateway(&home).await;

    server.push(Reply::text("All green: 12 checks passed."));
    let message = json!({"sender": "ci-bot", "text": "How did the nightly build go?", "id": "build-1"});
    let (status, body) = post(&gateway.base, &message, SECRET, now()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "All green: 12 checks passed.");
    assert_eq!(body["id"], "build-1");

    // The same delivery again: de-duplicated by id, no second turn; the caller hears 202.
    let (status, body) = post(&gateway.base, &message, SECRET, now()).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(server.requests().len(), 1);

    for (secret, timestamp, what) in [("wrong-secret", now(), "forged"), (SECRET, now() - 3_600, "stale")] {
        let (status, body) = post(&gateway.base, &json!({"sender": "x", "text": "hi"}), secret, timestamp).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(body["error"].as_str().unwrap().starts_with("can't accept the request"), "{body}");
    }
    let (status, body) = post(&gateway.base, &json!({"sender": "x"}), SECRET, now()).await;
    assert_eq!(status, 400, "{body}");
    let unsigned =
        reqwest::Client::new().post(format!("{}/webhook/hook", gateway.base)).body("{}").send().await.unwrap();
    assert_eq!(unsigned.status().as_u16(), 401);
    let missing =
        reqwest::Client::new().post(format!("{}/webhook/other", gateway.base)).body("{}").send().await.unwrap();
    assert_eq!(missing.status().as_u16(), 404);
    assert_eq!(server.requests().len(), 1, "no turn for refused requests");

    // The sender is not the owner: their own context, session and workspace.
    let lines = home.session_lines("hook:ci-bot");
    assert_eq!(lines[0]["context"], "user:hook:ci-bot", "{}", lines[0]);
    assert!(home.path().join("users").join("hook:ci-bot").join("workspace").is_dir());

    let health: Value = reqwest::Client::new()
        .get(format!("{}/health", gateway.base))
        .bearer_auth(crate::gateway::TOKEN)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let hook = &health["components"]["channels"]["hook"];
    assert_eq!(hook["status"], "running", "{health}");
    assert_eq!(
        (hook["received"].as_u64(), hook["answered"].as_u64(), hook["duplicates"].as_u64()),
        (Some(1), Some(1), Some(1))
    );
    let metrics = gateway.metrics().await;
    assert!(metrics.contains("squidbot_channel_up{channel=\"hook\",kind=\"webhook\"} 1"), "{metrics}");
    assert!(metrics.contains("squidbot_channel_messages_total{channel=\"hook\",outcome=\"duplicate\"} 1"), "{metrics}");
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_turn_answers_accepted_and_posts_the_reply_to_the_callback() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.hook]\nkind = \"webhook\"\nsecret = \"{SECRET}\"\nowners = [\"ops\"]\nreply_timeout_secs = 1\n"
    ));
    let gateway = start_gateway(&home).await;
    let (callback, received) = callback_server().await;

    server.push(Reply::Delayed { delay: Duration::from_secs(3), reply: Box::new(Reply::text("Report is ready.")) });
    let message = json!({"sender": "ops", "text": "Write the weekly report", "id": "r-7", "callback_url": callback});
    let (status, body) = post(&gateway.base, &message, SECRET, now()).await;
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["callback"], true);
    eventually("the callback", || !received.lock().unwrap().is_empty()).await;
    let posted = received.lock().unwrap()[0].clone();
    assert_eq!(posted, json!({"id": "r-7", "reply": "Report is ready."}));
    // The owner's messages go to the owner's context.
    assert_eq!(home.session_lines("hook:ops")[0]["context"], "owner");

    // A file the assistant sends comes back in the response, base64-encoded.
    std::fs::write(home.workspace().join("weekly.csv"), "week,done\n47,12\n").unwrap();
    server.push(Reply::tool_calls(vec![("send_file", json!({"path": "weekly.csv"}))]));
    server.push(Reply::text("Attached."));
    let message = json!({"sender": "ops", "text": "Send me the numbers", "id": "r-8"});
    let (status, body) = post(&gateway.base, &message, SECRET, now()).await;
    assert_eq!(status, 200, "{body}");
    let data = base64::engine::general_purpose::STANDARD.encode("week,done\n47,12\n");
    assert_eq!(
        body,
        json!({"id": "r-8", "reply": "Attached.", "files": [{"name": "weekly.csv", "mime": "text/csv", "data": data}]})
    );

    // Someone who is not an owner is refused under the default policy (no turn).
    let (status, _) =
        post(&gateway.base, &json!({"sender": "stranger", "text": "hi", "id": "s-1"}), SECRET, now()).await;
    assert_eq!(status, 202);
    assert_eq!(server.requests().len(), 3);
    server.assert_clean();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_gets_a_pairing_code_that_the_owner_approves_from_the_cli() {
    let server = ScriptedLlm::start().await;
    let home = bus_home(&server);
    home.append_config(&format!(
        "[channels.hook]\nkind = \"webhook\"\nsecret = \"{SECRET}\"\npolicy = \"pairing\"\nreply_timeout_secs = 5\n"
    ));
    let gateway = start_gateway(&home).await;

    let (status, body) =
        post(&gateway.base, &json!({"sender": "alice", "text": "hello?", "id": "a-1"}), SECRET, now()).await;
    assert_eq!(status, 200, "{body}");
    let reply = body["reply"].as_str().unwrap();
    assert!(reply.contains("squidbot users approve"), "{reply}");
    let code: String = reply.split("code: ").nth(1).unwrap().chars().take(6).collect();
    // Writing again before approval sends nothing new.
    let (status, _) =
        post(&gateway.base, &json!({"sender": "alice", "text": "hello??", "id": "a-2"}), SECRET, now()).await;
    assert_eq!(status, 202);

    let listed: Value = serde_json::from_str(&home.run(&["users", "list", "--json"]).await.success().stdout).unwrap();
    assert_eq!(listed["pending"][0]["code"], code.as_str(), "{listed}");
    assert_eq!(listed["pending"][0]["sender_id"], "alice");
    let wrong = home.run(&["users", "approve", "ZZZZZZ"]).await.failure();
    assert!(wrong.stderr.contains("can't approve pairing code ZZZZZZ"), "{}", wrong.stderr);
    let approved = home.run(&["users", "approve", &code.to_lowercase()]).await.success();
    assert!(approved.stdout.contains("approved hook:alice"), "{}", approved.stdout);
    home.run(&["users", "approve", &code]).await.failure();

    server.push(Reply::text("Hi Alice, welcome."));
    let (status, body) =
        post(&gateway.base, &json!({"sender": "alice", "text": "thanks!", "id": "a-3"}), SECRET, now()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["reply"], "Hi Alice, welcome.");
    let listed: Value = serde_json::from_str(&home.run(&["users", "list", "--json"]).await.success().stdout).unwrap();
    assert_eq!(listed["approved"][0]["sender_id"], "alice", "{listed}");
    assert_eq!(listed["pending"].as_array().unwrap().len(), 0);
    home.run(&["users", "revoke", "hook:alice"]).await.success();
    server.assert_clean();
}
