//! `[user_roles.<name>]`, `[approvals]`, `[audit]` and `[prices]`: what people may do,
//! what waits for an admin, what is kept of it and what model calls cost.
//!
//! People's roles (`[user_roles.*]`) are not the agent roles of `[agents.*]`: a person's
//! role limits what the agents may do for them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sandbox::SandboxBackend;

/// `[user_roles.<name>]`: one people's role. A built-in role's table changes only the
/// keys it sets; a new name is a custom role starting from nothing allowed but what it
/// sets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UserRoleConfig {
    /// Tools the agents may run for this role (names as the model sees them; `mcp` for
    /// every MCP tool, `<server>__*` for one server's); absent: every tool.
    pub tools: Option<Vec<String>>,
    /// MCP servers whose tools it may use; absent: every server.
    pub mcp_servers: Option<Vec<String>>,
    /// Sandbox backend for its commands; absent: `[sandbox].backend`.
    pub sandbox: Option<SandboxBackend>,
    /// May save, change and delete long-term memories.
    pub memory: Option<bool>,
    /// May add and change scheduled jobs.
    pub schedule: Option<bool>,
    /// May install skills.
    pub install_skills: Option<bool>,
    /// May have files sent to them (`send_file`).
    pub send_files: Option<bool>,
    /// May use the web (`web_fetch`, `web_search`).
    pub web: Option<bool>,
    /// Models (`provider/model`, `provider/*`) it may choose; absent: every model.
    pub models: Option<Vec<String>>,
    /// Agent roles (`[agents.<role>]`) its assistant may hand work to; absent: every one.
    pub agents: Option<Vec<String>>,
    /// Budget: tokens per day (UTC).
    pub budget_daily_tokens: Option<u64>,
    /// Budget: tokens per calendar month.
    pub budget_monthly_tokens: Option<u64>,
    /// Budget: cost per day.
    pub budget_daily_cost: Option<f64>,
    /// Budget: cost per calendar month.
    pub budget_monthly_cost: Option<f64>,
    /// Whether budgets apply to it (admins: not unless set to true).
    pub budget_applies: Option<bool>,
}

/// `[approvals]`: which tool calls wait for an admin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// Seconds a request waits before it counts as `on_timeout` says.
    pub timeout_secs: u64,
    /// What an unanswered request becomes: `deny` (default) or `approve`.
    pub on_timeout: ApprovalTimeout,
    /// `[[approvals.rules]]`; when absent, the defaults: `exec` for `user`, every
    /// changing tool for `child`, `cron_add` and `send_file` for everyone but admins.
    pub rules: Option<Vec<ApprovalRule>>,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self { timeout_secs: 600, on_timeout: ApprovalTimeout::Deny, rules: None }
    }
}

/// What an unanswered approval becomes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalTimeout {
    /// Refused.
    #[default]
    Deny,
    /// Run.
    Approve,
}

/// `[[approvals.rules]]`: calls that wait for an admin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApprovalRule {
    /// People's roles it applies to; empty: every role but `admin` (admins wait only
    /// when a rule names them).
    pub roles: Vec<String>,
    /// Tools: names, globs (`cron_*`, `files__*`), `@changing` (every tool that changes
    /// something) or `*`.
    pub tools: Vec<String>,
    /// Argument patterns: each key a top-level argument, each value a glob its text must
    /// match (`{ command = "git push*" }`); all must match.
    pub arguments: BTreeMap<String, String>,
}

/// `[audit]`: the audit trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Days rows are kept (0: forever). Pruning keeps the chain checkable: the first kept
    /// row's link is recorded.
    pub retention_days: u64,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self { retention_days: 365 }
    }
}

/// `[prices."provider/model"]`: what a million tokens cost (any currency, the same
/// throughout).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelPrice {
    /// Per million input tokens.
    pub input: f64,
    /// Per million output tokens.
    pub output: f64,
    /// Per million cache-read tokens (default: the input price).
    pub cache_read: Option<f64>,
    /// Per million cache-write tokens (default: the input price).
    pub cache_write: Option<f64>,
}
