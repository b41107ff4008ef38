//! Scripted failures: provider errors, garbage, cut streams, delays, an exhausted script, bad keys.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use squidbot_testkit::{ErrorKind, Reply, ScriptedLlm, Wire};

use crate::support::{
    API_KEY, anthropic_body, anthropic_events, data_payloads, openai_body, openai_chunks, post, read_stream,
};

async fn status_retry_after_and_body(llm: &ScriptedLlm, wire: Wire, body: &Value) -> (u16, Option<String>, Value) {
    let response = post(llm, wire, body).await;
    let status = response.status().as_u16();
    let retry_after = response.headers().get("retry-after").map(|value| value.to_str().expect("ASCII").to_owned());
    (status, retry_after, response.json().await.expect("a JSON error body"))
}

#[tokio::test]
async fn rate_limits_carry_status_retry_after_and_the_provider_error_format() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::rate_limited(Some(7)));
    llm.push(Reply::rate_limited(Some(3)));
    let (status, retry_after, body) = status_retry_after_and_body(&llm, Wire::OpenAi, &openai_body(true)).await;
    assert_eq!((status, retry_after.as_deref()), (429, Some("7")));
    assert_eq!(body["error"]["code"], "rate_limit_exceeded");
    assert!(body["error"]["message"].as_str().is_some_and(|message| !message.is_empty()));
    let (status, retry_after, body) = status_retry_after_and_body(&llm, Wire::Anthropic, &anthropic_body(true)).await;
    assert_eq!((status, retry_after.as_deref()), (429, Some("3")));
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    llm.assert_clean();
}

#[tokio::test]
async fn context_overflow_reads_like_each_provider() {
    let llm = ScriptedLlm::start().await;
    llm.push_all([Reply::context_overflow(), Reply::context_overflow()]);
    let (status, retry_after, body) = status_retry_after_and_body(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!((status, retry_after), (400, None));
    assert_eq!(body["error"]["code"], "context_length_exceeded");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .starts_with("This model's maximum context length is 8192 tokens")
    );
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!(status, 400);
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}})
    );
}

#[tokio::test]
async fn server_auth_and_bad_request_errors_keep_their_status_and_message() {
    let llm = ScriptedLlm::start().await;
    llm.push_all([
        Reply::server_error(503),
        Reply::server_error(529),
        Reply::auth_failure(),
        Reply::auth_failure(),
        Reply::Error {
            status: 400,
            message: "messages.1: bad".to_owned(),
            retry_after_secs: None,
            kind: ErrorKind::BadRequest,
        },
    ]);
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!((status, body["error"]["type"].as_str()), (503, Some("server_error")));
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!((status, body["error"]["type"].as_str()), (529, Some("overloaded_error")));
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!((status, body["error"]["code"].as_str()), (401, Some("invalid_api_key")));
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("authentication_error")));
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"], json!({"type": "invalid_request_error", "message": "messages.1: bad"}));
    llm.assert_clean();
}

#[tokio::test]
async fn garbage_is_a_200_that_does_not_parse() {
    let llm = ScriptedLlm::start().await;
    llm.push_all([Reply::garbage("<html>oops</html>"), Reply::garbage("{not json\nat all")]);
    let response = post(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.expect("body");
    assert_eq!(text, "<html>oops</html>");
    assert!(serde_json::from_str::<Value>(&text).is_err());
    let stream = read_stream(post(&llm, Wire::Anthropic, &anthropic_body(true)).await).await;
    assert_eq!(data_payloads(&stream.text), vec!["{not json", "at all"]);
}

#[tokio::test]
async fn an_openai_cut_stream_ends_without_finish_or_done() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::cut_stream("half an answer"));
    let stream = read_stream(post(&llm, Wire::OpenAi, &openai_body(true)).await).await;
    assert!(stream.cut, "the connection breaks instead of ending the body");
    assert!(!stream.text.contains("[DONE]"));
    let chunks = openai_chunks(&stream.text);
    let text: String = chunks.iter().filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str()).collect();
    assert_eq!(text, "half an answer");
    assert!(chunks.iter().all(|chunk| chunk["choices"][0]["finish_reason"].is_null()));
}

#[tokio::test]
async fn an_anthropic_cut_stream_ends_without_message_stop() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::cut_stream("half an answer"));
    let stream = read_stream(post(&llm, Wire::Anthropic, &anthropic_body(true)).await).await;
    assert!(stream.cut);
    let events = anthropic_events(&stream.text);
    let text: String = events.iter().filter_map(|(_, data)| data["delta"]["text"].as_str()).collect();
    assert_eq!(text, "half an answer");
    assert!(events.iter().all(|(name, _)| name != "message_stop" && name != "message_delta"));
}

#[tokio::test]
async fn a_cut_plain_answer_is_truncated_json() {
    let llm = ScriptedLlm::start().await;
    llm.push_all([Reply::cut_stream("half"), Reply::cut_stream("half")]);
    for (wire, body) in [(Wire::OpenAi, openai_body(false)), (Wire::Anthropic, anthropic_body(false))] {
        let response = post(&llm, wire, &body).await;
        assert_eq!(response.status(), 200);
        let text = response.text().await.expect("body");
        assert!(text.starts_with('{'));
        assert!(serde_json::from_str::<Value>(&text).is_err(), "{text}");
    }
}

#[tokio::test]
async fn a_delayed_reply_waits() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::text("late").after(Duration::from_millis(150)));
    let started = Instant::now();
    let stream = read_stream(post(&llm, Wire::OpenAi, &openai_body(true)).await).await;
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(stream.text.contains("late"));
}

#[tokio::test]
async fn an_exhausted_script_answers_500_and_records_a_violation() {
    let llm = ScriptedLlm::start().await;
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!(status, 500);
    assert!(body["error"]["message"].as_str().expect("message").contains("script exhausted"));
    let (status, _, body) = status_retry_after_and_body(&llm, Wire::Anthropic, &anthropic_body(true)).await;
    assert_eq!((status, body["error"]["type"].as_str()), (500, Some("api_error")));
    let violations = llm.violations();
    assert_eq!(violations.len(), 2, "{violations:?}");
    assert!(violations.iter().all(|violation| violation.contains("unexpected request: script exhausted")));
}

#[tokio::test]
async fn replies_are_shared_first_in_first_out_across_wires_and_requests_are_recorded() {
    let llm = ScriptedLlm::start().await;
    llm.push_all([Reply::text("first"), Reply::text("second")]);
    assert_eq!(llm.remaining(), 2);
    let completion = crate::support::post_json(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!(completion["choices"][0]["message"]["content"], "first");
    let message = crate::support::post_json(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!(message["content"][0]["text"], "second");
    assert_eq!(llm.remaining(), 0);
    llm.assert_script_consumed();
    let requests = llm.requests();
    assert_eq!(requests.iter().map(|request| request.wire).collect::<Vec<_>>(), vec![Wire::OpenAi, Wire::Anthropic]);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body, openai_body(false));
    assert_eq!(requests[0].header("Authorization"), Some(format!("Bearer {API_KEY}").as_str()));
    let last = llm.last_request().expect("a request");
    assert_eq!(last.path, "/v1/messages");
    assert_eq!(last.header("anthropic-version"), Some("2023-06-01"));
    llm.assert_clean();
}

#[tokio::test]
async fn a_wrong_or_missing_key_is_refused_without_consuming_the_script() {
    let llm = ScriptedLlm::start().await;
    llm.expect_api_key(API_KEY);
    llm.push(Reply::text("for the right key"));
    let client = reqwest::Client::new();
    let response = client
        .post(format!("{}/chat/completions", llm.base_url()))
        .bearer_auth("sk-wrong")
        .json(&openai_body(false))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["code"], "invalid_api_key");
    let response = client
        .post(format!("{}/messages", llm.base_url()))
        .header("x-api-key", API_KEY)
        .json(&anthropic_body(false))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 400, "a missing anthropic-version is refused");
    let response = client
        .post(format!("{}/messages", llm.base_url()))
        .json(&anthropic_body(false))
        .send()
        .await
        .expect("response");
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.expect("JSON");
    assert_eq!(body["error"]["type"], "authentication_error");
    assert_eq!(llm.remaining(), 1);
    let violations = llm.violations();
    assert_eq!(violations.len(), 3, "{violations:?}");
    assert!(violations[0].contains("Authorization: Bearer"));
    assert!(violations[1].contains("anthropic-version"));
    assert!(violations[2].contains("x-api-key"));
    let completion = crate::support::post_json(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!(completion["choices"][0]["message"]["content"], "for the right key");
    assert_eq!(llm.violations().len(), 3);
}

#[tokio::test]
async fn unknown_endpoints_are_violations() {
    let llm = ScriptedLlm::start().await;
    let response =
        reqwest::Client::new().post(format!("{}/completions", llm.base_url())).send().await.expect("response");
    assert_eq!(response.status(), 404);
    assert!(llm.violations()[0].contains("POST /v1/completions is not an endpoint"));
}

#[tokio::test]
#[should_panic(expected = "script exhausted")]
async fn assert_clean_panics_listing_violations() {
    let llm = ScriptedLlm::start().await;
    post(&llm, Wire::OpenAi, &openai_body(false)).await;
    llm.assert_clean();
}

#[tokio::test]
async fn dropping_the_last_handle_stops_the_server() {
    let llm = ScriptedLlm::start().await;
    let url = llm.base_url();
    let clone = llm.clone();
    drop(llm);
    clone.push(Reply::text("still up"));
    let response =
        reqwest::Client::new().post(format!("{url}/chat/completions")).json(&openai_body(false)).send().await;
    assert_eq!(response.expect("server still up").status(), 200);
    drop(clone);
    let mut refused = false;
    for _ in 0..100 {
        let attempt =
            reqwest::Client::new().post(format!("{url}/chat/completions")).json(&openai_body(false)).send().await;
        if attempt.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "the server stopped listening");
}
