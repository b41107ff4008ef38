//! What a wire needs to know about one request to shape its answer, and the token estimates.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::script::ScriptedCall;

/// The facts about a request that every answer is built from.
#[derive(Clone, Debug)]
pub(crate) struct Exchange {
    /// 1-based number of the request on this server; used in response ids.
    pub number: u64,
    /// Whether the request asked for a streamed answer.
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// The requested model, echoed back as real providers do.
    pub model: String,
    /// Deterministic estimate: request body characters / 4.
    pub prompt_tokens: u64,
    /// Unix seconds, for OpenAI's `created`.
    pub created: u64,
}

impl Exchange {
    pub(crate) fn new(number: u64, body: &Value, body_length: usize) -> Exchange {
        let stream = body.get("stream").and_then(Value::as_bool) == Some(true);
        let include_usage =
            body.get("stream_options").and_then(|options| options.get("include_usage")).and_then(Value::as_bool)
                == Some(true);
        let model = body.get("model").and_then(Value::as_str).unwrap_or("scripted-model").to_owned();
        let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.as_secs()).unwrap_or(0);
        Exchange { number, stream, include_usage, model, prompt_tokens: tokens_for(body_length), created }
    }
}

/// Deterministic token estimate for `characters` characters.
pub(crate) fn tokens_for(characters: usize) -> u64 {
    u64::try_from(characters.div_ceil(4)).unwrap_or(u64::MAX)
}

/// Deterministic completion-token estimate for a reply's text and calls.
pub(crate) fn completion_tokens(text: &str, calls: &[ScriptedCall]) -> u64 {
    let characters = text.chars().count()
        + calls.iter().map(|call| call.name.chars().count() + call.arguments.chars().count()).sum::<usize>();
    tokens_for(characters)
}
