//! The `LlmProvider` port: one completion request in, streamed text and a final
//! completion out. The llm crate implements it for each wire protocol and for the
//! router that resolves `provider/model` ids and walks the fallback chain.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use squidbot_types::{ChatMessage, ToolCall, ToolSpec, Usage};

use crate::BoxFuture;

/// Everything a provider needs for one model call.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    /// Model id as the receiver understands it: `provider/model` for the router,
    /// the bare model name for a single adapter.
    pub model: String,
    /// System prompt (may be empty).
    pub system: String,
    /// Conversation so far, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call (shared: the same specs go into every request of an agent).
    pub tools: Arc<[ToolSpec]>,
    /// Maximum tokens to generate.
    pub max_tokens: u32,
    /// Sampling temperature; provider default when `None`.
    pub temperature: Option<f32>,
    /// Ask the provider to stream (SSE). Providers still call the sink either way.
    pub stream: bool,
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// A final answer.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output hit `max_tokens`.
    MaxTokens,
    /// Anything else the provider reported (content filter, unknown).
    Other,
}

/// A finished model call.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    /// Assistant text (may be empty when only tools are called).
    pub content: String,
    /// Tool calls with complete argument text, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage as reported (zero when the provider reported none).
    pub usage: Usage,
    /// Why generation stopped.
    pub stop_reason: StopReason,
    /// `provider/model` that actually answered (differs from the request after a fallback).
    pub model: String,
}

/// Receives text as it streams in.
pub trait StreamSink: Send + Sync {
    /// A piece of assistant text.
    fn text_delta(&self, text: &str);
    /// Text streamed so far is void: a retry or a fallback provider starts over.
    fn stream_reset(&self) {}
}

/// A sink that drops everything (non-streaming callers).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopSink;

impl StreamSink for NoopSink {
    fn text_delta(&self, _text: &str) {}
}

/// Why a model call failed. Classified where the failure is seen, never from strings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProviderError {
    /// The key was missing, wrong or lacks permission. Not retried.
    #[error("can't call {provider}: authentication failed: {message}")]
    Auth {
        /// Provider name.
        provider: String,
        /// What the provider said.
        message: String,
    },
    /// Too many requests; retry after the given delay when known.
    #[error("can't call {provider}: rate limited{}: {message}", retry_after.map(|delay| format!(" (retry after {}s)", delay.as_secs())).unwrap_or_default())]
    RateLimited {
        /// Provider name.
        provider: String,
        /// Delay the provider asked for.
        retry_after: Option<Duration>,
        /// What the provider said.
        message: String,
    },
    /// The prompt does not fit the model's context window.
    #[error("can't call {provider}: the conversation is too long for the model: {message}")]
    ContextOverflow {
        /// Provider name.
        provider: String,
        /// What the provider said.
        message: String,
    },
    /// A failure that may go away: 5xx, connection refused, timeout, a cut stream.
    #[error("can't call {provider}: {message}")]
    Transient {
        /// Provider name.
        provider: String,
        /// What went wrong.
        message: String,
    },
    /// The provider answered something we can't understand.
    #[error("can't call {provider}: invalid response: {message}")]
    InvalidResponse {
        /// Provider name.
        provider: String,
        /// What was wrong with it.
        message: String,
    },
    /// The request itself was refused (bad model name, bad parameters). Not retried.
    #[error("can't call {provider}: request rejected: {message}")]
    Rejected {
        /// Provider name.
        provider: String,
        /// What the provider said.
        message: String,
    },
    /// Configuration makes the call impossible (unknown provider, no API key).
    #[error("can't call the model: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
    /// The caller cancelled the request.
    #[error("the model call was cancelled")]
    Cancelled,
}

impl ProviderError {
    /// Worth retrying on the same provider after a backoff.
    pub fn is_retriable(&self) -> bool {
        match self {
            Self::RateLimited { .. } | Self::Transient { .. } => true,
            Self::Auth { .. }
            | Self::ContextOverflow { .. }
            | Self::InvalidResponse { .. }
            | Self::Rejected { .. }
            | Self::Config { .. }
            | Self::Cancelled => false,
        }
    }

    /// Worth moving to the next provider in the fallback chain.
    pub fn should_fall_back(&self) -> bool {
        match self {
            Self::RateLimited { .. } | Self::Transient { .. } | Self::InvalidResponse { .. } | Self::Auth { .. } => {
                true
            }
            Self::ContextOverflow { .. } | Self::Rejected { .. } | Self::Config { .. } | Self::Cancelled => false,
        }
    }
}

/// A language-model backend.
pub trait LlmProvider: Send + Sync {
    /// Runs one completion, calling `sink` with text as it arrives.
    fn complete<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> impl Future<Output = Result<Completion, ProviderError>> + Send + 'a;
}

/// Object-safe companion of [`LlmProvider`], implemented for every provider.
pub trait DynLlmProvider: Send + Sync {
    /// Boxed form of [`LlmProvider::complete`].
    fn complete_boxed<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>>;
}

impl<T: LlmProvider> DynLlmProvider for T {
    fn complete_boxed<'a>(
        &'a self,
        request: &'a CompletionRequest,
        sink: &'a dyn StreamSink,
    ) -> BoxFuture<'a, Result<Completion, ProviderError>> {
        Box::pin(self.complete(request, sink))
    }
}
