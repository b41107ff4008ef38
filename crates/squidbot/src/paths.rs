//! Where squidbot keeps things: `$SQUIDBOT_HOME` (default `~/.squidbot`) and the
//! config path (`$SQUIDBOT_CONFIG` overrides it).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Resolved locations of one installation.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `$SQUIDBOT_HOME`.
    pub home: PathBuf,
    /// The config file.
    pub config: PathBuf,
}

impl Paths {
    /// Reads `SQUIDBOT_HOME` and `SQUIDBOT_CONFIG` from the environment.
    pub fn from_env() -> Result<Self> {
        let home = match std::env::var_os("SQUIDBOT_HOME").filter(|value| !value.is_empty()) {
            Some(home) => PathBuf::from(home),
            None => {
                let user_home = std::env::var_os("HOME")
                    .filter(|value| !value.is_empty())
                    .context("can't find the home directory: set HOME or SQUIDBOT_HOME")?;
                PathBuf::from(user_home).join(".squidbot")
            }
        };
        let config = match std::env::var_os("SQUIDBOT_CONFIG").filter(|value| !value.is_empty()) {
            Some(config) => PathBuf::from(config),
            None => home.join("config.toml"),
        };
        Ok(Self { home, config })
    }

    /// Directory of session files.
    pub fn sessions(&self) -> PathBuf {
        self.home.join("sessions")
    }

    /// The SQLite database.
    pub fn database(&self) -> PathBuf {
        self.home.join("squidbot.db")
    }

    /// Root of the per-context memory.md files.
    pub fn memory_documents(&self) -> PathBuf {
        self.home.join("memory")
    }

    /// REPL line history.
    pub fn repl_history(&self) -> PathBuf {
        self.home.join("history.txt")
    }

    /// The user's own skills, where `skills install` puts them.
    pub fn user_skills(&self) -> PathBuf {
        self.home.join("skills")
    }

    /// Where this version's bundled skills are written out for the file tools.
    pub fn bundled_skills(&self) -> PathBuf {
        self.home.join("bundled-skills").join(squidbot_skills::BUNDLED_VERSION)
    }

    /// Trigger files of the agent bus: messages waiting for a target that is not running.
    pub fn triggers(&self) -> std::path::PathBuf {
        self.home.join("triggers")
    }

    /// Log files kept beside the database (`skills-install.jsonl`).
    pub fn logs(&self) -> PathBuf {
        self.home.join("logs")
    }

    /// The workspace: `workspace.path` from config (with `~` expanded) or `$SQUIDBOT_HOME/workspace`.
    pub fn workspace(&self, configured: Option<&str>) -> PathBuf {
        match configured {
            Some(path) => expand_tilde(path),
            None => self.home.join("workspace"),
        }
    }
}

/// Expands a leading `~/` to `$HOME`.
pub fn expand_tilde(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}
