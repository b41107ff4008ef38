//! The methods of the protocol. Each returns its `res` payload, or `None` when the final
//! response comes later (an `agent` run answers when it ends).

use serde_json::{Map, Value, json};
use squidbot_core::memory::{DocumentEdit, ListFilter, apply_edit};
use squidbot_core::runs::{RunError, RunRequest};
use squidbot_types::memory::{DEFAULT_IMPORTANCE, MemoryType, NewMemory};
use squidbot_types::session::{EntryBody, MessageRole, SessionEntry};

use super::frame::{ErrorCode, MethodError, optional_str, optional_u64, required_str};
use super::{Access, Connection};

/// The owner's main session, as OpenClaw names it.
pub const MAIN_SESSION: &str = "agent:main:main";

/// Methods and what they need.
const METHODS: &[(&str, Access)] = &[
    ("health", Access::Read),
    ("status", Access::Read),
    ("agent", Access::Write),
    ("chat.send", Access::Write),
    ("chat.history", Access::Read),
    ("chat.abort", Access::Write),
    ("sessions.list", Access::Read),
    ("sessions.get", Access::Read),
    ("sessions.subscribe", Access::Read),
    ("sessions.reset", Access::Write),
    ("cron.list", Access::Read),
    ("cron.get", Access::Read),
    ("cron.status", Access::Read),
    ("cron.add", Access::Write),
    ("cron.remove", Access::Write),
    ("cron.pause", Access::Write),
    ("cron.resume", Access::Write),
    ("cron.update", Access::Write),
    ("cron.run", Access::Write),
    ("config.get", Access::Read),
    ("models.list", Access::Read),
    ("agents.list", Access::Read),
    ("skills.list", Access::Read),
    ("memory.list", Access::Read),
    ("memory.save", Access::Write),
    ("memory.delete", Access::Write),
    ("memory.doc.get", Access::Read),
    ("memory.doc.set", Access::Write),
    ("workers.list", Access::Read),
    ("workers.cancel", Access::Write),
    ("bus.send", Access::Write),
    ("bus.health", Access::Read),
];

/// Names advertised in `hello-ok`.
pub const NAMES: [&str; METHODS.len()] = {
    let mut names = [""; METHODS.len()];
    let mut index = 0;
    while index < METHODS.len() {
        names[index] = METHODS[index].0;
        index += 1;
    }
    names
};

/// What `method` needs, `None` for unknown methods.
pub(super) fn access(method: &str) -> Option<Access> {
    METHODS.iter().find(|(name, _)| *name == method).map(|(_, access)| *access)
}

fn internal(error: impl std::fmt::Display) -> MethodError {
    MethodError::new(ErrorCode::Internal, error.to_string())
}

/// The session a request names: `sessionKey`, else the agent's main session.
fn session_key(params: &Map<String, Value>) -> Result<String, MethodError> {
    if let Some(key) = optional_str(params, "sessionKey")?.filter(|key| !key.trim().is_empty()) {
        if key.len() > 256 || key.chars().any(char::is_control) {
            return Err(MethodError::invalid("`sessionKey` must be at most 256 printable characters"));
        }
        return Ok(key.to_owned());
    }
    let agent = optional_str(params, "agentId")?.unwrap_or("main");
    if agent != "main" {
        return Err(MethodError::invalid(format!("unknown agent {agent:?}; this gateway runs the agent \"main\"")));
    }
    Ok(MAIN_SESSION.to_owned())
}

/// Runs the method; `None` when the response is sent later.
pub(super) async fn call(
    connection: &mut Connection,
    id: &str,
    method: &str,
    params: &Map<String, Value>,
) -> Option<Result<Value, MethodError>> {
    let gateway = connection.gateway.clone();
    let result = match method {
        "health" => Ok(crate::health::report(&gateway).await),
        "status" => Ok(status(connection).await),
        "agent" => return agent(connection, id, params),
        "chat.send" => chat_send(connection, params),
        "chat.abort" => chat_abort(connection, params),
        "chat.history" => chat_history(connection, params).await,
        "sessions.list" => sessions_list(connection).await,
        "sessions.get" => sessions_get(connection, params).await,
        "sessions.subscribe" => session_key(params).map(|key| {
            connection.watch(&key);
            json!({"ok": true, "sessionKey": key})
        }),
        "sessions.reset" => match session_key(params) {
            Ok(key) => gateway.runner.reset(&key).await.map(|()| json!({"ok": true, "key": key})).map_err(internal),
            Err(error) => Err(error),
        },
        "cron.list" | "cron.get" | "cron.status" | "cron.add" | "cron.remove" | "cron.pause" | "cron.resume"
        | "cron.update" | "cron.run" => super::cron::call(gateway.services.jobs.as_ref(), method, params).await,
        "config.get" => Ok(json!({"config": gateway.services.config})),
        "models.list" => Ok(json!({"models": gateway.models.iter().map(|id| json!({"id": id})).collect::<Vec<_>>()})),
        "agents.list" => {
            Ok(json!({"defaultId": "main", "agents": [{"id": "main", "name": "squidbot", "default": true}]}))
        }
        "skills.list" => {
            let skills = gateway.services.skills.as_ref().map(|list| list()).unwrap_or_default();
            Ok(json!({"skills": skills}))
        }
        "memory.list" => memory_list(connection, params).await,
        "memory.save" => memory_save(connection, params).await,
        "memory.delete" => memory_delete(connection, params).await,
        "memory.doc.get" => memory_doc_get(connection),
        "memory.doc.set" => memory_doc_set(connection, params),
        "bus.send" => crate::bus::send(&gateway, params).await,
        "bus.health" => crate::bus::health(&gateway, params),
        "workers.list" => super::workers::list(&gateway, params),
        "workers.cancel" => super::workers::cancel(&gateway, params),
        other => Err(MethodError::invalid(format!("unknown method `{other}`"))),
    };
    Some(result)
}

async fn status(connection: &Connection) -> Value {
    let gateway = &connection.gateway;
    let gauges = gateway.gauges();
    let (turns, input, output) = gateway.metrics.usage_totals();
    let memory = match &gateway.services.memories {
        Some(memories) => {
            let count = memories.stats(&gateway.services.memory_context).await.map(|stats| stats.memories).unwrap_or(0);
            json!({"mode": memories.mode().describe(), "count": count})
        }
        None => json!({"mode": "disabled", "count": 0}),
    };
    json!({
        "runtimeVersion": env!("CARGO_PKG_VERSION"),
        "version": env!("CARGO_PKG_VERSION"),
        "uptimeMs": gauges.uptime.as_millis() as u64,
        "model": gateway.runner.agent().settings().model,
        "providers": gateway.services.providers,
        "channels": crate::channels::views(gateway).iter().map(crate::channels::ChannelView::json).collect::<Vec<_>>(),
        "channelSummary": crate::channels::views(gateway)
            .iter()
            .map(|channel| format!("{} ({}): {}", channel.name, channel.kind, channel.state))
            .collect::<Vec<_>>(),
        "usage": {"turns": turns, "inputTokens": input, "outputTokens": output},
        "sessionsOpen": gauges.open_sessions,
        "workers": super::workers::summary(gateway),
        "activeRuns": gauges.active_runs,
        "wsConnections": gauges.ws_connections,
        "memory": memory,
        "heartbeat": {"defaultAgentId": "main", "agents": []},
        "sessions": {"count": gauges.open_sessions, "defaults": {"model": gateway.runner.agent().settings().model}},
    })
}

fn start_run(
    connection: &mut Connection,
    params: &Map<String, Value>,
    text_key: &str,
) -> Result<(String, String), MethodError> {
    let key = session_key(params)?;
    let message = required_str(params, text_key)?.to_owned();
    let run_id = match optional_str(params, "idempotencyKey")? {
        Some(id) if !id.is_empty() => id.to_owned(),
        _ => format!("run-{}", squidbot_core::ids::session_id()),
    };
    // Watch before starting so the first events are not missed.
    connection.watch(&key);
    let request = RunRequest {
        session_key: key.clone(),
        input: message,
        images: Vec::new(),
        origin: "openclaw".into(),
        run_id: Some(run_id),
        correlation_id: None,
    };
    match connection.gateway.runner.start(request) {
        Ok(handle) => Ok((handle.run_id, key)),
        Err(RunError::AlreadyRunning(id)) => Err(MethodError::invalid(format!("run {id} is already running"))
            .with_details(json!({"code": "DUPLICATE_RUN", "runId": id}))),
        Err(RunError::ShuttingDown) => Err(MethodError::new(ErrorCode::Unavailable, "the gateway is shutting down")),
        Err(RunError::Invalid(message)) => Err(MethodError::invalid(message)),
    }
}

fn agent(connection: &mut Connection, id: &str, params: &Map<String, Value>) -> Option<Result<Value, MethodError>> {
    match start_run(connection, params, "message") {
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

fn chat_send(connection: &mut Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let (run_id, key) = start_run(connection, params, "message")?;
    Ok(json!({"runId": run_id, "sessionKey": key, "status": "started"}))
}

fn chat_abort(connection: &mut Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let key = session_key(params)?;
    let run_id = optional_str(params, "runId")?;
    let aborted = connection.gateway.runner.abort(&key, run_id);
    Ok(json!({"ok": true, "aborted": !aborted.is_empty(), "runIds": aborted}))
}

/// The entries of a session: the open one when loaded, else from the store.
async fn session_entries(
    connection: &Connection,
    key: &str,
) -> Result<Option<(Vec<SessionEntry>, Option<String>, Option<Vec<String>>)>, MethodError> {
    let runner = &connection.gateway.runner;
    let stored = runner.agent().store().load_boxed(key).await.map_err(internal)?;
    let Some(stored) = stored else { return Ok(None) };
    let session = runner.session(key).await.map_err(internal)?;
    // A running turn holds the lock; then the stored copy (which lags by at most the
    // entries of that turn) is shown instead of waiting.
    let (entries, leaf, active) = match session.try_lock() {
        Ok(session) => (
            session.entries().to_vec(),
            session.leaf().map(str::to_owned),
            Some(session.active_path().iter().map(|entry| entry.id.clone()).collect()),
        ),
        Err(_) => {
            let leaf = stored.entries.last().map(|entry| entry.id.clone());
            (stored.entries, leaf, None)
        }
    };
    Ok(Some((entries, leaf, active)))
}

async fn chat_history(connection: &mut Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let key = session_key(params)?;
    let limit = optional_u64(params, "limit")?.unwrap_or(200).clamp(1, 1000) as usize;
    connection.watch(&key);
    let Some((entries, _, active)) = session_entries(connection, &key).await? else {
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

async fn sessions_list(connection: &Connection) -> Result<Value, MethodError> {
    let summaries = connection.gateway.runner.agent().store().list_boxed().await.map_err(internal)?;
    let sessions: Vec<Value> = summaries
        .into_iter()
        .map(|summary| {
            json!({
                "key": summary.key, "title": summary.preview, "context": summary.context,
                "createdAt": summary.created, "updatedAt": summary.updated,
                "entries": summary.entry_count, "messages": summary.message_count, "archived": false,
            })
        })
        .collect();
    Ok(json!({"sessions": sessions}))
}

async fn sessions_get(connection: &Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let key = match optional_str(params, "key")? {
        Some(key) if !key.trim().is_empty() => key.to_owned(),
        _ => session_key(params)?,
    };
    let Some((entries, leaf, active)) = session_entries(connection, &key).await? else {
        return Err(MethodError::invalid(format!("no session {key:?}")).with_details(json!({"code": "NOT_FOUND"})));
    };
    let entries: Vec<Value> = entries
        .iter()
        .map(|entry| {
            let mut body = serde_json::to_value(&entry.body).unwrap_or(Value::Null);
            if let Some(kind) = body.get("type").cloned() {
                body["kind"] = kind;
            }
            json!({"id": entry.id, "parent": entry.parent, "timestamp": entry.timestamp, "body": body})
        })
        .collect();
    Ok(json!({"key": key, "leaf": leaf, "activePath": active, "entries": entries}))
}

fn memory_json(memory: &squidbot_types::memory::Memory) -> Value {
    json!({
        "id": memory.id, "type": memory.kind.as_str(), "content": memory.content, "importance": memory.importance,
        "tags": memory.tags, "source": memory.source, "created_at": memory.created_at,
        "updated_at": memory.updated_at, "expires_at": memory.expires_at,
    })
}

fn memories(connection: &Connection) -> Result<&std::sync::Arc<squidbot_core::memory::Memories>, MethodError> {
    connection
        .gateway
        .services
        .memories
        .as_ref()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "long-term memory is not enabled on this gateway"))
}

async fn memory_list(connection: &Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let memories = memories(connection)?;
    let context = &connection.gateway.services.memory_context;
    let limit = optional_u64(params, "limit")?.unwrap_or(50).clamp(1, 500) as usize;
    let list = match optional_str(params, "query")?.filter(|query| !query.trim().is_empty()) {
        Some(query) => memories
            .recall(context, query, limit, &[])
            .await
            .map_err(internal)?
            .hits
            .into_iter()
            .map(|hit| hit.memory)
            .collect(),
        None => memories.list(context, ListFilter { limit, ..ListFilter::default() }).await.map_err(internal)?,
    };
    Ok(json!({"memories": list.iter().map(memory_json).collect::<Vec<_>>()}))
}

async fn memory_save(connection: &Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let memories = memories(connection)?;
    let content = required_str(params, "content")?;
    let kind = match optional_str(params, "type")? {
        None => MemoryType::Fact,
        Some(name) => {
            MemoryType::parse(name).ok_or_else(|| MethodError::invalid(format!("unknown memory type {name:?}")))?
        }
    };
    let importance = match params.get("importance") {
        None | Some(Value::Null) => DEFAULT_IMPORTANCE,
        Some(value) => match value.as_f64() {
            Some(importance) if (0.0..=1.0).contains(&importance) => importance as f32,
            _ => return Err(MethodError::invalid("`importance` must be a number from 0 to 1")),
        },
    };
    let memory = NewMemory {
        context: connection.gateway.services.memory_context.clone(),
        kind,
        content: content.to_owned(),
        importance,
        tags: Vec::new(),
        source: "ui".into(),
        expires_at: None,
        links: Vec::new(),
    };
    let outcome = memories.save(memory).await.map_err(|error| MethodError::invalid(error.to_string()))?;
    Ok(json!({"id": outcome.id(), "created": matches!(outcome, squidbot_core::memory::SaveOutcome::Created(_))}))
}

async fn memory_delete(connection: &Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let memories = memories(connection)?;
    let id =
        params.get("id").and_then(Value::as_i64).ok_or_else(|| MethodError::invalid("`id` must be a memory id"))?;
    memories
        .delete(&connection.gateway.services.memory_context, id)
        .await
        .map_err(|error| MethodError::invalid(error.to_string()))?;
    Ok(json!({"ok": true}))
}

fn documents(
    connection: &Connection,
) -> Result<&std::sync::Arc<dyn squidbot_core::memory::MemoryDocuments>, MethodError> {
    connection
        .gateway
        .services
        .documents
        .as_ref()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "memory.md is not enabled on this gateway"))
}

fn memory_doc_get(connection: &Connection) -> Result<Value, MethodError> {
    let documents = documents(connection)?;
    let context = &connection.gateway.services.memory_context;
    let text = documents.read(context).map_err(internal)?.unwrap_or_default();
    Ok(json!({"text": text, "location": documents.location(context), "cap": connection.gateway.services.document_cap}))
}

fn memory_doc_set(connection: &Connection, params: &Map<String, Value>) -> Result<Value, MethodError> {
    let documents = documents(connection)?;
    let text = optional_str(params, "text")?.ok_or_else(|| MethodError::invalid("`text` is required"))?;
    let cap = connection.gateway.services.document_cap;
    let edit = DocumentEdit { content: text.to_owned(), append: false, section: None };
    let document = apply_edit("", &edit);
    if document.chars().count() > cap {
        return Err(MethodError::invalid(format!(
            "memory.md would be {} characters; the limit is {cap}",
            document.chars().count()
        )));
    }
    documents.write(&connection.gateway.services.memory_context, &document).map_err(internal)?;
    Ok(json!({"ok": true, "chars": document.chars().count()}))
}
