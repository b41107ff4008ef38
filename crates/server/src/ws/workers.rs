//! `workers.list` and `workers.cancel`: the assistant's sub-agents as people see them, and
//! stopping one from a client. A person sees and stops only the workers their own
//! sessions started.

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_core::delegation::{Delegator, Priority, WorkerSnapshot};

use super::frame::{ErrorCode, MethodError};
use super::params::NonBlank;
use crate::Gateway;
use crate::people::Caller;

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

/// Runs a `workers.*` request for `caller`.
pub(super) async fn call(gateway: &Gateway, caller: &Caller, request: WorkersRequest) -> Result<Value, MethodError> {
    let mine = match caller.person() {
        Some(actor) => {
            Some(crate::people::session_keys_in(&gateway.runner, &actor.context).await.map_err(MethodError::internal)?)
        }
        None => None,
    };
    match request {
        WorkersRequest::List(params) => list(gateway, mine.as_ref(), params),
        WorkersRequest::Cancel(params) => cancel(gateway, mine.as_ref(), params),
    }
}

/// The workers a person sees: those started by one of `mine`, their sessions.
pub(crate) fn theirs(workers: Vec<WorkerSnapshot>, mine: &HashSet<String>) -> Vec<WorkerSnapshot> {
    workers.into_iter().filter(|worker| mine.contains(&worker.owner)).collect()
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

/// The `workers` part of `status`: counts and the running ones (for a person, those their
/// own sessions, `mine`, started).
pub(crate) fn summary(gateway: &Gateway, mine: Option<&HashSet<String>>) -> Value {
    let Some(delegation) = gateway.delegation() else {
        return json!({"enabled": false, "running": 0, "list": []});
    };
    let running = match mine {
        Some(mine) => theirs(delegation.pool().running(), mine),
        None => delegation.pool().running(),
    };
    json!({
        "enabled": true, "maxPerSession": delegation.max_workers(), "roles": delegation.role_names(),
        "running": running.len(), "list": running.iter().map(worker_json).collect::<Vec<_>>(),
    })
}

/// `workers.list {sessionKey?}`: every known worker, or one session's (of a person's
/// sessions only, for a person: `mine`).
fn list(gateway: &Gateway, mine: Option<&HashSet<String>>, params: WorkersListParams) -> Result<Value, MethodError> {
    let delegation = delegation(gateway)?;
    let workers = match params.session_key.as_deref().filter(|key| !key.trim().is_empty()) {
        Some(key) if mine.is_some_and(|mine| !mine.contains(key)) => return Err(super::sessions::not_yours(key)),
        Some(key) => delegation.pool().owned_by(key),
        None => delegation.pool().list(),
    };
    let workers = match mine {
        Some(mine) => theirs(workers, mine),
        None => workers,
    };
    Ok(json!({"workers": workers.iter().map(worker_json).collect::<Vec<_>>()}))
}

/// `workers.cancel {id}` (a person's own workers only: another's reads as unknown).
fn cancel(gateway: &Gateway, mine: Option<&HashSet<String>>, params: WorkerParams) -> Result<Value, MethodError> {
    let delegation = delegation(gateway)?;
    if let Some(mine) = mine {
        let id = params.id.as_str();
        if delegation.pool().snapshot(id).is_none_or(|worker| !mine.contains(&worker.owner)) {
            return Err(MethodError::new(ErrorCode::NotFound, format!("no worker {id:?} of yours")));
        }
    }
    match delegation.cancel(params.id.as_str()) {
        Ok(worker) => Ok(json!({"ok": true, "worker": worker_json(&worker)})),
        Err(error) => Err(MethodError::invalid(error.to_string())),
    }
}
