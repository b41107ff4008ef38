//! Answers in the Anthropic messages wire format: messages, streamed events and errors.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::exchange::{Exchange, completion_tokens};
use crate::script::{ErrorKind, Reply, ScriptedCall};
use crate::sse::{self, Ending};

/// The answer to an Anthropic request for an already-due reply (delays are applied by the server).
pub(crate) fn respond(reply: &Reply, exchange: &Exchange) -> Response {
    match reply {
        Reply::Text(text) => complete(text, &[], exchange),
        Reply::ToolCalls { text, calls } => complete(text, calls, exchange),
        Reply::Error { status, message, retry_after_secs, kind } => {
            error_response(*status, *kind, message, *retry_after_secs)
        }
        Reply::Garbage(garbage) if exchange.stream => sse::garbage_stream_response(garbage),
        Reply::Garbage(garbage) => sse::raw_response(StatusCode::OK, "application/json", garbage.clone()),
        Reply::CutStream { text } if exchange.stream => {
            let mut frames = vec![message_start(exchange)];
            frames.push(sse::event_frame(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            frames.push(ping());
            frames.extend(text_deltas(0, text));
            sse::stream_response(frames, Ending::Cut)
        }
        Reply::CutStream { text } => {
            let full = message(text, &[], exchange).to_string();
            let truncated: String = full.chars().take(full.chars().count() / 2).collect();
            sse::raw_response(StatusCode::OK, "application/json", truncated)
        }
        Reply::StallStream { text } if exchange.stream => {
            let mut frames = vec![message_start(exchange)];
            frames.push(sse::event_frame(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ));
            frames.extend(text_deltas(0, text));
            sse::stream_response(frames, Ending::Stall)
        }
        Reply::StallStream { .. } => sse::stalled_body_response("application/json", "{".to_owned()),
        Reply::Delayed { reply, .. } => respond(reply, exchange),
    }
}

/// An error in Anthropic's `{"type": "error", "error": {type, message}}` format.
pub(crate) fn error_response(status: u16, kind: ErrorKind, message: &str, retry_after_secs: Option<u64>) -> Response {
    let (default_status, error_type, default_message) = match kind {
        ErrorKind::RateLimit => (
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "This request would exceed the rate limit for your organization of 50 requests per minute.",
        ),
        ErrorKind::Auth => (StatusCode::UNAUTHORIZED, "authentication_error", "invalid x-api-key"),
        ErrorKind::ContextOverflow => {
            (StatusCode::BAD_REQUEST, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
        }
        ErrorKind::Server if status == 529 || status == 503 => {
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded_error", "Overloaded")
        }
        ErrorKind::Server => (StatusCode::INTERNAL_SERVER_ERROR, "api_error", "Internal server error"),
        ErrorKind::BadRequest => (StatusCode::BAD_REQUEST, "invalid_request_error", "Invalid request."),
    };
    let message = if message.is_empty() { default_message } else { message };
    let body = json!({"type": "error", "error": {"type": error_type, "message": message}});
    let status = StatusCode::from_u16(status).unwrap_or(default_status);
    let mut response = sse::raw_response(status, "application/json", body.to_string());
    if let Some(seconds) = retry_after_secs {
        response.headers_mut().insert("retry-after", HeaderValue::from(seconds));
    }
    response
}

fn complete(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Response {
    if exchange.stream {
        sse::stream_response(stream_frames(text, calls, exchange), Ending::Complete)
    } else {
        sse::raw_response(StatusCode::OK, "application/json", message(text, calls, exchange).to_string())
    }
}

fn stop_reason(calls: &[ScriptedCall]) -> &'static str {
    if calls.is_empty() { "end_turn" } else { "tool_use" }
}

/// The `input` of a non-streamed tool_use block: the parsed arguments, or the raw text as a
/// JSON string when the script deliberately made them invalid.
fn tool_input(call: &ScriptedCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or_else(|_| Value::String(call.arguments.clone()))
}

fn message(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Value {
    let mut content = Vec::new();
    if !text.is_empty() || calls.is_empty() {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in calls {
        content
            .push(json!({"type": "tool_use", "id": call.anthropic_id(), "name": call.name, "input": tool_input(call)}));
    }
    json!({
        "id": format!("msg_scripted{}", exchange.number),
        "type": "message",
        "role": "assistant",
        "model": exchange.model,
        "content": content,
        "stop_reason": stop_reason(calls),
        "stop_sequence": null,
        "usage": {
            "input_tokens": exchange.prompt_tokens,
            "output_tokens": completion_tokens(text, calls),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    })
}

fn message_start(exchange: &Exchange) -> String {
    let start = json!({
        "type": "message_start",
        "message": {
            "id": format!("msg_scripted{}", exchange.number),
            "type": "message",
            "role": "assistant",
            "model": exchange.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": exchange.prompt_tokens,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        },
    });
    sse::event_frame("message_start", &start)
}

fn ping() -> String {
    sse::event_frame("ping", &json!({"type": "ping"}))
}

fn text_deltas(index: usize, text: &str) -> Vec<String> {
    sse::split_words(text)
        .into_iter()
        .map(|word| {
            sse::event_frame(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": word}}),
            )
        })
        .collect()
}

fn block_stop(index: usize) -> String {
    sse::event_frame("content_block_stop", &json!({"type": "content_block_stop", "index": index}))
}

/// Blocks stream one after another (Anthropic never interleaves them); the single `ping`
/// follows the first block's start, where the real API sends it.
fn stream_frames(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Vec<String> {
    let mut frames = vec![message_start(exchange)];
    let mut index = 0;
    if !text.is_empty() || calls.is_empty() {
        frames.push(sse::event_frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        frames.push(ping());
        frames.extend(text_deltas(index, text));
        frames.push(block_stop(index));
        index += 1;
    }
    for call in calls {
        let start = json!({
            "type": "content_block_start",
            "index": index,
            "content_block": {"type": "tool_use", "id": call.anthropic_id(), "name": call.name, "input": {}},
        });
        frames.push(sse::event_frame("content_block_start", &start));
        if index == 0 {
            frames.push(ping());
        }
        for fragment in sse::split_fragments(&call.arguments) {
            let delta = json!({
                "type": "content_block_delta",
                "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment},
            });
            frames.push(sse::event_frame("content_block_delta", &delta));
        }
        frames.push(block_stop(index));
        index += 1;
    }
    let delta = json!({
        "type": "message_delta",
        "delta": {"stop_reason": stop_reason(calls), "stop_sequence": null},
        "usage": {"output_tokens": completion_tokens(text, calls)},
    });
    frames.push(sse::event_frame("message_delta", &delta));
    frames.push(sse::event_frame("message_stop", &json!({"type": "message_stop"})));
    frames
}
