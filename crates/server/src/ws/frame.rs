//! Frames of the OpenClaw gateway protocol: client frames, parsed without trusting anything
//! (every malformed input is a [`FrameError`] that names the problem, never a panic), and
//! the `res` and `event` envelopes the server writes.

use serde::Serialize;
use serde_json::{Map, Value};

/// Largest frame before `connect` succeeded.
pub const MAX_PRE_AUTH_BYTES: usize = 64 * 1024;

/// Largest frame afterwards.
pub const MAX_FRAME_BYTES: usize = 1024 * 1024;

/// Longest request id.
const MAX_ID_CHARS: usize = 256;

/// Longest method name.
const MAX_METHOD_CHARS: usize = 128;

/// A frame a client may send.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientFrame {
    /// `{type:"req", id, method, params?}`.
    Request {
        /// Echoed in the response.
        id: String,
        /// Method name.
        method: String,
        /// Parameters (an object, `{}` when absent).
        params: Map<String, Value>,
    },
    /// `{type:"cancel", id}`: the client gave up on a request.
    Cancel {
        /// The request's id.
        id: String,
    },
}

/// Why a frame was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Over the size limit.
    #[error("frame of {size} bytes is over the {limit}-byte limit")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Not JSON.
    #[error("frame is not valid JSON: {0}")]
    NotJson(String),
    /// JSON, but not an object with a known `type`.
    #[error("{message}")]
    Invalid {
        /// The request id when one could be read, so the error can answer it.
        id: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// A binary frame.
    #[error("binary frames are not supported; send JSON text frames")]
    Binary,
}

impl FrameError {
    /// The request id the error frame should carry, if any.
    pub fn request_id(&self) -> Option<&str> {
        match self {
            Self::Invalid { id, .. } => id.as_deref(),
            _ => None,
        }
    }
}

fn invalid(id: Option<&str>, message: impl Into<String>) -> FrameError {
    FrameError::Invalid { id: id.map(str::to_owned), message: message.into() }
}

/// Parses one text frame, refusing it when over `limit` bytes.
pub fn parse(text: &str, limit: usize) -> Result<ClientFrame, FrameError> {
    if text.len() > limit {
        return Err(FrameError::TooLarge { size: text.len(), limit });
    }
    let value: Value = serde_json::from_str(text).map_err(|error| FrameError::NotJson(error.to_string()))?;
    let Value::Object(mut object) = value else {
        return Err(invalid(None, "a frame must be a JSON object"));
    };
    let id = match object.get("id") {
        None => None,
        Some(Value::String(id)) if !id.is_empty() && id.chars().count() <= MAX_ID_CHARS => Some(id.clone()),
        Some(_) => return Err(invalid(None, format!("`id` must be a string of 1 to {MAX_ID_CHARS} characters"))),
    };
    let kind = match object.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        _ => return Err(invalid(id.as_deref(), "`type` must be \"req\" or \"cancel\"")),
    };
    let Some(id) = id else {
        return Err(invalid(None, format!("a {kind:?} frame needs an `id`")));
    };
    match kind.as_str() {
        "req" => {
            let method = match object.get("method") {
                Some(Value::String(method))
                    if !method.is_empty()
                        && method.len() <= MAX_METHOD_CHARS
                        && method.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')) =>
                {
                    method.clone()
                }
                _ => return Err(invalid(Some(&id), "`method` must be a method name such as \"health\"")),
            };
            let params = match object.remove("params") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(params)) => params,
                Some(_) => return Err(invalid(Some(&id), "`params` must be an object")),
            };
            Ok(ClientFrame::Request { id, method, params })
        }
        "cancel" => Ok(ClientFrame::Cancel { id }),
        other => Err(invalid(Some(&id), format!("unknown frame type {other:?}; expected \"req\" or \"cancel\""))),
    }
}

/// An error code of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// The request is malformed or names an unknown method.
    InvalidRequest,
    /// The connection lacks a scope or the credentials are wrong.
    Forbidden,
    /// The method exists but cannot answer now.
    Unavailable,
    /// The thing the request names (a job id, ...) does not exist, or is not the
    /// caller's to see.
    NotFound,
    /// The request clashes with what is going on (a job's run is still going).
    Conflict,
    /// Too many attempts.
    RateLimited,
    /// Something failed on the server.
    Internal,
}

impl ErrorCode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "INVALID_REQUEST",
            Self::Forbidden => "FORBIDDEN",
            Self::Unavailable => "UNAVAILABLE",
            Self::NotFound => "NOT_FOUND",
            Self::Conflict => "CONFLICT",
            Self::RateLimited => "RATE_LIMITED",
            Self::Internal => "INTERNAL",
        }
    }
}

/// A method's failure, sent as `res ok:false`.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodError {
    /// The code.
    pub code: ErrorCode,
    /// For people.
    pub message: String,
    /// Structured details (`{code: ...}`).
    pub details: Option<Value>,
}

impl MethodError {
    /// An error without details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), details: None }
    }

    /// A malformed request.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidRequest, message)
    }

    /// A failure on the server's side.
    pub fn internal(error: impl std::fmt::Display) -> Self {
        Self::new(ErrorCode::Internal, error.to_string())
    }

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `error` object of the frame.
    fn body(&self) -> ErrorBody<'_> {
        let retryable = match self.code {
            ErrorCode::Unavailable => Some(false),
            ErrorCode::RateLimited => Some(true),
            ErrorCode::InvalidRequest
            | ErrorCode::Forbidden
            | ErrorCode::NotFound
            | ErrorCode::Conflict
            | ErrorCode::Internal => None,
        };
        ErrorBody { code: self.code.as_str(), details: self.details.as_ref(), message: &self.message, retryable }
    }
}

// The frames below are written straight from borrowed data: building a `Value` tree first
// and printing it through `Display` cost more than the rest of a turn's frame handling.
// Fields are declared in the order the wire has always had them (alphabetical: a
// `serde_json::Map` without `preserve_order` sorts its keys), so the bytes did not change
// either.

/// The `error` object of a `res ok:false`.
#[derive(Serialize)]
struct ErrorBody<'a> {
    code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<&'a Value>,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    retryable: Option<bool>,
}

/// `{type:"res", id, ok, payload | error}`.
#[derive(Serialize)]
struct ResponseFrame<'a, P: ?Sized> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorBody<'a>>,
    /// `null` when the request's id could not be read.
    id: Option<&'a str>,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a P>,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// `{type:"event", event, payload, seq}`.
#[derive(Serialize)]
struct EventFrame<'a, P: ?Sized> {
    event: &'a str,
    payload: &'a P,
    seq: u64,
    #[serde(rename = "type")]
    kind: &'static str,
}

/// `res ok:true`.
pub fn ok_response<P: Serialize + ?Sized>(id: &str, payload: &P) -> Result<String, serde_json::Error> {
    serde_json::to_string(&ResponseFrame { error: None, id: Some(id), ok: true, payload: Some(payload), kind: "res" })
}

/// `res ok:false`; an unknown id is sent as `null`.
pub fn error_response(id: Option<&str>, error: &MethodError) -> Result<String, serde_json::Error> {
    let frame = ResponseFrame::<Value> { error: Some(error.body()), id, ok: false, payload: None, kind: "res" };
    serde_json::to_string(&frame)
}

/// `event` with the connection's sequence number.
pub fn event<P: Serialize + ?Sized>(name: &str, payload: &P, seq: u64) -> Result<String, serde_json::Error> {
    serde_json::to_string(&EventFrame { event: name, payload, seq, kind: "event" })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_and_cancels_parse() {
        let frame = parse(r#"{"type":"req","id":"1:a","method":"chat.send","params":{"x":1}}"#, MAX_FRAME_BYTES);
        let Ok(ClientFrame::Request { id, method, params }) = frame else { panic!("{frame:?}") };
        assert_eq!((id.as_str(), method.as_str(), params["x"].as_i64()), ("1:a", "chat.send", Some(1)));
        let frame = parse(r#"{"type":"req","id":"2","method":"health"}"#, MAX_FRAME_BYTES);
        assert!(matches!(frame, Ok(ClientFrame::Request { params, .. }) if params.is_empty()));
        assert_eq!(parse(r#"{"type":"cancel","id":"3"}"#, 100), Ok(ClientFrame::Cancel { id: "3".into() }));
    }

    #[test]
    fn bad_frames_are_named_and_keep_the_id_when_readable() {
        assert!(matches!(parse("{", 100), Err(FrameError::NotJson(_))));
        assert!(matches!(parse("[1]", 100), Err(FrameError::Invalid { id: None, .. })));
        assert_eq!(parse(&"x".repeat(101), 100), Err(FrameError::TooLarge { size: 101, limit: 100 }));
        let error = parse(r#"{"type":"req","id":"7","method":""}"#, 100).unwrap_err();
        assert_eq!(error.request_id(), Some("7"));
        let error = parse(r#"{"type":"req","id":"7","method":"a b"}"#, 100).unwrap_err();
        assert_eq!(error.request_id(), Some("7"));
        let error = parse(r#"{"type":"req","id":"8","method":"x","params":[1]}"#, 100).unwrap_err();
        assert!(error.to_string().contains("params"), "{error}");
        assert!(matches!(
            parse(r#"{"type":"req","id":5,"method":"x"}"#, 100),
            Err(FrameError::Invalid { id: None, .. })
        ));
        assert!(matches!(parse(r#"{"type":"req","method":"x"}"#, 100), Err(FrameError::Invalid { id: None, .. })));
        let error = parse(r#"{"type":"res","id":"9"}"#, 100).unwrap_err();
        assert_eq!(error.request_id(), Some("9"));
    }

    #[test]
    fn responses_carry_codes_and_details() {
        let error = MethodError::new(ErrorCode::Forbidden, "no").with_details(json!({"code": "MISSING_SCOPE"}));
        let text = error_response(Some("4"), &error).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["ok"], false);
        assert_eq!(value["error"]["code"], "FORBIDDEN");
        assert_eq!(value["error"]["details"]["code"], "MISSING_SCOPE");
        let text = error_response(Some("5"), &MethodError::new(ErrorCode::NotFound, "gone")).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!((value["error"]["code"].as_str(), value["error"].get("retryable")), (Some("NOT_FOUND"), None));
        assert_eq!(ErrorCode::Conflict.as_str(), "CONFLICT");
        let value: Value = serde_json::from_str(&event("tick", &json!({"ts": 1}), 3).unwrap()).unwrap();
        assert_eq!((value["type"].as_str(), value["seq"].as_u64()), (Some("event"), Some(3)));
    }

    fn parsed(text: &str) -> Value {
        serde_json::from_str(text).unwrap_or_else(|error| panic!("{error}: {text}"))
    }

    /// The envelopes as they were built before they were typed: `json!` trees.
    #[test]
    fn envelopes_keep_the_shape_of_the_json_trees_they_replaced() {
        let payload = json!({"runId": "r1", "nested": {"list": [1, "two", null]}, "text": "a \"quoted\"\nline ü"});
        assert_eq!(
            parsed(&event("agent", &payload, 42).unwrap()),
            json!({"type": "event", "event": "agent", "payload": payload, "seq": 42})
        );
        assert_eq!(
            parsed(&ok_response("1:a", &payload).unwrap()),
            json!({"type": "res", "id": "1:a", "ok": true, "payload": payload})
        );
        let details = json!({"code": "RATE_LIMITED", "retryAfterMs": 1500});
        for (code, retryable) in [
            (ErrorCode::InvalidRequest, None),
            (ErrorCode::Forbidden, None),
            (ErrorCode::Unavailable, Some(false)),
            (ErrorCode::NotFound, None),
            (ErrorCode::Conflict, None),
            (ErrorCode::RateLimited, Some(true)),
            (ErrorCode::Internal, None),
        ] {
            for (id, details) in [(Some("7"), None), (None, Some(details.clone()))] {
                let mut error = MethodError::new(code, "can't run: busy");
                let mut expected = json!({"code": code.as_str(), "message": "can't run: busy"});
                if let Some(details) = details {
                    error = error.with_details(details.clone());
                    expected["details"] = details;
                }
                if let Some(retryable) = retryable {
                    expected["retryable"] = Value::Bool(retryable);
                }
                assert_eq!(
                    parsed(&error_response(id, &error).unwrap()),
                    json!({"type": "res", "id": id, "ok": false, "error": expected}),
                    "{code:?}"
                );
            }
        }
    }

    /// Without `preserve_order` a `Value` writes its keys sorted; the typed frames declare
    /// their fields in that order, so not even the bytes changed.
    #[test]
    fn envelopes_are_byte_for_byte_what_the_json_trees_printed() {
        let payload = json!({"b": 1, "a": [true]});
        let tree = json!({"type": "event", "event": "chat", "payload": payload, "seq": 9});
        if tree.as_object().and_then(|object| object.keys().next()).map(String::as_str) == Some("event") {
            assert_eq!(event("chat", &payload, 9).unwrap(), tree.to_string());
            let tree = json!({"type": "res", "id": "x", "ok": true, "payload": payload});
            assert_eq!(ok_response("x", &payload).unwrap(), tree.to_string());
        }
    }
}
