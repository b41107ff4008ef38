//! Fuzzes the OpenClaw frame parser (`squidbot_server::ws::frame::parse`) with arbitrary
//! bytes and checks the promises the connection loop relies on.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use squidbot_server::ws::frame::{ClientFrame, FrameError, MAX_FRAME_BYTES, MAX_PRE_AUTH_BYTES, parse};

/// The parser's own cap on request ids, in characters.
const MAX_ID_CHARS: usize = 256;

/// The parser's own cap on method names, in bytes.
const MAX_METHOD_BYTES: usize = 128;

fuzz_target!(|data: &[u8]| {
    match std::str::from_utf8(data) {
        Ok(text) => check(text),
        Err(error) => {
            // WebSocket text frames are always valid UTF-8, so the valid prefix is what a
            // client could really send; the lossy decoding adds replacement characters.
            let valid = &data[..error.valid_up_to()];
            check(std::str::from_utf8(valid).unwrap_or_default());
            check(&String::from_utf8_lossy(data));
        }
    }
});

fn check(text: &str) {
    let before_connect = parse(text, MAX_PRE_AUTH_BYTES);
    let after_connect = parse(text, MAX_FRAME_BYTES);
    check_result(text, MAX_PRE_AUTH_BYTES, &before_connect);
    check_result(text, MAX_FRAME_BYTES, &after_connect);
    if text.len() <= MAX_PRE_AUTH_BYTES {
        assert_eq!(before_connect, after_connect, "the limit alone must not change the verdict");
    }
    // The limit is inclusive: a frame of exactly `limit` bytes is judged on its content.
    if text.len() <= MAX_FRAME_BYTES {
        assert_eq!(parse(text, text.len()), after_connect, "a frame at the limit is not refused for its size");
    }
    if let Some(limit) = text.len().checked_sub(1) {
        assert_eq!(parse(text, limit), Err(FrameError::TooLarge { size: text.len(), limit }));
    }
}

fn check_result(text: &str, limit: usize, result: &Result<ClientFrame, FrameError>) {
    match result {
        Ok(frame) => {
            assert!(text.len() <= limit, "accepted a frame over the limit");
            let value: Value = serde_json::from_str(text).unwrap_or_else(|error| panic!("accepted non-JSON: {error}"));
            assert!(value.is_object(), "accepted a frame that is not an object");
            match frame {
                ClientFrame::Request { id, method, params } => {
                    assert_eq!(value["type"], "req");
                    check_id(id, &value);
                    assert!(!method.is_empty() && method.len() <= MAX_METHOD_BYTES, "method {method:?}");
                    assert!(
                        method.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
                        "method {method:?} has characters outside [A-Za-z0-9._-]"
                    );
                    assert_eq!(value["method"], method.as_str());
                    match value.get("params") {
                        None | Some(Value::Null) => assert!(params.is_empty()),
                        Some(Value::Object(sent)) => assert_eq!(sent, params),
                        Some(other) => panic!("accepted params {other}"),
                    }
                }
                ClientFrame::Cancel { id } => {
                    assert_eq!(value["type"], "cancel");
                    check_id(id, &value);
                }
            }
        }
        Err(error) => {
            let message = error.to_string();
            assert!(!message.is_empty(), "{error:?} renders as an empty message");
            if let Some(id) = error.request_id() {
                assert!(!id.is_empty() && id.chars().count() <= MAX_ID_CHARS, "error carries id {id:?}");
            }
            match error {
                FrameError::TooLarge { size, limit: refused_at } => {
                    assert_eq!((*size, *refused_at), (text.len(), limit));
                    assert!(text.len() > limit, "refused a frame within the limit as too large");
                }
                FrameError::NotJson(_) => assert!(serde_json::from_str::<Value>(text).is_err()),
                FrameError::Invalid { .. } => assert!(serde_json::from_str::<Value>(text).is_ok()),
                FrameError::Binary => panic!("a text frame was called binary"),
            }
        }
    }
}

fn check_id(id: &str, value: &Value) {
    assert!(!id.is_empty() && id.chars().count() <= MAX_ID_CHARS, "id {id:?}");
    assert_eq!(value["id"], id);
}
