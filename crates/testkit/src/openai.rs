//! Answers in the OpenAI chat-completions wire format: completions, streamed chunks and errors.

use axum::http::{HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{Value, json};

use crate::exchange::{Exchange, completion_tokens};
use crate::script::{ErrorKind, Reply, ScriptedCall};
use crate::sse::{self, Ending};

/// The answer to an OpenAI request for an already-due reply (delays are applied by the server).
pub(crate) fn respond(reply: &Reply, exchange: &Exchange) -> Response {
    match reply {
        Reply::Text(text) => complete(text, &[], exchange),
        Reply::ToolCalls { text, calls } => complete(text, calls, exchange),
        Reply::Error { status, message, retry_after_secs, kind } => {
            error_response(*status, *kind, message, *retry_after_secs, exchange)
        }
        Reply::Garbage(garbage) if exchange.stream => sse::garbage_stream_response(garbage),
        Reply::Garbage(garbage) => sse::raw_response(StatusCode::OK, "application/json", garbage.clone()),
        Reply::CutStream { text } if exchange.stream => {
            let mut frames = vec![sse::data_frame(&chunk(exchange, json!({"role": "assistant", "content": ""}), None))];
            frames.extend(text_frames(text, exchange));
            sse::stream_response(frames, Ending::Cut)
        }
        Reply::CutStream { text } => {
            let full = completion(text, &[], exchange).to_string();
            let truncated: String = full.chars().take(full.chars().count() / 2).collect();
            sse::raw_response(StatusCode::OK, "application/json", truncated)
        }
        Reply::StallStream { text } if exchange.stream => {
            let mut frames = vec![sse::data_frame(&chunk(exchange, json!({"role": "assistant", "content": ""}), None))];
            frames.extend(text_frames(text, exchange));
            sse::stream_response(frames, Ending::Stall)
        }
        Reply::StallStream { .. } => sse::stalled_body_response("application/json", "{".to_owned()),
        Reply::Delayed { reply, .. } => respond(reply, exchange),
    }
}

/// An error in OpenAI's `{"error": {message, type, param, code}}` format.
pub(crate) fn error_response(
    status: u16,
    kind: ErrorKind,
    message: &str,
    retry_after_secs: Option<u64>,
    exchange: &Exchange,
) -> Response {
    let (default_status, error_type, code) = match kind {
        ErrorKind::RateLimit => (StatusCode::TOO_MANY_REQUESTS, "requests", Some("rate_limit_exceeded")),
        ErrorKind::Auth => (StatusCode::UNAUTHORIZED, "invalid_request_error", Some("invalid_api_key")),
        ErrorKind::ContextOverflow => {
            (StatusCode::BAD_REQUEST, "invalid_request_error", Some("context_length_exceeded"))
        }
        ErrorKind::Server => (StatusCode::INTERNAL_SERVER_ERROR, "server_error", None),
        ErrorKind::BadRequest => (StatusCode::BAD_REQUEST, "invalid_request_error", None),
    };
    let message = if message.is_empty() { default_message(kind, exchange) } else { message.to_owned() };
    let param = if kind == ErrorKind::ContextOverflow { Some("messages") } else { None };
    let body = json!({"error": {"message": message, "type": error_type, "param": param, "code": code}});
    let status = StatusCode::from_u16(status).unwrap_or(default_status);
    let mut response = sse::raw_response(status, "application/json", body.to_string());
    if let Some(seconds) = retry_after_secs {
        response.headers_mut().insert("retry-after", HeaderValue::from(seconds));
    }
    response
}

fn default_message(kind: ErrorKind, exchange: &Exchange) -> String {
    match kind {
        ErrorKind::RateLimit => {
            "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again later."
                .to_owned()
        }
        ErrorKind::Auth => {
            "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
                .to_owned()
        }
        ErrorKind::ContextOverflow => format!(
            "This model's maximum context length is 8192 tokens. However, your messages resulted in {} tokens. Please reduce the length of the messages.",
            exchange.prompt_tokens.max(8193)
        ),
        ErrorKind::Server => "The server had an error while processing your request. Sorry about that!".to_owned(),
        ErrorKind::BadRequest => "Invalid request.".to_owned(),
    }
}

fn complete(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Response {
    if exchange.stream {
        sse::stream_response(stream_frames(text, calls, exchange), Ending::Complete)
    } else {
        sse::raw_response(StatusCode::OK, "application/json", completion(text, calls, exchange).to_string())
    }
}

fn finish_reason(calls: &[ScriptedCall]) -> &'static str {
    if calls.is_empty() { "stop" } else { "tool_calls" }
}

pub(crate) fn usage(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Value {
    let completion = completion_tokens(text, calls);
    json!({
        "prompt_tokens": exchange.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": exchange.prompt_tokens + completion,
    })
}

fn completion(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Value {
    let mut message = json!({"role": "assistant", "content": text, "refusal": null});
    if !calls.is_empty() {
        if text.is_empty() {
            message["content"] = Value::Null;
        }
        let tool_calls: Vec<Value> = calls
            .iter()
            .map(|call| json!({"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}))
            .collect();
        message["tool_calls"] = Value::Array(tool_calls);
    }
    json!({
        "id": format!("chatcmpl-scripted{}", exchange.number),
        "object": "chat.completion",
        "created": exchange.created,
        "model": exchange.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(calls)}],
        "usage": usage(text, calls, exchange),
        "system_fingerprint": null,
    })
}

pub(crate) fn chunk(exchange: &Exchange, delta: Value, finish_reason: Option<&str>) -> Value {
    let mut chunk = json!({
        "id": format!("chatcmpl-scripted{}", exchange.number),
        "object": "chat.completion.chunk",
        "created": exchange.created,
        "model": exchange.model,
        "system_fingerprint": null,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
    });
    if exchange.include_usage {
        // OpenAI sends `"usage": null` on every chunk but the final usage chunk.
        chunk["usage"] = Value::Null;
    }
    chunk
}

fn text_frames(text: &str, exchange: &Exchange) -> Vec<String> {
    sse::split_words(text)
        .into_iter()
        .map(|word| sse::data_frame(&chunk(exchange, json!({"content": word}), None)))
        .collect()
}

fn stream_frames(text: &str, calls: &[ScriptedCall], exchange: &Exchange) -> Vec<String> {
    let opening = if text.is_empty() && !calls.is_empty() {
        json!({"role": "assistant", "content": null})
    } else {
        json!({"role": "assistant", "content": ""})
    };
    let mut frames = vec![sse::data_frame(&chunk(exchange, opening, None))];
    frames.extend(text_frames(text, exchange));
    frames.extend(tool_call_frames(calls, exchange));
    frames.push(sse::data_frame(&chunk(exchange, json!({}), Some(finish_reason(calls)))));
    if exchange.include_usage {
        let usage_chunk = json!({
            "id": format!("chatcmpl-scripted{}", exchange.number),
            "object": "chat.completion.chunk",
            "created": exchange.created,
            "model": exchange.model,
            "system_fingerprint": null,
            "choices": [],
            "usage": usage(text, calls, exchange),
        });
        frames.push(sse::data_frame(&usage_chunk));
    }
    frames.push("data: [DONE]\n\n".to_owned());
    frames
}

/// Each call opens with a chunk carrying `index`, `id`, `type` and `name`; its argument
/// fragments follow interleaved round-robin with the other calls', so clients must
/// reassemble by `index`.
fn tool_call_frames(calls: &[ScriptedCall], exchange: &Exchange) -> Vec<String> {
    let fragments: Vec<Vec<&str>> = calls.iter().map(|call| sse::split_fragments(&call.arguments)).collect();
    let mut frames = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let delta = json!({"tool_calls": [{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]});
        frames.push(sse::data_frame(&chunk(exchange, delta, None)));
    }
    let rounds = fragments.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..rounds {
        for (index, call_fragments) in fragments.iter().enumerate() {
            if let Some(fragment) = call_fragments.get(round) {
                let delta = json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]});
                frames.push(sse::data_frame(&chunk(exchange, delta, None)));
            }
        }
    }
    frames
}
