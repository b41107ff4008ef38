//! The configuration schema (`config.toml`). Loading, env overrides and validation of
//! cross-field rules live in the binary; this module only describes the shape.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::secret::Secret;

mod bus;
mod channels;
mod people;
mod scheduler;
mod web;

pub use bus::{BusConfig, DEFAULT_ACK_TIMEOUT_MS, DEFAULT_STALE_AFTER_SECS};
pub use channels::{CHANNEL_KINDS, ChannelConfig};
pub use people::{ApprovalRule, ApprovalTimeout, ApprovalsConfig, AuditConfig, ModelPrice, UserRoleConfig};
pub use scheduler::{HeartbeatConfig, LOCAL_ZONE, SchedulerConfig};
pub use web::{
    DEFAULT_BRAVE_API_KEY_ENV, DEFAULT_BRAVE_URL, DEFAULT_DUCKDUCKGO_URL, DEFAULT_FETCH_MAX_BYTES,
    DEFAULT_WEB_TIMEOUT_SECS, SearchBackend, WebConfig,
};

/// The whole configuration file. Every section is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Model selection and request policy.
    pub llm: LlmConfig,
    /// Named provider endpoints, `[providers.<name>]`.
    pub providers: BTreeMap<String, ProviderConfig>,
    /// Per-role agent settings, `[agents.<role>]`.
    pub agents: BTreeMap<String, AgentConfig>,
    /// Tool behaviour.
    pub tools: ToolsConfig,
    /// Where the workspace lives.
    pub workspace: WorkspaceConfig,
    /// Logging output.
    pub logging: LoggingConfig,
    /// Long-term memory.
    pub memory: MemoryConfig,
    /// Session lifecycle.
    pub sessions: SessionsConfig,
    /// The gateway server.
    pub gateway: GatewayConfig,
    /// MCP servers whose tools the assistant may call.
    pub mcp: McpConfig,
    /// Skills: extra directories and whether the prompt lists them.
    pub skills: SkillsConfig,
    /// How commands the model runs are confined.
    pub sandbox: crate::sandbox::SandboxConfig,
    /// The agent bus.
    pub bus: BusConfig,
    /// Cron jobs, heartbeats and housekeeping jobs.
    pub scheduler: SchedulerConfig,
    /// Chat channels, `[channels.<name>]`.
    pub channels: BTreeMap<String, ChannelConfig>,
    /// People's roles, `[user_roles.<name>]` (not the agent roles of `[agents.*]`).
    pub user_roles: BTreeMap<String, UserRoleConfig>,
    /// Which tool calls wait for an admin.
    pub approvals: ApprovalsConfig,
    /// The audit trail.
    pub audit: AuditConfig,
    /// Prices per model, `[prices."provider/model"]`.
    pub prices: BTreeMap<String, ModelPrice>,
    /// The secrets vault that `"secret:NAME"` values are read from.
    pub vault: VaultConfig,
    /// Executables run before and after tool calls, `[[hooks]]`.
    pub hooks: Vec<crate::hooks::HookConfig>,
}

/// `[vault]`: where the key of the secrets vault comes from.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VaultConfig {
    /// `file` (the default): the key file `$SQUIDBOT_HOME/vault.key`; `keyring`: a key
    /// kept by the OS keyring (the Secret Service over D-Bus, the macOS Keychain);
    /// `passphrase`: a key derived from a passphrase asked on the terminal at start (or
    /// read from `SQUIDBOT_VAULT_PASSPHRASE`, which is used whenever it is set).
    pub key: VaultKeyMode,
}

/// Where the vault key comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VaultKeyMode {
    /// `$SQUIDBOT_HOME/vault.key`, made on first use.
    #[default]
    File,
    /// argon2id of a passphrase.
    Passphrase,
    /// The OS keyring, one item per `$SQUIDBOT_HOME`, made on first use.
    Keyring,
}

/// `[skills]`: SKILL.md skills (sources in precedence bundled < `extra_dirs` < user <
/// group < workspace).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillsConfig {
    /// False leaves the `<skills>` block and always-on skills out of the prompt.
    pub enabled: bool,
    /// More directories of skills, above the bundled ones and below the user's own;
    /// a later one wins a name clash with an earlier one.
    pub extra_dirs: Vec<std::path::PathBuf>,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self { enabled: true, extra_dirs: Vec::new() }
    }
}

/// `[mcp]`: Model Context Protocol servers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpConfig {
    /// `[mcp.servers.<name>]`; the name prefixes the server's tools (`<name>__<tool>`).
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// Default for `mcp.servers.<name>.timeout_secs`.
pub const DEFAULT_MCP_TIMEOUT_SECS: u64 = 60;

/// Default for `mcp.servers.<name>.startup_timeout_secs`.
pub const DEFAULT_MCP_STARTUP_TIMEOUT_SECS: u64 = 30;

/// `[mcp.servers.<name>]`: one server, either a child process speaking stdio (`command`)
/// or a streamable HTTP endpoint (`url`), never both.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerConfig {
    /// Program to run (stdio transport); an absolute path, or a name looked up on a fixed
    /// safe `PATH`.
    pub command: Option<String>,
    /// Arguments of `command`.
    pub args: Vec<String>,
    /// Environment variables for `command`, on top of a small safe set. Names that look
    /// like credentials or change how programs load (`LD_*`, `DYLD_*`, `PATH`) are refused.
    pub env: BTreeMap<String, String>,
    /// Endpoint of a streamable HTTP server, `http://` or `https://`.
    pub url: Option<String>,
    /// Extra HTTP headers sent to `url` (such as `Authorization`); never printed.
    pub headers: BTreeMap<String, Secret>,
    /// Tools of this server the model may use, by the server's own names; empty means all.
    pub allow: Vec<String>,
    /// Seconds one tool call may take before it is cancelled.
    pub timeout_secs: u64,
    /// Seconds starting the server (spawn, handshake, tool listing) may take.
    pub startup_timeout_secs: u64,
    /// False keeps the server configured but unused.
    pub enabled: bool,
}

impl Default for McpServerConfig {
    fn default() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            allow: Vec::new(),
            timeout_secs: DEFAULT_MCP_TIMEOUT_SECS,
            startup_timeout_secs: DEFAULT_MCP_STARTUP_TIMEOUT_SECS,
            enabled: true,
        }
    }
}

/// `[gateway]`: the long-running server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayConfig {
    /// Address to listen on.
    pub bind: String,
    /// Port to listen on (0 picks a free one).
    pub port: u16,
    /// `[gateway.auth]`.
    pub auth: GatewayAuthConfig,
    /// Host names (optionally `name:port`) requests may address besides the bound IP
    /// address (and `localhost` on loopback): a reverse proxy's public name, a LAN name.
    /// Any other `Host` is refused, which stops DNS rebinding.
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`https://chat.example.com`) whose pages may open the WebSocket
    /// besides the gateway's own; clients that send no `Origin` are not affected.
    pub allowed_origins: Vec<String>,
    /// Serve `/metrics` without credentials (for a scraper on a trusted network).
    pub metrics_open: bool,
    /// `[gateway.tls]`: HTTPS and WSS on the gateway's port; unset, plain HTTP.
    pub tls: GatewayTlsConfig,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        Self {
            bind: "127.0.0.1".into(),
            port: 18789,
            auth: GatewayAuthConfig::default(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            metrics_open: false,
            tls: GatewayTlsConfig::default(),
        }
    }
}

/// `[gateway.tls]`: the certificate and key the gateway serves TLS with, both or neither.
/// Relative paths are under `$SQUIDBOT_HOME`; `~/` is the user's home. The files are read
/// again when they change, so a renewed certificate needs no restart.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayTlsConfig {
    /// PEM file with the certificate chain, the gateway's own certificate first.
    pub cert: Option<String>,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<String>,
}

/// How gateway clients authenticate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GatewayAuthMode {
    /// A bearer token.
    #[default]
    Token,
    /// A password checked against an argon2id hash; clients send the password itself
    /// as the bearer credential.
    Password,
    /// No authentication; only allowed on a loopback address.
    None,
}

/// `[gateway.auth]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GatewayAuthConfig {
    /// `token`, `password` or `none`.
    pub mode: GatewayAuthMode,
    /// The token itself.
    pub token: Option<Secret>,
    /// Environment variable holding the token.
    pub token_env: Option<String>,
    /// The password's argon2id hash as a PHC string (`$argon2id$v=19$m=…`), as printed
    /// by `squidbot gateway hash-password`. A `Secret` so `config show` never prints it:
    /// the hash alone would let anyone guess offline.
    pub password_hash: Option<Secret>,
    /// Environment variable holding the PHC string instead.
    pub password_hash_env: Option<String>,
}

/// `[memory]`: long-term memory, recall and compaction.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryConfig {
    /// Embedding model, `provider/model` on an OpenAI-compatible `/embeddings` endpoint.
    /// Unset: recall uses full-text search only.
    pub embedding_model: Option<String>,
    /// Vector size to ask the embedding model for (models that support it).
    pub embedding_dimensions: Option<u32>,
    /// Seconds between memory bulletin refreshes.
    pub bulletin_interval_secs: u64,
    /// Compact a session in the background when its prompt passes this share of the window.
    pub compact_at: f32,
    /// Summarise aggressively past this share.
    pub aggressive_at: f32,
    /// Truncate the oldest turns without a model call past this share.
    pub emergency_at: f32,
    /// Characters of memory.md a context may hold.
    pub document_cap: usize,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self {
            embedding_model: None,
            embedding_dimensions: None,
            bulletin_interval_secs: 3600,
            compact_at: 0.80,
            aggressive_at: 0.85,
            emergency_at: 0.95,
            document_cap: crate::memory::DEFAULT_DOCUMENT_CAP,
        }
    }
}

/// `[sessions]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SessionsConfig {
    /// Idle time after which a session is archived (memories extracted first): `90s`, `30m`, `24h`, `7d`.
    pub archive_after: String,
    /// Sessions a long-running process (the gateway) keeps loaded in memory at most; the
    /// least recently used one nobody is using is dropped first (it loads again on use).
    pub max_open: usize,
    /// Idle time after which a loaded session nobody is using is dropped from memory.
    pub unload_after: String,
    /// Age after which the sessions of finished job and heartbeat runs are deleted (their
    /// replies stay in the session they were delivered to).
    pub keep_job_runs: String,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self { archive_after: "24h".into(), max_open: 256, unload_after: "15m".into(), keep_job_runs: "7d".into() }
    }
}

/// `[llm]`: which model answers and how requests behave.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Default model for every role, `provider/model`.
    pub model: String,
    /// Models tried in order when the default fails with a retriable error.
    pub fallbacks: Vec<String>,
    /// Retries per provider before moving down the fallback chain.
    pub max_retries: u32,
    /// Seconds to wait for a response to start (and between stream chunks).
    pub timeout_secs: u64,
    /// Maximum tokens the model may generate per request.
    pub max_tokens: u32,
    /// Sampling temperature; the provider default when unset.
    pub temperature: Option<f32>,
    /// Context window in tokens, used when the model's own size is unknown.
    pub context_window: u32,
}

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            fallbacks: Vec::new(),
            max_retries: 2,
            timeout_secs: 120,
            max_tokens: 4096,
            temperature: None,
            context_window: 128_000,
        }
    }
}

/// Wire protocol a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI chat completions (and every compatible server).
    Openai,
    /// Anthropic messages.
    Anthropic,
}

impl ProviderKind {
    /// Name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Openai => "openai",
            Self::Anthropic => "anthropic",
        }
    }
}

/// `[providers.<name>]`: one endpoint. Fields left out come from the preset of the same name.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    /// Wire protocol; defaults to the preset's, else `openai`.
    pub kind: Option<ProviderKind>,
    /// Base URL such as `http://127.0.0.1:8089/v1`.
    pub api_base: Option<String>,
    /// The API key itself.
    pub api_key: Option<Secret>,
    /// Name of an environment variable holding the key.
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request. Secrets: they often carry keys, so
    /// they redact themselves wherever the configuration is shown.
    pub headers: BTreeMap<String, Secret>,
    /// Context window in tokens for this provider's models.
    pub context_window: Option<u32>,
    /// Whether its models take images (photos people send through channels); defaults
    /// to the preset's (`openai` and `anthropic`: yes), else no.
    pub vision: Option<bool>,
}

/// `[agents.<role>]`: settings of one agent role. The built-in roles (`assistant`,
/// `worker`, `researcher`, `coder`, `memory`, `heartbeat`) exist without a section; any
/// other name defines a new role that starts from `worker`'s defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    /// Model for this role, `provider/model`; `llm.model` when unset.
    pub model: Option<String>,
    /// Model calls per user turn before the agent stops and says so.
    pub max_turns: Option<u32>,
    /// Workspace files put into the system prompt, in order. Unset: the assistant reads
    /// every bootstrap file, sub-agents only `AGENTS.md` and `ENVIRONMENT.md`.
    pub bootstrap: Option<Vec<String>>,
    /// A file (relative to the workspace, or absolute) appended to the system prompt.
    pub system_prompt_file: Option<String>,
    /// Text appended to the system prompt after `system_prompt_file`.
    pub system_prompt: Option<String>,
    /// Tools this role may call, by name (`mcp` stands for every MCP tool,
    /// `<server>__<tool>` for one). Unset: the role's defaults.
    pub tools: Option<Vec<String>>,
    /// Seconds a sub-agent may run before it is stopped and reported failed.
    pub timeout_secs: Option<u64>,
    /// How this role's commands are confined, instead of `[sandbox]`.
    pub sandbox: Option<RoleSandbox>,
    /// Assistant only: `delegate` (tool work goes to sub-agents) or `direct` (the
    /// assistant holds the tools itself, plus `spawn`).
    pub mode: Option<AssistantMode>,
    /// Assistant only: sub-agents one session may have running at once.
    pub max_workers: Option<usize>,
}

/// Default for `agents.<role>.max_turns`.
pub const DEFAULT_MAX_TURNS: u32 = 20;

/// Default for `agents.<role>.timeout_secs` of sub-agents.
pub const DEFAULT_AGENT_TIMEOUT_SECS: u64 = 300;

/// Default for `agents.assistant.max_workers`.
pub const DEFAULT_MAX_WORKERS: usize = 4;

/// How the assistant gets tool work done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AssistantMode {
    /// The assistant hands tool work to sub-agents with `delegate`; its own context holds
    /// conclusions, not tool traces.
    #[default]
    Delegate,
    /// Single-agent mode: the assistant calls the tools itself and may `spawn` a child.
    Direct,
}

impl AssistantMode {
    /// Name as written in config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delegate => "delegate",
            Self::Direct => "direct",
        }
    }
}

/// `agents.<role>.sandbox`: a backend name (`[sandbox]` with that backend) or a whole
/// inline `[sandbox]`-shaped table that replaces `[sandbox]` for the role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RoleSandbox {
    /// `sandbox = "none"`: the global policy with another backend.
    Backend(crate::sandbox::SandboxBackend),
    /// `[agents.<role>.sandbox]`: a policy of its own.
    Policy(crate::sandbox::SandboxConfig),
}

/// `[tools]`: tool behaviour.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolsConfig {
    /// Refuse file paths outside the workspace (`..`, symlinks, absolute paths elsewhere).
    pub restrict_to_workspace: bool,
    /// `[tools.exec]`.
    pub exec: ExecConfig,
    /// `[tools.web]`.
    pub web: WebConfig,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self { restrict_to_workspace: true, exec: ExecConfig::default(), web: WebConfig::default() }
    }
}

/// `[tools.exec]`: the shell tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecConfig {
    /// Default timeout in seconds.
    pub timeout_secs: u64,
    /// Output kept, in characters; the middle of longer output is omitted.
    pub max_output_chars: usize,
    /// Extra regular expressions; a command matching one is refused.
    pub blocked_patterns: Vec<String>,
    /// Environment variable names passed through to commands besides the safe defaults.
    pub pass_env: Vec<String>,
}

impl Default for ExecConfig {
    fn default() -> Self {
        Self { timeout_secs: 60, max_output_chars: 30_000, blocked_patterns: Vec::new(), pass_env: Vec::new() }
    }
}

/// `[workspace]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorkspaceConfig {
    /// Workspace directory; `$SQUIDBOT_HOME/workspace` when unset.
    pub path: Option<String>,
}

/// Log output format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[logging]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoggingConfig {
    /// Filter such as `warn` or `squidbot=debug` (`RUST_LOG` wins when set).
    pub level: String,
    /// `text` or `json`.
    pub format: LogFormat,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self { level: "warn".into(), format: LogFormat::Text }
    }
}
