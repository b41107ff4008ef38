//! Reading chat-completions answers: whole JSON bodies and streamed chunks.

use std::collections::BTreeMap;

use serde_json::Value;
use squidbot_core::provider::{Completion, ProviderError, StopReason, StreamSink};
use squidbot_types::{ToolCall, Usage};

use crate::fault::Fault;
use crate::http::Transport;

/// Reads a non-streamed response body.
pub(super) fn parse_completion(transport: &Transport, value: &Value, model: &str) -> Result<Completion, ProviderError> {
    check_error(transport, value)?;
    let Some(choice) = value.get("choices").and_then(|choices| choices.get(0)) else {
        return Err(transport.invalid("the response has no choices".to_owned()));
    };
    let message = choice.get("message").unwrap_or(&Value::Null);
    let tool_calls = match message.get("tool_calls") {
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(position, call)| {
                let mut partial = PartialCall::default();
                partial.absorb(call);
                partial.into_call(position as u64)
            })
            .collect(),
        _ => Vec::new(),
    };
    let finish_reason = choice.get("finish_reason").and_then(Value::as_str);
    Ok(Completion {
        content: text_of(message.get("content")),
        stop_reason: stop_reason(finish_reason, !tool_calls.is_empty()),
        tool_calls,
        usage: value.get("usage").map(parse_usage).unwrap_or_default(),
        model: model.to_owned(),
    })
}

/// A tool call whose pieces are still arriving.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl PartialCall {
    /// Adds one fragment: the id and name come once, arguments arrive in pieces.
    fn absorb(&mut self, fragment: &Value) {
        if let Some(id) = fragment.get("id").and_then(Value::as_str)
            && self.id.is_empty()
        {
            self.id = id.to_owned();
        }
        let function = fragment.get("function").unwrap_or(&Value::Null);
        if let Some(name) = function.get("name").and_then(Value::as_str)
            && self.name.is_empty()
        {
            self.name = name.to_owned();
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => self.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            // A few servers send the arguments already parsed.
            Some(other) => self.arguments.push_str(&other.to_string()),
        }
    }

    fn into_call(self, index: u64) -> ToolCall {
        ToolCall {
            id: if self.id.is_empty() { format!("call_{index}") } else { self.id },
            name: self.name,
            arguments: self.arguments,
        }
    }
}

/// Everything a stream has delivered so far.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    content: String,
    calls: BTreeMap<u64, PartialCall>,
    /// Index of the call the last fragment went to, for servers that omit `index`.
    last_index: Option<u64>,
    finish_reason: Option<String>,
    usage: Usage,
}

impl StreamState {
    /// Applies one `data:` chunk, streaming its text to `sink`.
    pub(super) fn apply(
        &mut self,
        transport: &Transport,
        chunk: &Value,
        sink: &dyn StreamSink,
    ) -> Result<(), ProviderError> {
        check_error(transport, chunk)?;
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            self.usage = parse_usage(usage);
        }
        let Some(Value::Array(choices)) = chunk.get("choices") else {
            return Ok(());
        };
        let first = choices.iter().find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0);
        let Some(choice) = first else {
            return Ok(());
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(text) = delta.get("content").and_then(Value::as_str)
            && !text.is_empty()
        {
            self.content.push_str(text);
            sink.text_delta(text);
        }
        if let Some(Value::Array(fragments)) = delta.get("tool_calls") {
            for fragment in fragments {
                let index = self.index_of(fragment);
                self.last_index = Some(index);
                self.calls.entry(index).or_default().absorb(fragment);
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        Ok(())
    }

    /// True once the model said why it stopped (the stream may omit `[DONE]`).
    pub(super) fn saw_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// The completion assembled from everything received.
    pub(super) fn finish(self, model: &str) -> Completion {
        let tool_calls: Vec<ToolCall> =
            self.calls.into_iter().map(|(index, partial)| partial.into_call(index)).collect();
        Completion {
            content: self.content,
            stop_reason: stop_reason(self.finish_reason.as_deref(), !tool_calls.is_empty()),
            tool_calls,
            usage: self.usage,
            model: model.to_owned(),
        }
    }

    /// The fragment's `index`; without one, a new id starts a new call and anything else
    /// continues the last.
    fn index_of(&self, fragment: &Value) -> u64 {
        if let Some(index) = fragment.get("index").and_then(Value::as_u64) {
            return index;
        }
        let next = self.calls.keys().next_back().map_or(0, |last| last + 1);
        let Some(last) = self.last_index else {
            return next;
        };
        match fragment.get("id").and_then(Value::as_str) {
            Some(id) if !id.is_empty() && self.calls.get(&last).is_some_and(|call| call.id != id) => next,
            _ => last,
        }
    }
}

/// A body or chunk carrying `{"error": ...}` instead of an answer (OpenRouter does this
/// mid-stream) fails with the provider's classification.
fn check_error(transport: &Transport, value: &Value) -> Result<(), ProviderError> {
    match value.get("error") {
        Some(Value::Null) | None => Ok(()),
        Some(_) => Err(Fault::from_error_value(value).classify(transport.provider())),
    }
}

/// `content` as text: a string, null, or a list of `{type: "text", text}` parts.
fn text_of(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

fn parse_usage(usage: &Value) -> Usage {
    let count = |value: Option<&Value>| value.and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: count(usage.get("prompt_tokens")),
        output_tokens: count(usage.get("completion_tokens")),
        cached_input_tokens: count(usage.pointer("/prompt_tokens_details/cached_tokens")),
        cache_write_tokens: 0,
    }
}

/// Maps `finish_reason`; tool calls win over `stop` because some servers report that.
fn stop_reason(finish_reason: Option<&str>, has_tool_calls: bool) -> StopReason {
    match finish_reason {
        Some("tool_calls" | "function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        _ if has_tool_calls => StopReason::ToolUse,
        Some("stop") | None => StopReason::EndTurn,
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
    struct Recorder(Mutex<Vec<String>>);

    impl StreamSink for Recorder {
        fn text_delta(&self, text: &str) {
            self.0.lock().unwrap().push(text.to_owned());
        }
    }

    fn transport() -> Transport {
        Transport::new(http_client().unwrap(), Endpoint::new("test", "http://127.0.0.1:1/v1"), KeyHeader::Bearer, &[])
            .unwrap()
    }

    #[test]
    fn plain_body_with_tool_calls_and_usage() {
        let body = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "one", "arguments": "{\"x\":1}"}},
                    {"type": "function", "function": {"name": "two", "arguments": "{bad"}}
                ]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 4}}
        });
        let completion = parse_completion(&transport(), &body, "m").unwrap();
        assert_eq!(completion.stop_reason, StopReason::ToolUse);
        assert_eq!(completion.tool_calls[0].arguments, "{\"x\":1}");
        assert_eq!(completion.tool_calls[1].id, "call_1");
        assert_eq!(completion.tool_calls[1].arguments, "{bad");
        assert_eq!(
            completion.usage,
            Usage { input_tokens: 10, output_tokens: 5, cached_input_tokens: 4, cache_write_tokens: 0 }
        );
    }

    #[test]
    fn parallel_fragments_assemble_by_index() {
        let chunks = [
            json!({"choices": [{"index": 0, "delta": {"content": "Hi "}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "c0", "type": "function", "function": {"name": "read", "arguments": ""}},
                {"index": 1, "id": "c1", "type": "function", "function": {"name": "list", "arguments": "{\"pa"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"p\":"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "th\":\"/\"}"}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}, "finish_reason": "tool_calls"}]}),
            json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        ];
        let sink = Recorder::default();
        let mut state = StreamState::default();
        for chunk in &chunks {
            state.apply(&transport(), chunk, &sink).unwrap();
        }
        assert!(state.saw_finish_reason());
        let completion = state.finish("m");
        assert_eq!(completion.content, "Hi ");
        assert_eq!(*sink.0.lock().unwrap(), vec!["Hi ".to_owned()]);
        let calls: Vec<_> = completion
            .tool_calls
            .iter()
            .map(|call| (call.id.as_str(), call.name.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(calls, vec![("c0", "read", "{\"p\":1}"), ("c1", "list", "{\"path\":\"/\"}")]);
        assert_eq!(completion.usage.total(), 5);
    }

    #[test]
    fn fragments_without_index_follow_ids() {
        let mut state = StreamState::default();
        let fragments = [
            json!({"id": "a", "function": {"name": "x", "arguments": "{"}}),
            json!({"function": {"arguments": "}"}}),
            json!({"id": "b", "function": {"name": "y", "arguments": "{}"}}),
        ];
        for fragment in fragments {
            let chunk = json!({"choices": [{"delta": {"tool_calls": [fragment]}}]});
            state.apply(&transport(), &chunk, &Recorder::default()).unwrap();
        }
        let completion = state.finish("m");
        assert_eq!(completion.tool_calls.len(), 2);
        assert_eq!(completion.tool_calls[0].arguments, "{}");
        assert_eq!(completion.tool_calls[1].name, "y");
    }

    #[test]
    fn error_chunks_are_classified() {
        let chunk = json!({"error": {"code": 502, "message": "upstream died"}});
        let error = StreamState::default().apply(&transport(), &chunk, &Recorder::default()).unwrap_err();
        assert!(matches!(error, ProviderError::Transient { .. }));
    }

    #[test]
    fn finish_reasons_map() {
        assert_eq!(stop_reason(Some("stop"), false), StopReason::EndTurn);
        assert_eq!(stop_reason(Some("stop"), true), StopReason::ToolUse);
        assert_eq!(stop_reason(Some("length"), false), StopReason::MaxTokens);
        assert_eq!(stop_reason(Some("content_filter"), false), StopReason::Other);
    }

    #[test]
    fn missing_choices_is_invalid() {
        let error = parse_completion(&transport(), &json!({"id": "x"}), "m").unwrap_err();
        assert!(matches!(error, ProviderError::InvalidResponse { .. }));
    }
}
