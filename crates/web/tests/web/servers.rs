//! Local fake servers and the tool-calling fixture the tests share.

use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use squidbot_core::tool::{DynTool, ToolContext, ToolError};
use tokio_util::sync::CancellationToken;

/// Serves `router` on a fresh 127.0.0.1 port until the test ends.
pub async fn serve(router: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    address
}

/// A tool context for calls that need none of it.
pub fn context() -> ToolContext {
    ToolContext {
        workspace: PathBuf::from("/nonexistent"),
        session_key: "test".to_owned(),
        context: "owner".to_owned(),
        cancel: CancellationToken::new(),
        correlation_id: String::new(),
        actor: None,
        skills_in_use: Default::default(),
    }
}

/// Calls `tool` and returns its text or its error message.
pub async fn call(tool: &dyn DynTool, arguments: serde_json::Value) -> Result<String, String> {
    match tool.call_boxed(arguments, &context()).await {
        Ok(output) => Ok(output.content),
        Err(ToolError::RespondToModel(message)) => Err(message),
        Err(ToolError::Fatal(message)) => panic!("fatal tool error: {message}"),
    }
}

/// A bound listener whose address is known before its router is built.
pub async fn bind() -> (tokio::net::TcpListener, SocketAddr) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    (listener, address)
}

/// Serves `router` on `listener` until the test ends.
pub fn start(listener: tokio::net::TcpListener, router: Router) {
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
}
