//! `agent` and `chat.*`: starting a turn, aborting one, and a session's history as chat
//! messages.

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_core::runs::{RunError, RunRequest};
use squidbot_types::session::{EntryBody, MessageRole};

use super::Connection;
use super::frame::{ErrorCode, MethodError};
use super::params::{Count, NonBlank};
use super::sessions::{claim, entries, ownership, session_key_for};
use crate::people::Ownership;
use crate::uploads::{Upload, UploadError};

/// Params of `agent` and `chat.send`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunParams {
    /// The session; the agent's main session when absent.
    pub(crate) session_key: Option<String>,
    /// The agent whose main session is meant; only `main` runs here.
    pub(crate) agent_id: Option<String>,
    /// What the user says.
    pub(crate) message: NonBlank,
    /// The run's id; a fresh one when absent or empty.
    pub(crate) idempotency_key: Option<String>,
    /// Files sent with the message, kept in the session's files directory; images reach
    /// the model as image parts.
    pub(crate) attachments: Option<Vec<AttachmentParams>>,
}

/// One file of `chat.send {attachments}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AttachmentParams {
    /// The file's name as the user's machine calls it.
    #[serde(alias = "fileName", default)]
    pub(crate) name: String,
    /// Its media type, e.g. `image/png`.
    #[serde(alias = "mimeType", default)]
    pub(crate) mime: String,
    /// Its content, base64.
    pub(crate) content: String,
}

/// `chat.history` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HistoryParams {
    /// The session; the agent's main session when absent.
    pub(crate) session_key: Option<String>,
    /// The agent whose main session is meant.
    pub(crate) agent_id: Option<String>,
    /// The newest this many messages (1 to 1000, 200 by default).
    pub(crate) limit: Option<Count>,
}

/// `chat.abort` params.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AbortParams {
    /// The session; the agent's main session when absent.
    pub(crate) session_key: Option<String>,
    /// The agent whose main session is meant.
    pub(crate) agent_id: Option<String>,
    /// Only this run; every run of the session when absent.
    pub(crate) run_id: Option<String>,
}

/// Starts a turn; answers its run id and session. A person's turn acts for them, in a
/// session of their own.
async fn start_run(connection: &mut Connection, params: RunParams) -> Result<(String, String), MethodError> {
    let key = session_key_for(&connection.caller, params.session_key.as_deref(), params.agent_id.as_deref())?;
    claim(connection, &key).await?;
    let uploads = params
        .attachments
        .unwrap_or_default()
        .iter()
        .map(|file| Upload::from_base64(&file.name, &file.mime, &file.content))
        .collect::<Result<Vec<_>, _>>()
        .map_err(upload_error)?;
    let store = connection.gateway.services.attachments.as_deref();
    let (input, images) = crate::uploads::save(store, &key, uploads, params.message.0).map_err(upload_error)?;
    let run_id = match params.idempotency_key {
        Some(id) if !id.is_empty() => id,
        _ => format!("run-{}", squidbot_core::ids::session_id()),
    };
    // Watch before starting so the first events are not missed.
    connection.watch(&key);
    let request = RunRequest {
        session_key: key.clone(),
        input,
        images,
        origin: "openclaw".into(),
        run_id: Some(run_id),
        correlation_id: None,
        actor: connection.caller.person().cloned(),
    };
    match connection.gateway.runner.start(request) {
        Ok(handle) => Ok((handle.run_id, key)),
        Err(RunError::AlreadyRunning(id)) => Err(MethodError::invalid(format!("run {id} is already running"))
            .with_details(json!({"code": "DUPLICATE_RUN", "runId": id}))),
        Err(RunError::ShuttingDown) => Err(MethodError::new(ErrorCode::Unavailable, "the gateway is shutting down")),
        Err(RunError::Invalid(message)) => Err(MethodError::invalid(message)),
    }
}

fn upload_error(error: UploadError) -> MethodError {
    if error.is_client_error() { MethodError::invalid(error.to_string()) } else { MethodError::internal(error) }
}

/// `agent`: answered `accepted` now and again when the run ends.
pub(super) async fn agent(
    connection: &mut Connection,
    id: &str,
    params: RunParams,
) -> Option<Result<Value, MethodError>> {
    match start_run(connection, params).await {
        Ok((run_id, key)) => {
            connection.runs.await_final(&run_id, id);
            let accepted = json!({
                "runId": run_id, "sessionKey": key, "agentId": "main", "status": "accepted",
                "acceptedAt": super::unix_ms(),
            });
            connection.respond(id, Ok(accepted));
            None
        }
        Err(error) => Some(Err(error)),
    }
}

/// `chat.send`.
pub(super) async fn send(connection: &mut Connection, params: RunParams) -> Result<Value, MethodError> {
    let (run_id, key) = start_run(connection, params).await?;
    Ok(json!({"runId": run_id, "sessionKey": key, "status": "started"}))
}

/// `chat.abort`.
pub(super) async fn abort(connection: &mut Connection, params: AbortParams) -> Result<Value, MethodError> {
    let key = session_key_for(&connection.caller, params.session_key.as_deref(), params.agent_id.as_deref())?;
    ownership(connection, &key).await?;
    let aborted = connection.gateway.runner.abort(&key, params.run_id.as_deref());
    Ok(json!({"ok": true, "aborted": !aborted.is_empty(), "runIds": aborted}))
}

/// `chat.history`: the messages on the session's active path, newest last.
pub(super) async fn history(connection: &mut Connection, params: HistoryParams) -> Result<Value, MethodError> {
    let key = session_key_for(&connection.caller, params.session_key.as_deref(), params.agent_id.as_deref())?;
    let limit = params.limit.map_or(200, |limit| limit.0).clamp(1, 1000) as usize;
    let owned = ownership(connection, &key).await?;
    connection.watch(&key);
    if owned == Ownership::Fresh {
        return Ok(json!({"sessionKey": key, "messages": []}));
    }
    let Some((entries, _, active)) = entries(connection, &key).await? else {
        return Ok(json!({"sessionKey": key, "messages": []}));
    };
    let on_path: Option<std::collections::HashSet<&str>> =
        active.as_ref().map(|active| active.iter().map(String::as_str).collect());
    let messages: Vec<Value> = entries
        .iter()
        .filter(|entry| on_path.as_ref().is_none_or(|on_path| on_path.contains(entry.id.as_str())))
        .filter_map(|entry| match &entry.body {
            EntryBody::Message { role, content, .. } if !content.is_empty() => {
                let role = match role {
                    MessageRole::User => "user",
                    MessageRole::Assistant => "assistant",
                };
                Some(json!({"role": role, "content": [{"type": "text", "text": content}], "timestamp": entry.timestamp, "id": entry.id}))
            }
            EntryBody::Delegate { worker, agent, status, result, session, .. } => {
                let text = format!("[background {agent} {worker} {status}]\n{result}");
                Some(json!({
                    "role": "assistant", "content": [{"type": "text", "text": text}], "timestamp": entry.timestamp,
                    "id": entry.id, "background": {"workerId": worker, "status": status, "workerSession": session},
                }))
            }
            _ => None,
        })
        .collect();
    let skip = messages.len().saturating_sub(limit);
    Ok(json!({"sessionKey": key, "messages": messages[skip..]}))
}
