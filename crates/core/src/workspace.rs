//! The `WorkspaceFiles` port: read access to bootstrap files and prompt overrides,
//! without core knowing where or how they are stored; each context's workspace and the
//! files it keeps beside it (`ContextWorkspaces`, `PromptFiles`); watched files
//! (HEARTBEAT.md) and the people's and groups' HEARTBEAT.md files.

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

/// The prompt file about the person a context belongs to.
pub const USER_FILE: &str = "USER.md";

/// The prompt file about the group a group chat's context belongs to.
pub const GROUP_FILE: &str = "GROUP.md";

/// Whom a context with a directory of its own belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextKind {
    /// A person (`user:<id>`): their `USER.md` goes into the prompt.
    Person,
    /// A group chat (`group:<id>`): its `GROUP.md` goes into the prompt.
    Group,
}

impl ContextKind {
    /// The kind of `context` (`user:…` or `group:…`); `None` for the owner and any other.
    pub fn of(context: &str) -> Option<Self> {
        if context.starts_with("user:") {
            Some(ContextKind::Person)
        } else if context.starts_with("group:") {
            Some(ContextKind::Group)
        } else {
            None
        }
    }

    /// The prompt file about whom the context belongs to: [`USER_FILE`] or [`GROUP_FILE`].
    pub fn profile_file(self) -> &'static str {
        match self {
            ContextKind::Person => USER_FILE,
            ContextKind::Group => GROUP_FILE,
        }
    }
}

/// The files a person's or group's context keeps beside its workspace, out of its file
/// tools' reach: who the context belongs to (`USER.md` or `GROUP.md`), which only an
/// admin changes.
#[derive(Clone)]
pub struct ContextProfile {
    /// A person's or a group's.
    pub kind: ContextKind,
    /// The context's directory (`users/<id>/`, `groups/<id>/`), read by file name.
    pub files: std::sync::Arc<dyn WorkspaceFiles>,
}

impl std::fmt::Debug for ContextProfile {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("ContextProfile").field("kind", &self.kind).finish_non_exhaustive()
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
    /// The person's or group's own files beside the workspace; `None`: the context keeps
    /// its `USER.md` in its workspace (the owner).
    pub profile: Option<ContextProfile>,
}

impl ContextWorkspace {
    /// The files its prompt is read from: the workspace's, except `USER.md` and
    /// `GROUP.md`, which come from the context's profile (see [`PromptFiles`]).
    pub fn prompt_files(&self) -> PromptFiles<'_> {
        PromptFiles { workspace: self.files.as_ref(), profile: self.profile.as_ref() }
    }
}

impl std::fmt::Debug for ContextWorkspace {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ContextWorkspace")
            .field("path", &self.path)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

/// A context's prompt files: everything from its workspace but who it belongs to. A
/// person's `USER.md` comes from their profile (never from a workspace, so never the
/// owner's), a group's `GROUP.md` from its profile; a group has no `USER.md`, and only a
/// group has a `GROUP.md`. Without a profile (the owner) `USER.md` is the workspace's.
#[derive(Clone, Copy)]
pub struct PromptFiles<'a> {
    workspace: &'a dyn WorkspaceFiles,
    profile: Option<&'a ContextProfile>,
}

impl<'a> PromptFiles<'a> {
    /// The prompt files of a context that keeps everything in `workspace` (the owner).
    pub fn of_workspace(workspace: &'a dyn WorkspaceFiles) -> Self {
        Self { workspace, profile: None }
    }
}

impl WorkspaceFiles for PromptFiles<'_> {
    fn read(&self, name: &str) -> Option<String> {
        if name != USER_FILE && name != GROUP_FILE {
            return self.workspace.read(name);
        }
        match self.profile {
            Some(profile) if profile.kind.profile_file() == name => profile.files.read(name),
            Some(_) => None,
            None if name == USER_FILE => self.workspace.read(name),
            None => None,
        }
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

/// The HEARTBEAT.md files of the people's and groups' contexts (`users/<id>/`,
/// `groups/<id>/`), each watched like the owner's.
pub trait ContextHeartbeatFiles: Send + Sync {
    /// The contexts whose directory holds a HEARTBEAT.md now (never the owner).
    fn contexts(&self) -> Result<Vec<String>, WatchedFileError>;
    /// The HEARTBEAT.md of `context`, which need not exist; `None` for a context that
    /// keeps none there (the owner, whose file is in the main workspace; an id that
    /// can't be a directory name).
    fn file(&self, context: &str) -> Option<std::sync::Arc<dyn WatchedFile>>;
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
