//! A scripted model for the crate's unit tests: it answers each request with the next
//! step of a script and keeps every request it got.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use squidbot_types::Usage;
use squidbot_types::message::ToolCall;

use crate::provider::{Completion, CompletionRequest, LlmProvider, ProviderError, StopReason, StreamSink};

/// What the scripted model does for one request.
pub(crate) enum Step {
    /// Streams the content, then answers with it.
    Answer(Completion),
    Fail(ProviderError),
    /// Streams the text, then never answers.
    StreamThenHang(&'static str),
    /// Streams these pieces, then answers with them joined.
    StreamPieces(Vec<&'static str>),
    /// Waits until the gate opens, then does the inner step.
    Gated(Arc<tokio::sync::Semaphore>, Box<Step>),
    Hang,
    Panic(&'static str),
}

/// Answers from a script of [`Step`]s, one per request.
pub(crate) struct ScriptedModel {
    pub(crate) steps: Mutex<VecDeque<Step>>,
    requests: Mutex<Vec<CompletionRequest>>,
}

impl ScriptedModel {
    pub(crate) fn new(steps: Vec<Step>) -> Arc<Self> {
        Arc::new(Self { steps: Mutex::new(steps.into()), requests: Mutex::new(Vec::new()) })
    }

    /// Every request so far.
    pub(crate) fn requests(&self) -> Vec<CompletionRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl LlmProvider for ScriptedModel {
    async fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> Result<Completion, ProviderError> {
        self.requests.lock().unwrap().push(request.clone());
        let mut step = self.steps.lock().unwrap().pop_front().expect("script exhausted");
        loop {
            match step {
                Step::Answer(completion) => {
                    sink.text_delta(&completion.content);
                    return Ok(completion);
                }
                Step::Fail(error) => return Err(error),
                Step::StreamThenHang(text) => {
                    sink.text_delta(text);
                    std::future::pending::<()>().await;
                }
                Step::StreamPieces(pieces) => {
                    for piece in &pieces {
                        sink.text_delta(piece);
                    }
                    return Ok(answer(&pieces.concat(), 10));
                }
                Step::Gated(gate, inner) => {
                    let _permit = gate.acquire().await.expect("gate");
                    step = *inner;
                }
                Step::Hang => std::future::pending::<()>().await,
                Step::Panic(message) => panic!("{message}"),
            }
        }
    }
}

fn answer(content: &str, input_tokens: u64) -> Completion {
    Completion {
        content: content.into(),
        tool_calls: Vec::new(),
        usage: Usage { input_tokens, output_tokens: 5, cached_input_tokens: 0, cache_write_tokens: 0 },
        stop_reason: StopReason::EndTurn,
        model: "fake/model".into(),
    }
}

/// A plain answer that reports `input_tokens` of prompt.
pub(crate) fn text_using(content: &str, input_tokens: u64) -> Step {
    Step::Answer(answer(content, input_tokens))
}

/// A plain answer.
pub(crate) fn text(content: &str) -> Step {
    text_using(content, 10)
}

/// An answer calling tools, each `(call id, name, JSON arguments)`.
pub(crate) fn calls(calls: &[(&str, &str, &str)]) -> Step {
    Step::Answer(Completion {
        content: String::new(),
        tool_calls: calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        usage: Usage::default(),
        stop_reason: StopReason::ToolUse,
        model: "fake/model".into(),
    })
}

/// An answer calling one tool, with call id `call-<name>`.
pub(crate) fn call(name: &str, arguments: serde_json::Value) -> Step {
    calls(&[(&format!("call-{name}"), name, &arguments.to_string())])
}
