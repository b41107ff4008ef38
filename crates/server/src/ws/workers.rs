//! `workers.list` and `workers.cancel`: the assistant's sub-agents as people see them, and
//! stopping one from a client.

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_core::delegation::{Delegator, Priority, WorkerSnapshot};

use super::frame::{ErrorCode, MethodError};
use super::params::NonBlank;
use crate::Gateway;

/// A `workers.*` request.
#[derive(Debug)]
pub(crate) enum WorkersRequest {
    /// `workers.list`.
    List(WorkersListParams),
    /// `workers.cancel`.
    Cancel(WorkerParams),
}

/// `workers.list` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct WorkersListParams {
    /// Only the workers this session started; every worker when absent or blank.
    pub(crate) session_key: Option<String>,
}

/// `workers.cancel` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WorkerParams {
    /// The worker's id.
    pub(crate) id: NonBlank,
}

/// Runs a `workers.*` request.
pub(super) fn call(gateway: &Gateway, request: WorkersRequest) -> Result<Value, MethodError> {
    match request {
        WorkersRequest::List(params) => list(gateway, params),
        WorkersRequest::Cancel(params) => cancel(gateway, params),
    }
}

/// The assistant's sub-agents, or why there are none.
pub(super) fn delegation(gateway: &Gateway) -> Result<&std::sync::Arc<Delegator>, MethodError> {
    gateway
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
    let Some(delegation) = gateway.delegation() else {
        return json!({"enabled": false, "running": 0, "list": []});
    };
    let running = delegation.pool().running();
    json!({
        "enabled": true, "maxPerSession": delegation.max_workers(), "roles": delegation.role_names(),
        "running": running.len(), "list": running.iter().map(worker_json).collect::<Vec<_>>(),
    })
}

/// `workers.list {sessionKey?}`: every known worker, or one session's.
fn list(gateway: &Gateway, params: WorkersListParams) -> Result<Value, MethodError> {
    let delegation = delegation(gateway)?;
    let workers = match params.session_key.as_deref().filter(|key| !key.trim().is_empty()) {
        Some(key) => delegation.pool().owned_by(key),
        None => delegation.pool().list(),
    };
    Ok(json!({"workers": workers.iter().map(worker_json).collect::<Vec<_>>()}))
}

/// `workers.cancel {id}`.
fn cancel(gateway: &Gateway, params: WorkerParams) -> Result<Value, MethodError> {
    let delegation = delegation(gateway)?;
    match delegation.cancel(params.id.as_str()) {
        Ok(worker) => Ok(json!({"ok": true, "worker": worker_json(&worker)})),
        Err(error) => Err(MethodError::invalid(error.to_string())),
    }
}
