//! The OpenAI chat-completions adapter against the scripted server.

use std::time::Duration;

use serde_json::{Value, json};
use squidbot_core::provider::{LlmProvider, ProviderError, StopReason};
use squidbot_llm::OpenAiProvider;
use squidbot_testkit::{Reply, ScriptedCall};
use squidbot_types::{ChatMessage, ToolCall};

use crate::{Recorder, endpoint, request, server, tool};

#[tokio::test]
async fn text_plain_and_streamed() {
    let server = server().await;
    let provider = OpenAiProvider::new(endpoint(&server)).unwrap();
    for stream in [false, true] {
        server.push(Reply::text("Hello there, my friend."));
        let sink = Recorder::default();
        let completion = provider.complete(&request("gpt-test", stream), &sink).await.unwrap();
        assert_eq!(completion.content, "Hello there, my friend.");
        assert_eq!(sink.text(), "Hello there, my friend.");
        assert_eq!(completion.stop_reason, StopReason::EndTurn);
        assert_eq!(completion.model, "gpt-test");
        assert!(completion.tool_calls.is_empty());
        if stream {
            assert!(sink.delta_count() > 1, "text should arrive in pieces");
        } else {
            assert_eq!(sink.delta_count(), 1);
        }
        assert!(completion.usage.input_tokens > 0, "stream={stream}");
        assert!(completion.usage.output_tokens > 0, "stream={stream}");
    }
    let requests = server.requests();
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert!(requests[0].body.get("stream").is_none());
    assert_eq!(requests[1].body["stream_options"], json!({"include_usage": true}));
    assert_eq!(requests[1].body["messages"][0]["role"], "system");
    server.assert_clean();
}

#[tokio::test]
async fn parallel_tool_calls_streamed_in_fragments() {
    let server = server().await;
    let provider = OpenAiProvider::new(endpoint(&server)).unwrap();
    server.push(Reply::tool_calls(vec![
        ("read_file", json!({"path": "notes/today.md", "limit": 200})),
        ("list_dir", json!({"path": "/tmp/some/long/directory/name"})),
    ]));
    let mut question = request("gpt-test", true);
    question.tools = vec![tool("read_file"), tool("list_dir")].into();
    let completion = provider.complete(&question, &Recorder::default()).await.unwrap();
    assert_eq!(completion.stop_reason, StopReason::ToolUse);
    let calls: Vec<(&str, &str, Value)> = completion
        .tool_calls
        .iter()
        .map(|call| (call.id.as_str(), call.name.as_str(), serde_json::from_str(&call.arguments).unwrap()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("call_1", "read_file", json!({"path": "notes/today.md", "limit": 200})),
            ("call_2", "list_dir", json!({"path": "/tmp/some/long/directory/name"})),
        ]
    );
    assert_eq!(server.requests()[0].body["tools"][0]["function"]["name"], "read_file");

    // The results go back as `tool` messages the server checks against the calls.
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
    let sent = &server.requests()[1].body["messages"];
    assert_eq!(sent[3]["role"], "tool");
    assert_eq!(sent[3]["tool_call_id"], "call_1");
    server.assert_clean();
}

#[tokio::test]
async fn invalid_argument_json_is_kept_raw() {
    let server = server().await;
    let provider = OpenAiProvider::new(endpoint(&server)).unwrap();
    for stream in [true, false] {
        server.push(Reply::ToolCalls {
            text: "Trying.".into(),
            calls: vec![ScriptedCall::new("", "read_file", "{\"path\": \"unterminated")],
        });
        let mut question = request("gpt-test", stream);
        question.tools = vec![tool("read_file")].into();
        let completion = provider.complete(&question, &Recorder::default()).await.unwrap();
        assert_eq!(completion.content, "Trying.");
        assert_eq!(completion.tool_calls[0].arguments, "{\"path\": \"unterminated");
    }
    server.assert_clean();
}

#[tokio::test]
async fn invalid_stored_arguments_still_make_a_valid_request() {
    let server = server().await;
    let provider = OpenAiProvider::new(endpoint(&server)).unwrap();
    server.push(Reply::text("noted"));
    let mut question = request("gpt-test", true);
    question.tools = vec![tool("read_file")].into();
    question.messages.push(ChatMessage::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCall { id: "call_9".into(), name: "read_file".into(), arguments: "{oops".into() }],
    });
    question.messages.push(ChatMessage::Tool {
        call_id: "call_9".into(),
        name: "read_file".into(),
        content: "invalid arguments: expected a JSON object".into(),
        is_error: true,
    });
    provider.complete(&question, &Recorder::default()).await.unwrap();
    server.assert_clean();
}

async fn failure(reply: Reply, stream: bool) -> ProviderError {
    let server = server().await;
    server.push(reply);
    let provider = OpenAiProvider::new(endpoint(&server)).unwrap();
    let error = provider.complete(&request("gpt-test", stream), &Recorder::default()).await.unwrap_err();
    server.assert_clean();
    error
}

#[tokio::test]
async fn errors_are_classified_at_the_source() {
    for stream in [false, true] {
        let error = failure(Reply::auth_failure(), stream).await;
        assert!(matches!(error, ProviderError::Auth { .. }), "{error:?}");
        assert!(error.to_string().contains("Incorrect API key"), "{error}");

        let error = failure(Reply::context_overflow(), stream).await;
        assert!(matches!(error, ProviderError::ContextOverflow { .. }), "{error:?}");

        let error = failure(Reply::rate_limited(Some(7)), stream).await;
        let ProviderError::RateLimited { retry_after, .. } = error else { panic!("{error:?}") };
        assert_eq!(retry_after, Some(Duration::from_secs(7)));

        let error = failure(Reply::server_error(503), stream).await;
        assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");

        let error = failure(Reply::bad_request("unknown model gpt-test"), stream).await;
        assert!(matches!(error, ProviderError::Rejected { .. }), "{error:?}");
        assert!(error.to_string().contains("unknown model gpt-test"), "{error}");

        let error = failure(Reply::garbage("this is not json {{{"), stream).await;
        assert!(matches!(error, ProviderError::InvalidResponse { .. }), "{error:?}");
    }
}

#[tokio::test]
async fn cut_stream_is_transient() {
    let error = failure(Reply::cut_stream("The answer is"), true).await;
    assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
}

#[tokio::test(start_paused = true)]
async fn a_silent_server_times_out_as_transient() {
    let server = server().await;
    server.push(Reply::text("too late").after(Duration::from_secs(30)));
    let provider = OpenAiProvider::new(endpoint(&server).with_timeout(Duration::from_secs(5))).unwrap();
    let error = provider.complete(&request("gpt-test", true), &Recorder::default()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
    assert!(error.to_string().contains("no response within 5s"), "{error}");
    server.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn a_stream_that_stalls_mid_answer_times_out_as_transient() {
    let server = server().await;
    server.push(Reply::stall_stream("The answer is"));
    let provider = OpenAiProvider::new(endpoint(&server).with_timeout(Duration::from_secs(5))).unwrap();
    let recorder = Recorder::default();
    let error = provider.complete(&request("gpt-test", true), &recorder).await.unwrap_err();
    assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
    assert!(error.to_string().contains("no data for 5s"), "{error}");
    assert_eq!(recorder.text(), "The answer is", "the text before the stall was streamed");
    server.assert_clean();
}

#[tokio::test(start_paused = true)]
async fn a_plain_body_that_stalls_times_out_as_transient() {
    let server = server().await;
    server.push(Reply::stall_stream("never finished"));
    let provider = OpenAiProvider::new(endpoint(&server).with_timeout(Duration::from_secs(5))).unwrap();
    let error = provider.complete(&request("gpt-test", false), &Recorder::default()).await.unwrap_err();
    assert!(matches!(error, ProviderError::Transient { .. }), "{error:?}");
    server.assert_clean();
}
