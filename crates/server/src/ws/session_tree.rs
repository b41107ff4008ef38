//! `sessions.tree`, `sessions.fork`, `sessions.switch`, `sessions.export` and
//! `sessions.search`: the session tree and the transcripts' search for the UIs, each in
//! the connection's own sessions (a person's context) and scopes.

use serde::Deserialize;
use serde_json::{Value, json};
use squidbot_core::runs::TreeError;
use squidbot_core::session::branches::{BranchError, LeafMove};
use squidbot_core::session::export::{ExportFormat, ExportScope, export};
use squidbot_core::store::StoreError;
use squidbot_core::store::search::{SearchError, SearchScope};

use super::Connection;
use super::frame::{ErrorCode, MethodError};
use super::params::NonBlank;
use super::sessions::{not_yours, ownership, session_key_for};

/// Most hits `sessions.search` returns.
const MAX_HITS: usize = 200;

/// A request of the session tree family.
#[derive(Debug)]
pub(crate) enum TreeRequest {
    /// `sessions.tree`.
    Tree(TreeParams),
    /// `sessions.fork`.
    Fork(MoveParams),
    /// `sessions.switch`.
    Switch(MoveParams),
    /// `sessions.export`.
    Export(ExportParams),
    /// `sessions.search`.
    Search(SearchParams),
}

/// `sessions.tree {key? | sessionKey?, agentId?}`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TreeParams {
    /// The session, as `sessions.list` names it.
    pub(crate) key: Option<String>,
    /// Read when `key` is absent or blank.
    pub(crate) session_key: Option<String>,
    /// Read when neither key is given.
    pub(crate) agent_id: Option<String>,
}

/// `sessions.fork` / `sessions.switch {key? | sessionKey?, entryId, as?}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MoveParams {
    /// The session, as `sessions.list` names it.
    pub(crate) key: Option<String>,
    /// Read when `key` is absent or blank.
    pub(crate) session_key: Option<String>,
    /// Read when neither key is given.
    pub(crate) agent_id: Option<String>,
    /// The entry to continue from (fork) or a branch's entry (switch).
    pub(crate) entry_id: NonBlank,
    /// Fork only: copy the branch into a new session with this key instead.
    #[serde(rename = "as")]
    pub(crate) new_key: Option<String>,
}

/// `sessions.export {key? | sessionKey?, format, active?}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExportParams {
    /// The session, as `sessions.list` names it.
    pub(crate) key: Option<String>,
    /// Read when `key` is absent or blank.
    pub(crate) session_key: Option<String>,
    /// Read when neither key is given.
    pub(crate) agent_id: Option<String>,
    /// `html` or `md`.
    pub(crate) format: NonBlank,
    /// Only the active branch (the whole tree when absent or false).
    pub(crate) active: Option<bool>,
}

/// `sessions.search {query, limit?}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SearchParams {
    /// The words to look for (all must match).
    pub(crate) query: NonBlank,
    /// Most hits (20 unless given, at most 200).
    pub(crate) limit: Option<usize>,
}

/// The session named by `key`, else `session_key`, else the main session of `agent_id`.
fn named_key(
    connection: &Connection,
    key: Option<&str>,
    session_key: Option<&str>,
    agent_id: Option<&str>,
) -> Result<String, MethodError> {
    match key {
        Some(key) if !key.trim().is_empty() => Ok(key.to_owned()),
        _ => session_key_for(&connection.caller, session_key, agent_id),
    }
}

impl TreeParams {
    fn key(&self, connection: &Connection) -> Result<String, MethodError> {
        named_key(connection, self.key.as_deref(), self.session_key.as_deref(), self.agent_id.as_deref())
    }
}

impl MoveParams {
    fn key(&self, connection: &Connection) -> Result<String, MethodError> {
        named_key(connection, self.key.as_deref(), self.session_key.as_deref(), self.agent_id.as_deref())
    }
}

impl ExportParams {
    fn key(&self, connection: &Connection) -> Result<String, MethodError> {
        named_key(connection, self.key.as_deref(), self.session_key.as_deref(), self.agent_id.as_deref())
    }
}

/// Why `sessions.search` can't run here: the gateway has no search index.
pub(crate) fn search_available(gateway: &crate::Gateway) -> Result<(), MethodError> {
    match gateway.services.session_search {
        Some(_) => Ok(()),
        None => Err(MethodError::new(ErrorCode::Unavailable, "session search is not available on this gateway")),
    }
}

/// Runs a request of the family.
pub(crate) async fn call(connection: &Connection, request: TreeRequest) -> Result<Value, MethodError> {
    match request {
        TreeRequest::Tree(params) => {
            let key = owned(connection, params.key(connection)?).await?;
            let tree =
                connection.gateway.runner.tree(&key).await.map_err(|error| tree_error(connection, &key, error))?;
            let leaf = tree.iter().find(|node| node.leaf).map(|node| node.id.clone());
            Ok(json!({"key": key, "leaf": leaf, "nodes": tree}))
        }
        TreeRequest::Fork(params) => {
            let key = owned(connection, params.key(connection)?).await?;
            let runner = &connection.gateway.runner;
            let entry = params.entry_id.as_str();
            match params.new_key.filter(|new_key| !new_key.trim().is_empty()) {
                Some(new_key) => {
                    super::sessions::session_key(Some(&new_key), None)?;
                    ownership(connection, &new_key).await?;
                    let leaf = runner
                        .fork_into(&key, entry, &new_key)
                        .await
                        .map_err(|error| tree_error(connection, &key, error))?;
                    Ok(json!({"ok": true, "key": new_key, "from": key, "leaf": leaf}))
                }
                None => {
                    let leaf = runner
                        .move_leaf(&key, entry, LeafMove::Fork)
                        .await
                        .map_err(|error| tree_error(connection, &key, error))?;
                    Ok(json!({"ok": true, "key": key, "leaf": leaf}))
                }
            }
        }
        TreeRequest::Switch(params) => {
            let key = owned(connection, params.key(connection)?).await?;
            let leaf = connection
                .gateway
                .runner
                .move_leaf(&key, params.entry_id.as_str(), LeafMove::Switch)
                .await
                .map_err(|error| tree_error(connection, &key, error))?;
            Ok(json!({"ok": true, "key": key, "leaf": leaf}))
        }
        TreeRequest::Export(params) => {
            let Some(format) = ExportFormat::parse(params.format.as_str()) else {
                return Err(MethodError::invalid("`format` must be \"html\" or \"md\""));
            };
            let key = owned(connection, params.key(connection)?).await?;
            let runner = &connection.gateway.runner;
            let session = runner.whole_session(&key).await.map_err(|error| tree_error(connection, &key, error))?;
            let scope = if params.active == Some(true) { ExportScope::ActiveBranch } else { ExportScope::WholeTree };
            let document = export(&session, format, scope, runner.agent().leak_scanner());
            let format = match format {
                ExportFormat::Html => "html",
                ExportFormat::Markdown => "md",
            };
            Ok(json!({"key": key, "format": format, "text": document.text, "redactions": document.redactions}))
        }
        TreeRequest::Search(params) => {
            search_available(&connection.gateway)?;
            let Some(search) = &connection.gateway.services.session_search else { return Ok(json!({"hits": []})) };
            let scope = match connection.caller.person() {
                Some(actor) => SearchScope::Context(&actor.context),
                None => SearchScope::Everything,
            };
            let limit = params.limit.unwrap_or(20).clamp(1, MAX_HITS);
            let hits = search.search_boxed(params.query.as_str(), scope, limit).await.map_err(|error| match error {
                SearchError::EmptyQuery => MethodError::invalid(error.to_string()),
                SearchError::Index(_) => MethodError::internal(error),
            })?;
            Ok(json!({"hits": hits}))
        }
    }
}

/// `key`, refused as [`not_yours`] when it is not the caller's.
async fn owned(connection: &Connection, key: String) -> Result<String, MethodError> {
    ownership(connection, &key).await?;
    Ok(key)
}

fn tree_error(connection: &Connection, key: &str, error: TreeError) -> MethodError {
    match error {
        TreeError::UnknownSession(_) if connection.caller.person().is_some() => not_yours(key),
        TreeError::UnknownSession(_) => MethodError::new(ErrorCode::NotFound, format!("no session {key:?}"))
            .with_details(json!({"code": "NOT_FOUND"})),
        TreeError::Branch(BranchError::UnknownEntry { entry, .. }) => {
            MethodError::new(ErrorCode::NotFound, format!("no entry {entry:?} in session {key:?}"))
                .with_details(json!({"code": "NOT_FOUND"}))
        }
        TreeError::Branch(BranchError::Store(StoreError::AlreadyExists { key })) => {
            MethodError::new(ErrorCode::Conflict, format!("session {key:?} already exists"))
        }
        TreeError::Branch(BranchError::Store(StoreError::InvalidKey { key, reason })) => {
            MethodError::invalid(format!("can't use session key {key:?}: {reason}"))
        }
        error @ (TreeError::Branch(_) | TreeError::Agent(_)) => MethodError::internal(error),
    }
}
