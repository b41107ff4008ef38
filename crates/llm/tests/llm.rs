//! Integration tests of squidbot-llm against the scripted LLM server, over real HTTP.

// Test helpers outside `#[test]` functions panic on failure like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod anthropic_wire;
mod embeddings;
mod images;
mod openai_wire;
mod routing;

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;
use squidbot_core::provider::{CompletionRequest, StreamSink};
use squidbot_llm::Endpoint;
use squidbot_testkit::ScriptedLlm;
use squidbot_types::{ChatMessage, Secret, ToolSpec};

/// Key every scripted server in these tests expects.
pub const KEY: &str = "sk-test-key";

/// Records streamed text and resets.
#[derive(Default)]
pub struct Recorder {
    deltas: Mutex<Vec<String>>,
    resets: AtomicUsize,
}

impl Recorder {
    /// Text received since the last reset.
    pub fn text(&self) -> String {
        self.deltas.lock().unwrap().concat()
    }

    /// Number of deltas received since the last reset.
    pub fn delta_count(&self) -> usize {
        self.deltas.lock().unwrap().len()
    }

    /// Number of `stream_reset` calls.
    pub fn resets(&self) -> usize {
        self.resets.load(Ordering::SeqCst)
    }
}

impl StreamSink for Recorder {
    fn text_delta(&self, text: &str) {
        self.deltas.lock().unwrap().push(text.to_owned());
    }

    fn stream_reset(&self) {
        self.resets.fetch_add(1, Ordering::SeqCst);
        self.deltas.lock().unwrap().clear();
    }
}

/// A one-question request for `model`.
pub fn request(model: &str, stream: bool) -> CompletionRequest {
    CompletionRequest {
        model: model.to_owned(),
        system: "You are a test assistant.".to_owned(),
        messages: vec![ChatMessage::user("Hello?")],
        tools: Default::default(),
        max_tokens: 256,
        temperature: None,
        stream,
    }
}

/// A tool spec the scripted server accepts.
pub fn tool(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }
}

/// An endpoint at the scripted server, with [`KEY`].
pub fn endpoint(server: &ScriptedLlm) -> Endpoint {
    Endpoint::new("scripted", server.base_url()).with_api_key(Secret::new(KEY))
}

/// A scripted server that expects [`KEY`].
pub async fn server() -> ScriptedLlm {
    let server = ScriptedLlm::start().await;
    server.expect_api_key(KEY);
    server
}
