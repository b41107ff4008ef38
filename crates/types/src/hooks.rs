//! The `[[hooks]]` schema: executables run before and after tool calls.

use serde::{Deserialize, Serialize};

/// Events a hook can be attached to today.
pub const HOOK_EVENTS: &[&str] = &[BEFORE_TOOL, AFTER_TOOL];

/// Runs right before a tool call; may allow it, rewrite its arguments or veto it.
pub const BEFORE_TOOL: &str = "before_tool";

/// Runs after a tool call finished; observes only, never delays the reply.
pub const AFTER_TOOL: &str = "after_tool";

/// Default time a hook gets to answer, in milliseconds.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 2000;

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// `before_tool` or `after_tool`.
    pub event: String,
    /// Program and its arguments, run in the sandbox (not through a shell).
    pub command: Vec<String>,
    /// How long the hook may take, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Tools it applies to (globs allowed); empty: every tool.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Let the call run when the hook fails or times out (default: block it).
    #[serde(default)]
    pub fail_open: bool,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_HOOK_TIMEOUT_MS
}
