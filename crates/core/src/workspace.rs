//! The `WorkspaceFiles` port: read access to bootstrap files and prompt overrides,
//! without core knowing where or how they are stored.

/// Read-only access to the agent's workspace documents.
pub trait WorkspaceFiles: Send + Sync {
    /// Contents of a workspace file such as `SOUL.md`, `None` when it does not exist
    /// or can't be read as text.
    fn read(&self, name: &str) -> Option<String>;
}

/// A workspace held in memory (tests, embedded defaults).
#[derive(Debug, Clone, Default)]
pub struct MemoryWorkspace {
    files: std::collections::BTreeMap<String, String>,
}

impl MemoryWorkspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file.
    pub fn with(mut self, name: &str, content: &str) -> Self {
        self.files.insert(name.to_owned(), content.to_owned());
        self
    }
}

impl WorkspaceFiles for MemoryWorkspace {
    fn read(&self, name: &str) -> Option<String> {
        self.files.get(name).cloned()
    }
}
