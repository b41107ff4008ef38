//! `memory_save`: stores one long-term memory, merging it into a near-identical one.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::leaks::LeakScanner;
use squidbot_core::memory::{Memories, SaveOutcome};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use squidbot_types::memory::{DEFAULT_IMPORTANCE, MemoryType, NewMemory};

use super::{refusal, without_secrets};
use crate::{parse, schema};

/// Seconds in a day, for `ttl_days`.
const DAY_SECONDS: f64 = 86_400.0;

/// Save a long-term memory for future conversations.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemorySaveArguments {
    /// One self-contained statement.
    pub content: String,
    /// fact (default), preference, decision, identity, event, observation, todo.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// 0-1, default 0.5.
    pub importance: Option<f64>,
    /// Labels.
    pub tags: Option<Vec<String>>,
    /// Forget after N days.
    pub ttl_days: Option<f64>,
}

/// The `memory_save` tool.
#[derive(Debug, Clone)]
pub struct MemorySaveTool {
    memories: Memories,
    /// Secrets found in what is saved are redacted first.
    leaks: LeakScanner,
}

impl MemorySaveTool {
    /// A `memory_save` tool saving through `memories`.
    pub fn new(memories: Memories) -> Self {
        Self { memories, leaks: LeakScanner::default() }
    }

    /// The same tool redacting the secrets `leaks` knows from what it saves.
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> Self {
        self.leaks = leaks;
        self
    }

    async fn save(&self, arguments: MemorySaveArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let refuse = |reason: String| ToolError::RespondToModel(format!("can't save the memory: {reason}"));
        let kind = match arguments.kind.as_deref().map(str::trim).filter(|kind| !kind.is_empty()) {
            None => MemoryType::Fact,
            Some(name) => MemoryType::parse(name).ok_or_else(|| {
                let valid: Vec<&str> = MemoryType::ALL.iter().map(|kind| kind.as_str()).collect();
                refuse(format!("unknown type {name:?}; use one of {}", valid.join(", ")))
            })?,
        };
        let importance = arguments.importance.unwrap_or(f64::from(DEFAULT_IMPORTANCE));
        if !(0.0..=1.0).contains(&importance) {
            return Err(refuse(format!("importance {importance} is outside 0..1")));
        }
        let expires_at = match arguments.ttl_days {
            None => None,
            Some(days) if days > 0.0 && days.is_finite() => {
                Some(self.memories.now().saturating_add((days * DAY_SECONDS).round() as i64))
            }
            Some(days) => return Err(refuse(format!("ttl_days {days} is not a positive number of days"))),
        };
        let mut tags: Vec<String> = Vec::new();
        for tag in arguments.tags.unwrap_or_default() {
            let tag = tag.trim();
            if !tag.is_empty() && !tags.iter().any(|existing| existing == tag) {
                tags.push(tag.to_owned());
            }
        }
        let (content, redacted) = without_secrets(&self.leaks, arguments.content);
        let memory = NewMemory {
            context: context.context.clone(),
            kind,
            content,
            importance: importance as f32,
            tags,
            source: "tool".to_owned(),
            expires_at,
            links: Vec::new(),
        };
        let message = match self.memories.save(memory).await.map_err(refusal)? {
            SaveOutcome::Created(id) => format!("saved memory #{id} ({})", kind.as_str()),
            SaveOutcome::Updated(id) => format!("updated memory #{id} (it said nearly the same)"),
        };
        Ok(ToolOutput::text(format!("{message}{}", redacted.unwrap_or_default())))
    }
}

impl Tool for MemorySaveTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<MemorySaveArguments>("memory_save")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.save(parse(arguments)?, context).await
    }
}
