//! Which paths a command gets, and how: the granted roots, with hidden paths inside them
//! carved out. Shared by both backends so they hide the same things.

use std::path::{Path, PathBuf};

/// Access to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Access {
    /// Read and execute.
    ReadOnly,
    /// Read, execute, create, change and remove.
    ReadWrite,
    /// List the directory's names only: it contains a hidden path, so its entries are
    /// granted one by one instead.
    ListOnly,
}

/// True when `path` is strictly below `ancestor`.
pub fn strictly_below(path: &Path, ancestor: &Path) -> bool {
    path != ancestor && path.starts_with(ancestor)
}

/// Resolves symlinks of paths that exist, leaves the others as given.
pub fn canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().map(|path| path.canonicalize().unwrap_or_else(|_| path.clone())).collect()
}

/// The landlock rules: every existing root with its access, except that a root holding
/// a hidden path is replaced by its entries (recursively), the hidden ones and symlinks
/// left out. A root inside a hidden path is still granted: explicit grants (such as the
/// workspace inside the home directory) win; a read-only root that is itself hidden is not.
pub fn rules(read_only: &[PathBuf], read_write: &[PathBuf], hidden: &[PathBuf]) -> Vec<(PathBuf, Access)> {
    let hidden = canonical(hidden);
    let mut rules = Vec::new();
    for (roots, access) in [(read_only, Access::ReadOnly), (read_write, Access::ReadWrite)] {
        for root in roots {
            // Roots may be symlinks (`/bin` → `usr/bin`); rules apply to what they name.
            let Ok(root) = root.canonicalize() else {
                continue;
            };
            // Hiding a read-only path outright wins over granting it; writable paths
            // (the workspace) are always granted.
            if access == Access::ReadOnly && hidden.contains(&root) {
                continue;
            }
            expand(&root, access, &hidden, &mut rules);
        }
    }
    rules
}

fn expand(path: &Path, access: Access, hidden: &[PathBuf], rules: &mut Vec<(PathBuf, Access)>) {
    if !hidden.iter().any(|secret| strictly_below(secret, path)) {
        rules.push((path.to_path_buf(), access));
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    rules.push((path.to_path_buf(), Access::ListOnly));
    for entry in entries.flatten() {
        let child = entry.path();
        // A symlink is left out: what it points to is reachable through its own grant,
        // and following it here could grant a hidden target.
        let is_link = entry.file_type().map(|kind| kind.is_symlink()).unwrap_or(true);
        if is_link || hidden.contains(&child) {
            continue;
        }
        expand(&child, access, hidden, rules);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_entries_are_carved_out_of_their_root() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        for name in ["passwd", "shadow", "ssl/certs/ca.pem", "ssl/private/key.pem"] {
            let path = root.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "x").unwrap();
        }
        std::os::unix::fs::symlink(root.join("shadow"), root.join("link-to-shadow")).unwrap();
        let hidden = [root.join("shadow"), root.join("ssl/private")];
        let rules = rules(std::slice::from_ref(&root), &[], &hidden);
        let granted = |path: &Path| rules.iter().find(|(rule, _)| rule == path).map(|(_, access)| *access);
        assert_eq!(granted(&root), Some(Access::ListOnly));
        assert_eq!(granted(&root.join("passwd")), Some(Access::ReadOnly));
        assert_eq!(granted(&root.join("ssl")), Some(Access::ListOnly));
        assert_eq!(granted(&root.join("ssl/certs")), Some(Access::ReadOnly));
        assert_eq!(granted(&root.join("shadow")), None);
        assert_eq!(granted(&root.join("ssl/private")), None);
        assert_eq!(granted(&root.join("link-to-shadow")), None);
    }

    #[test]
    fn a_root_inside_a_hidden_path_is_still_granted() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        let workspace = home.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        let rules = rules(&[], std::slice::from_ref(&workspace), std::slice::from_ref(&home));
        assert_eq!(rules, [(workspace, Access::ReadWrite)]);
    }

    #[test]
    fn a_hidden_read_only_root_is_dropped() {
        let root = tempfile::tempdir().unwrap();
        let root = root.path().canonicalize().unwrap();
        assert!(rules(std::slice::from_ref(&root), &[], std::slice::from_ref(&root)).is_empty());
        let writable = rules(&[], std::slice::from_ref(&root), std::slice::from_ref(&root));
        assert_eq!(writable, [(root, Access::ReadWrite)]);
    }

    #[test]
    fn missing_roots_are_skipped() {
        assert!(rules(&[PathBuf::from("/surely/not/here")], &[], &[]).is_empty());
    }
}
