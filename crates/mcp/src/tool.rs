//! One MCP tool as a squidbot [`Tool`]: the namespaced spec, calls forwarded to its server.

use std::sync::Arc;

use squidbot_core::leaks::LeakScanner;
use squidbot_core::tool::{Tool, ToolContext, ToolError, ToolOutput};
use squidbot_types::ToolSpec;

use crate::error::McpError;
use crate::listing::RemoteTool;
use crate::server::Server;
use crate::settings::Transport;

/// A tool offered by an MCP server.
pub struct McpTool {
    server: Arc<Server>,
    tool: RemoteTool,
    /// Finds secrets in the arguments of calls that would leave for an HTTP server.
    leaks: LeakScanner,
}

impl McpTool {
    /// The tool `tool` of `server`.
    pub(crate) fn new(server: Arc<Server>, tool: RemoteTool, leaks: LeakScanner) -> Self {
        Self { server, tool, leaks }
    }

    /// Refuses arguments carrying a secret when the server is reached over HTTP (a stdio
    /// server runs here and gets them locally, as the other local tools do).
    fn refuse_secrets(&self, arguments: &serde_json::Value) -> Result<(), McpError> {
        let settings = self.server.settings();
        match &settings.transport {
            Transport::Stdio { .. } => Ok(()),
            Transport::Http { .. } => match first_secret(&self.leaks, arguments) {
                Some(kind) => Err(McpError::SecretInArguments { server: settings.name.clone(), kind }),
                None => Ok(()),
            },
        }
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
        self.refuse_secrets(&arguments)?;
        let output = self.server.call(&self.tool.remote_name, arguments, &context.cancel).await?;
        Ok(ToolOutput::text(output))
    }
}

/// The kind of the first secret in any key or string of `value`.
fn first_secret(leaks: &LeakScanner, value: &serde_json::Value) -> Option<&'static str> {
    let scan = |text: &str| leaks.scan(text).first().map(|finding| finding.kind);
    match value {
        serde_json::Value::String(text) => scan(text),
        serde_json::Value::Array(items) => items.iter().find_map(|item| first_secret(leaks, item)),
        serde_json::Value::Object(fields) => {
            fields.iter().find_map(|(key, field)| scan(key).or_else(|| first_secret(leaks, field)))
        }
        serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => None,
    }
}
