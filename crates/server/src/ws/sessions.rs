//! `sessions.*`: the sessions a client sees, their entry trees, watching one and resetting
//! one; and which session a request names (`sessionKey`, else the agent's main session).

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_core::session::Session;
use squidbot_types::session::SessionEntry;

use super::Connection;
use super::frame::{ErrorCode, MethodError};
use super::methods::MAIN_SESSION;
use crate::people::{Caller, ClaimError, Ownership};

/// Longest session key a client may name.
const MAX_SESSION_KEY_CHARS: usize = 256;

/// Params of the methods that name a session.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionParams {
    /// The session; the agent's main session when absent or blank.
    pub(crate) session_key: Option<String>,
    /// The agent whose main session is meant; only `main` runs here.
    pub(crate) agent_id: Option<String>,
}

/// `sessions.get` params: `key` (or `sessionKey`) names the session.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionGetParams {
    /// The session, as `sessions.list` names it.
    pub(crate) key: Option<String>,
    /// Read when `key` is absent or blank.
    pub(crate) session_key: Option<String>,
    /// Read when neither key is given.
    pub(crate) agent_id: Option<String>,
}

/// The session a request names: `session_key`, else the main session of `agent_id`.
pub(super) fn session_key(session_key: Option<&str>, agent_id: Option<&str>) -> Result<String, MethodError> {
    if let Some(key) = session_key.filter(|key| !key.trim().is_empty()) {
        if key.len() > MAX_SESSION_KEY_CHARS || key.chars().any(char::is_control) {
            return Err(MethodError::invalid("`sessionKey` must be at most 256 printable characters"));
        }
        return Ok(key.to_owned());
    }
    let agent = agent_id.unwrap_or("main");
    if agent != "main" {
        return Err(MethodError::invalid(format!("unknown agent {agent:?}; this gateway runs the agent \"main\"")));
    }
    Ok(MAIN_SESSION.to_owned())
}

/// The session a request of `caller` names: as [`session_key`], except that a person's
/// default is their own main session.
pub(super) fn session_key_for(
    caller: &Caller,
    session_key: Option<&str>,
    agent_id: Option<&str>,
) -> Result<String, MethodError> {
    let key = self::session_key(session_key, agent_id)?;
    let named = session_key.is_some_and(|key| !key.trim().is_empty());
    match caller.person() {
        Some(actor) if !named => Ok(crate::people::main_session(actor)),
        _ => Ok(key),
    }
}

impl SessionParams {
    /// The session named, for `caller`.
    pub(super) fn key(&self, caller: &Caller) -> Result<String, MethodError> {
        session_key_for(caller, self.session_key.as_deref(), self.agent_id.as_deref())
    }
}

/// What a person is told about a session that is not theirs, the same whether it exists
/// or not, so nobody learns another's session keys by asking.
pub(super) fn not_yours(key: &str) -> MethodError {
    MethodError::new(ErrorCode::NotFound, format!("no session {key:?} of yours"))
        .with_details(json!({"code": "NOT_FOUND"}))
}

/// Whose session `key` is for the connection: the owner's clients may use every session,
/// as always (answered [`Ownership::Mine`]); a person only their own, or a new one under
/// their own names, and anything else is refused as [`not_yours`].
pub(super) async fn ownership(connection: &Connection, key: &str) -> Result<Ownership, MethodError> {
    let Some(actor) = connection.caller.person() else { return Ok(Ownership::Mine) };
    match crate::people::ownership(&connection.gateway.runner, actor, key).await.map_err(MethodError::internal)? {
        Ownership::Theirs => Err(not_yours(key)),
        owned @ (Ownership::Mine | Ownership::Fresh) => Ok(owned),
    }
}

/// Opens `key` for a person's turn or reset: a new session is made in their context. The
/// owner's sessions open as they always did, on first use.
pub(super) async fn claim(connection: &Connection, key: &str) -> Result<(), MethodError> {
    let Some(actor) = connection.caller.person() else { return Ok(()) };
    ownership(connection, key).await?;
    match crate::people::claim(&connection.gateway.runner, actor, key).await {
        Ok(()) => Ok(()),
        Err(ClaimError::Theirs(_)) => Err(not_yours(key)),
        Err(error @ ClaimError::Busy(_)) => Err(MethodError::new(ErrorCode::Conflict, error.to_string())),
        Err(error @ ClaimError::Agent(_)) => Err(MethodError::internal(error)),
    }
}

/// A session's entries, its leaf and the ids on its active path (`None` while a turn runs).
pub(super) type Entries = (Vec<SessionEntry>, Option<String>, Option<Vec<String>>);

/// The entries of a session: the open one when loaded, else from the store.
pub(super) async fn entries(connection: &Connection, key: &str) -> Result<Option<Entries>, MethodError> {
    let runner = &connection.gateway.runner;
    let stored = runner.agent().store().load_boxed(key).await.map_err(MethodError::internal)?;
    let Some(stored) = stored else { return Ok(None) };
    let session = runner.session(key).await.map_err(MethodError::internal)?;
    // A running turn holds the lock; then the stored copy (which lags by at most the
    // entries of that turn) is shown instead of waiting.
    let (entries, leaf, active) = match session.try_lock() {
        Ok(session) if session.is_partial() => {
            // The open session holds only what the model sees; the store has the rest, and
            // the open one anything written since without a sync.
            let leaf = session.leaf().map(str::to_owned);
            let mut whole = Session::from_loaded(stored);
            for entry in session.entries() {
                if whole.entry(&entry.id).is_none() {
                    whole.append_loaded(entry.clone());
                }
            }
            match &leaf {
                Some(leaf) => {
                    whole.checkout(leaf);
                }
                None => whole.start_new_branch(),
            }
            let active = whole.active_path().iter().map(|entry| entry.id.clone()).collect();
            (whole.entries().to_vec(), leaf, Some(active))
        }
        Ok(session) => (
            session.entries().to_vec(),
            session.leaf().map(str::to_owned),
            Some(session.active_path().iter().map(|entry| entry.id.clone()).collect()),
        ),
        Err(_) => {
            // The stored leaf: the last entry, or where a later leaf line moved it.
            let whole = Session::from_loaded(stored);
            let leaf = whole.leaf().map(str::to_owned);
            (whole.entries().to_vec(), leaf, None)
        }
    };
    Ok(Some((entries, leaf, active)))
}

/// `sessions.list`: every session for the owner's clients, a person's own for theirs.
pub(super) async fn list(connection: &Connection) -> Result<Value, MethodError> {
    let summaries = connection.gateway.runner.agent().store().list_boxed().await.map_err(MethodError::internal)?;
    let context = connection.caller.person().map(|actor| actor.context.as_str());
    let sessions: Vec<Value> = summaries
        .into_iter()
        .filter(|summary| context.is_none_or(|context| summary.context == context))
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

/// `sessions.get`.
pub(super) async fn get(connection: &Connection, params: SessionGetParams) -> Result<Value, MethodError> {
    let key = match params.key {
        Some(key) if !key.trim().is_empty() => key,
        _ => session_key_for(&connection.caller, params.session_key.as_deref(), params.agent_id.as_deref())?,
    };
    ownership(connection, &key).await?;
    let Some((entries, leaf, active)) = entries(connection, &key).await? else {
        if connection.caller.person().is_some() {
            return Err(not_yours(&key));
        }
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

/// `sessions.subscribe`: the connection receives the session's events from now on (a
/// person's only of their own sessions: a key watched now would show a session someone
/// else starts under it later).
pub(super) async fn subscribe(connection: &Connection, params: SessionParams) -> Result<Value, MethodError> {
    let key = params.key(&connection.caller)?;
    ownership(connection, &key).await?;
    connection.watch(&key);
    Ok(json!({"ok": true, "sessionKey": key}))
}

/// `sessions.reset`.
pub(super) async fn reset(connection: &Connection, params: SessionParams) -> Result<Value, MethodError> {
    let key = params.key(&connection.caller)?;
    claim(connection, &key).await?;
    connection.gateway.runner.reset(&key).await.map_err(MethodError::internal)?;
    Ok(json!({"ok": true, "key": key}))
}
