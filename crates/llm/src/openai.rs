//! The OpenAI chat-completions adapter, also used for every OpenAI-compatible server.

mod request;
mod response;

use std::future::Future;

use squidbot_core::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StreamSink};

use crate::http::{self, Endpoint, Flow, KeyHeader, StreamEnd, Transport};
use crate::images::Images;
use request::RequestBody;
use response::StreamState;

/// Talks to `POST {api_base}/chat/completions`.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    transport: Transport,
}

impl OpenAiProvider {
    /// An adapter with its own HTTP client.
    pub fn new(endpoint: Endpoint) -> Result<Self, ProviderError> {
        Self::with_client(http::http_client()?, endpoint)
    }

    /// An adapter sharing `client` (and its connection pool) with others.
    pub(crate) fn with_client(client: reqwest::Client, endpoint: Endpoint) -> Result<Self, ProviderError> {
        Ok(Self { transport: Transport::new(client, endpoint, KeyHeader::Bearer, &[])? })
    }

    async fn run(&self, request: &CompletionRequest, sink: &dyn StreamSink) -> Result<Completion, ProviderError> {
        let images = Images::load(&request.messages, self.transport.vision()).await;
        let body = RequestBody::new(request, &images);
        let response = self.transport.post("chat/completions", &body).await?;
        if !(request.stream && http::is_event_stream(&response)) {
            return self
                .transport
                .read_completion(response, sink, |transport, value| {
                    response::parse_completion(transport, value, &request.model)
                })
                .await;
        }
        let mut state = StreamState::default();
        let end = self
            .transport
            .read_events(response, |event| {
                if event.data.trim() == "[DONE]" {
                    return Ok(Flow::Done);
                }
                let value = self.transport.parse_json("a stream event", event.data.as_bytes())?;
                state.apply(&self.transport, &value, sink)?;
                Ok(Flow::Continue)
            })
            .await?;
        match end {
            StreamEnd::Finished => {}
            StreamEnd::Closed { .. } if state.saw_finish_reason() => {}
            StreamEnd::Closed { events, unknown_line } => {
                return Err(self.transport.closed_early(events, unknown_line, "[DONE]"));
            }
        }
        Ok(state.finish(&request.model))
    }
}

impl LlmProvider for OpenAiProvider {
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> impl Future<Output = Result<Completion, ProviderError>> + Send + 'a {
        self.run(request, sink)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use squidbot_types::{ChatMessage, ToolCall, ToolSpec};

    use super::*;

    fn request_body(request: &CompletionRequest, images: &Images) -> Value {
        serde_json::to_value(RequestBody::new(request, images)).unwrap()
    }

    fn request(stream: bool) -> CompletionRequest {
        CompletionRequest {
            model: "gpt-test".into(),
            system: "be brief".into(),
            messages: vec![
                ChatMessage::user("weather?"),
                ChatMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "weather".into(),
                        arguments: String::new(),
                    }],
                },
                ChatMessage::Tool {
                    call_id: "call_1".into(),
                    name: "weather".into(),
                    content: "sunny".into(),
                    is_error: false,
                },
            ],
            tools: vec![ToolSpec {
                name: "weather".into(),
                description: "Looks up weather.".into(),
                parameters: json!({"type": "object"}),
            }]
            .into(),
            max_tokens: 100,
            temperature: Some(0.5),
            stream,
        }
    }

    #[test]
    fn request_body_maps_messages_tools_and_stream_options() {
        let body = request_body(&request(true), &Images::default());
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["temperature"], 0.5);
        assert_eq!(body["stream_options"]["include_usage"], true);
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(messages[2]["content"], Value::Null);
        assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{}");
        assert_eq!(messages[3], json!({"role": "tool", "tool_call_id": "call_1", "content": "sunny"}));
        assert_eq!(body["tools"][0]["function"]["name"], "weather");
        assert_eq!(body["tools"][0]["type"], "function");
    }

    #[test]
    fn plain_requests_omit_stream_fields_empty_tools_and_empty_system() {
        let mut plain = request(false);
        plain.tools = Default::default();
        plain.system.clear();
        plain.temperature = None;
        let body = request_body(&plain, &Images::default());
        for absent in ["stream", "stream_options", "tools", "temperature"] {
            assert!(body.get(absent).is_none(), "{absent} should be omitted");
        }
        assert_eq!(body["messages"][0]["role"], "user");
    }
}
