//! From `[sandbox]` and the installation's paths to absolute path lists: what is
//! read-only, what is writable, what is hidden.

use std::path::PathBuf;

use squidbot_types::sandbox::{ALWAYS_HIDDEN, SandboxConfig};

/// Names under `$SQUIDBOT_HOME` that stay hidden even when a grant covers the home
/// directory (a workspace configured as the home itself).
const PRIVATE_NAMES: [&str; 12] = [
    "config.toml",
    "squidbot.db",
    "squidbot.db-wal",
    "squidbot.db-shm",
    "sessions",
    "memory",
    "logs",
    "triggers",
    "history.txt",
    "users",
    "groups",
    "secrets",
];

/// What the sandbox is built from: the policy plus the installation's private places.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// `[sandbox]`.
    pub config: SandboxConfig,
    /// `$SQUIDBOT_HOME`: hidden, with its config, database and sessions, except what is
    /// granted inside it (the workspace, skills).
    pub squidbot_home: PathBuf,
    /// More private files to hide, such as a config file outside the home directory.
    pub private_files: Vec<PathBuf>,
    /// The user's home directory (`$HOME`), hidden too.
    pub user_home: Option<PathBuf>,
    /// Read-only paths on top of the policy's, such as the skill directories.
    pub extra_read_only: Vec<PathBuf>,
    /// The program re-executed as the helper: the squidbot binary itself in production.
    pub helper: PathBuf,
}

/// The policy's paths, absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPaths {
    /// Readable and executable.
    pub read_only: Vec<PathBuf>,
    /// Writable besides the workspace.
    pub read_write: Vec<PathBuf>,
    /// Invisible, even under a granted directory.
    pub hidden: Vec<PathBuf>,
}

impl SandboxSettings {
    /// Resolves the configured paths: `~/` against the user's home, relative paths
    /// against `$SQUIDBOT_HOME`.
    pub fn resolve(&self) -> ResolvedPaths {
        let config = &self.config;
        let mut read_only: Vec<PathBuf> =
            config.read_only.iter().chain(&config.extra_read_only).map(|path| self.absolute(path)).collect();
        read_only.extend(self.extra_read_only.iter().cloned());
        let read_write = config.read_write.iter().map(|path| self.absolute(path)).collect();
        let mut hidden: Vec<PathBuf> = ALWAYS_HIDDEN.iter().map(PathBuf::from).collect();
        hidden.extend(config.hidden.iter().map(|path| self.absolute(path)));
        hidden.push(self.squidbot_home.clone());
        hidden.extend(PRIVATE_NAMES.iter().map(|name| self.squidbot_home.join(name)));
        hidden.extend(self.private_files.iter().cloned());
        hidden.extend(self.user_home.iter().cloned());
        ResolvedPaths { read_only, read_write, hidden }
    }

    fn absolute(&self, path: &str) -> PathBuf {
        let expanded = match (path.strip_prefix("~/"), &self.user_home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(path),
        };
        if expanded.is_absolute() { expanded } else { self.squidbot_home.join(expanded) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> SandboxSettings {
        SandboxSettings {
            config: SandboxConfig {
                extra_read_only: vec!["~/.cargo".to_owned(), "tools".to_owned()],
                hidden: vec!["/opt/secret".to_owned()],
                ..SandboxConfig::default()
            },
            squidbot_home: PathBuf::from("/home/me/.squidbot"),
            private_files: vec![PathBuf::from("/srv/squidbot.toml")],
            user_home: Some(PathBuf::from("/home/me")),
            extra_read_only: vec![PathBuf::from("/home/me/.squidbot/skills")],
            helper: PathBuf::from("/usr/bin/squidbot"),
        }
    }

    #[test]
    fn paths_are_expanded_and_private_places_hidden() {
        let resolved = settings().resolve();
        assert!(resolved.read_only.contains(&PathBuf::from("/usr")));
        assert!(resolved.read_only.contains(&PathBuf::from("/home/me/.cargo")));
        assert!(resolved.read_only.contains(&PathBuf::from("/home/me/.squidbot/tools")));
        assert!(resolved.read_only.contains(&PathBuf::from("/home/me/.squidbot/skills")));
        for hidden in ["/etc/shadow", "/opt/secret", "/home/me", "/home/me/.squidbot", "/srv/squidbot.toml"] {
            assert!(resolved.hidden.contains(&PathBuf::from(hidden)), "{hidden}");
        }
        assert!(resolved.hidden.contains(&PathBuf::from("/home/me/.squidbot/config.toml")));
    }
}
