//! `memory_recall`: searches the context's memories and lists the best matches compactly.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::memory::{Memories, Recall, RecallMode};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;
use squidbot_types::memory::Memory;

use super::refusal;
use crate::{parse, schema};

/// Results when the model names no limit.
const DEFAULT_LIMIT: u64 = 8;

/// Most results one call returns.
const MAX_LIMIT: u64 = 50;

/// Characters of one memory shown; longer ones end in `…`.
const CONTENT_LIMIT: usize = 400;

/// Search long-term memories.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryRecallArguments {
    /// What to look for.
    pub query: String,
    /// Default 8, max 50.
    pub limit: Option<u64>,
}

/// The `memory_recall` tool.
#[derive(Debug, Clone)]
pub struct MemoryRecallTool {
    memories: Memories,
}

impl MemoryRecallTool {
    /// A `memory_recall` tool searching through `memories`.
    pub fn new(memories: Memories) -> Self {
        Self { memories }
    }

    async fn recall(&self, arguments: MemoryRecallArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = arguments.query.trim();
        if query.is_empty() {
            return Err(ToolError::RespondToModel("can't recall memories: the query is empty".to_owned()));
        }
        let limit = arguments.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let limit = usize::try_from(limit).unwrap_or(1);
        let recall = self.memories.recall(&context.context, query, limit, &[]).await.map_err(refusal)?;
        Ok(ToolOutput::text(render(&recall, self.memories.now())))
    }
}

impl Tool for MemoryRecallTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<MemoryRecallArguments>("memory_recall")
    }

    /// Recall only records access statistics, which nothing the model sees depends on.
    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.recall(parse(arguments)?, context).await
    }
}

/// One line per hit, after a note when only keywords were searched.
fn render(recall: &Recall, now: i64) -> String {
    let mut lines = Vec::with_capacity(recall.hits.len() + 1);
    match (&recall.warning, recall.mode) {
        (Some(warning), _) => lines.push(format!("[{warning}; keyword matches only]")),
        (None, RecallMode::FullTextOnly) => {
            lines.push(format!("[search: {} (no embedder configured)]", RecallMode::FullTextOnly.describe()));
        }
        (None, RecallMode::Hybrid) => {}
    }
    if recall.hits.is_empty() {
        lines.push("no memories match".to_owned());
    }
    lines.extend(recall.hits.iter().map(|hit| line(&hit.memory, now)));
    lines.join("\n")
}

/// `#12 [preference 0.8] User prefers dark mode · tags: ui · 3d ago`
fn line(memory: &Memory, now: i64) -> String {
    let mut content = memory.content.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = content.char_indices().nth(CONTENT_LIMIT) {
        content.truncate(cut);
        content.push('…');
    }
    let mut line = format!("#{} [{} {}] {content}", memory.id, memory.kind.as_str(), importance(memory.importance));
    if !memory.tags.is_empty() {
        line.push_str(&format!(" · tags: {}", memory.tags.join(", ")));
    }
    line.push_str(" · ");
    line.push_str(&age(now - memory.updated_at));
    line
}

/// `0.8`, `0.75`, `1`: at most two decimals, no trailing zeros.
fn importance(value: f32) -> String {
    let text = format!("{value:.2}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// How long ago, coarsely: `just now`, `5m ago`, `3h ago`, `12d ago`, `4mo ago`, `2y ago`.
fn age(seconds: i64) -> String {
    const MINUTE: i64 = 60;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;
    match seconds.max(0) {
        seconds if seconds < MINUTE => "just now".to_owned(),
        seconds if seconds < HOUR => format!("{}m ago", seconds / MINUTE),
        seconds if seconds < DAY => format!("{}h ago", seconds / HOUR),
        seconds if seconds < 60 * DAY => format!("{}d ago", seconds / DAY),
        seconds if seconds < 730 * DAY => format!("{}mo ago", seconds / (30 * DAY)),
        seconds => format!("{}y ago", seconds / (365 * DAY)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn importance_and_age_read_compactly() {
        assert_eq!(importance(0.8), "0.8");
        assert_eq!(importance(0.75), "0.75");
        assert_eq!(importance(1.0), "1");
        assert_eq!(importance(0.0), "0");
        assert_eq!(age(-5), "just now");
        assert_eq!(age(59), "just now");
        assert_eq!(age(5 * 60), "5m ago");
        assert_eq!(age(3 * 3600 + 10), "3h ago");
        assert_eq!(age(3 * 86_400), "3d ago");
        assert_eq!(age(120 * 86_400), "4mo ago");
        assert_eq!(age(800 * 86_400), "2y ago");
    }
}
