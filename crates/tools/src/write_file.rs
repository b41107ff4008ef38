//! `write_file`: creates or replaces a file atomically, making parent directories.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::atomic::write_atomically;
use crate::path_guard::PathGuard;
use crate::{io_refusal, join_failure, parse, schema};

/// Create or overwrite a file (parent directories are created).
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArguments {
    /// File path.
    pub path: String,
    /// Full new content.
    pub content: String,
}

/// The `write_file` tool.
#[derive(Debug, Clone)]
pub struct WriteFileTool {
    guard: PathGuard,
}

impl WriteFileTool {
    /// A `write_file` tool resolving paths through `guard`.
    pub fn new(guard: PathGuard) -> Self {
        Self { guard }
    }

    async fn write(&self, arguments: WriteFileArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let shown = arguments.path;
        let path = self.guard.resolve(&shown, &context.workspace, "write")?;
        if tokio::fs::metadata(&path).await.is_ok_and(|metadata| metadata.is_dir()) {
            return Err(ToolError::RespondToModel(format!("can't write {shown}: it is a directory")));
        }
        let bytes = arguments.content.len();
        let target = path.clone();
        tokio::task::spawn_blocking(move || write_atomically(&target, arguments.content.as_bytes()))
            .await
            .map_err(|error| join_failure("write a file", &error))?
            .map_err(|error| io_refusal("write", &shown, &error))?;
        Ok(ToolOutput::text(format!("wrote {bytes} bytes to {shown}")))
    }
}

impl Tool for WriteFileTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<WriteFileArguments>("write_file")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.write(parse(arguments)?, context).await
    }
}
