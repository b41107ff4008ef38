//! squidbot's MCP client: servers from `[mcp.servers.<name>]`, reached over stdio or
//! streamable HTTP through the official `rmcp` SDK, their tools offered to the model as
//! `<server>__<tool>`.
//!
//! Servers start lazily. [`McpManager`] is a [`ToolSource`]: the agent's tool registry
//! holds it and asks it for tools at the start of each turn, so building an agent or a
//! gateway spawns nothing; the first turn starts every enabled server (concurrently, each
//! within its `startup_timeout_secs`) and later turns reuse the connections. A crashed
//! server waits out an exponential backoff (1 s doubling to 60 s, with jitter) and starts
//! again on the first use after that; calls in between fail at once with a clear message.

mod backoff;
mod connect;
mod content;
pub mod environment;
mod error;
mod listing;
mod server;
mod settings;
mod tool;

use std::sync::Arc;

use squidbot_core::leaks::LeakScanner;
use squidbot_core::tool::{DynTool, ToolSource};
use squidbot_types::config::McpConfig;

pub use backoff::Backoff;
pub use content::MAX_RESULT_BYTES;
pub use error::McpError;
pub use listing::{MAX_DESCRIPTION_CHARS, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_SERVER};
pub use server::ServerState;
pub use settings::{McpConfigIssue, ServerSettings, Transport, check, is_valid_server_name};
pub use tool::McpTool;

use server::Server;

/// Every configured MCP server, as one source of tools.
pub struct McpManager {
    servers: Vec<Arc<Server>>,
    /// Secrets the arguments of a call to an HTTP server may not carry.
    leaks: LeakScanner,
}

impl std::fmt::Debug for McpManager {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.servers.iter().map(|server| &server.settings().name)).finish()
    }
}

/// One server as `squidbot status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSummary {
    /// Name from the configuration.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// Command line or URL.
    pub target: String,
    /// False when `enabled = false`.
    pub enabled: bool,
    /// Where it is in its life.
    pub state: ServerState,
}

impl McpManager {
    /// Checks `[mcp]` and prepares every server without starting any.
    pub fn from_config(config: &McpConfig) -> Result<Self, Vec<McpConfigIssue>> {
        Ok(Self::new(check(config)?, Backoff::default()))
    }

    /// A manager for already checked servers with a chosen restart backoff.
    pub fn new(servers: Vec<ServerSettings>, backoff: Backoff) -> Self {
        Self {
            servers: servers.into_iter().map(|settings| Arc::new(Server::new(settings, backoff))).collect(),
            leaks: LeakScanner::default(),
        }
    }

    /// Refuses calls to HTTP servers whose arguments carry one of these configured secrets
    /// (key shapes are refused without it), and starts stdio servers without an inherited
    /// variable that carries one. Called before any server started.
    pub fn with_leak_scanner(mut self, leaks: LeakScanner) -> Self {
        self.servers = self.servers.iter().map(|server| Arc::new(server.withholding(leaks.clone()))).collect();
        self.leaks = leaks;
        self
    }

    /// True when no server is enabled.
    pub fn is_empty(&self) -> bool {
        !self.servers.iter().any(|server| server.settings().enabled)
    }

    /// Starts every enabled server that is due and returns all their tools: what the agent
    /// gets at the start of a turn.
    pub async fn connect_all(&self) -> Vec<Arc<dyn DynTool>> {
        let listed = futures_util::future::join_all(self.servers.iter().map(|server| async move {
            server
                .tools()
                .await
                .into_iter()
                .map(|tool| Arc::new(McpTool::new(server.clone(), tool, self.leaks.clone())) as Arc<dyn DynTool>)
        }))
        .await;
        listed.into_iter().flatten().collect()
    }

    /// Every configured server and its state; starts nothing.
    pub fn summaries(&self) -> Vec<ServerSummary> {
        self.servers
            .iter()
            .map(|server| {
                let settings = server.settings();
                ServerSummary {
                    name: settings.name.clone(),
                    transport: settings.transport.kind(),
                    target: settings.transport.target(),
                    enabled: settings.enabled,
                    state: server.state(),
                }
            })
            .collect()
    }

    /// Closes every connection; servers start again on their next use.
    pub async fn shutdown(&self) {
        futures_util::future::join_all(self.servers.iter().map(|server| server.shutdown())).await;
    }
}

impl ToolSource for McpManager {
    fn name(&self) -> &str {
        "mcp"
    }

    async fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.connect_all().await
    }
}
