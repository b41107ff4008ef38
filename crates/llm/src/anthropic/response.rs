//! Reading Anthropic messages answers: whole JSON bodies and streamed events.

use std::collections::BTreeMap;

use serde_json::Value;
use squidbot_core::provider::{Completion, ProviderError, StopReason, StreamSink};
use squidbot_types::{ToolCall, Usage};

use crate::fault::Fault;
use crate::http::{Flow, Transport};

/// Reads a non-streamed response body.
pub(super) fn parse_message(transport: &Transport, value: &Value, model: &str) -> Result<Completion, ProviderError> {
    check_error(transport, value)?;
    let Some(Value::Array(blocks)) = value.get("content") else {
        return Err(transport.invalid("the response has no content list".to_owned()));
    };
    let mut content = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => content.push_str(block.get("text").and_then(Value::as_str).unwrap_or_default()),
            Some("tool_use") => tool_calls.push(ToolCall {
                id: string_field(block, "id"),
                name: string_field(block, "name"),
                arguments: block.get("input").map_or_else(|| "{}".to_owned(), Value::to_string),
            }),
            _ => {}
        }
    }
    let mut usage = TokenCounts::default();
    if let Some(reported) = value.get("usage") {
        usage.update(reported);
    }
    Ok(Completion {
        content,
        stop_reason: stop_reason(value.get("stop_reason").and_then(Value::as_str), !tool_calls.is_empty()),
        tool_calls,
        usage: usage.into_usage(),
        model: model.to_owned(),
    })
}

/// Token counts as Anthropic splits them.
#[derive(Debug, Default)]
struct TokenCounts {
    input: u64,
    cache_read: u64,
    cache_creation: u64,
    output: u64,
}

impl TokenCounts {
    /// Takes every count present; later events repeat the totals so far.
    fn update(&mut self, usage: &Value) {
        let fields = [
            ("input_tokens", &mut self.input),
            ("cache_read_input_tokens", &mut self.cache_read),
            ("cache_creation_input_tokens", &mut self.cache_creation),
            ("output_tokens", &mut self.output),
        ];
        for (name, slot) in fields {
            if let Some(count) = usage.get(name).and_then(Value::as_u64) {
                *slot = count;
            }
        }
    }

    fn into_usage(self) -> Usage {
        Usage {
            input_tokens: self.input + self.cache_read + self.cache_creation,
            output_tokens: self.output,
            cached_input_tokens: self.cache_read,
            cache_write_tokens: self.cache_creation,
        }
    }
}

/// A content block being streamed.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        /// `input` from `content_block_start`, used when no JSON pieces follow.
        initial_input: Value,
        /// Concatenated `input_json_delta.partial_json` pieces.
        json: String,
        saw_json: bool,
    },
    Other,
}

/// Everything a stream has delivered so far.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    content: String,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: TokenCounts,
}

impl StreamState {
    /// Applies one event; [`Flow::Done`] on `message_stop`.
    pub(super) fn apply(
        &mut self,
        transport: &Transport,
        event_name: Option<&str>,
        value: &Value,
        sink: &dyn StreamSink,
    ) -> Result<Flow, ProviderError> {
        let kind = value.get("type").and_then(Value::as_str).or(event_name);
        let index = value.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            Some("message_start") => {
                if let Some(usage) = value.pointer("/message/usage") {
                    self.usage.update(usage);
                }
            }
            Some("content_block_start") => {
                let block = value.get("content_block").unwrap_or(&Value::Null);
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(text) = block.get("text").and_then(Value::as_str) {
                            self.push_text(text, sink);
                        }
                        Block::Text
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: string_field(block, "id"),
                        name: string_field(block, "name"),
                        initial_input: block.get("input").cloned().unwrap_or(Value::Null),
                        json: String::new(),
                        saw_json: false,
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, started);
            }
            Some("content_block_delta") => {
                let delta = value.get("delta").unwrap_or(&Value::Null);
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta.get("text").and_then(Value::as_str).unwrap_or_default();
                        self.push_text(text, sink);
                    }
                    Some("input_json_delta") => {
                        let piece = delta.get("partial_json").and_then(Value::as_str).unwrap_or_default();
                        match self.blocks.get_mut(&index) {
                            Some(Block::ToolUse { json, saw_json, .. }) => {
                                json.push_str(piece);
                                *saw_json = true;
                            }
                            _ => {
                                return Err(transport.invalid(format!(
                                    "input_json_delta for content block {index}, which is not a tool_use"
                                )));
                            }
                        }
                    }
                    _ => {}
                }
            }
            Some("message_delta") => {
                if let Some(reason) = value.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(reason.to_owned());
                }
                if let Some(usage) = value.get("usage") {
                    self.usage.update(usage);
                }
            }
            Some("message_stop") => return Ok(Flow::Done),
            Some("error") => return Err(Fault::from_error_value(value).classify(transport.provider())),
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn push_text(&mut self, text: &str, sink: &dyn StreamSink) {
        if !text.is_empty() {
            self.content.push_str(text);
            sink.text_delta(text);
        }
    }

    /// The completion assembled from everything received.
    pub(super) fn finish(self, model: &str) -> Completion {
        let tool_calls: Vec<ToolCall> = self
            .blocks
            .into_values()
            .filter_map(|block| match block {
                Block::ToolUse { id, name, initial_input, json, saw_json } => {
                    let arguments = if saw_json && !json.trim().is_empty() {
                        json
                    } else if initial_input.is_object() {
                        initial_input.to_string()
                    } else {
                        "{}".to_owned()
                    };
                    Some(ToolCall { id, name, arguments })
                }
                Block::Text | Block::Other => None,
            })
            .collect();
        Completion {
            content: self.content,
            stop_reason: stop_reason(self.stop_reason.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage.into_usage(),
            model: model.to_owned(),
        }
    }
}

/// A body of `{"type": "error", ...}` fails with the provider's classification.
fn check_error(transport: &Transport, value: &Value) -> Result<(), ProviderError> {
    if value.get("type").and_then(Value::as_str) == Some("error") {
        return Err(Fault::from_error_value(value).classify(transport.provider()));
    }
    Ok(())
}

fn string_field(value: &Value, field: &str) -> String {
    value.get(field).and_then(Value::as_str).unwrap_or_default().to_owned()
}

fn stop_reason(reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match reason {
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        _ if has_tool_calls => StopReason::ToolUse,
        Some("end_turn" | "stop_sequence") | None => StopReason::EndTurn,
        Some(_) => StopReason::Other,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;
    use crate::http::{Endpoint, KeyHeader, http_client};

    #[derive(Default)]
    struct Recorder(Mutex<String>);

    impl StreamSink for Recorder {
        fn text_delta(&self, text: &str) {
            self.0.lock().unwrap().push_str(text);
        }
    }

    fn transport() -> Transport {
        Transport::new(
            http_client().unwrap(),
            Endpoint::new("anthropic", "http://127.0.0.1:1/v1"),
            KeyHeader::Named("x-api-key"),
            &[],
        )
        .unwrap()
    }

    #[test]
    fn plain_message_with_tools_and_cache_usage() {
        let body = json!({
            "type": "message", "role": "assistant", "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}
            ],
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 5, "output_tokens": 7}
        });
        let completion = parse_message(&transport(), &body, "claude").unwrap();
        assert_eq!(completion.content, "Let me look.");
        assert_eq!(completion.tool_calls[0].arguments, "{\"path\":\"a\"}");
        assert_eq!(completion.stop_reason, StopReason::ToolUse);
        assert_eq!(
            completion.usage,
            Usage { input_tokens: 115, output_tokens: 7, cached_input_tokens: 100, cache_write_tokens: 5 }
        );
    }

    #[test]
    fn streamed_parallel_tool_uses_assemble_per_block() {
        let events = [
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 3, "cache_read_input_tokens": 2, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "On it"}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "read", "input": {}}}),
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "t2", "name": "list", "input": {}}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"pa"}}),
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}}),
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "th\": 1"}}),
            json!({"type": "ping"}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        ];
        let sink = Recorder::default();
        let mut state = StreamState::default();
        for event in &events {
            assert_eq!(state.apply(&transport(), None, event, &sink).unwrap(), Flow::Continue);
        }
        let stop = json!({"type": "message_stop"});
        assert_eq!(state.apply(&transport(), None, &stop, &sink).unwrap(), Flow::Done);
        let completion = state.finish("claude");
        assert_eq!(*sink.0.lock().unwrap(), "On it");
        assert_eq!(completion.tool_calls.len(), 2);
        assert_eq!(completion.tool_calls[0].arguments, "{\"path\": 1");
        assert_eq!(completion.tool_calls[1].arguments, "{}");
        assert_eq!(completion.stop_reason, StopReason::ToolUse);
        assert_eq!(completion.usage.input_tokens, 5);
        assert_eq!(completion.usage.cached_input_tokens, 2);
        assert_eq!(completion.usage.output_tokens, 9);
    }

    #[test]
    fn error_events_are_classified() {
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let error =
            StreamState::default().apply(&transport(), Some("error"), &overloaded, &Recorder::default()).unwrap_err();
        assert!(matches!(error, ProviderError::Transient { .. }));
        assert!(error.to_string().contains("Overloaded"));
        let plain = parse_message(&transport(), &overloaded, "m").unwrap_err();
        assert!(matches!(plain, ProviderError::Transient { .. }));
    }

    #[test]
    fn stray_json_delta_is_invalid_not_a_panic() {
        let delta = json!({"type": "content_block_delta", "index": 7, "delta": {"type": "input_json_delta", "partial_json": "{"}});
        let error = StreamState::default().apply(&transport(), None, &delta, &Recorder::default()).unwrap_err();
        assert!(matches!(error, ProviderError::InvalidResponse { .. }));
    }
}
