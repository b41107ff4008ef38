//! The Anthropic messages adapter against the scripted server.

use std::time::Duration;

use serde_json::{Value, json};
use squidbot_core::provider::{LlmProvider, ProviderError, StopReason};
use squidbot_llm::AnthropicProvider;
use squidbot_testkit::{Reply, ScriptedCall};
use squidbot_types::ChatMessage;

use crate::{KEY, Recorder, endpoint, request, server, tool};

#[tokio::test]
async fn text_plain_and_streamed() {
    let server = server().await;
    let provider = AnthropicProvider::new(endpoint(&server)).unwrap();
    for stream in [false, true] {
        server.push(Reply::text("Hello there, my friend."));
        let sink = Recorder::default();
        let completion = provider.complete(&request("claude-test", stream), &sink).await.unwrap();
        assert_eq!(completion.content, "Hello there, my friend.");
        assert_eq!(sink.text(), "Hello there, my friend.");
        assert_eq!(completion.stop_reason, StopReason::EndTurn);
        if stream {
            assert!(sink.delta_count() > 1, "text should arrive in pieces");
        }
        assert!(completion.usage.input_tokens > 0, "stream={stream}");
        assert!(completion.usage.output_tokens > 0, "stream={stream}");
    }
    let first = &server.requests()[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.header("x-api-key"), Some(KEY));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(first.body["max_tokens"], 256);
    server.assert_clean();
}

#[tokio::test]
async fn parallel_tool_uses_streamed_in_fragments() {
    let server = server().await;
    let provider = AnthropicProvider::new(endpoint(&server)).unwrap();
    server.push(Reply::ToolCalls {
        text: "Looking.".into(),
        calls: vec![
            ScriptedCall::new("", "read_file", json!({"path": "notes/today.md", "limit": 200}).to_string()),
            ScriptedCall::new("", "list_dir", json!({"path": "/tmp/some/long/directory/name"}).to_string()),
        ],
    });
    let mut question = request("claude-test", true);
    question.tools = vec![tool("read_file"), tool("list_dir")].into();
    let sink = Recorder::default();
    let completion = provider.complete(&question, &sink).await.unwrap();
    assert_eq!(completion.stop_reason, StopReason::ToolUse);
    assert_eq!(sink.text(), "Looking.");
    let calls: Vec<(&str, &str, Value)> = completion
        .tool_calls
        .iter()
        .map(|call| (call.id.as_str(), call.name.as_str(), serde_json::from_str(&call.arguments).unwrap()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("toolu_call_1", "read_file", json!({"path": "notes/today.md", "limit": 200})),
            ("toolu_call_2", "list_dir", json!({"path": "/tmp/some/long/directory/name"})),
        ]
    );
    let tools = &server.requests()[0].body["tools"];
    assert!(tools[0].get("cache_control").is_none());
    assert_eq!(tools[1]["cache_control"], json!({"type": "ephemeral"}));
    assert_eq!(tools[1]["input_schema"]["type"], "object");

    // Results of parallel calls must travel together in one user turn.
    server.push(Reply::text("Both done."));
    let mut follow_up = question.clone();
    follow_up.messages.push(ChatMessage::Assistant {
        content: completion.content.clone(),
        tool_calls: completion.tool_calls.clone(),
    });
    for call in &completion.tool_calls {
        follow_up.messages.push(ChatMessage::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("result of {}", call.name),
            is_error: false,
        });
    }
    let answer = provider.complete(&follow_up, &Recorder::default()).await.unwrap();
    assert_eq!(answer.content, "Both done.");
    let sent = server.requests()[1].body["messages"].clone();
    assert_eq!(sent.as_array().unwrap().len(), 3);
    assert_eq!(sent[2]["content"].as_array().unwrap().len(), 2);
    assert_eq!(sent[2]["content"][1]["tool_use_id"], "toolu_call_2");
    server.assert_clean();
}

#[tokio::test]
async fn invalid_argument_json_is_kept_raw_and_sent_back_as_an_object() {
    let server = server().await;
    let provider = AnthropicProvider::new(endpoint(&server)).unwrap();
    server.push(Reply::ToolCalls {
        text: String::new(),
        calls: vec![ScriptedCall::new("", "read_file", "{\"path\": \"unterminated")],
    });
    let mut question = request("claude-test", true);
    question.tools = vec![tool("read_file")].into();
    let completion = provider.complete(&question, &Recorder::default()).await.unwrap();
    assert_eq!(completion.tool_calls[0].arguments, "{\"path\": \"unterminated");

    server.push(Reply::text("ok"));
    question
        .messages
        .push(ChatMessage::Assistant { content: String::new(), tool_calls: completion.tool_calls.clone() });
    question.messages.push(ChatMessage::Tool {
        call_id: completion.tool_calls[0].id.clone(),
        name: "read_file".into(),
        content: "invalid arguments".into(),
        is_error: true,
    });
    provider.complete(&question, &Recorder::default()).await.unwrap();
    assert_eq!(server.requests()[1].body["messages"][1]["content"][0]["input"], json!({}));
    server.assert_clean();
}

async fn failure(reply: Reply, stream: bool) -> ProviderError {
    let server = server().await;
    server.push(reply);
    let provider = AnthropicProvider::new(endpoint(&server)).unwrap();
    let error = provider.complete(&request("claude-test", stream), &Recorder::default()).await.unwrap_err();
    server.assert_clean();
    error
}

#[tokio::test]
async fn errors_are_classified_at_the_source() {
    for stream in [false, true] {
        let error = failure(Reply::auth_failure(), stream).await;
        assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");

        let error = failure(Reply::context_overflow(), stream).await;
        assert!(matches!(error, ProviderError::ContextOverflow { .. }), "{error:?}");
        assert!(error.to_string().contains("prompt is too long"), "{error}");

        let error = failure(Reply::rate_limited(Some(3)), stream).await;
        let ProviderError::RateLimited { retry_after, .. } = error else { panic!("{error:?}") };
        assert_eq!(retry_after, Some(Duration::from_secs(3)));

        let error = failure(Reply::server_error(529), stream).await;
        assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
        assert!(error.to_string().contains("Overloaded"), "{error}");

        let error = failure(Reply::bad_request("max_tokens: too large"), stream).await;
        assert!(matches!(error, ProviderError::Rejected { .. }), "{error:?}");

        let error = failure(Reply::garbage("<html>definitely not json</html>"), stream).await;
        assert!(matches!(error, ProviderError::InvalidResponse { .. }), "{error:?}");
    }
}

#[tokio::test]
async fn cut_stream_is_transient() {
    let error = failure(Reply::cut_stream("The answer is"), true).await;
    assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
}
