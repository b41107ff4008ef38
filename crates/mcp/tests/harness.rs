//! Where the npm servers and Node are, and helpers to build managers and call tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use squidbot_core::tool::{DynTool, ToolContext, ToolError};
use squidbot_mcp::{Backoff, McpManager, check};
use squidbot_types::config::{McpConfig, McpServerConfig};
use tokio_util::sync::CancellationToken;

/// The folder scripts/test installs the npm servers into.
pub fn mcp_dir() -> PathBuf {
    let directory = std::env::var("SQUIDBOT_TEST_MCP_DIR")
        .expect("SQUIDBOT_TEST_MCP_DIR must name the folder holding the npm MCP servers; scripts/test installs them");
    PathBuf::from(directory)
}

/// Entry script of an installed server package (`server-filesystem`, `server-everything`).
pub fn server_script(package: &str) -> String {
    let script = mcp_dir().join("node_modules/@modelcontextprotocol").join(package).join("dist/index.js");
    assert!(script.is_file(), "{} is missing; run scripts/test to install it", script.display());
    script.display().to_string()
}

/// Absolute path of `node` from `PATH`.
pub fn node() -> String {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|directory| directory.join("node"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from("/usr/bin/node"))
        .display()
        .to_string()
}

/// A stdio server run by Node.
pub fn node_server(script: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig {
        command: Some(node()),
        args: std::iter::once(script.to_owned()).chain(args.iter().map(|arg| (*arg).to_owned())).collect(),
        ..McpServerConfig::default()
    }
}

/// A manager for `servers`, with the default backoff unless one is given.
pub fn manager(servers: Vec<(&str, McpServerConfig)>, backoff: Option<Backoff>) -> McpManager {
    let config = McpConfig {
        servers: servers.into_iter().map(|(name, server)| (name.to_owned(), server)).collect::<BTreeMap<_, _>>(),
    };
    McpManager::new(check(&config).expect("valid config"), backoff.unwrap_or_default())
}

/// The tool named `name`, from a listing.
pub fn find<'a>(tools: &'a [Arc<dyn DynTool>], name: &str) -> &'a Arc<dyn DynTool> {
    tools.iter().find(|tool| tool.spec().name == name).unwrap_or_else(|| {
        let names: Vec<String> = tools.iter().map(|tool| tool.spec().name).collect();
        panic!("no tool {name} among {names:?}")
    })
}

/// Names of a listing, sorted.
pub fn names(tools: &[Arc<dyn DynTool>]) -> Vec<String> {
    let mut names: Vec<String> = tools.iter().map(|tool| tool.spec().name).collect();
    names.sort();
    names
}

/// A tool context in `workspace`.
pub fn context(workspace: &Path) -> ToolContext {
    ToolContext {
        workspace: workspace.to_owned(),
        session_key: "test".into(),
        context: "owner".into(),
        cancel: CancellationToken::new(),
        correlation_id: String::new(),
        actor: None,
        skills_in_use: Default::default(),
    }
}

/// Calls a tool, returning the model-facing text of its result or error.
pub async fn call(tool: &Arc<dyn DynTool>, arguments: serde_json::Value) -> Result<String, String> {
    let workspace = std::env::temp_dir();
    let result = tokio::time::timeout(Duration::from_secs(30), tool.call_boxed(arguments, &context(&workspace)))
        .await
        .expect("the call finished");
    match result {
        Ok(output) => Ok(output.content),
        Err(ToolError::RespondToModel(message)) => Err(message),
        Err(ToolError::Fatal(message)) => panic!("MCP tools never fail fatally: {message}"),
    }
}

/// A free loopback port (released right away for a server to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something accepts connections on `port`.
pub async fn wait_for_port(port: u16) {
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on port {port} after 20 s");
}
