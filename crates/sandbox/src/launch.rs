//! What the gateway tells the helper: one JSON argument describing the command, the
//! backend and the resolved policy.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The hidden subcommand the helper answers to: `<program> __sandbox-exec <launch JSON>`.
pub const HELPER_SUBCOMMAND: &str = "__sandbox-exec";

/// A backend that actually confines (the `none` backend never reaches the helper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confiner {
    /// Landlock rules and a seccomp filter applied by the helper to itself.
    Landlock,
    /// The helper sets limits, then executes `bwrap`.
    Bubblewrap,
}

/// Per-process resource limits, applied with `setrlimit` before anything runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `RLIMIT_CPU`, seconds.
    pub cpu_secs: u64,
    /// `RLIMIT_DATA`, bytes.
    pub data_bytes: u64,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_bytes: u64,
    /// Processes of the sandbox; enforced by `RLIMIT_NPROC` (counted per user, so the
    /// helper adds the user's current count) when no process-count group is used.
    pub processes: Option<u64>,
}

/// Everything the helper needs; paths are absolute and already resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// Which backend.
    pub confiner: Confiner,
    /// The `sh -c` command line.
    pub command: String,
    /// A program and its arguments run directly instead of `command` through `sh -c`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Vec<String>>,
    /// The workspace: writable, and the working directory.
    pub workspace: PathBuf,
    /// Readable and executable paths.
    pub read_only: Vec<PathBuf>,
    /// Writable paths besides the workspace.
    pub read_write: Vec<PathBuf>,
    /// Paths that stay invisible even under a granted directory.
    pub hidden: Vec<PathBuf>,
    /// The private temporary directory (writable, `TMPDIR`) where the backend can't
    /// mount a private /tmp.
    pub private_tmp: Option<PathBuf>,
    /// True when the command may use the network.
    pub network: bool,
    /// Resource limits.
    pub limits: Limits,
    /// A process-count group (cgroup) directory to join first, when one is used.
    pub cgroup: Option<PathBuf>,
    /// The `bwrap` program (bubblewrap backend).
    pub bwrap: Option<PathBuf>,
    /// Print what was enforced on standard output before running the command (probes).
    pub report: bool,
    /// The landlock rules, worked out by the caller (which keeps the expansion of the
    /// shared roots from one command to the next); absent: the helper works them out
    /// from the paths above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rules: Option<Vec<(PathBuf, crate::grants::Access)>>,
}
