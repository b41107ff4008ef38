//! Conversation messages as the agent loop and the providers exchange them.

use serde::{Deserialize, Serialize};

/// One tool invocation requested by the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned id that the matching result must echo.
    pub id: String,
    /// Tool name as advertised in the request.
    pub name: String,
    /// Raw JSON text of the arguments, exactly as the model produced it (may be invalid).
    pub arguments: String,
}

/// An image the person sent with a message: a file on disk (saved by the channel that
/// received it), read and encoded only when a request to a vision-capable model is built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageRef {
    /// Absolute path of the image file.
    pub path: String,
}

impl ImageRef {
    /// Characters an image counts as in token estimates: about what providers charge
    /// for a mid-sized image (1,600 tokens at four characters a token).
    pub const ESTIMATED_CHARS: usize = 6_400;

    /// An image at `path`.
    pub fn new(path: impl Into<String>) -> Self {
        Self { path: path.into() }
    }
}

/// A message in provider-neutral form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    /// Text from the person.
    User {
        /// What they wrote.
        content: String,
        /// Images sent with it, shown to vision-capable models.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageRef>,
    },
    /// A reply from the model, possibly asking for tools.
    Assistant {
        /// Text of the reply (may be empty when only tools are called).
        content: String,
        /// Tools the model asked for, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call, answering [`ToolCall::id`].
    Tool {
        /// The id of the call this answers.
        call_id: String,
        /// The tool's name (Anthropic and some OpenAI-compatible servers want it).
        name: String,
        /// The output or error text shown to the model.
        content: String,
        /// True when the tool failed; the content then explains why.
        #[serde(default)]
        is_error: bool,
    },
}

impl ChatMessage {
    /// Builds a user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User { content: content.into(), images: Vec::new() }
    }

    /// Builds a user message with images.
    pub fn user_with_images(content: impl Into<String>, images: Vec<ImageRef>) -> Self {
        Self::User { content: content.into(), images }
    }

    /// Builds an assistant message without tool calls.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant { content: content.into(), tool_calls: Vec::new() }
    }

    /// Rough size in characters, used for token estimates.
    pub fn char_len(&self) -> usize {
        match self {
            Self::User { content, images } => content.len() + images.len() * ImageRef::ESTIMATED_CHARS,
            Self::Assistant { content, tool_calls } => {
                content.len()
                    + tool_calls
                        .iter()
                        .map(|call| call.name.len() + call.arguments.len() + call.id.len())
                        .sum::<usize>()
            }
            Self::Tool { content, name, call_id, .. } => content.len() + name.len() + call_id.len(),
        }
    }
}

/// Token counts reported by a provider for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt (including cached ones).
    pub input_tokens: u64,
    /// Tokens generated.
    pub output_tokens: u64,
    /// Prompt tokens served from the provider's cache, when reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic), when reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Usage {
    /// Adds another request's usage to this one.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_input_tokens += other.cached_input_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }
}
