//! The benchmark server's fixed reply: its latency, the pacing of its streamed words, and
//! the send-time stamps that let a client measure what sits between it and the provider.

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream;
use serde_json::json;

use crate::exchange::Exchange;
use crate::openai;
use crate::script::Reply;
use crate::sse;

/// How the fixed-reply server answers every chat request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FixedReply {
    /// The reply text; streamed answers send it word by word.
    pub text: String,
    /// How long each request waits before its answer starts (the provider's latency).
    pub delay: Duration,
    /// Pause before each streamed word on the OpenAI wire; zero sends them all at once.
    pub token_interval: Duration,
    /// On the OpenAI wire, stream each word as the time it was handed to the connection,
    /// in microseconds since the Unix epoch followed by a space, instead of the word itself.
    pub stamp_tokens: bool,
}

impl FixedReply {
    /// Answers `text` at once, unpaced.
    pub fn new(text: impl Into<String>) -> FixedReply {
        FixedReply { text: text.into(), ..FixedReply::default() }
    }

    /// The reply a request gets, delayed by the latency.
    pub(crate) fn reply(&self) -> Reply {
        let reply = Reply::Text(self.text.clone());
        if self.delay.is_zero() { reply } else { reply.after(self.delay) }
    }

    /// Whether streamed answers need [`paced_openai_stream`] rather than the plain stream.
    pub fn is_paced(&self) -> bool {
        !self.token_interval.is_zero() || self.stamp_tokens
    }
}

/// Microseconds since the Unix epoch: the one clock two processes on a machine share.
fn unix_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |elapsed| elapsed.as_micros())
}

/// An OpenAI stream of `text` whose words leave `fixed.token_interval` apart, stamped
/// with their send time when `fixed.stamp_tokens` is set; the frames around the words are
/// those of the unpaced stream.
pub(crate) fn paced_openai_stream(text: &str, fixed: &FixedReply, exchange: &Exchange) -> Response {
    let opening = sse::data_frame(&openai::chunk(exchange, json!({"role": "assistant", "content": ""}), None));
    let mut closing = vec![sse::data_frame(&openai::chunk(exchange, json!({}), Some("stop")))];
    if exchange.include_usage {
        let usage_chunk = json!({
            "id": format!("chatcmpl-scripted{}", exchange.number),
            "object": "chat.completion.chunk",
            "created": exchange.created,
            "model": exchange.model,
            "system_fingerprint": null,
            "choices": [],
            "usage": openai::usage(text, &[], exchange),
        });
        closing.push(sse::data_frame(&usage_chunk));
    }
    closing.push("data: [DONE]\n\n".to_owned());
    let words: Vec<String> = sse::split_words(text).into_iter().map(str::to_owned).collect();
    let (interval, stamp_tokens, exchange) = (fixed.token_interval, fixed.stamp_tokens, exchange.clone());
    let paced_words = stream::iter(words).then(move |word| {
        let exchange = exchange.clone();
        async move {
            if !interval.is_zero() {
                tokio::time::sleep(interval).await;
            }
            let content = if stamp_tokens { format!("{} ", unix_micros()) } else { word };
            sse::data_frame(&openai::chunk(&exchange, json!({"content": content}), None))
        }
    });
    let frames = stream::once(async move { opening })
        .chain(paced_words)
        .chain(stream::iter(closing))
        .map(|frame| Ok::<Bytes, io::Error>(Bytes::from(frame)));
    sse::event_stream_response(Body::from_stream(frames))
}
