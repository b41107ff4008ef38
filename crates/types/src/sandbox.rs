//! The sandbox policy as data: `[sandbox]` in config.toml, what commands the model runs
//! may see, write, reach and consume.

use serde::{Deserialize, Serialize};

/// Which confinement runs commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxBackend {
    /// Landlock if it works on this machine, else bubblewrap, else none; probed once.
    #[default]
    Auto,
    /// Landlock filesystem and TCP rules plus a seccomp filter, applied by squidbot
    /// re-executing itself as a helper.
    Landlock,
    /// bubblewrap (`bwrap`): private mount, PID, network and IPC namespaces.
    Bubblewrap,
    /// No confinement: commands run on the host, only path-guarded and command-checked.
    None,
}

impl SandboxBackend {
    /// Name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Landlock => "landlock",
            Self::Bubblewrap => "bubblewrap",
            Self::None => "none",
        }
    }
}

/// Default `sandbox.read_only`: what programs need to run.
pub const DEFAULT_READ_ONLY: [&str; 15] = [
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// Paths hidden whatever the configuration says: credentials of the system and its
/// services that live under the default read-only directories. `$SQUIDBOT_HOME` and the
/// user's home directory are hidden as well (except what is granted inside them, such as
/// the workspace).
pub const ALWAYS_HIDDEN: [&str; 13] = [
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/security/opasswd",
    "/etc/credstore",
    "/etc/credstore.encrypted",
    "/etc/wireguard",
    "/etc/NetworkManager/system-connections",
];

/// `[sandbox]`: how commands (`exec`, skill scripts) are confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    /// `auto`, `landlock`, `bubblewrap` or `none`.
    pub backend: SandboxBackend,
    /// Let commands open network connections.
    pub network: bool,
    /// Paths commands may read and execute but not change (`~/` expanded). Replaces the
    /// default list; use `extra_read_only` to add to it.
    pub read_only: Vec<String>,
    /// More read-only paths on top of `read_only`.
    pub extra_read_only: Vec<String>,
    /// Writable paths besides the workspace and the private temporary directory.
    pub read_write: Vec<String>,
    /// More paths to hide on top of [`ALWAYS_HIDDEN`], `$SQUIDBOT_HOME` and the home directory.
    pub hidden: Vec<String>,
    /// CPU seconds each process may use.
    pub cpu_secs: u64,
    /// Memory (private writable data) each process may allocate, in MiB.
    pub memory_mb: u64,
    /// Processes one command may run at once.
    pub max_processes: u32,
    /// Output bytes a command may write before it is stopped.
    pub max_output_bytes: u64,
    /// Largest file a command may write, in MiB.
    pub max_file_mb: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            backend: SandboxBackend::Auto,
            network: false,
            read_only: DEFAULT_READ_ONLY.iter().map(|path| (*path).to_owned()).collect(),
            extra_read_only: Vec::new(),
            read_write: Vec::new(),
            hidden: Vec::new(),
            cpu_secs: 60,
            memory_mb: 1024,
            max_processes: 256,
            max_output_bytes: 16 * 1024 * 1024,
            max_file_mb: 1024,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_read_as_written() {
        for backend in
            [SandboxBackend::Auto, SandboxBackend::Landlock, SandboxBackend::Bubblewrap, SandboxBackend::None]
        {
            let text = serde_json::to_string(&backend).unwrap_or_default();
            assert_eq!(text, format!("\"{}\"", backend.as_str()));
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        let parsed: Result<SandboxConfig, _> = serde_json::from_str(r#"{"netwrk": true}"#);
        assert!(parsed.is_err());
        let parsed: SandboxConfig = serde_json::from_str(r#"{"network": true}"#).unwrap_or_default();
        assert!(parsed.network);
        assert_eq!(parsed.max_processes, 256);
    }
}
