//! Outbound leak scanning through the real gateway: the model replies with a configured
//! secret split across streamed chunks and with a provider-shaped key, and neither the
//! OpenAI-compatible stream, the WebSocket chat events nor the stored transcript holds
//! them, only the redaction marker.

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedLlm};

use crate::gateway::{gateway_home, start};
use crate::protocol::Client;

/// A configured secret (a spare provider's key) with spaces, so the scripted server
/// streams it in several chunks.
const CONFIGURED: &str = "correct horse battery staple 7f3a";

/// A key of a provider's shape, known to no configuration.
const SHAPED: &str = "sk-proj-abcdefghijklmnopqrstuvwx1234";

fn leaky_reply() -> String {
    format!("Sure: the spare key is {CONFIGURED} and the other one is {SHAPED}. Keep them safe.")
}

fn assert_redacted(what: &str, text: &str) {
    for secret in [CONFIGURED, "horse battery staple", "abcdefghijklmnopqrstuvwx1234"] {
        assert!(!text.contains(secret), "{what} holds {secret:?}: {text}");
    }
    assert!(text.contains("[REDACTED:configured_secret]"), "{what}: {text}");
    assert!(text.contains("[REDACTED:openai_key]"), "{what}: {text}");
    assert!(text.contains("Keep them safe."), "{what} lost the ordinary text: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_replies_never_reach_clients_or_the_transcript() {
    let server = ScriptedLlm::start().await;
    let home = gateway_home(&server);
    home.append_config(&format!(
        "[providers.spare]\nkind = \"openai\"\napi_base = \"http://127.0.0.1:9\"\napi_key = \"{CONFIGURED}\"\n"
    ));
    let running = start(&home).await;
    server.push(Reply::text(leaky_reply()));
    server.push(Reply::text(leaky_reply()));

    let body = json!({"model": "local/test-model", "user": "ana", "stream": true,
                      "messages": [{"role": "user", "content": "what are the keys?"}]});
    let response = running.chat_completions(&body).await;
    let text = response.text().await.unwrap();
    let chunks: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|event| *event != "[DONE]")
        .map(|event| serde_json::from_str(event).unwrap())
        .collect();
    let streamed: String = chunks.iter().filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str()).collect();
    assert!(chunks.len() > 5, "the reply came in many chunks: {text}");
    assert_redacted("the OpenAI-compatible stream", &streamed);
    assert!(!text.contains("battery"), "{text}");

    let (mut client, _) = Client::connected(&running, 4, &["operator.write"]).await;
    let ack = client
        .call("chat.send", json!({"sessionKey": "leaky", "message": "again?", "idempotencyKey": "leak-run"}))
        .await;
    assert_eq!(ack["ok"], true, "{ack}");
    let events = client.chat_until_done("leak-run").await;
    let deltas: String = events
        .iter()
        .filter(|event| event["event"] == "chat" && event["payload"]["state"] == "delta")
        .filter_map(|event| event["payload"]["deltaText"].as_str())
        .collect();
    assert_redacted("the WebSocket chat deltas", &deltas);
    let everything = serde_json::to_string(&events).unwrap();
    assert!(!everything.contains("battery") && !everything.contains("abcdefghijklmnop"), "{everything}");
    let final_text = events
        .iter()
        .find(|event| event["event"] == "chat" && event["payload"]["state"] == "final")
        .map(|event| event["payload"]["message"]["content"][0]["text"].as_str().unwrap().to_owned())
        .unwrap();
    assert_redacted("the WebSocket final message", &final_text);

    let listed = home.run(&["sessions", "list", "--json"]).await.success();
    let sessions: Vec<Value> = serde_json::from_str(&listed.stdout).unwrap();
    assert!(sessions.len() >= 2, "{}", listed.stdout);
    for session in &sessions {
        let key = session["key"].as_str().unwrap();
        let shown = home.run(&["sessions", "show", key]).await.success();
        assert_redacted(&format!("the transcript of {key}"), &shown.stdout);
    }
    let files = walk(&home.path().join("sessions"));
    for file in files {
        let content = std::fs::read_to_string(&file).unwrap_or_default();
        assert!(!content.contains("battery") && !content.contains("abcdefghijklmnop"), "{}", file.display());
    }
}

fn walk(directory: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(directory).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}
