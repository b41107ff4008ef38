//! `connect`: the real CLI's frame read into its params, the lenient fields, and every
//! refusal with the error frame and close code it always had.

use serde_json::{Map, Value, json};
use squidbot_types::Secret;

use super::{AuthFailure, ConnectError, ConnectParams};
use crate::Auth;
use crate::ws::fixture::{connection, gateway};
use crate::ws::frame::{ErrorCode, MethodError};
use crate::ws::params::decode;
use crate::ws::{Access, PROTOCOL_MAX};

/// The params of the `connect` the `openclaw` CLI sent in the capture
/// (`cli-agent-turn.frames.jsonl`).
fn captured() -> Map<String, Value> {
    let frame = json!({
        "minProtocol": 4, "maxProtocol": 4,
        "client": {
            "id": "cli", "version": "2026.9.6", "platform": "linux", "deviceFamily": "Linux", "mode": "cli",
            "instanceId": "326024d3-8608-41b1-ae75-6afa07ab1f04",
        },
        "caps": [], "auth": {"token": "testtoken123"}, "role": "operator", "scopes": ["operator.write"],
    });
    let Value::Object(params) = frame else { unreachable!() };
    params
}

fn with(changes: Value) -> Map<String, Value> {
    let mut params = captured();
    let Value::Object(changes) = changes else { panic!("changes must be an object") };
    params.extend(changes);
    params
}

#[test]
fn the_captured_cli_connect_reads_into_its_params() {
    let params: ConnectParams = decode(captured()).unwrap();
    assert_eq!((params.min_protocol.0, params.max_protocol.0), (Some(4), Some(4)));
    assert_eq!(params.role.0.as_deref(), Some("operator"));
    let scopes: Vec<String> = params.scopes.0.unwrap().into_iter().filter_map(|scope| scope.0).collect();
    assert_eq!(scopes, ["operator.write"]);
    let auth = params.auth.0.unwrap();
    assert_eq!((auth.token.0.as_deref(), auth.password.0), (Some("testtoken123"), None));
    let client = params.client.0.unwrap();
    assert_eq!((client.id.0.as_deref(), client.mode.0.as_deref()), (Some("cli"), Some("cli")));
    assert_eq!(client.instance_id.0.as_deref(), Some("326024d3-8608-41b1-ae75-6afa07ab1f04"));
}

#[test]
fn mistyped_connect_fields_read_as_absent_as_they_always_did() {
    let params: ConnectParams = decode(with(json!({
        "minProtocol": "4", "maxProtocol": 4.5, "client": "cli", "role": 1,
        "scopes": ["operator.write", 7, null], "auth": {"token": 12, "password": ["p"]},
    })))
    .unwrap();
    assert_eq!((params.min_protocol.0, params.max_protocol.0, params.role.0), (None, None, None));
    assert!(params.client.0.is_none());
    let scopes: Vec<String> = params.scopes.0.unwrap().into_iter().filter_map(|scope| scope.0).collect();
    assert_eq!(scopes, ["operator.write"]);
    let auth = params.auth.0.unwrap();
    assert_eq!((auth.token.0, auth.password.0), (None, None));
    let params: ConnectParams = decode(with(json!({"scopes": "operator.write", "auth": "token"}))).unwrap();
    assert!(params.scopes.0.is_none() && params.auth.0.is_none());
}

#[tokio::test]
async fn a_good_connect_sets_protocol_access_and_scopes() {
    let (mut connection, _queue) = connection(gateway(Auth::Token(Secret::new("testtoken123"))));
    connection.connect(captured()).await.unwrap();
    assert_eq!((connection.protocol, connection.access), (4, Access::Write));
    assert_eq!(connection.scopes, ["operator.write"]);

    let (mut connection, _queue) = connection_without_auth();
    connection.connect(Map::new()).await.unwrap();
    assert_eq!((connection.protocol, connection.access), (PROTOCOL_MAX, Access::Read));
    assert_eq!(connection.scopes, ["operator.read"], "operator.read alone when no scopes are asked for");

    let (mut connection, _queue) = connection_without_auth();
    connection.connect(object(json!({"minProtocol": 3, "maxProtocol": 9, "scopes": []}))).await.unwrap();
    assert_eq!((connection.protocol, connection.access, connection.scopes.len()), (PROTOCOL_MAX, Access::Read, 0));
}

fn connection_without_auth() -> (crate::ws::Connection, tokio::sync::mpsc::Receiver<axum::extract::ws::Message>) {
    connection(gateway(Auth::None))
}

fn object(value: Value) -> Map<String, Value> {
    let Value::Object(params) = value else { panic!("not an object") };
    params
}

async fn refusal(auth: Auth, params: Map<String, Value>) -> ConnectError {
    let (mut connection, _queue) = connection(gateway(auth));
    connection.connect(params).await.unwrap_err()
}

#[tokio::test]
async fn refusals_answer_the_error_frames_and_close_codes_they_always_had() {
    let token = || Auth::Token(Secret::new("testtoken123"));
    let cases = [
        (
            refusal(token(), with(json!({"minProtocol": 5, "maxProtocol": 4}))).await,
            ErrorCode::InvalidRequest,
            "minProtocol 5 is above maxProtocol 4",
            None,
            (1008, "bad connect"),
        ),
        (
            refusal(token(), with(json!({"minProtocol": 2, "maxProtocol": 2}))).await,
            ErrorCode::InvalidRequest,
            "protocol 2..2 is not supported; this gateway speaks 3 to 4",
            Some(json!({"code": "PROTOCOL_MISMATCH", "min": 3, "max": 4})),
            (1002, "protocol mismatch"),
        ),
        (
            refusal(token(), with(json!({"role": "node"}))).await,
            ErrorCode::InvalidRequest,
            "role \"node\" is not supported; connect as \"operator\"",
            None,
            (1008, "bad connect"),
        ),
        (
            refusal(token(), with(json!({"auth": {"token": "nope"}}))).await,
            ErrorCode::Forbidden,
            "unauthorized: wrong or missing gateway credentials",
            Some(json!({"code": "AUTH_TOKEN_MISMATCH"})),
            (1008, "unauthorized"),
        ),
        (
            refusal(token(), with(json!({"auth": {}}))).await,
            ErrorCode::Forbidden,
            "unauthorized: wrong or missing gateway credentials",
            Some(json!({"code": "AUTH_TOKEN_MISSING"})),
            (1008, "unauthorized"),
        ),
    ];
    for (error, code, message, details, close) in cases {
        let frame = MethodError::from(&error);
        assert_eq!((frame.code, frame.message.as_str(), frame.details), (code, message, details), "{error:?}");
        assert_eq!(error.close(), close, "{error:?}");
    }
    let first = ConnectError::NotConnect("health".into());
    assert_eq!(MethodError::from(&first).message, "the first request must be `connect`, not `health`");
    assert_eq!(first.close(), (1008, "connect first"));
    let locked = ConnectError::LockedOut(std::time::Duration::from_millis(1500));
    let frame = MethodError::from(&locked);
    assert_eq!(
        (frame.code, frame.details),
        (ErrorCode::RateLimited, Some(json!({"code": "RATE_LIMITED", "retryAfterMs": 1500})))
    );
    assert_eq!(locked.close(), (1008, "rate limited"));
    assert_eq!(AuthFailure::PasswordMismatch.as_str(), "AUTH_PASSWORD_MISMATCH");
}
