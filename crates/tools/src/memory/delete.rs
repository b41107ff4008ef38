//! `memory_delete`: forgets one memory of the current context.

use schemars::JsonSchema;
use serde::Deserialize;
use squidbot_core::memory::{Memories, MemoryError};
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use super::refusal;
use crate::{parse, schema};

/// Forget a wrong or obsolete memory.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct MemoryDeleteArguments {
    /// Id from memory_recall.
    pub id: i64,
}

/// The `memory_delete` tool.
#[derive(Debug, Clone)]
pub struct MemoryDeleteTool {
    memories: Memories,
}

impl MemoryDeleteTool {
    /// A `memory_delete` tool deleting through `memories`.
    pub fn new(memories: Memories) -> Self {
        Self { memories }
    }

    async fn delete(&self, arguments: MemoryDeleteArguments, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = arguments.id;
        match self.memories.delete(&context.context, id).await {
            Ok(()) => Ok(ToolOutput::text(format!("deleted memory #{id}"))),
            Err(MemoryError::NotFound { .. }) => Err(ToolError::RespondToModel(format!(
                "can't delete memory #{id}: there is no such memory; use memory_recall to find ids"
            ))),
            Err(error) => Err(refusal(error)),
        }
    }
}

impl Tool for MemoryDeleteTool {
    fn spec(&self) -> ToolSpec {
        schema::spec_for::<MemoryDeleteArguments>("memory_delete")
    }

    fn mutates(&self) -> bool {
        true
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        self.delete(parse(arguments)?, context).await
    }
}
