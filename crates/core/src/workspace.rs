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

/// One context's workspace: where its tools resolve relative paths and the files its
/// prompt is read from.
#[derive(Clone)]
pub struct ContextWorkspace {
    /// The directory (tools' working directory and file root).
    pub path: std::path::PathBuf,
    /// Its prompt files.
    pub files: std::sync::Arc<dyn WorkspaceFiles>,
}

impl std::fmt::Debug for ContextWorkspace {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("ContextWorkspace").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Why a context's workspace can't be used now.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContextWorkspaceError {
    /// The context's id can't be a directory name.
    #[error("its id can't be a directory name: {0}")]
    InvalidId(String),
    /// Its directory, or a prompt file seeded into it, could not be written.
    #[error("can't write {path}: {reason}")]
    Io {
        /// What could not be written.
        path: std::path::PathBuf,
        /// Why.
        reason: String,
    },
}

/// Where each user and group context keeps its workspace, so one context's files (its
/// `USER.md`, its notes) are never in another's prompt or within reach of its tools.
pub trait ContextWorkspaces: Send + Sync {
    /// The workspace of `context`, or `None` for the agent's own (the owner's).
    /// An error means the context can't work now (its directory can't be made); the turn
    /// fails instead of falling back to the owner's workspace.
    fn workspace(&self, context: &str) -> Result<Option<ContextWorkspace>, ContextWorkspaceError>;
}

/// When a watched file last changed and how long it is: compared between looks, so an
/// unchanged file is not read again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    /// Its modification time (the Unix epoch when the system can't tell).
    pub modified: std::time::SystemTime,
    /// Its length in bytes.
    pub length: u64,
}

/// Why a watched file could not be looked at or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchedFileError {
    /// The file exists but could not be read.
    #[error("can't read {location}: {reason}")]
    Unreadable {
        /// Where the file is, for messages.
        location: String,
        /// Why.
        reason: String,
    },
}

/// One file of the workspace that the domain looks at again and again (HEARTBEAT.md):
/// a cheap look at whether it changed, then a read of its bytes when it did.
pub trait WatchedFile: Send + Sync {
    /// The file's stamp, `Ok(None)` when there is no such file.
    fn stamp(&self) -> Result<Option<FileStamp>, WatchedFileError>;
    /// The file's bytes, whatever their encoding.
    fn read(&self) -> Result<Vec<u8>, WatchedFileError>;
    /// Where the file is, for messages.
    fn location(&self) -> String;
}
