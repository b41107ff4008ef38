//! `FsWorkspace`: the `WorkspaceFiles` port over a directory, refusing anything that
//! could read outside it.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use squidbot_core::workspace::WorkspaceFiles;

/// Largest workspace file read, in bytes: these files go into prompts.
pub const MAX_WORKSPACE_FILE_BYTES: u64 = 1024 * 1024;

/// Directory levels a workspace file name may have, `prompts/system.md` being two.
const MAX_NAME_DEPTH: usize = 2;

/// Workspace documents (`SOUL.md`, `prompts/system.md`, …) read from a directory.
#[derive(Debug, Clone)]
pub struct FsWorkspace {
    /// The workspace directory.
    root: PathBuf,
}

impl FsWorkspace {
    /// A workspace rooted at `root`; the directory need not exist yet.
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The workspace directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn try_read(&self, name: &str) -> Result<String, Refusal> {
        check_name(name)?;
        let root = self.root.canonicalize().map_err(Refusal::Root)?;
        let path = root.join(name).canonicalize().map_err(Refusal::Missing)?;
        // A symlink inside the workspace must not reach outside it.
        if !path.starts_with(&root) {
            return Err(Refusal::OutsideRoot);
        }
        // Checked before opening: opening a FIFO would block.
        if !fs::metadata(&path).map_err(Refusal::Missing)?.is_file() {
            return Err(Refusal::NotRegularFile);
        }
        let file = File::open(&path).map_err(Refusal::Unreadable)?;
        let size = file.metadata().map_err(Refusal::Unreadable)?.len();
        if size > MAX_WORKSPACE_FILE_BYTES {
            return Err(Refusal::TooLarge { size });
        }
        // The file may grow after the size check: read one byte past the limit to notice.
        let mut bytes = Vec::new();
        file.take(MAX_WORKSPACE_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(Refusal::Unreadable)?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > MAX_WORKSPACE_FILE_BYTES {
            return Err(Refusal::TooLarge { size: read });
        }
        String::from_utf8(bytes).map_err(|_| Refusal::NotUtf8)
    }
}

impl WorkspaceFiles for FsWorkspace {
    fn read(&self, name: &str) -> Option<String> {
        match self.try_read(name) {
            Ok(text) => Some(text),
            Err(reason) => {
                tracing::debug!(
                    root = %self.root.display(),
                    name,
                    %reason,
                    "not using workspace file"
                );
                None
            }
        }
    }
}

/// Accepts `FILE` and `DIRECTORY/FILE`: relative, no `.` or `..`, no root or prefix.
fn check_name(name: &str) -> Result<(), Refusal> {
    let mut depth = 0;
    for component in Path::new(name).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::Prefix(_) | Component::RootDir => return Err(Refusal::Absolute),
            Component::ParentDir | Component::CurDir => return Err(Refusal::NotPlain),
        }
    }
    if depth == 0 {
        return Err(Refusal::NotPlain);
    }
    if depth > MAX_NAME_DEPTH {
        return Err(Refusal::TooDeep);
    }
    Ok(())
}

/// Why a workspace file was not read.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("can't read an absolute path")]
    Absolute,
    #[error("can't read a name that is empty or contains `.` or `..`")]
    NotPlain,
    #[error("can't read a file nested more than one directory deep")]
    TooDeep,
    #[error("can't open the workspace directory: {0}")]
    Root(io::Error),
    #[error("can't find the file: {0}")]
    Missing(io::Error),
    #[error("can't read a file outside the workspace (a symlink leads out)")]
    OutsideRoot,
    #[error("can't read something that is not a regular file")]
    NotRegularFile,
    #[error("can't read a file of {size} bytes: the limit is {MAX_WORKSPACE_FILE_BYTES}")]
    TooLarge { size: u64 },
    #[error("can't read the file: {0}")]
    Unreadable(io::Error),
    #[error("can't read the file as text: it is not UTF-8")]
    NotUtf8,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace() -> (tempfile::TempDir, FsWorkspace) {
        let directory = tempfile::tempdir().unwrap();
        let workspace = FsWorkspace::new(directory.path().to_path_buf());
        (directory, workspace)
    }

    #[test]
    fn reads_top_level_and_one_directory_deep() {
        let (directory, workspace) = workspace();
        fs::write(directory.path().join("SOUL.md"), "be kind").unwrap();
        fs::create_dir(directory.path().join("prompts")).unwrap();
        fs::write(directory.path().join("prompts/system.md"), "system").unwrap();
        assert_eq!(workspace.read("SOUL.md").as_deref(), Some("be kind"));
        assert_eq!(workspace.read("prompts/system.md").as_deref(), Some("system"));
    }

    #[test]
    fn refuses_names_that_are_not_plain() {
        for name in ["", ".", "./SOUL.md", "../x", "a/../SOUL.md", "/etc/passwd"] {
            assert!(check_name(name).is_err(), "{name:?}");
        }
        assert!(matches!(check_name("a/b/c.md"), Err(Refusal::TooDeep)));
        assert!(check_name("prompts/system.md").is_ok());
    }

    #[test]
    fn refuses_missing_files_directories_and_non_utf8() {
        let (directory, workspace) = workspace();
        fs::create_dir(directory.path().join("prompts")).unwrap();
        fs::write(directory.path().join("binary.md"), [0xFF, 0xFE, 0x00]).unwrap();
        assert_eq!(workspace.read("missing.md"), None);
        assert_eq!(workspace.read("prompts"), None);
        assert_eq!(workspace.read("binary.md"), None);
    }

    #[test]
    fn reads_nothing_when_the_root_is_missing() {
        let workspace = FsWorkspace::new(PathBuf::from("/nonexistent/squidbot-workspace"));
        assert_eq!(workspace.read("SOUL.md"), None);
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_leading_outside() {
        let (directory, workspace) = workspace();
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), directory.path().join("SOUL.md")).unwrap();
        std::os::unix::fs::symlink(outside.path(), directory.path().join("prompts")).unwrap();
        assert_eq!(workspace.read("SOUL.md"), None);
        assert_eq!(workspace.read("prompts/secret"), None);
    }

    #[cfg(unix)]
    #[test]
    fn follows_symlinks_that_stay_inside() {
        let (directory, workspace) = workspace();
        fs::write(directory.path().join("real.md"), "real").unwrap();
        std::os::unix::fs::symlink("real.md", directory.path().join("SOUL.md")).unwrap();
        assert_eq!(workspace.read("SOUL.md").as_deref(), Some("real"));
    }
}
