//! `memory_write`: edits the context's memory.md, whole or one `## section`, within a cap.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::leaks::LeakScanner;
use squidbot_core::memory::{DocumentEdit, MemoryDocuments, apply_edit};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use super::{refusal, without_secrets};
use crate::{join_failure, parse, schema};

/// Edit memory.md, your always-visible notes.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryWriteArguments {
    /// Markdown text.
    pub content: String,
    /// replace (default) or append.
    pub mode: Option<String>,
    /// ## heading to edit (made if missing); omit for the whole file.
    pub section: Option<String>,
}

/// The `memory_write` tool.
#[derive(Clone)]
pub struct MemoryWriteTool {
    documents: Arc<dyn MemoryDocuments>,
    cap: usize,
    /// Secrets found in what is written are redacted first.
    leaks: LeakScanner,
}

impl std::fmt::Debug for MemoryWriteTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("MemoryWriteTool").field("cap", &self.cap).finish_non_exhaustive()
    }
}

/// What one edit came to.
enum Written {
    /// The document now has this many characters.
    Saved { after: usize },
    /// The edit would pass the cap; nothing was written.
    TooLarge { before: usize, after: usize },
}

impl MemoryWriteTool {
    /// A `memory_write` tool editing `documents`, refusing to let one pass `cap` characters.
    pub fn new(documents: Arc<dyn MemoryDocuments>, cap: usize) -> Self {
        Self { documents, cap, leaks: LeakScanner::default() }
    }

    /// The same tool redacting the secrets `leaks` knows from what it writes.
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> Self {
        self.leaks = leaks;
        self
    }

    async fn write(&self, arguments: MemoryWriteArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let refuse = |reason: String| ToolError::RespondToModel(format!("can't write memory.md: {reason}"));
        let append = match arguments.mode.as_deref().map(str::trim) {
            None | Some("") => false,
            Some(mode) if mode.eq_ignore_ascii_case("replace") => false,
            Some(mode) if mode.eq_ignore_ascii_case("append") => true,
            Some(mode) => return Err(refuse(format!("mode {mode:?} is neither replace nor append"))),
        };
        if append && arguments.content.trim().is_empty() {
            return Err(refuse("the content is empty, so there is nothing to append".to_owned()));
        }
        let section = arguments.section.filter(|section| !section.trim().trim_start_matches('#').trim().is_empty());
        let shown_section = section.as_deref().map(|section| section.trim().trim_start_matches('#').trim().to_owned());
        let (content, redacted) = without_secrets(&self.leaks, arguments.content);
        let edit = DocumentEdit { content, append, section };
        let documents = Arc::clone(&self.documents);
        let scope = context.context.clone();
        let cap = self.cap;
        let written = tokio::task::spawn_blocking(move || {
            let current = documents.read(&scope)?.unwrap_or_default();
            let updated = apply_edit(&current, &edit);
            let (before, after) = (current.chars().count(), updated.chars().count());
            if after > cap {
                return Ok(Written::TooLarge { before, after });
            }
            documents.write(&scope, &updated)?;
            Ok(Written::Saved { after })
        })
        .await
        .map_err(|error| join_failure("write memory.md", &error))?
        .map_err(refusal)?;
        match written {
            Written::Saved { after } => {
                let place = shown_section.map(|section| format!(" (section {section})")).unwrap_or_default();
                let redacted = redacted.unwrap_or_default();
                Ok(ToolOutput::text(format!("updated memory.md{place}: now {after} of {cap} characters{redacted}")))
            }
            Written::TooLarge { before, after } => Err(refuse(format!(
                "the result would be {after} characters, over the cap of {cap} (it is {before} now); nothing was written. Condense it: rewrite the document or a section shorter with mode replace"
            ))),
        }
    }
}

impl Tool for MemoryWriteTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<MemoryWriteArguments>("memory_write")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.write(parse(arguments)?, context).await
    }
}
