//! The Anthropic messages wire: plain and streamed answers reassemble to the script.

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedCall, ScriptedLlm, Wire};

use crate::support::{anthropic_body, anthropic_events, post, post_json, read_stream, tokens_for};

#[tokio::test]
async fn a_plain_message_carries_text_tool_uses_and_usage() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::ToolCalls {
        text: "Reading it.".to_owned(),
        calls: vec![ScriptedCall::new("", "read_file", json!({"path": "a.txt"}).to_string())],
    });
    let body = anthropic_body(false);
    let message = post_json(&llm, Wire::Anthropic, &body).await;
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["model"], "claude-test");
    assert_eq!(
        message["content"],
        json!([
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_call_1", "name": "read_file", "input": {"path": "a.txt"}},
        ])
    );
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(message["usage"]["input_tokens"], tokens_for(body.to_string().len()));
    assert_eq!(message["usage"]["output_tokens"], tokens_for("Reading it.".len() + "read_file".len() + 16));
    llm.assert_clean();
}

#[tokio::test]
async fn a_plain_text_message_ends_the_turn() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::text("Hi."));
    let message = post_json(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!(message["content"], json!([{"type": "text", "text": "Hi."}]));
    assert_eq!(message["stop_reason"], "end_turn");
}

#[tokio::test]
async fn streamed_parallel_tool_uses_reassemble_to_the_script() {
    let llm = ScriptedLlm::start().await;
    let scripted = [
        ("read_file", json!({"path": "notes/today.md"})),
        ("exec", json!({"command": "ls -la /tmp", "timeout_secs": 30})),
    ];
    llm.push(Reply::text("warm-up"));
    llm.push(Reply::ToolCalls {
        text: "Checking both.".to_owned(),
        calls: scripted.iter().map(|(name, arguments)| ScriptedCall::new("", *name, arguments.to_string())).collect(),
    });
    post(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    let body = anthropic_body(true);
    let stream = read_stream(post(&llm, Wire::Anthropic, &body).await).await;
    assert!(!stream.cut);
    let events = anthropic_events(&stream.text);
    let names: Vec<&str> = events.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"));
    assert_eq!(names.last(), Some(&"message_stop"));
    assert_eq!(names.iter().filter(|name| **name == "ping").count(), 1);
    assert_eq!(events[0].1["message"]["usage"]["input_tokens"], tokens_for(body.to_string().len()));

    let mut text = String::new();
    let mut blocks: Vec<(Value, String, usize)> = Vec::new();
    for (name, data) in &events {
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(data["index"], blocks.len());
                blocks.push((data["content_block"].clone(), String::new(), 0));
            }
            "content_block_delta" => {
                let (_, partial, count) = blocks.last_mut().expect("a started block");
                match data["delta"]["type"].as_str() {
                    Some("text_delta") => text.push_str(data["delta"]["text"].as_str().expect("text")),
                    Some("input_json_delta") => {
                        partial.push_str(data["delta"]["partial_json"].as_str().expect("partial_json"));
                        *count += 1;
                    }
                    other => panic!("unexpected delta {other:?}"),
                }
            }
            _ => {}
        }
    }
    assert_eq!(text, "Checking both.");
    let tool_blocks: Vec<&(Value, String, usize)> =
        blocks.iter().filter(|(block, _, _)| block["type"] == "tool_use").collect();
    assert_eq!(tool_blocks.len(), 2);
    for ((block, partial, count), (position, (name, arguments))) in tool_blocks.iter().zip(scripted.iter().enumerate())
    {
        // Ids continue the server's numbering: the warm-up had no calls, so these are call_1 and call_2.
        assert_eq!(block["id"], format!("toolu_call_{}", position + 1));
        assert_eq!(block["name"], *name);
        assert_eq!(block["input"], json!({}));
        assert!(*count >= 3, "{count} fragments");
        assert_eq!(serde_json::from_str::<Value>(partial).expect("valid JSON"), *arguments);
    }
    let delta = events.iter().find(|(name, _)| name == "message_delta").expect("message_delta");
    assert_eq!(delta.1["delta"]["stop_reason"], "tool_use");
    assert!(delta.1["usage"]["output_tokens"].as_u64().is_some_and(|tokens| tokens > 0));
    llm.assert_clean();
}

#[tokio::test]
async fn deliberately_invalid_arguments_reach_the_client_as_garbage() {
    let llm = ScriptedLlm::start().await;
    let broken = ScriptedCall::new("call_bad", "read_file", "{\"path\": ");
    llm.push(Reply::ToolCalls { text: String::new(), calls: vec![broken.clone()] });
    llm.push(Reply::ToolCalls { text: String::new(), calls: vec![broken] });
    let message = post_json(&llm, Wire::Anthropic, &anthropic_body(false)).await;
    assert_eq!(message["content"][0]["input"], "{\"path\": ");
    assert_eq!(message["content"][0]["id"], "toolu_call_bad");
    let stream = read_stream(post(&llm, Wire::Anthropic, &anthropic_body(true)).await).await;
    let partial: String = anthropic_events(&stream.text)
        .iter()
        .filter_map(|(_, data)| data["delta"]["partial_json"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(partial, "{\"path\": ");
}
