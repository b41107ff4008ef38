//! The Anthropic messages adapter (`POST {api_base}/messages`, `anthropic-version: 2023-06-01`).

mod response;

use std::future::Future;

use serde_json::{Map, Value, json};
use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StreamSink};
use squidbot_types::ChatMessage;

use crate::http::{self, Endpoint, KeyHeader, StreamEnd, Transport};
use crate::images::Images;
use response::StreamState;

/// API version every request pins.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Talks to the Anthropic messages API.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    transport: Transport,
}

impl AnthropicProvider {
    /// An adapter with its own HTTP client.
    pub fn new(endpoint: Endpoint) -> Result<Self, ProviderError> {
        Self::with_client(http::http_client()?, endpoint)
    }

    /// An adapter sharing `client` (and its connection pool) with others.
    pub(crate) fn with_client(client: reqwest::Client, endpoint: Endpoint) -> Result<Self, ProviderError> {
        let transport = Transport::new(
            client,
            endpoint,
            KeyHeader::Named("x-api-key"),
            &[("anthropic-version", ANTHROPIC_VERSION)],
        )?;
        Ok(Self { transport })
    }

    async fn run(&self, request: &CompletionRequest, sink: &dyn StreamSink) -> Result<Completion, ProviderError> {
        let images = Images::load(&request.messages, self.transport.vision()).await;
        let body = request_body(request, &images);
        let response = self.transport.post("messages", &body).await?;
        if !(request.stream && http::is_event_stream(&response)) {
            return self
                .transport
                .read_completion(response, sink, |transport, value| {
                    response::parse_message(transport, value, &request.model)
                })
                .await;
        }
        let mut state = StreamState::default();
        let end = self
            .transport
            .read_events(response, |event| {
                let value = self.transport.parse_json("a stream event", event.data.as_bytes())?;
                state.apply(&self.transport, event.event.as_deref(), &value, sink)
            })
            .await?;
        match end {
            StreamEnd::Finished => Ok(state.finish(&request.model)),
            StreamEnd::Closed { events, unknown_line } => {
                Err(self.transport.closed_early(events, unknown_line, "message_stop"))
            }
        }
    }
}

impl LlmProvider for AnthropicProvider {
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> impl Future<Output = Result<Completion, ProviderError>> + Send + 'a {
        self.run(request, sink)
    }
}

/// The JSON body of one messages request.
fn request_body(request: &CompletionRequest, images: &Images) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if !request.system.trim().is_empty() {
        // A cache breakpoint after the system prompt lets every turn reuse it.
        body.insert(
            "system".into(),
            json!([{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]),
        );
    }
    body.insert("messages".into(), Value::Array(messages_json(&request.messages, images)));
    if let Some(temperature) = request.temperature {
        body.insert("temperature".into(), json!(temperature));
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                let schema = if tool.parameters.is_object() {
                    tool.parameters.clone()
                } else {
                    json!({"type": "object", "properties": {}})
                };
                json!({"name": tool.name, "description": tool.description, "input_schema": schema})
            })
            .collect();
        // Tools render before the system prompt, so this breakpoint caches them too.
        if let Some(Value::Object(last)) = tools.last_mut() {
            last.insert("cache_control".into(), json!({"type": "ephemeral"}));
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    if request.stream {
        body.insert("stream".into(), json!(true));
    }
    Value::Object(body)
}

/// Text of the user turn inserted when a conversation would open with the assistant.
const CONTINUATION_MARKER: &str = "(conversation continues)";

/// One role's turn in the strictly alternating message list.
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// Maps messages to content blocks, merging consecutive same-role messages (tool results
/// travel as user blocks) and dropping empty text, which the API refuses.
fn messages_json(messages: &[ChatMessage], images: &Images) -> Vec<Value> {
    let mut turns: Vec<Turn> = Vec::new();
    for message in messages {
        let (role, blocks) = message_blocks(message, images);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.blocks.extend(blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    if let Some(last) = turns.last_mut()
        && last.role == "assistant"
    {
        trim_final_assistant_text(&mut last.blocks);
    }
    // The API refuses a conversation that opens with the assistant (possible after
    // compaction trimmed the head); a marker turn keeps the rest intact.
    if turns.first().is_some_and(|turn| turn.role == "assistant") {
        turns.insert(0, Turn { role: "user", blocks: vec![json!({"type": "text", "text": CONTINUATION_MARKER})] });
    }
    turns
        .into_iter()
        .filter(|turn| !turn.blocks.is_empty())
        .map(|mut turn| {
            if turn.role == "user" {
                // The API wants tool results before any text in a user turn.
                turn.blocks.sort_by_key(|block| block["type"] != "tool_result");
            }
            json!({"role": turn.role, "content": turn.blocks})
        })
        .collect()
}

fn message_blocks(message: &ChatMessage, images: &Images) -> (&'static str, Vec<Value>) {
    match message {
        ChatMessage::User { content, images: attached } => {
            // Images first, then the text about them (the order Anthropic recommends).
            let (text, sent) = images.parts(content, attached);
            let mut blocks: Vec<Value> = sent
                .into_iter()
                .map(|(media_type, data)| {
                    json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
                })
                .collect();
            blocks.extend(text_block(&text));
            ("user", blocks)
        }
        ChatMessage::Assistant { content, tool_calls } => {
            let mut blocks: Vec<Value> = text_block(content).into_iter().collect();
            blocks.extend(tool_calls.iter().map(|call| {
                // The raw arguments may be invalid JSON; the API needs an object regardless.
                let input = serde_json::from_str::<Value>(&call.arguments)
                    .ok()
                    .filter(Value::is_object)
                    .unwrap_or_else(|| json!({}));
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
            }));
            ("assistant", blocks)
        }
        ChatMessage::Tool { call_id, content, is_error, .. } => {
            let mut block = Map::new();
            block.insert("type".into(), json!("tool_result"));
            block.insert("tool_use_id".into(), json!(call_id));
            if !content.trim().is_empty() {
                block.insert("content".into(), json!(content));
            }
            if *is_error {
                block.insert("is_error".into(), json!(true));
            }
            ("user", vec![Value::Object(block)])
        }
    }
}

fn text_block(text: &str) -> Option<Value> {
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

/// A conversation ending in assistant text is a prefill, which may not end in whitespace.
fn trim_final_assistant_text(blocks: &mut [Value]) {
    if let Some(Value::Object(block)) = blocks.last_mut()
        && block.get("type") == Some(&json!("text"))
        && let Some(Value::String(text)) = block.get_mut("text")
    {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
    }
}

#[cfg(test)]
mod tests {
    use squidbot_types::{ToolCall, ToolSpec};

    use super::*;

    fn call(id: &str, arguments: &str) -> ToolCall {
        ToolCall { id: id.into(), name: "read".into(), arguments: arguments.into() }
    }

    fn tool_result(id: &str, content: &str) -> ChatMessage {
        ChatMessage::Tool { call_id: id.into(), name: "read".into(), content: content.into(), is_error: id == "b" }
    }

    #[test]
    fn roles_alternate_and_tool_results_merge() {
        let messages = vec![
            ChatMessage::user("hi"),
            ChatMessage::user("  "),
            ChatMessage::user("again"),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![call("a", "{\"path\":\"x\"}"), call("b", "{not json")],
            },
            tool_result("a", "file body"),
            tool_result("b", ""),
            ChatMessage::user("and?"),
            ChatMessage::assistant(""),
            ChatMessage::assistant("done  "),
        ];
        let turns = messages_json(&messages, &Images::default());
        let roles: Vec<_> = turns.iter().map(|turn| turn["role"].as_str().unwrap()).collect();
        assert_eq!(roles, vec!["user", "assistant", "user", "assistant"]);
        assert_eq!(turns[0]["content"].as_array().unwrap().len(), 2);
        let uses = &turns[1]["content"];
        assert_eq!(uses.as_array().unwrap().len(), 2);
        assert_eq!(uses[0]["input"], json!({"path": "x"}));
        assert_eq!(uses[1]["input"], json!({}));
        let results = &turns[2]["content"];
        assert_eq!(results[0], json!({"type": "tool_result", "tool_use_id": "a", "content": "file body"}));
        assert_eq!(results[1], json!({"type": "tool_result", "tool_use_id": "b", "is_error": true}));
        assert_eq!(results[2], json!({"type": "text", "text": "and?"}));
        assert_eq!(turns[3]["content"][0]["text"], "done");
    }

    #[test]
    fn a_conversation_never_opens_with_the_assistant() {
        let turns =
            messages_json(&[ChatMessage::assistant("earlier answer"), ChatMessage::user("next")], &Images::default());
        assert_eq!(turns[0]["role"], "user");
        assert_eq!(turns[0]["content"][0]["text"], CONTINUATION_MARKER);
        assert_eq!(turns[1]["role"], "assistant");
    }

    #[test]
    fn tool_results_come_before_text_in_a_user_turn() {
        let messages = vec![
            ChatMessage::Assistant { content: "checking".into(), tool_calls: vec![call("a", "{}")] },
            ChatMessage::user("hurry"),
            tool_result("a", "ok"),
        ];
        let turns = messages_json(&messages, &Images::default());
        assert_eq!(turns[2]["content"][0]["type"], "tool_result");
        assert_eq!(turns[2]["content"][1]["type"], "text");
    }

    #[test]
    fn body_has_cache_breakpoints_on_system_and_last_tool() {
        let tool =
            |name: &str| ToolSpec { name: name.into(), description: "d".into(), parameters: json!({"type": "object"}) };
        let request = CompletionRequest {
            model: "claude-test".into(),
            system: "you are squidbot".into(),
            messages: vec![ChatMessage::user("hi")],
            tools: vec![tool("one"), tool("two")].into(),
            max_tokens: 50,
            temperature: None,
            stream: true,
        };
        let body = request_body(&request, &Images::default());
        assert_eq!(body["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["system"][0]["text"], "you are squidbot");
        assert!(body["tools"][0].get("cache_control").is_none());
        assert_eq!(body["tools"][1]["cache_control"]["type"], "ephemeral");
        assert_eq!(body["tools"][1]["input_schema"], json!({"type": "object"}));
        assert_eq!(body["stream"], true);
        assert_eq!(body["max_tokens"], 50);
        assert!(body.get("temperature").is_none());

        let bare = request_body(
            &CompletionRequest { system: String::new(), tools: Default::default(), stream: false, ..request },
            &Images::default(),
        );
        for absent in ["system", "tools", "stream"] {
            assert!(bare.get(absent).is_none(), "{absent} should be omitted");
        }
    }
}
