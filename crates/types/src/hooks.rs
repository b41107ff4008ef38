//! The `[[hooks]]` schema and the events hooks attach to: executables run when a message
//! arrives, around turns, tool calls and replies, and when sessions, jobs and approvals
//! change.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Runs right before a tool call; may allow it, rewrite its arguments or veto it.
pub const BEFORE_TOOL: &str = "before_tool";

/// Runs after a tool call finished; observes only, never delays the reply.
pub const AFTER_TOOL: &str = "after_tool";

/// Default time a hook gets to answer, in milliseconds.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 2000;

/// Something a hook can be attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// A person's message arrived, before the turn records it. Before-hook: may rewrite
    /// the text or veto it (the person reads the reason).
    MessageReceived,
    /// A turn started (its message recorded). Observed.
    TurnStarted,
    /// A tool call is about to run. Before-hook: may rewrite the arguments or veto the
    /// call (the model reads the reason).
    BeforeTool,
    /// A tool call ended. Observed.
    AfterTool,
    /// The final reply is about to be stored and sent. Before-hook: may rewrite it or
    /// withhold it (the person reads the reason).
    BeforeReply,
    /// A turn ended, however it ended. Observed.
    TurnFinished,
    /// A conversation's first turn opened its session. Observed.
    SessionCreated,
    /// A scheduled job ran (or failed). Observed.
    JobRun,
    /// An approval was granted, denied or abandoned. Observed.
    ApprovalDecided,
}

impl HookEvent {
    /// Every event, in the order a turn meets them.
    pub const ALL: [HookEvent; 9] = [
        HookEvent::MessageReceived,
        HookEvent::SessionCreated,
        HookEvent::TurnStarted,
        HookEvent::BeforeTool,
        HookEvent::AfterTool,
        HookEvent::BeforeReply,
        HookEvent::TurnFinished,
        HookEvent::JobRun,
        HookEvent::ApprovalDecided,
    ];

    /// The name used in `[[hooks]] event = …` and in a hook's input.
    pub fn name(self) -> &'static str {
        match self {
            HookEvent::MessageReceived => "message_received",
            HookEvent::TurnStarted => "turn_started",
            HookEvent::BeforeTool => BEFORE_TOOL,
            HookEvent::AfterTool => AFTER_TOOL,
            HookEvent::BeforeReply => "before_reply",
            HookEvent::TurnFinished => "turn_finished",
            HookEvent::SessionCreated => "session_created",
            HookEvent::JobRun => "job_run",
            HookEvent::ApprovalDecided => "approval_decided",
        }
    }

    /// The event called `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|event| event.name() == name)
    }

    /// Whether hooks of this event decide (allow, rewrite, veto) and the caller waits for
    /// them; the others observe and are never waited for.
    pub fn decides(self) -> bool {
        match self {
            HookEvent::MessageReceived | HookEvent::BeforeTool | HookEvent::BeforeReply => true,
            HookEvent::TurnStarted
            | HookEvent::AfterTool
            | HookEvent::TurnFinished
            | HookEvent::SessionCreated
            | HookEvent::JobRun
            | HookEvent::ApprovalDecided => false,
        }
    }

    /// Whether the event concerns one tool (so `tools = [...]` filters it).
    pub fn is_about_a_tool(self) -> bool {
        matches!(self, HookEvent::BeforeTool | HookEvent::AfterTool)
    }

    /// The names of every event, for error messages.
    pub fn names() -> String {
        Self::ALL.iter().map(|event| event.name()).collect::<Vec<_>>().join(", ")
    }
}

impl fmt::Display for HookEvent {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.name())
    }
}

/// One `[[hooks]]` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    /// The event it runs on (a [`HookEvent`] name; kept as written so `config validate`
    /// can list an unknown one beside every other problem).
    pub event: String,
    /// Program and its arguments, run in the sandbox (not through a shell).
    pub command: Vec<String>,
    /// How long the hook may take, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Tools it applies to (globs allowed), for `before_tool` and `after_tool`; empty:
    /// every tool.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Let the message, call or reply through when the hook fails or times out (default:
    /// block it).
    #[serde(default)]
    pub fail_open: bool,
    /// Directories the hook may write to (a log, a state file); everything else outside
    /// its private working directory is read-only or hidden.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<std::path::PathBuf>,
}

fn default_timeout_ms() -> u64 {
    DEFAULT_HOOK_TIMEOUT_MS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_has_a_name_that_reads_back() {
        for event in HookEvent::ALL {
            assert_eq!(HookEvent::from_name(event.name()), Some(event));
            let written = serde_json::to_string(&event).unwrap();
            assert_eq!(written, format!("\"{}\"", event.name()));
        }
        assert_eq!(HookEvent::from_name("before_everything"), None);
    }
}
