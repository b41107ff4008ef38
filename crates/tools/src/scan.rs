//! File-tree scanning shared by `grep` and `find`: the directories skipped, binary
//! sniffing and a sorted, symlink-free walk.

use std::path::{Path, PathBuf};

use walkdir::{DirEntry, WalkDir};

/// Directory names never descended into: version control, dependencies, build output.
pub(crate) const SKIPPED_DIRECTORIES: [&str; 3] = [".git", "node_modules", "target"];

/// How many leading bytes are sniffed for a NUL to call a file binary.
pub(crate) const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// True when `bytes` (a file's start) looks binary: a NUL within the sniffed prefix.
pub(crate) fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// Walks `root` in name order without following symlinks, skipping
/// [`SKIPPED_DIRECTORIES`] below the root (the root itself is walked even if so named).
pub(crate) fn walk(root: &Path) -> impl Iterator<Item = DirEntry> {
    WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|entry| entry.depth() == 0 || !is_skipped_directory(entry))
        .filter_map(Result::ok)
}

fn is_skipped_directory(entry: &DirEntry) -> bool {
    entry.file_type().is_dir() && entry.file_name().to_str().is_some_and(|name| SKIPPED_DIRECTORIES.contains(&name))
}

/// Shows paths relative to the workspace (as given or canonical) when inside it.
#[derive(Debug, Clone)]
pub(crate) struct Relativizer {
    canonical: Option<PathBuf>,
    raw: PathBuf,
}

impl Relativizer {
    /// Relativizes against `workspace`; canonicalizes it once up front.
    pub(crate) fn new(workspace: &Path) -> Self {
        Self { canonical: workspace.canonicalize().ok(), raw: workspace.to_path_buf() }
    }

    /// `path` relative to the workspace, `.` for the workspace itself, else in full.
    pub(crate) fn show(&self, path: &Path) -> String {
        let relative = self
            .canonical
            .as_deref()
            .and_then(|root| path.strip_prefix(root).ok())
            .or_else(|| path.strip_prefix(&self.raw).ok());
        match relative {
            Some(relative) if relative.as_os_str().is_empty() => ".".to_owned(),
            Some(relative) => relative.display().to_string(),
            None => path.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_in_prefix_means_binary() {
        assert!(looks_binary(b"ab\0cd"));
        assert!(!looks_binary(b"plain text"));
        let mut late = vec![b'a'; BINARY_SNIFF_BYTES];
        late.push(0);
        assert!(!looks_binary(&late));
    }

    #[test]
    fn walk_skips_vendored_and_build_directories() {
        let directory = tempfile::tempdir().unwrap();
        for path in ["src/a.rs", ".git/config", "node_modules/x/y.js", "target/debug/z"] {
            let full = directory.path().join(path);
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(full, "x").unwrap();
        }
        let files: Vec<_> = walk(directory.path())
            .filter(|entry| entry.file_type().is_file())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, ["a.rs"]);
    }
}
