//! The script a test writes for the scripted LLM: replies, scripted tool calls, recorded requests.

use std::fmt;
use std::time::Duration;

/// Which provider wire format a request arrived on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Wire {
    /// OpenAI chat completions: `POST /v1/chat/completions`.
    OpenAi,
    /// Anthropic messages: `POST /v1/messages`.
    Anthropic,
    /// OpenAI embeddings: `POST /v1/embeddings`, answered by the fake embedding model
    /// rather than the script, and recorded apart (`ScriptedLlm::embedding_requests`).
    Embeddings,
}

impl Wire {
    /// The path this wire is served on.
    pub fn path(self) -> &'static str {
        match self {
            Wire::OpenAi => "/v1/chat/completions",
            Wire::Anthropic => "/v1/messages",
            Wire::Embeddings => "/v1/embeddings",
        }
    }
}

impl fmt::Display for Wire {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wire::OpenAi => formatter.write_str("openai"),
            Wire::Anthropic => formatter.write_str("anthropic"),
            Wire::Embeddings => formatter.write_str("embeddings"),
        }
    }
}

/// One request as the server received it.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedRequest {
    /// The wire the request arrived on.
    pub wire: Wire,
    /// The request path, e.g. `/v1/messages`.
    pub path: String,
    /// Headers in arrival order, names lowercased, values lossily decoded.
    pub headers: Vec<(String, String)>,
    /// The parsed body; a body that is not JSON is kept as a `Value::String` of its raw text.
    pub body: serde_json::Value,
}

impl RecordedRequest {
    /// The first value of a header, matched case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header_name, _)| header_name.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }

    /// Whether the client asked for a streamed answer.
    pub fn is_stream(&self) -> bool {
        self.body.get("stream").and_then(serde_json::Value::as_bool) == Some(true)
    }
}

/// A tool call the scripted model makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedCall {
    /// The call id in OpenAI form (`call_N`); Anthropic answers get `toolu_` + this id.
    /// Left empty by the `Reply` constructors: `ScriptedLlm::push` then assigns `call_1`, `call_2`, ...
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments as raw JSON text; may be deliberately invalid to test client recovery.
    pub arguments: String,
}

impl ScriptedCall {
    /// A call with an explicit id and raw argument text (which need not be valid JSON).
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> ScriptedCall {
        ScriptedCall { id: id.into(), name: name.into(), arguments: arguments.into() }
    }

    /// The id this call carries on the Anthropic wire.
    pub fn anthropic_id(&self) -> String {
        if self.id.starts_with("toolu_") {
            return self.id.clone();
        }
        let cleaned: String = self
            .id
            .chars()
            .filter(|character| character.is_ascii_alphanumeric() || *character == '_' || *character == '-')
            .collect();
        format!("toolu_{cleaned}")
    }
}

/// How a scripted error presents itself on the wire (error type, code and default message).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Too many requests; pairs with status 429 and usually a `retry-after`.
    RateLimit,
    /// Bad or missing API key; status 401.
    Auth,
    /// The prompt exceeds the model's context window; status 400.
    ContextOverflow,
    /// The provider failed; status 500, 503 or Anthropic's 529.
    Server,
    /// The provider rejected the request as malformed; status 400.
    BadRequest,
}

/// What the scripted model answers to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A plain assistant text answer.
    Text(String),
    /// Tool calls, optionally preceded by text; several calls are parallel calls.
    ToolCalls { text: String, calls: Vec<ScriptedCall> },
    /// An HTTP error in the provider's error format. An empty `message` means the wire's
    /// canonical message for `kind` (e.g. Anthropic's "prompt is too long: ...").
    Error { status: u16, message: String, retry_after_secs: Option<u64>, kind: ErrorKind },
    /// Status 200 with a body that is not valid: raw text, or `data: <garbage>` lines when streaming.
    Garbage(String),
    /// Streaming: the text deltas, then the connection drops before the finish chunk / `[DONE]`
    /// (OpenAI) or `message_stop` (Anthropic). Non-streaming: a truncated JSON body.
    CutStream { text: String },
    /// Streaming: the text deltas, then the connection stays open and silent (a stalled
    /// provider). Non-streaming: the headers and the first byte of the body, then silence.
    StallStream { text: String },
    /// Waits `delay` before answering with `reply`.
    Delayed { delay: Duration, reply: Box<Reply> },
}

impl Reply {
    /// A plain text answer.
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::Text(text.into())
    }

    /// One tool call with the given JSON arguments; its id is assigned by `ScriptedLlm::push`.
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Reply {
        Reply::tool_calls(vec![(name.into(), arguments)])
    }

    /// Parallel tool calls with JSON arguments; their ids are assigned by `ScriptedLlm::push`.
    pub fn tool_calls<Name: Into<String>>(calls: Vec<(Name, serde_json::Value)>) -> Reply {
        let calls = calls
            .into_iter()
            .map(|(name, arguments)| ScriptedCall::new(String::new(), name, arguments.to_string()))
            .collect();
        Reply::ToolCalls { text: String::new(), calls }
    }

    /// A 429 rate-limit error, with a `retry-after` header when `retry_after_secs` is given.
    pub fn rate_limited(retry_after_secs: Option<u64>) -> Reply {
        Reply::error(ErrorKind::RateLimit, 429, retry_after_secs)
    }

    /// A 401 authentication error.
    pub fn auth_failure() -> Reply {
        Reply::error(ErrorKind::Auth, 401, None)
    }

    /// A 400 context-overflow error with each wire's canonical message.
    pub fn context_overflow() -> Reply {
        Reply::error(ErrorKind::ContextOverflow, 400, None)
    }

    /// A server-side error with the given status (500, 503, 529, ...).
    pub fn server_error(status: u16) -> Reply {
        Reply::error(ErrorKind::Server, status, None)
    }

    /// A 400 invalid-request error with the given message.
    pub fn bad_request(message: impl Into<String>) -> Reply {
        Reply::Error { status: 400, message: message.into(), retry_after_secs: None, kind: ErrorKind::BadRequest }
    }

    /// A 200 answer whose body is the given garbage.
    pub fn garbage(garbage: impl Into<String>) -> Reply {
        Reply::Garbage(garbage.into())
    }

    /// A stream that is cut off after sending `text`.
    pub fn cut_stream(text: impl Into<String>) -> Reply {
        Reply::CutStream { text: text.into() }
    }

    /// A stream that stops sending after `text` but never closes.
    pub fn stall_stream(text: impl Into<String>) -> Reply {
        Reply::StallStream { text: text.into() }
    }

    /// This reply, sent only after `delay`.
    pub fn after(self, delay: Duration) -> Reply {
        Reply::Delayed { delay, reply: Box::new(self) }
    }

    fn error(kind: ErrorKind, status: u16, retry_after_secs: Option<u64>) -> Reply {
        Reply::Error { status, message: String::new(), retry_after_secs, kind }
    }

    /// Gives every call with an empty id the next `call_N` id from `next_number`.
    pub(crate) fn assign_call_ids(&mut self, next_number: &mut u64) {
        match self {
            Reply::ToolCalls { calls, .. } => {
                for call in calls.iter_mut().filter(|call| call.id.is_empty()) {
                    call.id = format!("call_{next_number}");
                    *next_number += 1;
                }
            }
            Reply::Delayed { reply, .. } => reply.assign_call_ids(next_number),
            Reply::Text(_)
            | Reply::Error { .. }
            | Reply::Garbage(_)
            | Reply::CutStream { .. }
            | Reply::StallStream { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn push_time_ids_number_calls_in_order_and_keep_explicit_ids() {
        let mut next_number = 1;
        let mut first = Reply::tool_calls(vec![("a", json!({})), ("b", json!({}))]);
        let mut second = Reply::ToolCalls {
            text: String::new(),
            calls: vec![ScriptedCall::new("mine", "c", "{}"), ScriptedCall::new("", "d", "{}")],
        }
        .after(Duration::from_millis(1));
        first.assign_call_ids(&mut next_number);
        second.assign_call_ids(&mut next_number);
        let Reply::ToolCalls { calls, .. } = first else { panic!("not tool calls") };
        assert_eq!(calls[0].id, "call_1");
        assert_eq!(calls[1].id, "call_2");
        let Reply::Delayed { reply, .. } = second else { panic!("not delayed") };
        let Reply::ToolCalls { calls, .. } = *reply else { panic!("not tool calls") };
        assert_eq!(calls[0].id, "mine");
        assert_eq!(calls[1].id, "call_3");
    }

    #[test]
    fn anthropic_ids_derive_from_the_call_id() {
        assert_eq!(ScriptedCall::new("call_7", "x", "{}").anthropic_id(), "toolu_call_7");
        assert_eq!(ScriptedCall::new("toolu_abc", "x", "{}").anthropic_id(), "toolu_abc");
        assert_eq!(ScriptedCall::new("call-7.x", "x", "{}").anthropic_id(), "toolu_call-7x");
    }
}
