//! The path guard every file-accepting tool (and exec's working directory) goes through:
//! resolves model-supplied paths against the workspace and refuses escapes.

use std::io;
use std::path::{Component, Path, PathBuf};

use squidbot_core::tool::ToolError;
use squidbot_types::config::ToolsConfig;

use crate::scan::Relativizer;

/// Resolves paths the model gives against the workspace, refusing NUL bytes always and,
/// when restricted, anything that would reach outside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathGuard {
    restrict_to_workspace: bool,
    /// Directories outside the workspace that may be read (skills), never written.
    read_roots: std::sync::Arc<[PathBuf]>,
}

impl PathGuard {
    /// A guard keeping every path inside the workspace.
    pub fn restricted_to_workspace() -> Self {
        Self { restrict_to_workspace: true, read_roots: std::sync::Arc::new([]) }
    }

    /// A guard that only refuses malformed paths (NUL bytes).
    pub fn unrestricted() -> Self {
        Self { restrict_to_workspace: false, read_roots: std::sync::Arc::new([]) }
    }

    /// The guard `[tools] restrict_to_workspace` asks for.
    pub fn from_config(config: &ToolsConfig) -> Self {
        if config.restrict_to_workspace { Self::restricted_to_workspace() } else { Self::unrestricted() }
    }

    /// Also lets reads (never writes) reach these directories, e.g. the skills'.
    /// Roots that don't exist yet (bundled skills are written on first use) count once
    /// they do.
    pub fn with_read_roots(mut self, roots: Vec<PathBuf>) -> Self {
        self.read_roots = roots.into();
        self
    }

    /// Like [`PathGuard::resolve`] for reading: a path inside one of the read roots is
    /// allowed too (relative paths still start at the workspace).
    pub fn resolve_for_reading(&self, raw: &str, workspace: &Path, action: &str) -> Result<PathBuf, ToolError> {
        let refusal = match self.resolve(raw, workspace, action) {
            Ok(path) => return Ok(path),
            Err(refusal) => refusal,
        };
        let requested = Path::new(raw);
        if self.read_roots.is_empty()
            || !requested.is_absolute()
            || requested.components().any(|component| component == Component::ParentDir)
        {
            return Err(refusal);
        }
        match requested.canonicalize() {
            Ok(canonical)
                if self
                    .read_roots
                    .iter()
                    .filter_map(|root| root.canonicalize().ok())
                    .any(|root| canonical.starts_with(root)) =>
            {
                Ok(canonical)
            }
            _ => Err(refusal),
        }
    }

    /// True when paths must stay inside the workspace.
    pub fn restricts_to_workspace(&self) -> bool {
        self.restrict_to_workspace
    }

    /// Resolves `raw` (relative to `workspace` unless absolute). `action` names what the
    /// caller is about to do and starts error messages: "can't read ../x: …".
    ///
    /// When restricted, the deepest existing ancestor of the path is canonicalized, so
    /// symlinks are followed and checked even when the final file does not exist yet; the
    /// returned path is that canonical ancestor plus the not-yet-existing rest.
    pub fn resolve(&self, raw: &str, workspace: &Path, action: &str) -> Result<PathBuf, ToolError> {
        let refuse = |reason: &str| ToolError::RespondToModel(format!("can't {action} {raw}: {reason}"));
        if raw.contains('\0') {
            return Err(refuse("path contains a NUL byte"));
        }
        let requested = Path::new(raw);
        let joined = if requested.is_absolute() { requested.to_path_buf() } else { workspace.join(requested) };
        if !self.restrict_to_workspace {
            return Ok(joined);
        }
        if requested.components().any(|component| component == Component::ParentDir) {
            return Err(refuse("path escapes the workspace (`..` is not allowed)"));
        }
        let canonical_workspace = canonical_workspace(workspace)?;
        let (existing, missing_tail) = deepest_existing_ancestor(&joined);
        let canonical_existing = match existing.canonicalize() {
            Ok(path) => path,
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                return Err(refuse("path goes through a dangling symlink"));
            }
            Err(error) => return Err(refuse(&error.to_string())),
        };
        if !canonical_existing.starts_with(&canonical_workspace) {
            return Err(refuse("path escapes the workspace"));
        }
        let mut resolved = canonical_existing;
        for component in missing_tail.iter().rev() {
            resolved.push(component);
        }
        Ok(resolved)
    }

    /// The workspace directory to run commands in, checked to exist.
    pub fn workspace_directory(&self, workspace: &Path) -> Result<PathBuf, ToolError> {
        if self.restrict_to_workspace {
            canonical_workspace(workspace)
        } else if workspace.is_dir() {
            Ok(workspace.to_path_buf())
        } else {
            Err(missing_workspace(workspace))
        }
    }

    /// How to show `path` to the model: relative to the workspace when inside it.
    pub fn display(&self, path: &Path, workspace: &Path) -> String {
        Relativizer::new(workspace).show(path)
    }
}

fn canonical_workspace(workspace: &Path) -> Result<PathBuf, ToolError> {
    workspace.canonicalize().map_err(|_| missing_workspace(workspace))
}

fn missing_workspace(workspace: &Path) -> ToolError {
    ToolError::Fatal(format!("can't use workspace {}: it does not exist or is not readable", workspace.display()))
}

/// Splits `path` into its deepest ancestor that exists (as a directory entry, possibly a
/// symlink) and the names below it that don't, innermost first.
fn deepest_existing_ancestor(path: &Path) -> (PathBuf, Vec<std::ffi::OsString>) {
    let mut existing = path.to_path_buf();
    let mut missing_tail = Vec::new();
    loop {
        if existing.symlink_metadata().is_ok() {
            return (existing, missing_tail);
        }
        match (existing.file_name().map(ToOwned::to_owned), existing.parent()) {
            (Some(name), Some(parent)) => {
                missing_tail.push(name);
                existing = parent.to_path_buf();
            }
            _ => return (existing, missing_tail),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<PathBuf, ToolError>) -> String {
        match result {
            Err(ToolError::RespondToModel(text)) => text,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn read_roots_allow_reading_but_not_writing_outside_the_workspace() {
        let workspace = tempfile::tempdir().unwrap();
        let skills = tempfile::tempdir().unwrap();
        std::fs::write(skills.path().join("SKILL.md"), "x").unwrap();
        let file = skills.path().join("SKILL.md");
        let file = file.to_str().unwrap();
        let guard = PathGuard::restricted_to_workspace().with_read_roots(vec![skills.path().to_path_buf()]);
        assert!(guard.resolve_for_reading(file, workspace.path(), "read").is_ok());
        message(guard.resolve(file, workspace.path(), "write"));
        let escape = format!("{}/../x", skills.path().display());
        message(guard.resolve_for_reading(&escape, workspace.path(), "read"));
        message(PathGuard::restricted_to_workspace().resolve_for_reading(file, workspace.path(), "read"));
    }

    #[test]
    fn relative_paths_resolve_inside_the_workspace() {
        let directory = tempfile::tempdir().unwrap();
        let guard = PathGuard::restricted_to_workspace();
        let resolved = guard.resolve("a/b.txt", directory.path(), "write").unwrap();
        assert_eq!(resolved, directory.path().canonicalize().unwrap().join("a/b.txt"));
    }

    #[test]
    fn parent_components_are_refused() {
        let directory = tempfile::tempdir().unwrap();
        let text = message(PathGuard::restricted_to_workspace().resolve("../x", directory.path(), "read"));
        assert!(text.starts_with("can't read ../x: path escapes the workspace"), "{text}");
    }

    #[test]
    fn absolute_paths_outside_are_refused_inside_allowed() {
        let directory = tempfile::tempdir().unwrap();
        let guard = PathGuard::restricted_to_workspace();
        message(guard.resolve("/etc/passwd", directory.path(), "read"));
        let inside = directory.path().join("new.txt");
        assert!(guard.resolve(inside.to_str().unwrap(), directory.path(), "write").is_ok());
    }

    #[test]
    fn nul_bytes_are_refused_even_unrestricted() {
        let directory = tempfile::tempdir().unwrap();
        let text = message(PathGuard::unrestricted().resolve("a\0b", directory.path(), "read"));
        assert!(text.contains("NUL"), "{text}");
    }

    #[test]
    fn unrestricted_allows_outside() {
        let directory = tempfile::tempdir().unwrap();
        assert!(PathGuard::unrestricted().resolve("../x", directory.path(), "read").is_ok());
    }

    #[test]
    fn symlink_escape_is_refused_for_new_files_too() {
        let workspace = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), workspace.path().join("link")).unwrap();
        let guard = PathGuard::restricted_to_workspace();
        message(guard.resolve("link/new/file.txt", workspace.path(), "write"));
        std::os::unix::fs::symlink("/nonexistent/target", workspace.path().join("dangling")).unwrap();
        let text = message(guard.resolve("dangling", workspace.path(), "write"));
        assert!(text.contains("dangling symlink"), "{text}");
    }

    #[test]
    fn display_is_relative_to_the_workspace() {
        let directory = tempfile::tempdir().unwrap();
        let guard = PathGuard::restricted_to_workspace();
        let resolved = guard.resolve("src/x.rs", directory.path(), "read").unwrap();
        assert_eq!(guard.display(&resolved, directory.path()), "src/x.rs");
    }
}
