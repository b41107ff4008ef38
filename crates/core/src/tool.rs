//! The `Tool` port and the registry the agent loop calls tools through.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

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
    /// Id shared by everything one inbound user message causes (tool calls, delegated
    /// agents, log lines); empty when the call has no such origin.
    pub correlation_id: String,
    /// Who the turn acts for (its tools, approvals and budget follow from them); `None`
    /// where no people's policy applies.
    pub actor: Option<squidbot_types::people::Actor>,
    /// The skills the turn read the `SKILL.md` of so far, shared by all its tool calls;
    /// commands get their `addons.env` variables.
    pub skills_in_use: crate::skill_use::SkillsInUse,
}

/// A file a tool hands to the people of the conversation: chat channels send it with the
/// reply as an attachment; other front ends show where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedFile {
    /// Where the file is.
    pub path: PathBuf,
    /// The name it is sent under.
    pub name: String,
    /// Its media type, e.g. `application/pdf`.
    pub mime: String,
}

/// A successful tool result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text shown to the model.
    pub content: String,
    /// True when the agent's turn ends with this result instead of another model call
    /// (a sub-agent reporting its final outcome).
    pub ends_turn: bool,
    /// Files for the people of the conversation.
    pub files: Vec<SharedFile>,
}

impl ToolOutput {
    /// Wraps text as a tool output.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: content.into(), ends_turn: false, files: Vec::new() }
    }

    /// A result that ends the turn: `content` becomes the turn's reply.
    pub fn final_text(content: impl Into<String>) -> Self {
        Self { content: content.into(), ends_turn: true, files: Vec::new() }
    }

    /// Adds a file for the people of the conversation.
    pub fn with_file(mut self, file: SharedFile) -> Self {
        self.files.push(file);
        self
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

/// Decides by name which tools an agent may see.
pub type ToolFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// A source whose tools pass through a filter.
struct FilteredSource {
    inner: Arc<dyn DynToolSource>,
    allow: ToolFilter,
}

impl DynToolSource for FilteredSource {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn tools_boxed(&self) -> BoxFuture<'_, Vec<Arc<dyn DynTool>>> {
        Box::pin(async move {
            let mut tools = self.inner.tools_boxed().await;
            tools.retain(|tool| (self.allow)(&tool.spec().name));
            tools
        })
    }
}

/// Tools known only at run time: an MCP server lists its tools once it has started, so the
/// registry asks its sources at the start of every turn instead of at construction.
pub trait ToolSource: Send + Sync {
    /// Name for logs (`mcp`).
    fn name(&self) -> &str;
    /// The tools available now. May start what it needs on first use; never fails as a
    /// whole: a broken backend contributes fewer tools and logs why.
    fn tools(&self) -> impl Future<Output = Vec<Arc<dyn DynTool>>> + Send + '_;
}

/// Object-safe companion of [`ToolSource`].
pub trait DynToolSource: Send + Sync {
    /// See [`ToolSource::name`].
    fn name(&self) -> &str;
    /// Boxed form of [`ToolSource::tools`].
    fn tools_boxed(&self) -> BoxFuture<'_, Vec<Arc<dyn DynTool>>>;
}

impl<T: ToolSource> DynToolSource for T {
    fn name(&self) -> &str {
        ToolSource::name(self)
    }

    fn tools_boxed(&self) -> BoxFuture<'_, Vec<Arc<dyn DynTool>>> {
        Box::pin(self.tools())
    }
}

/// Parses a tool's JSON arguments into its typed argument struct, with an error the
/// model can act on.
pub fn parse_arguments<T: DeserializeOwned>(arguments: serde_json::Value) -> Result<T, ToolError> {
    serde_json::from_value(arguments).map_err(|error| ToolError::RespondToModel(format!("invalid arguments: {error}")))
}

/// The tools available to one agent, by name, plus sources of tools known only at run time.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn DynTool>>,
    sources: Vec<Arc<dyn DynToolSource>>,
    /// The specs of `tools` and their serialized size, built at the first call of
    /// [`ToolRegistry::specs`] and shared by every clone (each turn's registry is one):
    /// building them means generating JSON schemas, too much to repeat every turn. A
    /// tool's spec depends on its configuration, not on anything that changes while it
    /// is registered. Any change to `tools` starts a new cache.
    specs: Arc<OnceLock<SpecCache>>,
}

/// The specs of a registry's tools.
#[derive(Debug)]
struct SpecCache {
    specs: Arc<[ToolSpec]>,
    serialized_chars: usize,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sources: Vec<String> = self.sources.iter().map(|source| format!("<{}>", source.name())).collect();
        formatter.debug_list().entries(self.tools.keys()).entries(sources).finish()
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
        self.specs = Arc::default();
    }

    /// Adds a source whose tools join the registry at every [`ToolRegistry::resolve`].
    pub fn add_source(&mut self, source: Arc<dyn DynToolSource>) {
        self.sources.push(source);
    }

    /// True when some tools are known only at run time.
    pub fn has_sources(&self) -> bool {
        !self.sources.is_empty()
    }

    /// The registry for one turn: the fixed tools plus what every source offers now (the
    /// sources are asked concurrently). A source's tool never replaces a fixed one.
    pub async fn resolve(&self) -> ToolRegistry {
        if self.sources.is_empty() {
            return self.clone();
        }
        let offered = futures_util::future::join_all(self.sources.iter().map(|source| source.tools_boxed())).await;
        let mut resolved = ToolRegistry { tools: self.tools.clone(), sources: Vec::new(), specs: Arc::default() };
        for (source, tools) in self.sources.iter().zip(offered) {
            for tool in tools {
                let name = tool.spec().name;
                if resolved.tools.contains_key(&name) {
                    tracing::warn!(source = source.name(), tool = %name, "skipping a tool whose name is already taken");
                    continue;
                }
                resolved.tools.insert(name, tool);
            }
        }
        resolved
    }

    /// The tools `allow` accepts; a source's tools are filtered when they are resolved.
    pub fn filtered(&self, allow: ToolFilter) -> ToolRegistry {
        let tools = self
            .tools
            .iter()
            .filter(|(name, _)| allow(name))
            .map(|(name, tool)| (name.clone(), tool.clone()))
            .collect();
        let sources = self
            .sources
            .iter()
            .map(|source| {
                Arc::new(FilteredSource { inner: source.clone(), allow: allow.clone() }) as Arc<dyn DynToolSource>
            })
            .collect();
        ToolRegistry { tools, sources, specs: Arc::default() }
    }

    /// The fixed tools only, without the run-time sources (an agent whose allowlist names
    /// no MCP tool must not start MCP servers).
    pub fn without_sources(&self) -> ToolRegistry {
        ToolRegistry { tools: self.tools.clone(), sources: Vec::new(), specs: Arc::clone(&self.specs) }
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.get(name)
    }

    /// Specs of every tool, sorted by name (stable for prompt caching); tools of sources
    /// appear only in a [`ToolRegistry::resolve`]d registry.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        Arc::clone(&self.spec_cache().specs)
    }

    /// Characters the specs add to a request, as serialized JSON.
    pub fn specs_chars(&self) -> usize {
        self.spec_cache().serialized_chars
    }

    fn spec_cache(&self) -> &SpecCache {
        self.specs.get_or_init(|| {
            let specs: Arc<[ToolSpec]> = self.tools.values().map(|tool| tool.spec()).collect();
            let serialized_chars = specs.iter().map(ToolSpec::serialized_len).sum();
            SpecCache { specs, serialized_chars }
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Named(&'static str);

    impl Tool for Named {
        fn spec(&self) -> ToolSpec {
            ToolSpec { name: self.0.to_owned(), description: String::new(), parameters: serde_json::json!({}) }
        }

        fn mutates(&self) -> bool {
            false
        }

        async fn call(&self, _arguments: serde_json::Value, _context: &ToolContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::text(self.0))
        }
    }

    struct Source(Vec<&'static str>);

    impl ToolSource for Source {
        fn name(&self) -> &str {
            "test"
        }

        async fn tools(&self) -> Vec<Arc<dyn DynTool>> {
            self.0.iter().map(|name| Arc::new(Named(name)) as Arc<dyn DynTool>).collect()
        }
    }

    #[tokio::test]
    async fn sources_join_at_resolve_without_replacing_fixed_tools() {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Named("read_file")));
        registry.add_source(Arc::new(Source(vec!["files__read_file", "read_file"])));
        assert!(registry.has_sources());
        assert_eq!(registry.names().collect::<Vec<_>>(), ["read_file"]);
        let resolved = registry.resolve().await;
        assert_eq!(resolved.names().collect::<Vec<_>>(), ["files__read_file", "read_file"]);
        assert!(!resolved.has_sources());
    }

    #[tokio::test]
    async fn filtering_applies_to_fixed_tools_and_to_sources() {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Named("read_file")));
        registry.register(Arc::new(Named("exec")));
        registry.add_source(Arc::new(Source(vec!["files__read_text_file", "files__write"])));
        let allow: ToolFilter = Arc::new(|name: &str| name == "read_file" || name == "files__read_text_file");
        let filtered = registry.filtered(allow);
        assert_eq!(filtered.names().collect::<Vec<_>>(), ["read_file"]);
        let resolved = filtered.resolve().await;
        assert_eq!(resolved.names().collect::<Vec<_>>(), ["files__read_text_file", "read_file"]);
    }

    #[tokio::test]
    async fn specs_are_built_once_and_follow_every_change() {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Named("read_file")));
        let first = registry.specs();
        let turn = registry.resolve().await;
        assert!(Arc::ptr_eq(&first, &turn.specs()), "a turn's registry shares the built specs");
        assert_eq!(registry.specs_chars(), first[0].serialized_len());
        registry.register(Arc::new(Named("exec")));
        let names: Vec<String> = registry.specs().iter().map(|spec| spec.name.clone()).collect();
        assert_eq!(names, ["exec", "read_file"]);
        assert_eq!(registry.specs_chars(), registry.specs().iter().map(ToolSpec::serialized_len).sum::<usize>());
        let only_exec = registry.filtered(Arc::new(|name: &str| name == "exec"));
        assert_eq!(only_exec.specs().len(), 1);
        registry.add_source(Arc::new(Source(vec!["files__read"])));
        assert_eq!(registry.resolve().await.specs().len(), 3, "tools of sources are in the resolved specs");
        assert_eq!(registry.without_sources().specs().len(), 2);
    }
}
