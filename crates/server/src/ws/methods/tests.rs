//! The method table: one list of names for `hello-ok` and dispatch, the order of refusals
//! (unknown, scope, feature off, params), and a refusal naming the field for bad params of
//! every method family, never a panic.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::{Method, NAMES, Request, read};
use crate::Auth;
use crate::ws::Access;
use crate::ws::fixture::{connection, gateway};
use crate::ws::frame::{ErrorCode, MethodError};
use crate::ws::params::ParamsError;

fn object(params: Value) -> Map<String, Value> {
    match params {
        Value::Object(params) => params,
        other => panic!("params must be an object: {other}"),
    }
}

/// Reads `method` as a write-scoped client sends it.
fn parsed(method: &str, params: Value) -> Result<Request, MethodError> {
    let method = Method::from_name(method).unwrap_or_else(|| panic!("no method {method}"));
    method.parse(object(params)).map_err(|error| MethodError::from(super::RequestError::from(error)))
}

#[test]
fn every_method_is_listed_once_and_found_by_its_name() {
    assert_eq!(NAMES.len(), Method::ALL.len());
    for (index, method) in Method::ALL.iter().enumerate() {
        assert_eq!(NAMES[index], method.name(), "{method:?}");
        assert_eq!(Method::from_name(method.name()), Some(*method), "{method:?}");
    }
    let unique: HashSet<&str> = NAMES.iter().copied().collect();
    assert_eq!(unique.len(), NAMES.len(), "a name is listed twice: {NAMES:?}");
    assert_eq!(Method::from_name("connect"), None, "connect is the handshake, not a method");
    assert_eq!(Method::from_name("no.such.method"), None);
}

/// `hello-ok` lists the methods in the order it always had: the bytes did not change.
#[test]
fn the_advertised_method_list_keeps_its_order() {
    assert_eq!(
        NAMES,
        [
            "health",
            "status",
            "agent",
            "chat.send",
            "chat.history",
            "chat.abort",
            "sessions.list",
            "sessions.get",
            "sessions.subscribe",
            "sessions.reset",
            "sessions.tree",
            "sessions.fork",
            "sessions.switch",
            "sessions.export",
            "sessions.search",
            "cron.list",
            "cron.get",
            "cron.status",
            "cron.add",
            "cron.remove",
            "cron.pause",
            "cron.resume",
            "cron.update",
            "cron.run",
            "config.get",
            "models.list",
            "agents.list",
            "skills.list",
            "memory.list",
            "memory.save",
            "memory.delete",
            "memory.doc.get",
            "memory.doc.set",
            "workers.list",
            "workers.cancel",
            "bus.send",
            "bus.health",
            "users.list",
            "approvals.list",
            "approvals.approve",
            "approvals.deny",
            "usage.get",
            "audit.list",
            "audit.verify",
        ]
    );
}

#[tokio::test]
async fn hello_ok_advertises_exactly_the_methods_of_the_table() {
    let (connection, _queue) = connection(gateway(Auth::None));
    let hello = connection.hello().await;
    let advertised: Vec<&str> =
        hello["features"]["methods"].as_array().unwrap().iter().map(|name| name.as_str().unwrap()).collect();
    assert_eq!(advertised, NAMES);
}

#[test]
fn reading_methods_need_read_access_changing_ones_write_access_and_the_people_methods_an_admin() {
    let write: Vec<&str> =
        Method::ALL.iter().filter(|method| method.access() == Access::Write).map(|method| method.name()).collect();
    assert_eq!(
        write,
        [
            "agent",
            "chat.send",
            "chat.abort",
            "sessions.reset",
            "sessions.fork",
            "sessions.switch",
            "cron.add",
            "cron.remove",
            "cron.pause",
            "cron.resume",
            "cron.update",
            "cron.run",
            "memory.save",
            "memory.delete",
            "memory.doc.set",
            "workers.cancel",
            "bus.send",
        ]
    );
    let admin: Vec<&str> =
        Method::ALL.iter().filter(|method| method.access() == Access::Admin).map(|method| method.name()).collect();
    assert_eq!(
        admin,
        [
            "config.get",
            "users.list",
            "approvals.list",
            "approvals.approve",
            "approvals.deny",
            "audit.list",
            "audit.verify"
        ]
    );
}

/// Without people every client is the owner: `config.get` needs no more than reading, as
/// it always did, and the people's methods say they are off.
#[tokio::test]
async fn without_people_config_get_needs_reading_only_and_the_people_methods_are_unavailable() {
    let gateway = gateway(Auth::None);
    assert!(read(&gateway, "config.get", Access::Read, true, Map::new()).is_ok());
    for method in ["users.list", "approvals.list", "approvals.approve", "usage.get", "audit.list", "audit.verify"] {
        let error = read(&gateway, method, Access::Read, true, object(json!({"id": "X"}))).unwrap_err();
        assert_eq!(error.code, ErrorCode::Unavailable, "{method}: {error:?}");
    }
}

#[tokio::test]
async fn requests_are_refused_unknown_then_by_scope_then_feature_then_params() {
    let gateway = gateway(Auth::None);
    let error = read(&gateway, "no.such.method", Access::Write, true, Map::new()).unwrap_err();
    assert_eq!((error.code, error.message.as_str()), (ErrorCode::InvalidRequest, "unknown method `no.such.method`"));
    assert_eq!(error.details, Some(json!({"code": "UNKNOWN_METHOD", "method": "no.such.method"})));

    let garbage = object(json!({"content": 5, "id": "x", "target": [], "text": {}}));
    let error = read(&gateway, "memory.save", Access::Read, true, garbage.clone()).unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str()),
        (ErrorCode::Forbidden, "`memory.save` needs the operator.write scope")
    );
    assert_eq!(error.details, Some(json!({"code": "MISSING_SCOPE", "scope": "operator.write"})));

    // A feature that is off says so whatever the params.
    for (method, code) in [
        ("memory.save", None),
        ("memory.delete", None),
        ("memory.doc.set", None),
        ("workers.cancel", None),
        ("bus.send", None),
        ("cron.get", Some("SCHEDULER_UNAVAILABLE")),
        ("cron.update", Some("SCHEDULER_UNAVAILABLE")),
    ] {
        let error = read(&gateway, method, Access::Write, true, garbage.clone()).unwrap_err();
        assert_eq!(error.code, ErrorCode::Unavailable, "{method}: {error:?}");
        assert_eq!(error.details.as_ref().map(|details| &details["code"]), code.map(Value::from).as_ref(), "{method}");
    }

    let error = read(&gateway, "chat.history", Access::Read, true, object(json!({"limit": "ten"}))).unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str(), error.details),
        (ErrorCode::InvalidRequest, "`limit` must be a non-negative integer", None)
    );
    assert!(read(&gateway, "chat.history", Access::Read, true, object(json!({"limit": 5}))).is_ok());
}

#[test]
fn bad_params_of_every_family_are_refused_naming_the_field() {
    let cases = [
        // agent and chat.*
        ("agent", json!({"message": 5}), "`message` must be a string"),
        ("agent", json!({"message": "hi", "idempotencyKey": 7}), "`idempotencyKey` must be a string"),
        ("chat.send", json!({}), "`message` is required and must be a non-empty string"),
        ("chat.send", json!({"message": "  "}), "`message` is required and must be a non-empty string"),
        ("chat.send", json!({"message": "hi", "sessionKey": 1}), "`sessionKey` must be a string"),
        ("chat.history", json!({"limit": -1}), "`limit` must be a non-negative integer"),
        ("chat.history", json!({"limit": 1.5}), "`limit` must be a non-negative integer"),
        ("chat.history", json!({"agentId": false}), "`agentId` must be a string"),
        ("chat.abort", json!({"runId": ["r"]}), "`runId` must be a string"),
        // sessions.*
        ("sessions.get", json!({"key": {}}), "`key` must be a string"),
        ("sessions.subscribe", json!({"sessionKey": 3}), "`sessionKey` must be a string"),
        ("sessions.reset", json!({"sessionKey": true}), "`sessionKey` must be a string"),
        // cron.*
        ("cron.get", json!({"id": 7}), "`id` must be a string"),
        ("cron.remove", json!({"jobId": 7}), "`jobId` must be a string"),
        ("cron.add", json!({"name": 1, "schedule": "daily", "message": "m"}), "`name` must be a string"),
        ("cron.add", json!({"name": "n", "message": "m"}), "`schedule` is required and must be a non-empty string"),
        ("cron.add", json!({"name": "n", "schedule": "daily", "message": "m", "tz": 1}), "`tz` must be a string"),
        ("cron.update", json!({"id": "j", "patch": 5}), "`patch` must be an object"),
        ("cron.update", json!({"id": "j", "patch": [true]}), "`patch` must be an object"),
        // memory.*
        ("memory.list", json!({"limit": "x"}), "`limit` must be a non-negative integer"),
        ("memory.list", json!({"query": 1}), "`query` must be a string"),
        ("memory.save", json!({"content": ""}), "`content` is required and must be a non-empty string"),
        ("memory.save", json!({"content": "c", "type": 1}), "`type` must be a string"),
        ("memory.save", json!({"content": "c", "importance": 2}), "`importance` must be a number from 0 to 1"),
        ("memory.save", json!({"content": "c", "importance": "high"}), "`importance` must be a number from 0 to 1"),
        ("memory.delete", json!({"id": "7"}), "`id` must be a memory id"),
        ("memory.delete", json!({}), "`id` must be a memory id"),
        ("memory.doc.set", json!({}), "`text` is required"),
        ("memory.doc.set", json!({"text": 1}), "`text` must be a string"),
        // workers.*
        ("workers.list", json!({"sessionKey": 1}), "`sessionKey` must be a string"),
        ("workers.cancel", json!({"id": 5}), "`id` must be a string"),
        ("workers.cancel", json!({"id": null}), "`id` is required and must be a non-empty string"),
        // bus.*
        ("bus.send", json!({"target": ""}), "`target` is required and must be a non-empty string"),
        ("bus.send", json!({"target": "a", "priority": 3}), "`priority` must be a string"),
        ("bus.send", json!({"target": "a", "correlationId": {}}), "`correlationId` must be a string"),
        ("bus.health", json!({}), "`target` is required and must be a non-empty string"),
        // users.*, approvals.*, usage.get, audit.*
        ("approvals.list", json!({"all": "yes"}), "`all` must be a boolean"),
        ("approvals.approve", json!({}), "`id` is required and must be a non-empty string"),
        ("approvals.deny", json!({"id": "X", "reason": 5}), "`reason` must be a string"),
        ("usage.get", json!({"since": 7}), "`since` must be a string"),
        ("usage.get", json!({"by": ["day"]}), "`by` must be a string"),
        ("audit.list", json!({"limit": "ten"}), "`limit` must be a non-negative integer"),
        ("audit.list", json!({"user": {}}), "`user` must be a string"),
    ];
    for (method, params, message) in cases {
        let error = parsed(method, params.clone()).unwrap_err();
        assert_eq!((error.code, error.message.as_str()), (ErrorCode::InvalidRequest, message), "{method} {params}");
        assert_eq!(error.details, None);
    }
}

#[test]
fn good_params_read_into_their_requests_and_unknown_keys_are_ignored() {
    let request = parsed(
        "chat.send",
        json!({"sessionKey": "s1", "message": "hi", "idempotencyKey": "run-a", "deliver": true, "thinking": "low"}),
    )
    .unwrap();
    let Request::ChatSend(params) = request else { panic!("{request:?}") };
    assert_eq!(
        (params.session_key.as_deref(), params.message.as_str(), params.idempotency_key.as_deref()),
        (Some("s1"), "hi", Some("run-a"))
    );
    let request = parsed("cron.update", json!({"jobId": "j", "patch": {"enabled": false}, "enabled": "yes"})).unwrap();
    let Request::Cron(super::CronRequest::Update(params)) = request else { panic!("{request:?}") };
    assert_eq!((params.job_id.as_deref(), params.enabled.0), (Some("j"), None));
    assert_eq!(params.patch.map(|patch| patch.0), Some(object(json!({"enabled": false}))));
    // `null` reads as absent.
    assert!(parsed("chat.history", json!({"limit": null, "sessionKey": null})).is_ok());
    for name in ["health", "status", "sessions.list", "config.get", "cron.list", "memory.doc.get"] {
        assert!(parsed(name, json!({"anything": [1, {"deep": null}]})).is_ok(), "{name}");
    }
}

#[test]
fn no_value_in_any_field_of_any_method_panics() {
    let fields = [
        "message",
        "sessionKey",
        "agentId",
        "idempotencyKey",
        "limit",
        "runId",
        "key",
        "id",
        "jobId",
        "name",
        "schedule",
        "tz",
        "channel",
        "patch",
        "enabled",
        "query",
        "content",
        "type",
        "importance",
        "text",
        "target",
        "priority",
        "from",
        "correlationId",
        "all",
        "reason",
        "since",
        "by",
        "user",
        "entryId",
        "as",
        "format",
        "active",
    ];
    let values = [
        json!(null),
        json!(true),
        json!(0),
        json!(-1),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1.5),
        json!(1e300),
        json!(""),
        json!(" "),
        json!("x"),
        json!([]),
        json!([1, {"a": null}]),
        json!({}),
        json!({"enabled": [null]}),
    ];
    for method in Method::ALL {
        for field in fields {
            for value in &values {
                let mut params = Map::new();
                params.insert(field.to_owned(), value.clone());
                // A refusal always names a field: this one, or a required one left out.
                if let Err(error) = method.parse(params) {
                    assert!(matches!(error, ParamsError::Field { .. }), "{method:?} {field}={value}: {error:?}");
                }
            }
        }
    }
}
