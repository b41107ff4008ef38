//! `memory.*`: long-term memories and memory.md for protocol clients and the web UI's
//! Memory panel: the owner's for the owner's clients, a person's own for theirs (changed
//! only when their role may change memory).

use std::sync::Arc;

use serde::Deserialize;
use serde::de;
use serde_json::{Value, json};
use squidbot_core::memory::{DocumentEdit, ListFilter, Memories, MemoryDocuments, SaveOutcome, apply_edit};
use squidbot_types::memory::{DEFAULT_IMPORTANCE, Memory, MemoryType, NewMemory};

use super::frame::{ErrorCode, MethodError};
use super::params::{Count, Fraction, NonBlank};
use crate::Gateway;
use crate::people::Caller;

/// A `memory.*` request.
#[derive(Debug)]
pub(crate) enum MemoryRequest {
    /// `memory.list`.
    List(MemoryListParams),
    /// `memory.save`.
    Save(MemorySaveParams),
    /// `memory.delete`.
    Delete(MemoryDeleteParams),
    /// `memory.doc.get`.
    DocumentGet,
    /// `memory.doc.set`.
    DocumentSet(MemoryTextParams),
}

/// `memory.list` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MemoryListParams {
    /// At most this many (1 to 500, 50 by default).
    pub(crate) limit: Option<Count>,
    /// Memories recalled for this text; the newest ones when absent or blank.
    pub(crate) query: Option<String>,
}

/// `memory.save` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MemorySaveParams {
    /// What to remember.
    pub(crate) content: NonBlank,
    /// `fact`, `preference`, ... (`fact` by default).
    #[serde(rename = "type")]
    pub(crate) kind: Option<String>,
    /// From 0 to 1.
    pub(crate) importance: Option<Fraction>,
}

/// `memory.delete` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MemoryDeleteParams {
    /// The memory's id.
    pub(crate) id: MemoryId,
}

/// `memory.doc.set` params.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct MemoryTextParams {
    /// memory.md's new text (may be empty).
    pub(crate) text: String,
}

/// A memory's id: an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MemoryId(pub(crate) i64);

impl<'de> Deserialize<'de> for MemoryId {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Option::<i64>::deserialize(deserializer)
            .ok()
            .flatten()
            .map(Self)
            .ok_or_else(|| de::Error::custom("must be a memory id"))
    }
}

/// The gateway's long-term memory, or why there is none.
pub(super) fn memories(gateway: &Gateway) -> Result<&Arc<Memories>, MethodError> {
    gateway
        .services
        .memories
        .as_ref()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "long-term memory is not enabled on this gateway"))
}

/// The gateway's memory.md, or why there is none.
pub(super) fn documents(gateway: &Gateway) -> Result<&Arc<dyn MemoryDocuments>, MethodError> {
    gateway
        .services
        .documents
        .as_ref()
        .ok_or_else(|| MethodError::new(ErrorCode::Unavailable, "memory.md is not enabled on this gateway"))
}

/// Runs a `memory.*` request for `caller`.
pub(super) async fn call(gateway: &Gateway, caller: &Caller, request: MemoryRequest) -> Result<Value, MethodError> {
    let context = match caller.person() {
        Some(actor) => actor.context.as_str(),
        None => gateway.services.memory_context.as_str(),
    };
    let changes = match &request {
        MemoryRequest::List(_) | MemoryRequest::DocumentGet => false,
        MemoryRequest::Save(_) | MemoryRequest::Delete(_) | MemoryRequest::DocumentSet(_) => true,
    };
    if changes
        && let (Some(actor), Some(people)) = (caller.person(), gateway.people())
        && !people.policy(actor).memory
    {
        return Err(MethodError::new(
            ErrorCode::Forbidden,
            format!("your role ({}) may not change long-term memory", actor.role),
        ));
    }
    match request {
        MemoryRequest::List(params) => list(gateway, context, params).await,
        MemoryRequest::Save(params) => save(gateway, context, params).await,
        MemoryRequest::Delete(params) => delete(gateway, context, params).await,
        MemoryRequest::DocumentGet => document_get(gateway, context),
        MemoryRequest::DocumentSet(params) => document_set(gateway, context, params),
    }
}

fn memory_json(memory: &Memory) -> Value {
    json!({
        "id": memory.id, "type": memory.kind.as_str(), "content": memory.content, "importance": memory.importance,
        "tags": memory.tags, "source": memory.source, "created_at": memory.created_at,
        "updated_at": memory.updated_at, "expires_at": memory.expires_at,
    })
}

async fn list(gateway: &Gateway, context: &str, params: MemoryListParams) -> Result<Value, MethodError> {
    let memories = memories(gateway)?;
    let limit = params.limit.map_or(50, |limit| limit.0).clamp(1, 500) as usize;
    let list = match params.query.filter(|query| !query.trim().is_empty()) {
        Some(query) => memories
            .recall(context, &query, limit, &[])
            .await
            .map_err(MethodError::internal)?
            .hits
            .into_iter()
            .map(|hit| hit.memory)
            .collect(),
        None => memories
            .list(context, ListFilter { limit, ..ListFilter::default() })
            .await
            .map_err(MethodError::internal)?,
    };
    Ok(json!({"memories": list.iter().map(memory_json).collect::<Vec<_>>()}))
}

async fn save(gateway: &Gateway, context: &str, params: MemorySaveParams) -> Result<Value, MethodError> {
    let memories = memories(gateway)?;
    let kind = match params.kind {
        None => MemoryType::Fact,
        Some(name) => {
            MemoryType::parse(&name).ok_or_else(|| MethodError::invalid(format!("unknown memory type {name:?}")))?
        }
    };
    let memory = NewMemory {
        context: context.to_owned(),
        kind,
        content: params.content.0,
        importance: params.importance.map_or(DEFAULT_IMPORTANCE, |importance| importance.0 as f32),
        tags: Vec::new(),
        source: "ui".into(),
        expires_at: None,
        links: Vec::new(),
    };
    let outcome = memories.save(memory).await.map_err(|error| MethodError::invalid(error.to_string()))?;
    Ok(json!({"id": outcome.id(), "created": matches!(outcome, SaveOutcome::Created(_))}))
}

async fn delete(gateway: &Gateway, context: &str, params: MemoryDeleteParams) -> Result<Value, MethodError> {
    let memories = memories(gateway)?;
    memories.delete(context, params.id.0).await.map_err(|error| MethodError::invalid(error.to_string()))?;
    Ok(json!({"ok": true}))
}

fn document_get(gateway: &Gateway, context: &str) -> Result<Value, MethodError> {
    let documents = documents(gateway)?;
    let text = documents.read(context).map_err(MethodError::internal)?.unwrap_or_default();
    Ok(json!({"text": text, "location": documents.location(context), "cap": gateway.services.document_cap}))
}

fn document_set(gateway: &Gateway, context: &str, params: MemoryTextParams) -> Result<Value, MethodError> {
    let documents = documents(gateway)?;
    let cap = gateway.services.document_cap;
    let edit = DocumentEdit { content: params.text, append: false, section: None };
    let document = apply_edit("", &edit);
    if document.chars().count() > cap {
        return Err(MethodError::invalid(format!(
            "memory.md would be {} characters; the limit is {cap}",
            document.chars().count()
        )));
    }
    documents.write(context, &document).map_err(MethodError::internal)?;
    Ok(json!({"ok": true, "chars": document.chars().count()}))
}
