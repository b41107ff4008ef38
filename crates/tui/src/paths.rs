//! The workspace's paths for `@` completion: a bounded walk that skips hidden entries and
//! build output, so a large workspace can't slow the start.

use std::path::Path;

/// Most paths collected.
const LIMIT: usize = 2000;

/// How deep the walk goes.
const DEPTH: usize = 4;

/// Directories never walked into.
const SKIPPED: &[&str] = &["target", "node_modules", "__pycache__", "venv"];

/// Paths under `root`, relative, directories ending in `/`, sorted.
pub fn workspace_paths(root: &Path) -> Vec<String> {
    let mut paths = Vec::new();
    walk(root, "", 0, &mut paths);
    paths.sort();
    paths
}

fn walk(directory: &Path, prefix: &str, depth: usize, paths: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(directory) else { return };
    for entry in entries.flatten() {
        if paths.len() >= LIMIT {
            return;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let is_directory = entry.file_type().is_ok_and(|kind| kind.is_dir());
        if is_directory {
            if SKIPPED.contains(&name.as_str()) {
                continue;
            }
            let path = format!("{prefix}{name}/");
            paths.push(path.clone());
            if depth + 1 < DEPTH {
                walk(&entry.path(), &path, depth + 1, paths);
            }
        } else {
            paths.push(format!("{prefix}{name}"));
        }
    }
}
