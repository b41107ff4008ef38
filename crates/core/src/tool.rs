//! The `Tool` port and the registry the agent loop calls tools through.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use squidbot_types::ToolSpec;
use tokio_util::sync::CancellationToken;

use crate::BoxFuture;

/// What a tool knows about the call it serves.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace directory relative paths resolve against.
    pub workspace: PathBuf,
    /// The session the call belongs to.
    pub session_key: String,
    /// The context (user or group) the session belongs to; memory is scoped by it.
    pub context: String,
    /// Cancelled when the user stops the turn; long tools must watch it.
    pub cancel: CancellationToken,
}

/// A successful tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text shown to the model.
    pub content: String,
}

impl ToolOutput {
    /// Wraps text as a tool output.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: content.into() }
    }
}

/// Why a tool call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// A failure the model should see and can react to (bad path, no match, non-zero exit…).
    #[error("{0}")]
    RespondToModel(String),
    /// Something is broken beyond the model's reach (the sandbox can't start…); the turn ends.
    #[error("tool failure: {0}")]
    Fatal(String),
}

/// A capability the model can call.
pub trait Tool: Send + Sync {
    /// Name, description and argument schema shown to the model.
    fn spec(&self) -> ToolSpec;
    /// True when the tool changes state outside the conversation (files, processes).
    /// Calls to non-mutating tools may run concurrently.
    fn mutates(&self) -> bool;
    /// Runs the tool with already-parsed JSON arguments.
    fn call<'a>(
        &'a self,
        arguments: serde_json::Value,
        context: &'a ToolContext,
    ) -> impl Future<Output = Result<ToolOutput, ToolError>> + Send + 'a;
}

/// Object-safe companion of [`Tool`].
pub trait DynTool: Send + Sync {
    /// See [`Tool::spec`].
    fn spec(&self) -> ToolSpec;
    /// See [`Tool::mutates`].
    fn mutates(&self) -> bool;
    /// Boxed form of [`Tool::call`].
    fn call_boxed<'a>(
        &'a self,
        arguments: serde_json::Value,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}

impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        Tool::spec(self)
    }

    fn mutates(&self) -> bool {
        Tool::mutates(self)
    }

    fn call_boxed<'a>(
        &'a self,
        arguments: serde_json::Value,
        context: &'a ToolContext,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(self.call(arguments, context))
    }
}

/// Parses a tool's JSON arguments into its typed argument struct, with an error the
/// model can act on.
pub fn parse_arguments<T: DeserializeOwned>(arguments: serde_json::Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|error| ToolError::RespondToModel(format!("invalid arguments: {error}")))
}

/// The tools available to one agent, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn DynTool>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.tools.keys()).finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, replacing any tool of the same name.
    pub fn register(&mut self, tool: Arc<dyn DynTool>) {
        self.tools.insert(tool.spec().name, tool);
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.get(name)
    }

    /// Specs of every tool, sorted by name (stable for prompt caching).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.values().map(|tool| tool.spec()).collect()
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// True when there are no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// Tool names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }
}
