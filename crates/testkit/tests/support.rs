//! Raw HTTP helpers the integration tests share: well-formed requests and SSE reading.

use futures_util::StreamExt;
use serde_json::{Value, json};
use squidbot_testkit::{ScriptedLlm, Wire};

pub const API_KEY: &str = "sk-test-key";

/// A well-formed OpenAI request body.
pub fn openai_body(stream: bool) -> Value {
    let mut body = json!({
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "You are squidbot."},
            {"role": "user", "content": "Hello?"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "read_file",
            "description": "Reads a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }}],
    });
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// A well-formed Anthropic request body.
pub fn anthropic_body(stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": "You are squidbot.",
        "messages": [{"role": "user", "content": "Hello?"}],
        "tools": [{
            "name": "read_file",
            "description": "Reads a file.",
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
        }],
        "stream": stream,
    })
}

/// Posts `body` to the wire's endpoint with that wire's credential headers.
pub async fn post(llm: &ScriptedLlm, wire: Wire, body: &Value) -> reqwest::Response {
    let client = reqwest::Client::new();
    let request = match wire {
        Wire::OpenAi => client.post(format!("{}/chat/completions", llm.base_url())).bearer_auth(API_KEY),
        Wire::Embeddings => client.post(format!("{}/embeddings", llm.base_url())).bearer_auth(API_KEY),
        Wire::Anthropic => client
            .post(format!("{}/messages", llm.base_url()))
            .header("x-api-key", API_KEY)
            .header("anthropic-version", "2023-06-01"),
    };
    match request.json(body).send().await {
        Ok(response) => response,
        Err(error) => panic!("can't reach the scripted LLM: {error}"),
    }
}

/// Posts and parses a JSON answer, asserting status 200.
pub async fn post_json(llm: &ScriptedLlm, wire: Wire, body: &Value) -> Value {
    let response = post(llm, wire, body).await;
    assert_eq!(response.status(), 200);
    response.json().await.expect("a JSON body")
}

/// A streamed body as far as it got, and whether the connection broke before its end.
pub struct StreamRead {
    pub text: String,
    pub cut: bool,
}

pub async fn read_stream(response: reqwest::Response) -> StreamRead {
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    let mut cut = false;
    while let Some(piece) = stream.next().await {
        match piece {
            Ok(piece) => bytes.extend_from_slice(&piece),
            Err(_) => {
                cut = true;
                break;
            }
        }
    }
    StreamRead { text: String::from_utf8(bytes).expect("UTF-8 stream"), cut }
}

/// The payloads of the `data:` lines, in order.
pub fn data_payloads(text: &str) -> Vec<String> {
    text.lines().filter_map(|line| line.strip_prefix("data: ")).map(str::to_owned).collect()
}

/// OpenAI chunks (every data payload but `[DONE]`), parsed.
pub fn openai_chunks(text: &str) -> Vec<Value> {
    data_payloads(text)
        .iter()
        .filter(|payload| payload.as_str() != "[DONE]")
        .map(|payload| serde_json::from_str(payload).expect("a JSON chunk"))
        .collect()
}

/// Anthropic events as (event name, parsed data), checking each data's `type` matches its event.
pub fn anthropic_events(text: &str) -> Vec<(String, Value)> {
    text.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let mut lines = frame.lines();
            let event = lines.next().and_then(|line| line.strip_prefix("event: ")).expect("an event line");
            let data = lines.next().and_then(|line| line.strip_prefix("data: ")).expect("a data line");
            let data: Value = serde_json::from_str(data).expect("JSON data");
            assert_eq!(data["type"], event);
            (event.to_owned(), data)
        })
        .collect()
}

/// The token estimate the server promises: characters / 4, rounded up.
pub fn tokens_for(characters: usize) -> u64 {
    u64::try_from(characters.div_ceil(4)).expect("small")
}
