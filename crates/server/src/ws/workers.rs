//! `workers.list` and `workers.cancel`: the assistant's sub-agents as people see them, and
//! stopping one from a client.

use serde_json::{Map, Value, json};
use squidbot_core::delegation::{Delegator, Priority, WorkerSnapshot};

use super::frame::{ErrorCode, MethodError, optional_str, required_str};
use crate::Gateway;

fn delegation(gateway: &Gateway) -> Result<&std::sync::Arc<Delegator>, MethodError> {
    gateway
        .runner
        .agent()
        .delegation()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "this gateway's assistant has no sub-agents"))
}

/// One worker as JSON.
pub(crate) fn worker_json(worker: &WorkerSnapshot) -> Value {
    json!({
        "id": worker.id, "role": worker.role, "owner": worker.owner, "sessionKey": worker.session_key,
        "task": worker.task, "state": worker.state.as_str(), "status": worker.status, "result": worker.result,
        "background": worker.priority == Priority::Background, "correlationId": worker.correlation_id,
        "elapsedMs": worker.elapsed.as_millis() as u64,
    })
}

/// The `workers` part of `status`: counts and the running ones.
pub(crate) fn summary(gateway: &Gateway) -> Value {
    let Some(delegation) = gateway.runner.agent().delegation() else {
        return json!({"enabled": false, "running": 0, "list": []});
    };
    let running = delegation.pool().running();
    json!({
        "enabled": true, "maxPerSession": delegation.max_workers(), "roles": delegation.role_names(),
        "running": running.len(), "list": running.iter().map(worker_json).collect::<Vec<_>>(),
    })
}

/// `workers.list {sessionKey?}`: every known worker, or one session's.
pub(super) fn list(gateway: &Gateway, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let delegation = delegation(gateway)?;
    let workers = match optional_str(params, "sessionKey")?.filter(|key| !key.trim().is_empty()) {
        Some(key) => delegation.pool().owned_by(key),
        None => delegation.pool().list(),
    };
    Ok(json!({"workers": workers.iter().map(worker_json).collect::<Vec<_>>()}))
}

/// `workers.cancel {id}`.
pub(super) fn cancel(gateway: &Gateway, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let delegation = delegation(gateway)?;
    let id = required_str(params, "id")?;
    match delegation.cancel(id) {
        Ok(worker) => Ok(json!({"ok": true, "worker": worker_json(&worker)})),
        Err(error) => Err(MethodError::invalid(error.to_string())),
    }
}
