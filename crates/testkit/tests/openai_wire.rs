//! The OpenAI chat-completions wire: plain and streamed answers reassemble to the script.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use squidbot_testkit::{Reply, ScriptedCall, ScriptedLlm, Wire};

use crate::support::{openai_body, openai_chunks, post, post_json, read_stream, tokens_for};

#[tokio::test]
async fn a_plain_completion_carries_text_and_deterministic_usage() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::text("Hello from the script."));
    let body = openai_body(false);
    let completion = post_json(&llm, Wire::OpenAi, &body).await;
    assert_eq!(completion["object"], "chat.completion");
    assert_eq!(completion["model"], "gpt-test");
    let choice = &completion["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], "Hello from the script.");
    assert_eq!(choice["finish_reason"], "stop");
    let prompt_tokens = tokens_for(body.to_string().len());
    assert_eq!(completion["usage"]["prompt_tokens"], prompt_tokens);
    assert_eq!(completion["usage"]["completion_tokens"], tokens_for("Hello from the script.".len()));
    assert_eq!(completion["usage"]["total_tokens"], prompt_tokens + tokens_for(22));
    llm.assert_clean();
}

#[tokio::test]
async fn a_plain_completion_carries_tool_calls() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::tool_call("read_file", json!({"path": "a.txt"})));
    let completion = post_json(&llm, Wire::OpenAi, &openai_body(false)).await;
    let message = &completion["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(
        message["tool_calls"],
        json!([{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"a.txt\"}"}}])
    );
    assert_eq!(completion["choices"][0]["finish_reason"], "tool_calls");
    llm.assert_clean();
}

#[tokio::test]
async fn streamed_text_arrives_in_several_deltas_and_ends_with_done() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::text("one two three four"));
    let stream = read_stream(post(&llm, Wire::OpenAi, &openai_body(true)).await).await;
    assert!(!stream.cut);
    assert!(stream.text.trim_end().ends_with("data: [DONE]"));
    let chunks = openai_chunks(&stream.text);
    assert!(chunks.iter().all(|chunk| chunk["object"] == "chat.completion.chunk"));
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let deltas: Vec<&str> = chunks
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"]["content"].as_str())
        .filter(|text| !text.is_empty())
        .collect();
    assert!(deltas.len() >= 4, "{deltas:?}");
    assert_eq!(deltas.concat(), "one two three four");
    let last = chunks.last().expect("chunks");
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(chunks.iter().all(|chunk| chunk.get("usage").is_none()), "no usage unless asked");
}

#[tokio::test]
async fn streamed_parallel_tool_calls_reassemble_to_the_script() {
    let llm = ScriptedLlm::start().await;
    let scripted = vec![
        ("read_file", json!({"path": "notes/today.md"})),
        ("exec", json!({"command": "ls -la /tmp", "timeout_secs": 30})),
        ("web_search", json!({"query": "squid facts", "count": 5})),
    ];
    llm.push(Reply::tool_calls(scripted.clone()));
    let stream = read_stream(post(&llm, Wire::OpenAi, &openai_body(true)).await).await;
    let chunks = openai_chunks(&stream.text);

    let mut calls: BTreeMap<u64, ScriptedCall> = BTreeMap::new();
    let mut fragment_counts: BTreeMap<u64, usize> = BTreeMap::new();
    let mut fragment_order = Vec::new();
    for chunk in &chunks {
        let Some(deltas) = chunk["choices"][0]["delta"]["tool_calls"].as_array() else { continue };
        for delta in deltas {
            let index = delta["index"].as_u64().expect("index on every tool-call delta");
            let arguments = delta["function"]["arguments"].as_str().unwrap_or("");
            if let Some(id) = delta["id"].as_str() {
                assert!(!calls.contains_key(&index), "only the first chunk of a call carries its id");
                assert_eq!(delta["type"], "function");
                let name = delta["function"]["name"].as_str().expect("name in the first chunk");
                calls.insert(index, ScriptedCall::new(id, name, arguments));
            } else {
                assert!(delta["function"].get("name").is_none(), "later chunks carry no name");
                let call = calls.get_mut(&index).expect("a call opened before its fragments");
                call.arguments.push_str(arguments);
                *fragment_counts.entry(index).or_default() += 1;
                fragment_order.push(index);
            }
        }
    }
    let expected: Vec<ScriptedCall> = scripted
        .iter()
        .enumerate()
        .map(|(position, (name, arguments))| {
            ScriptedCall::new(format!("call_{}", position + 1), *name, arguments.to_string())
        })
        .collect();
    assert_eq!(calls.into_values().collect::<Vec<_>>(), expected);
    assert!(fragment_counts.values().all(|count| *count >= 3), "{fragment_counts:?}");
    assert_eq!(&fragment_order[..3], &[0, 1, 2], "fragments of parallel calls are interleaved");
    let finish = chunks.iter().find_map(|chunk| chunk["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("tool_calls"));
    assert!(stream.text.trim_end().ends_with("data: [DONE]"));
    llm.assert_clean();
}

#[tokio::test]
async fn include_usage_adds_a_final_usage_chunk() {
    let llm = ScriptedLlm::start().await;
    llm.push(Reply::text("counted words"));
    let mut body = openai_body(true);
    body["stream_options"] = json!({"include_usage": true});
    let stream = read_stream(post(&llm, Wire::OpenAi, &body).await).await;
    let chunks = openai_chunks(&stream.text);
    let last = chunks.last().expect("chunks");
    assert_eq!(last["choices"], json!([]));
    let prompt_tokens = tokens_for(body.to_string().len());
    assert_eq!(last["usage"]["prompt_tokens"], prompt_tokens);
    assert_eq!(last["usage"]["completion_tokens"], tokens_for("counted words".len()));
    assert_eq!(last["usage"]["total_tokens"], prompt_tokens + tokens_for(13));
    assert!(chunks[..chunks.len() - 1].iter().all(|chunk| chunk["usage"].is_null()));
    assert!(stream.text.trim_end().ends_with("data: [DONE]"));
    llm.assert_clean();
}

#[tokio::test]
async fn deliberately_invalid_arguments_are_sent_verbatim() {
    let llm = ScriptedLlm::start().await;
    let broken = ScriptedCall::new("call_bad", "read_file", "{\"path\": \"a.txt\"");
    llm.push(Reply::ToolCalls { text: String::new(), calls: vec![broken.clone()] });
    llm.push(Reply::ToolCalls { text: String::new(), calls: vec![broken] });
    let completion = post_json(&llm, Wire::OpenAi, &openai_body(false)).await;
    assert_eq!(completion["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"path\": \"a.txt\"");
    let stream = read_stream(post(&llm, Wire::OpenAi, &openai_body(true)).await).await;
    let arguments: String = openai_chunks(&stream.text)
        .iter()
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str().map(str::to_owned)
        })
        .collect();
    assert_eq!(arguments, "{\"path\": \"a.txt\"");
}
