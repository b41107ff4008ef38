//! One MCP tool as a squidbot [`Tool`]: the namespaced spec, calls forwarded to its server.

use std::sync::Arc;

use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::listing::RemoteTool;
use crate::server::Server;

/// A tool offered by an MCP server.
pub struct McpTool {
    server: Arc<Server>,
    tool: RemoteTool,
}

impl McpTool {
    /// The tool `tool` of `server`.
    pub(crate) fn new(server: Arc<Server>, tool: RemoteTool) -> Self {
        Self { server, tool }
    }

    /// The server's own name for the tool (without the `server__` prefix).
    pub fn remote_name(&self) -> &str {
        &self.tool.remote_name
    }
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("McpTool").field("name", &self.tool.spec.name).finish()
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.tool.spec.clone()
    }

    fn mutates(&self) -> bool {
        self.tool.mutates
    }

    async fn call(&self, arguments: serde_json::Value, context: &ToolContext) -> Result<ToolOutput, ToolError> {
        let output = self.server.call(&self.tool.remote_name, arguments, &context.cancel).await?;
        Ok(ToolOutput::text(output))
    }
}
