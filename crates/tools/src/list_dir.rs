//! `list_dir`: a directory's entries, sorted, directories marked with `/`, files with sizes.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::path_guard::PathGuard;
use crate::{io_refusal, parse, schema};

/// Entries listed at most; the note says how many more there are.
pub const MAX_ENTRIES: usize = 1000;

/// List a directory.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirArguments {
    /// Directory (default: workspace).
    pub path: Option<String>,
}

/// The `list_dir` tool.
#[derive(Debug, Clone)]
pub struct ListDirTool {
    guard: PathGuard,
}

impl ListDirTool {
    /// A `list_dir` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn list(&self, arguments: ListDirArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let shown = arguments.path.as_deref().unwrap_or(".");
        let path = self.guard.resolve_for_reading(shown, &context.workspace, "list")?;
        let metadata = tokio::fs::metadata(&path).await.map_err(|error| io_refusal("list", shown, &error))?;
        if !metadata.is_dir() {
            return Err(ToolError::RespondToModel(format!("can't list {shown}: it is a file; use read_file")));
        }
        let mut reader = tokio::fs::read_dir(&path).await.map_err(|error| io_refusal("list", shown, &error))?;
        let mut entries = Vec::new();
        while let Some(entry) = reader.next_entry().await.map_err(|error| io_refusal("list", shown, &error))? {
            entries.push(describe(&entry).await);
        }
        if entries.is_empty() {
            return Ok(ToolOutput::text("(empty directory)"));
        }
        entries.sort();
        let total = entries.len();
        let mut output: String = entries.into_iter().take(MAX_ENTRIES).map(|(_, line)| line + "\n").collect();
        if total > MAX_ENTRIES {
            output.push_str(&format!(
                "[{} more entries not shown; use find or grep to narrow down]",
                total - MAX_ENTRIES
            ));
        }
        Ok(ToolOutput::text(output))
    }
}

/// The sort key (the name) and the line shown for one entry.
async fn describe(entry: &tokio::fs::DirEntry) -> (String, String) {
    let name = entry.file_name().to_string_lossy().into_owned();
    let line = match entry.metadata().await {
        Ok(metadata) if metadata.is_dir() => format!("{name}/"),
        Ok(metadata) if metadata.is_symlink() => match tokio::fs::read_link(entry.path()).await {
            Ok(target) => format!("{name} -> {}", target.display()),
            Err(_) => format!("{name} -> ?"),
        },
        Ok(metadata) => format!("{name} ({} bytes)", metadata.len()),
        Err(_) => name.clone(),
    };
    (name, line)
}

impl Tool for ListDirTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<ListDirArguments>("list_dir")
    }

    fn mutates(&self) -> bool {
        false
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.list(parse(arguments)?, context).await
    }
}
