//! Memory tools: saving, recalling and deleting long-term memories, and editing the
//! context's memory.md. Every call is scoped by the context of its `ToolContext`.

mod delete;
mod recall;
mod save;
mod write;

use std::sync::Arc;

use squidbot_core::leaks::LeakScanner;
use squidbot_core::memory::{Memories, MemoryDocuments, MemoryError};
use squidbot_core::tool::{DynTool, ToolError};

pub use delete::{MemoryDeleteArguments, MemoryDeleteTool};
pub use recall::{MemoryRecallArguments, MemoryRecallTool};
pub use save::{MemorySaveArguments, MemorySaveTool};
pub use write::{MemoryWriteArguments, MemoryWriteTool};

/// The four memory tools (`memory_save`, `memory_recall`, `memory_delete`, `memory_write`).
/// `document_cap` is the largest memory.md, in characters, `memory_write` may leave
/// (usually `memory.document_cap`, default [`squidbot_core::memory::DOCUMENT_CAP`]).
pub fn memory_tools(
    memories: Memories,
    documents: Arc<dyn MemoryDocuments>,
    document_cap: usize,
    leaks: LeakScanner,
) -> Vec<Arc<dyn DynTool>> {
    vec![
        Arc::new(MemorySaveTool::new(memories.clone()).with_leak_scanner(leaks.clone())),
        Arc::new(MemoryRecallTool::new(memories.clone())),
        Arc::new(MemoryDeleteTool::new(memories)),
        Arc::new(MemoryWriteTool::new(documents, document_cap).with_leak_scanner(leaks)),
    ]
}

/// `text` with the secrets `leaks` finds replaced, and a note for the model when there
/// were any: what memory keeps is read back into prompts and listed by the CLI, so a
/// secret is never stored in it.
fn without_secrets(leaks: &LeakScanner, text: String) -> (String, Option<String>) {
    let (redacted, findings) = leaks.redact(&text);
    if findings.is_empty() {
        return (text, None);
    }
    tracing::warn!(count = findings.len(), "redacted secrets from what the model asked memory to keep");
    (redacted, Some(format!(" ({} secret(s) were redacted before it was stored)", findings.len())))
}

/// A memory failure as the model sees it. Store failures are told to the model too: a
/// broken memory database should cost the turn its memory, not the whole answer.
fn refusal(error: MemoryError) -> ToolError {
    if let MemoryError::Store { .. } = error {
        tracing::warn!(%error, "memory tool failed");
    }
    ToolError::RespondToModel(error.to_string())
}
