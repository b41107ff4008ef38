//! `POST /v1/embeddings`: the fake embedding model, its request checks, keys and failures.

use serde_json::{Value, json};
use squidbot_testkit::{DEFAULT_EMBEDDING_DIMENSIONS, Reply, ScriptedLlm, Wire, fake_embedding};

use crate::support::{API_KEY, post};

fn vectors(answer: &Value) -> Vec<Vec<f32>> {
    answer["data"]
        .as_array()
        .expect("a data list")
        .iter()
        .map(|item| {
            item["embedding"]
                .as_array()
                .expect("a vector")
                .iter()
                .map(|number| number.as_f64().expect("a number") as f32)
                .collect()
        })
        .collect()
}

async fn status_and_body(llm: &ScriptedLlm, body: &Value) -> (u16, Value) {
    let response = post(llm, Wire::Embeddings, body).await;
    let status = response.status().as_u16();
    (status, response.json().await.expect("a JSON body"))
}

#[tokio::test]
async fn texts_are_embedded_by_the_fake_model_in_order_without_touching_the_script() {
    let llm = ScriptedLlm::start().await;
    llm.expect_api_key(API_KEY);
    llm.push(Reply::text("for the chat"));
    let body =
        json!({"model": "embed-test", "input": ["I drive a red car", "automobile", "sunny weather"], "dimensions": 32});
    let (status, answer) = status_and_body(&llm, &body).await;
    assert_eq!(status, 200);
    assert_eq!(answer["object"], "list");
    assert_eq!(answer["model"], "embed-test");
    assert_eq!(answer["data"][1]["object"], "embedding");
    let indexes: Vec<u64> =
        answer["data"].as_array().expect("data").iter().filter_map(|item| item["index"].as_u64()).collect();
    assert_eq!(indexes, vec![0, 1, 2]);
    let expected: Vec<Vec<f32>> =
        ["I drive a red car", "automobile", "sunny weather"].iter().map(|text| fake_embedding(text, 32)).collect();
    assert_eq!(vectors(&answer), expected);
    assert_eq!(answer["usage"], json!({"prompt_tokens": 5 + 3 + 4, "total_tokens": 12}));

    let (_, single) = status_and_body(&llm, &json!({"model": "embed-test", "input": "my puppy"})).await;
    assert_eq!(vectors(&single), vec![fake_embedding("my puppy", DEFAULT_EMBEDDING_DIMENSIONS)]);

    assert!(llm.requests().is_empty(), "embeddings are not chat requests");
    let recorded = llm.embedding_requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!((recorded[0].wire, recorded[0].path.as_str()), (Wire::Embeddings, "/v1/embeddings"));
    assert_eq!(recorded[0].body, body);
    assert_eq!(recorded[1].header("authorization"), Some("Bearer sk-test-key"));
    assert_eq!(llm.remaining(), 1, "the script is only for chat");
    llm.assert_clean();
}

#[tokio::test]
async fn each_embeddings_invariant_catches_a_bad_request() {
    let cases = [
        (json!({"input": "x"}), "`model` is missing"),
        (json!({"model": " ", "input": "x"}), "`model` is empty"),
        (json!({"model": "m"}), "`input` is missing"),
        (json!({"model": "m", "input": ""}), "`input` is an empty string"),
        (json!({"model": "m", "input": []}), "`input` is an empty array"),
        (json!({"model": "m", "input": ["a", ""]}), "input[1] is an empty string"),
        (json!({"model": "m", "input": ["a", 7]}), "input[1] is not a string"),
        (json!({"model": "m", "input": {"text": "a"}}), "neither a string nor an array"),
        (json!({"model": "m", "input": "a", "dimensions": 0}), "`dimensions` is not a positive integer"),
        (json!({"model": "m", "input": "a", "dimensions": -3}), "`dimensions` is not a positive integer"),
        (json!({"model": "m", "input": "a", "dimensions": 100_000}), "serves at most 8192"),
        (json!({"model": "m", "input": "a", "encoding_format": "base64"}), "only answers \"float\""),
        (json!({"model": "m", "input": vec!["a"; 2049]}), "at most 2048"),
        (json!("text"), "not a JSON object"),
    ];
    for (body, expected) in cases {
        let llm = ScriptedLlm::start().await;
        let (status, answer) = status_and_body(&llm, &body).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(answer["error"]["type"], "invalid_request_error");
        let violations = llm.violations();
        assert_eq!(violations.len(), 1, "{body}: {violations:?}");
        assert!(violations[0].starts_with("request 1 (embeddings /v1/embeddings): "), "{violations:?}");
        assert!(violations[0].contains(expected), "{body} should produce {expected:?}, got {violations:?}");
        assert!(answer["error"]["message"].as_str().expect("a message").contains(expected));
    }
}

#[tokio::test]
async fn a_wrong_key_is_refused_like_chat() {
    let llm = ScriptedLlm::start().await;
    llm.expect_api_key("sk-other");
    let (status, answer) = status_and_body(&llm, &json!({"model": "m", "input": "a"})).await;
    assert_eq!(status, 401);
    assert_eq!(answer["error"]["code"], "invalid_api_key");
    assert!(llm.violations()[0].contains("lacks the expected API key in `Authorization: Bearer <key>`"));
}

#[tokio::test]
async fn failing_embeddings_answer_openai_errors_until_switched_back() {
    let llm = ScriptedLlm::start().await;
    let body = json!({"model": "m", "input": "a"});
    for (status, field, value) in [
        (429, "code", "rate_limit_exceeded"),
        (503, "type", "server_error"),
        (401, "code", "invalid_api_key"),
        (404, "type", "invalid_request_error"),
    ] {
        llm.set_embeddings_failing(Some(status));
        let (answered, answer) = status_and_body(&llm, &body).await;
        assert_eq!(answered, status);
        assert_eq!(answer["error"][field], value, "{status}");
    }
    llm.set_embeddings_failing(None);
    let (status, answer) = status_and_body(&llm, &body).await;
    assert_eq!(status, 200);
    assert_eq!(vectors(&answer), vec![fake_embedding("a", 64)]);
    assert_eq!(llm.embedding_requests().len(), 5);
    llm.assert_clean();
}
