//! Client frames of the OpenClaw gateway protocol, parsed without trusting anything: every
//! malformed input is a [`FrameError`] that names the problem, never a panic.

use serde_json::{Map, Value, json};

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

    /// Adds details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code.as_str(), "message": self.message});
        if let Some(details) = &self.details {
            error["details"] = details.clone();
        }
        if self.code == ErrorCode::Unavailable || self.code == ErrorCode::RateLimited {
            error["retryable"] = Value::Bool(self.code == ErrorCode::RateLimited);
        }
        error
    }
}

/// `res ok:true`.
pub fn ok_response(id: &str, payload: Value) -> String {
    json!({"type": "res", "id": id, "ok": true, "payload": payload}).to_string()
}

/// `res ok:false`; an unknown id is sent as `null`.
pub fn error_response(id: Option<&str>, error: &MethodError) -> String {
    json!({"type": "res", "id": id, "ok": false, "error": error.to_json()}).to_string()
}

/// `event` with the connection's sequence number.
pub fn event(name: &str, payload: Value, seq: u64) -> String {
    json!({"type": "event", "event": name, "payload": payload, "seq": seq}).to_string()
}

/// A string parameter, `None` when absent.
pub fn optional_str<'a>(params: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, MethodError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.as_str())),
        Some(_) => Err(MethodError::invalid(format!("`{key}` must be a string"))),
    }
}

/// A required non-empty string parameter.
pub fn required_str<'a>(params: &'a Map<String, Value>, key: &str) -> Result<&'a str, MethodError> {
    optional_str(params, key)?
        .filter(|text| !text.trim().is_empty())
        .ok_or_else(|| MethodError::invalid(format!("`{key}` is required and must be a non-empty string")))
}

/// A non-negative integer parameter.
pub fn optional_u64(params: &Map<String, Value>, key: &str) -> Result<Option<u64>, MethodError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| MethodError::invalid(format!("`{key}` must be a non-negative integer"))),
    }
}

#[cfg(test)]
mod tests {
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
        let text = error_response(Some("4"), &error);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["ok"], false);
        assert_eq!(value["error"]["code"], "FORBIDDEN");
        assert_eq!(value["error"]["details"]["code"], "MISSING_SCOPE");
        let value: Value =
            serde_json::from_str(&error_response(Some("5"), &MethodError::new(ErrorCode::NotFound, "gone"))).unwrap();
        assert_eq!((value["error"]["code"].as_str(), value["error"].get("retryable")), (Some("NOT_FOUND"), None));
        assert_eq!(ErrorCode::Conflict.as_str(), "CONFLICT");
        let value: Value = serde_json::from_str(&event("tick", json!({"ts": 1}), 3)).unwrap();
        assert_eq!((value["type"].as_str(), value["seq"].as_u64()), (Some("event"), Some(3)));
    }
}
