//! Lines of a tree-structured session file (`sessions/<key>.jsonl`).
//!
//! The first line is a [`SessionHeader`]; every later line is a [`SessionEntry`] whose
//! `parent` points at an earlier entry (or is `null` for a root), so one file can hold
//! several branches of the same conversation.

use serde::{Deserialize, Serialize};

use crate::message::{ImageRef, Usage};

/// Version written into new session headers.
pub const SESSION_FORMAT_VERSION: u32 = 1;

/// First line of every session file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Always `"header"`; lets readers tell the header from entries.
    #[serde(rename = "type")]
    pub kind: HeaderTag,
    /// File format version.
    pub version: u32,
    /// Unique id of this session.
    pub id: String,
    /// Session key such as `cli:local` or `telegram:12345`.
    pub key: String,
    /// Context (user or group) the session belongs to.
    pub context: String,
    /// Creation time, RFC 3339.
    pub created: String,
}

/// The literal tag of a header line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HeaderTag {
    /// `"type": "header"`.
    Header,
}

/// A line that moves the active leaf without adding an entry: a branch switch or a fork
/// made before the next message (`"type": "leaf"`). On reading, the active leaf is what
/// the last line says: the last entry written, or a later leaf line's target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeafLine {
    /// Always `"leaf"`.
    #[serde(rename = "type")]
    pub kind: LeafTag,
    /// The entry the next one follows; `None` starts a new root (a fresh conversation).
    pub leaf: Option<String>,
    /// When the leaf moved, RFC 3339.
    pub timestamp: String,
}

/// The literal tag of a leaf line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeafTag {
    /// `"type": "leaf"`.
    Leaf,
}

/// One entry of the session tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionEntry {
    /// Unique id within the session.
    pub id: String,
    /// The entry this one follows, `None` for a root.
    pub parent: Option<String>,
    /// When it was written, RFC 3339.
    pub timestamp: String,
    /// What the entry records.
    #[serde(flatten)]
    pub body: EntryBody,
}

/// Who wrote a message entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageRole {
    /// The person.
    User,
    /// The model.
    Assistant,
}

/// The payload of a session entry, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryBody {
    /// A user or assistant message.
    Message {
        /// Who wrote it.
        role: MessageRole,
        /// The text.
        content: String,
        /// Images sent with a user message.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        images: Vec<ImageRef>,
        /// `provider/model` that produced an assistant message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// Tokens used to produce an assistant message.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
        /// True when the turn was cancelled or failed while this message was produced.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        interrupted: bool,
    },
    /// A tool call the model made (its parent is the assistant message or an earlier call).
    ToolCall {
        /// Provider id of the call.
        call_id: String,
        /// Tool name.
        name: String,
        /// Raw argument JSON text.
        arguments: String,
    },
    /// The result given back to the model for one call.
    ToolResult {
        /// The call this answers.
        call_id: String,
        /// Tool name.
        name: String,
        /// Output or error text.
        content: String,
        /// True when the tool failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
    /// Older turns were condensed: history starts with `summary`, then `first_kept` and
    /// everything after it on the branch.
    Compaction {
        /// What the condensed turns said (empty for a bare truncation).
        summary: String,
        /// Id of the first entry still sent to the model (always a user message).
        first_kept: String,
        /// Messages condensed or dropped.
        condensed: usize,
        /// `summary`, `aggressive` or `truncation` (no model call).
        method: String,
    },
    /// A background sub-agent finished after the turn that started it; its result joins
    /// the conversation as this distinct entry (the model sees it as a note in the user's
    /// place). The sub-agent's own transcript is the session named by `session`.
    Delegate {
        /// The worker's id.
        worker: String,
        /// Its role (`researcher`).
        agent: String,
        /// The task it was given.
        task: String,
        /// How it ended: `done`, `failed` or `cancelled`.
        status: String,
        /// Its result, or why it failed.
        result: String,
        /// Key of the worker's own session.
        session: String,
    },
    /// The model used for the session changed.
    ModelChange {
        /// Model before the change.
        previous: String,
        /// Model after the change.
        new: String,
    },
}

impl EntryBody {
    /// Short name of the entry type as written in the file.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Message { .. } => "message",
            Self::ToolCall { .. } => "tool_call",
            Self::ToolResult { .. } => "tool_result",
            Self::Compaction { .. } => "compaction",
            Self::Delegate { .. } => "delegate",
            Self::ModelChange { .. } => "model_change",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_round_trips_with_flat_type_tag() {
        let entry = SessionEntry {
            id: "a1".into(),
            parent: None,
            timestamp: "2026-11-21T10:00:00Z".into(),
            body: EntryBody::ToolCall {
                call_id: "call_1".into(),
                name: "read_file".into(),
                arguments: "{\"path\":\"x\"}".into(),
            },
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert!(line.contains("\"type\":\"tool_call\""), "{line}");
        let back: SessionEntry = serde_json::from_str(&line).unwrap();
        assert_eq!(back, entry);
    }
}
