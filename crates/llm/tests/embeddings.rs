//! The OpenAI embeddings adapter against the scripted server's fake embedding model.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use serde_json::json;
use squidbot_core::memory::Embedder;
use squidbot_core::provider::ProviderError;
use squidbot_llm::{Endpoint, OpenAiEmbedder, embedder_from_config};
use squidbot_testkit::{ScriptedLlm, fake_embedding};
use squidbot_types::Secret;
use squidbot_types::config::{Config, ProviderConfig};

use crate::{KEY, endpoint, server};

fn texts(count: usize) -> Vec<String> {
    (0..count).map(|index| format!("memory number {index} about a car")).collect()
}

fn embedder(server: &ScriptedLlm) -> OpenAiEmbedder {
    OpenAiEmbedder::new(endpoint(server), "embed-test").unwrap()
}

/// Serves one connection with `response` (a whole HTTP response) and closes it; returns the base URL.
fn one_shot_server(response: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buffer = [0u8; 65536];
        // One read holds the small request of these tests; the answer doesn't depend on it.
        let _read = stream.read(&mut buffer).unwrap();
        stream.write_all(response.as_bytes()).unwrap();
    });
    format!("http://{address}/v1")
}

fn json_response(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn texts_are_embedded_in_batches_of_64_in_order() {
    let server = server().await;
    let embedder = embedder(&server).with_dimensions(16);
    assert_eq!(embedder.model(), "scripted/embed-test");
    let input = texts(130);
    let vectors = embedder.embed(&input).await.unwrap();
    let expected: Vec<Vec<f32>> = input.iter().map(|text| fake_embedding(text, 16)).collect();
    assert_eq!(vectors, expected);
    let requests = server.embedding_requests();
    let sizes: Vec<usize> = requests.iter().map(|request| request.body["input"].as_array().unwrap().len()).collect();
    assert_eq!(sizes, vec![64, 64, 2]);
    assert_eq!(requests[0].body["model"], "embed-test");
    assert_eq!(requests[0].body["dimensions"], 16);
    assert_eq!(requests[2].body["input"][1], input[129]);
    assert_eq!(requests[0].header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    server.assert_clean();
}

#[tokio::test]
async fn dimensions_are_left_out_unless_configured_and_empty_input_sends_nothing() {
    let server = server().await;
    let embedder = embedder(&server);
    assert!(embedder.embed(&[]).await.unwrap().is_empty());
    assert!(server.embedding_requests().is_empty());
    let vectors = embedder.embed(&["a red automobile".to_owned()]).await.unwrap();
    assert_eq!(vectors, vec![fake_embedding("a red automobile", 64)]);
    assert!(server.embedding_requests()[0].body.get("dimensions").is_none());
    server.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn auth_failures_are_not_retried_and_server_errors_are_retried_twice() {
    let server = server().await;
    let embedder = embedder(&server);
    let input = ["x".to_owned()];
    server.set_embeddings_failing(Some(401));
    let error = embedder.embed(&input).await.unwrap_err();
    assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
    assert_eq!(server.embedding_requests().len(), 1);
    server.set_embeddings_failing(Some(503));
    let error = embedder.embed(&input).await.unwrap_err();
    assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
    assert_eq!(server.embedding_requests().len(), 1 + 3);
    server.set_embeddings_failing(Some(429));
    let error = embedder.embed(&input).await.unwrap_err();
    assert!(matches!(error, ProviderError::RateLimited { .. }), "{error:?}");
    assert_eq!(server.embedding_requests().len(), 4 + 3);
    server.set_embeddings_failing(Some(400));
    let error = embedder.embed(&input).await.unwrap_err();
    assert!(matches!(error, ProviderError::Rejected { .. }), "{error:?}");
    assert_eq!(server.embedding_requests().len(), 7 + 1);
}

#[tokio::test]
async fn a_retry_recovers_from_a_passing_failure() {
    let server = server().await;
    server.set_embeddings_failing(Some(500));
    let watcher = server.clone();
    let heal = tokio::spawn(async move {
        while watcher.embedding_requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        watcher.set_embeddings_failing(None);
    });
    let vectors = embedder(&server).embed(&["hello".to_owned()]).await.unwrap();
    heal.await.unwrap();
    assert_eq!(vectors, vec![fake_embedding("hello", 64)]);
    assert_eq!(server.embedding_requests().len(), 2);
}

#[tokio::test]
async fn a_wrong_key_is_an_auth_error() {
    let server = server().await;
    let embedder = OpenAiEmbedder::new(
        Endpoint::new("scripted", server.base_url()).with_api_key(Secret::new("sk-wrong")),
        "embed-test",
    )
    .unwrap();
    let error = embedder.embed(&["x".to_owned()]).await.unwrap_err();
    assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
    assert_eq!(server.embedding_requests().len(), 1);
}

#[tokio::test]
async fn garbage_and_short_answers_are_invalid_responses() {
    let garbage = one_shot_server(json_response("<html>oops</html>"));
    let embedder = OpenAiEmbedder::new(Endpoint::new("odd", garbage), "m").unwrap().with_max_retries(0);
    let error = embedder.embed(&["x".to_owned()]).await.unwrap_err();
    assert!(matches!(error, ProviderError::InvalidResponse { .. }), "{error:?}");
    assert!(error.to_string().contains("<html>oops</html>"), "{error}");
    let short = one_shot_server(json_response(r#"{"object":"list","data":[{"index":0,"embedding":[1.0]}]}"#));
    let embedder = OpenAiEmbedder::new(Endpoint::new("odd", short), "m").unwrap().with_max_retries(0);
    let error = embedder.embed(&["x".to_owned(), "y".to_owned()]).await.unwrap_err();
    assert_eq!(
        error,
        ProviderError::InvalidResponse { provider: "odd".into(), message: "asked for 2 embeddings, got 1".into() }
    );
}

#[tokio::test]
async fn a_silent_server_times_out_as_transient() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let endpoint = Endpoint::new("silent", base).with_timeout(Duration::from_millis(200));
    let embedder = OpenAiEmbedder::new(endpoint, "m").unwrap().with_max_retries(0);
    let error = embedder.embed(&["x".to_owned()]).await.unwrap_err();
    assert_eq!(
        error,
        ProviderError::Transient { provider: "silent".into(), message: "no response within 200ms".into() }
    );
    drop(listener);
}

#[tokio::test]
async fn config_builds_an_embedder_on_the_configured_provider() {
    let server = server().await;
    let mut config = Config::default();
    config.memory.embedding_model = Some("local/embed-test".into());
    config.memory.embedding_dimensions = Some(8);
    config.providers.insert(
        "local".into(),
        ProviderConfig {
            api_base: Some(server.base_url()),
            api_key_env: Some("SQUIDBOT_TEST_EMBED_KEY".into()),
            ..ProviderConfig::default()
        },
    );
    let env = |name: &str| (name == "SQUIDBOT_TEST_EMBED_KEY").then(|| KEY.to_owned());
    let embedder = embedder_from_config(&config, &env).unwrap().unwrap();
    assert_eq!(embedder.model(), "local/embed-test");
    let vectors = embedder.embed(&["my puppy".to_owned()]).await.unwrap();
    assert_eq!(vectors, vec![fake_embedding("my puppy", 8)]);
    assert_eq!(
        server.embedding_requests()[0].body,
        json!({"model": "embed-test", "input": ["my puppy"], "dimensions": 8})
    );
    server.assert_clean();
}
