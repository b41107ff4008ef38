//! Command-line interface definition.

use clap::{Args, Parser, Subcommand};

/// squidbot: a self-hosted AI assistant.
///
/// Chat with it in the terminal (`squidbot agent`), or run the gateway (`squidbot
/// gateway`) to reach it from the web UI, Telegram, Discord, Slack, Matrix, email,
/// webhooks, and OpenClaw or OpenAI-API clients. It works with files and a sandboxed
/// shell, remembers what matters, and runs scheduled jobs and heartbeats.
#[derive(Debug, Parser)]
#[command(
    name = "squidbot",
    version,
    propagate_version = true,
    after_help = "Start with `squidbot onboard`, then `squidbot agent`. Files live in ~/.squidbot ($SQUIDBOT_HOME)."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Set up squidbot: pick a provider and model, write config.toml and the workspace
    /// files that shape the assistant.
    Onboard(OnboardArgs),
    /// Chat with the assistant in the terminal, or send one message with -m and print the
    /// reply.
    Agent(AgentArgs),
    /// The terminal client: talks to the running gateway over its WebSocket protocol
    /// (so it sees what channels and jobs do), or runs the assistant in this process
    /// when no gateway answers; the status line says which.
    #[cfg(feature = "tui")]
    Tui(TuiArgs),
    /// Run the assistant as a server until Ctrl-C: the web UI, the chat channels,
    /// scheduled jobs and heartbeats, the OpenClaw and OpenAI-compatible APIs, health and
    /// metrics, all on one port.
    Gateway(GatewayArgs),
    /// Show the model, providers and whether their keys are found, the workspace, the
    /// prompt size and memory.
    Status(JsonFlag),
    /// Check the installation (config, database, workspace) and report which sandbox
    /// runs commands and why; `--security` reviews credentials, file modes, the
    /// gateway, the sandbox, channels, skills and hooks instead.
    Doctor(DoctorFlags),
    /// Show, locate or check the configuration.
    Config {
        /// Which config action.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// List, read and archive conversations (sessions).
    Sessions {
        /// Which sessions action.
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// See and change what the assistant remembers: memories and memory.md.
    Memory {
        /// Which memory action.
        #[command(subcommand)]
        action: MemoryAction,
    },
    /// Run squidbot's housekeeping now: expire memories, archive idle sessions, delete old
    /// job runs, refresh the memory bulletin, embed memories that have no vector. The
    /// gateway and the REPL run it on their own.
    Maintenance,
    /// Send a message to an agent over the agent bus: through the running gateway, or
    /// into the target's trigger file when no gateway answers.
    Send(SendArgs),
    /// List or stop the assistant's sub-agents in the running gateway.
    Workers {
        /// Which workers action.
        #[command(subcommand)]
        action: WorkersAction,
    },
    /// Add, list, pause, resume, remove or run scheduled jobs; works whether or not a
    /// gateway runs.
    Cron {
        /// Which cron action.
        #[command(subcommand)]
        action: CronAction,
    },
    /// List, inspect and install skills.
    Skills {
        /// Which skills action.
        #[command(subcommand)]
        action: SkillsAction,
    },
    /// The people the assistant works for: users with a people's role, their linked chat
    /// accounts, gateway tokens and budgets; approved senders and pairing codes.
    Users {
        /// Which users action.
        #[command(subcommand)]
        action: UsersAction,
    },
    /// Tool calls waiting for an admin: list them, approve or deny one (as the owner).
    Approvals {
        /// Which approvals action.
        #[command(subcommand)]
        action: ApprovalsAction,
    },
    /// Tokens and cost of the model calls, per day, user or model.
    Usage(UsageArgs),
    /// The audit trail: tool calls, approvals, logins, user and role changes, skill
    /// installs, budget refusals; `audit verify` checks its keyed chain.
    Audit(AuditArgs),
    /// The secrets vault: credentials encrypted in the database, referenced from
    /// config.toml as "secret:NAME". Values are never arguments and never printed.
    Secrets {
        /// Which secrets action.
        #[command(subcommand)]
        action: SecretsAction,
    },
    /// The `[[hooks]]`: executables asked before tool calls (allow, rewrite or veto) and
    /// told after them; list them or try them on an input by hand.
    Hooks {
        /// Which hooks action.
        #[command(subcommand)]
        action: HooksAction,
    },
}

/// `squidbot hooks …`.
#[derive(Debug, Subcommand)]
pub enum HooksAction {
    /// List the hooks: event, command, tools, timeout and what a failure does.
    List,
    /// Run the hooks of EVENT that match the input's tool on FILE (the JSON a hook reads:
    /// `{"tool", "arguments", "session", "context", "user"}`) and print each decision.
    Test {
        /// `before_tool` or `after_tool`.
        event: String,
        /// The input, a JSON file.
        file: std::path::PathBuf,
    },
}

/// `squidbot secrets …`.
#[derive(Debug, Subcommand)]
pub enum SecretsAction {
    /// Store a secret (replacing its value if it exists). The value is read from a hidden
    /// prompt, or from standard input when that is not a terminal.
    Set {
        /// Letters, digits, `_`, `.` and `-`, at most 64; referenced as "secret:NAME".
        name: String,
    },
    /// List the secrets: names, when stored and when last used, never values.
    List(JsonFlag),
    /// Delete a secret.
    Rm {
        /// The secret's name.
        name: String,
    },
    /// Replace the value of an existing secret (read like `set`).
    Rotate {
        /// The secret's name.
        name: String,
    },
    /// Move every plaintext credential of config.toml into the vault and rewrite the file
    /// to reference them, keeping its comments and layout.
    ImportConfig,
}

/// `squidbot users …`.
#[derive(Debug, Subcommand)]
pub enum UsersAction {
    /// List the users (role, context, linked identities, whether they have a gateway
    /// token), then approved senders and the pairing codes waiting for approval.
    List(JsonFlag),
    /// Add a user with a people's role; their memory context is `user:<ID>`.
    Add {
        /// Lower-case letters, digits, `-` and `_`, starting with a letter or a digit.
        id: String,
        /// Their people's role: admin, user, child, guest or one of [user_roles.*]
        /// (people's roles, not the agent roles of [agents.*]).
        #[arg(long)]
        role: String,
        /// How they are called (default: the id).
        #[arg(long)]
        name: Option<String>,
    },
    /// Give a user another people's role.
    Role {
        /// The user's id.
        user: String,
        /// The new people's role.
        role: String,
    },
    /// Stop answering a user anywhere and refuse their gateway token.
    Disable {
        /// The user's id.
        user: String,
    },
    /// Answer a disabled user again.
    Enable {
        /// The user's id.
        user: String,
    },
    /// Show a user: role, identities, token, usage today and this month, budget limits.
    Show {
        /// The user's id.
        user: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Link a chat account to a user; what it said as a stranger is merged into theirs.
    Link {
        /// The user's id.
        user: String,
        /// `CHANNEL:ID`, the channel's name as in [channels.<name>] (or `gateway`).
        identity: String,
    },
    /// Unlink a chat account from whoever has it.
    Unlink {
        /// `CHANNEL:ID`.
        identity: String,
    },
    /// Make a new gateway token for a user (printed once; it replaces any earlier one).
    Token {
        /// The user's id.
        user: String,
    },
    /// Show or set a user's own budget (UTC days and months); limits not given stay.
    Budget(BudgetArgs),
    /// Let in the sender a pairing code was given to (the code works once, within an
    /// hour): as an approved sender, or linked to a user.
    Approve {
        /// The code the sender received, e.g. `K7MPQ2`.
        code: String,
        /// Link the sender to this existing user instead.
        #[arg(long = "as", value_name = "USER", conflicts_with = "new")]
        user: Option<String>,
        /// Create a user with this id for the sender and link them (needs --role).
        #[arg(long, value_name = "ID", requires = "role")]
        new: Option<String>,
        /// The people's role of the user --new creates.
        #[arg(long, requires = "new")]
        role: Option<String>,
    },
    /// Withdraw an approval.
    Revoke {
        /// `CHANNEL:SENDER_ID`, as `squidbot users list` shows it.
        sender: String,
    },
    /// Delete a user and their data: memories, sessions, memory.md, files, jobs, usage.
    /// The audit trail keeps that it happened.
    Purge {
        /// The user's id.
        user: String,
        /// Don't ask to type the id to confirm.
        #[arg(long)]
        yes: bool,
    },
}

/// `squidbot users budget`.
#[derive(Debug, Args)]
pub struct BudgetArgs {
    /// The user's id.
    pub user: String,
    /// Tokens (input, output and cache) per UTC day.
    #[arg(long)]
    pub daily_tokens: Option<u64>,
    /// Tokens per calendar month (UTC).
    #[arg(long)]
    pub monthly_tokens: Option<u64>,
    /// Cost per UTC day, in the price table's currency.
    #[arg(long)]
    pub daily_cost: Option<f64>,
    /// Cost per calendar month.
    #[arg(long)]
    pub monthly_cost: Option<f64>,
    /// Remove the user's own limits (their role's apply).
    #[arg(long, conflicts_with_all = ["daily_tokens", "monthly_tokens", "daily_cost", "monthly_cost"])]
    pub clear: bool,
}

/// `squidbot approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsAction {
    /// List the requests waiting for an admin, newest first.
    List {
        /// Also the decided, expired and abandoned ones.
        #[arg(long)]
        all: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Approve a request: the tool runs once, with exactly the arguments shown.
    Approve {
        /// The request's id (from `squidbot approvals list`).
        id: String,
    },
    /// Deny a request: the model gets the refusal.
    Deny {
        /// The request's id.
        id: String,
        /// Why (the model and the person see it).
        #[arg(long)]
        reason: Option<String>,
    },
}

/// How `squidbot usage` sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UsageBy {
    /// Per user (`context:<context>` for calls without one).
    User,
    /// Per `provider/model`.
    Model,
    /// Per UTC day.
    Day,
}

/// `squidbot usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Only this user's calls.
    #[arg(long)]
    pub user: Option<String>,
    /// How far back: a duration (`7d`, `24h`, `90m`) or a time (`2026-01-31`,
    /// `2026-01-31T09:00:00Z`).
    #[arg(long, default_value = "30d")]
    pub since: String,
    /// How to sum.
    #[arg(long, value_enum, default_value_t = UsageBy::Day)]
    pub by: UsageBy,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `squidbot audit`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// An audit helper instead of listing.
    #[command(subcommand)]
    pub action: Option<AuditAction>,
    /// Only rows whose actor is this (a user id, `owner`, `cli`, `system`, `stranger:<context>`).
    #[arg(long)]
    pub user: Option<String>,
    /// How far back: a duration (`1d`, `12h`) or a time (`2026-01-31`).
    #[arg(long)]
    pub since: Option<String>,
    /// At most this many rows (the newest), oldest first.
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `squidbot audit …` helpers.
#[derive(Debug, Subcommand)]
pub enum AuditAction {
    /// Check the keyed chain: every row unedited, none missing (the last ones included),
    /// and not recomputed without the key.
    Verify,
}

/// `squidbot workers …`.
#[derive(Debug, Subcommand)]
pub enum WorkersAction {
    /// List sub-agents: id, role, state, priority, age, session and last status line.
    List(JsonFlag),
    /// Stop a running sub-agent; its owner session gets the cancelled result.
    Cancel {
        /// The worker's id (from `squidbot workers list`).
        id: String,
    },
}

/// `squidbot cron …`.
#[derive(Debug, Subcommand)]
pub enum CronAction {
    /// List jobs: id, name, schedule, timezone, next run, last run, status, failures.
    List(JsonFlag),
    /// Add a job: a message the assistant runs on a schedule, its reply delivered to you.
    Add(CronAddArgs),
    /// Delete a job.
    Remove {
        /// The job's id (from `squidbot cron list`).
        id: String,
    },
    /// Stop a job from running until it is resumed.
    Pause {
        /// The job's id.
        id: String,
    },
    /// Schedule a paused job again, counting its next run from now.
    Resume {
        /// The job's id.
        id: String,
    },
    /// Run a job now, whatever its schedule: inside the running gateway (its reply goes
    /// where the job's replies go), or here when no gateway runs (the reply is printed).
    Run {
        /// The job's id.
        id: String,
    },
}

/// `squidbot cron add`.
#[derive(Debug, Args)]
pub struct CronAddArgs {
    /// A name for people.
    #[arg(long)]
    pub name: String,
    /// When: `"0 9 * * 1"` (cron), `"every 5m"`, `"at 2026-12-01T09:00:00Z"`,
    /// `"daily 09:00"` or `"weekly mon 09:00"`.
    #[arg(long)]
    pub schedule: String,
    /// The prompt the job's turn starts with.
    #[arg(long)]
    pub message: String,
    /// Where replies go (default: the preferred or last active channel).
    #[arg(long)]
    pub channel: Option<String>,
    /// IANA time zone the schedule's wall-clock times are read in (default `scheduler.timezone`,
    /// which is the machine's zone unless set).
    #[arg(long)]
    pub tz: Option<String>,
    /// Print the job as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `squidbot skills …`.
#[derive(Debug, Subcommand)]
pub enum SkillsAction {
    /// List skills: name, source, availability, missing requirements, location.
    List(JsonFlag),
    /// Print a skill's frontmatter summary and its body.
    Show {
        /// The skill's name.
        name: String,
    },
    /// Install a skill into $SQUIDBOT_HOME/skills from a local directory, a local git
    /// repository or a git URL (`file://`, `https://`, `ssh://`, `git://`, `git@host:path`).
    Install {
        /// Where the skill is.
        source: String,
        /// Replace an installed skill of the same name.
        #[arg(long)]
        force: bool,
    },
}

/// `squidbot memory …`.
#[derive(Debug, Subcommand)]
pub enum MemoryAction {
    /// List memories, most recently updated first.
    List {
        /// Only this type (fact, preference, decision, identity, event, observation, todo).
        #[arg(long = "type")]
        kind: Option<String>,
        /// Maximum rows.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Find memories for a query (full-text, plus vectors when memory.embedding_model is
    /// set).
    Search {
        /// What to look for.
        query: String,
        /// Maximum results.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Save a memory.
    Add {
        /// What to remember.
        text: String,
        /// Its type.
        #[arg(long = "type", default_value = "fact")]
        kind: String,
        /// 0 to 1.
        #[arg(long, default_value_t = 0.5)]
        importance: f32,
        /// Comma-separated tags.
        #[arg(long, value_delimiter = ',')]
        tags: Vec<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Import memories from a JSON Lines file: one object per line with `content` and
    /// optional `type`, `importance`, `tags`. Exact rewordings of stored memories merge.
    Import {
        /// The file (`-` reads standard input).
        file: String,
    },
    /// Delete a memory.
    Rm {
        /// Its id.
        id: i64,
    },
    /// Print memory.md.
    Doc {
        /// Print JSON with the path and the text.
        #[arg(long)]
        json: bool,
    },
}

/// `squidbot send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Who gets it: a role (assistant, worker, researcher, coder, memory, heartbeat, or
    /// one of [agents.*]), user, an alias such as main, or a running agent's name.
    pub target: String,
    /// The text; it arrives as `(USER #N): [TAG] text`.
    pub message: String,
    /// Priority tag: ack ([ACK REQUIRED]), urgent ([URGENT], interrupts the target's
    /// turn), fyi ([FYI]) or task ([TASK]).
    #[arg(long, value_parser = ["ack", "urgent", "fyi", "task", "normal"])]
    pub priority: Option<String>,
    /// Print the delivery result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `--json` for listings.
#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `squidbot doctor`'s flags.
#[derive(Debug, Args)]
pub struct DoctorFlags {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Review the installation's security instead: plaintext credentials, file modes,
    /// the gateway's bind, auth and TLS, the sandbox, open channels, skills from
    /// elsewhere, hooks that fail open. Exits 1 on a critical finding.
    #[arg(long)]
    pub security: bool,
}

/// `squidbot onboard`.
#[derive(Debug, Args)]
pub struct OnboardArgs {
    /// Take every answer from flags; never prompt.
    #[arg(long)]
    pub non_interactive: bool,
    /// Provider name (a preset such as openai, anthropic, openrouter, ollama, or your own name).
    #[arg(long)]
    pub provider: Option<String>,
    /// Wire protocol: openai or anthropic (defaults to the preset's).
    #[arg(long)]
    pub kind: Option<String>,
    /// Base URL of the API (defaults to the preset's).
    #[arg(long)]
    pub api_base: Option<String>,
    /// Environment variable holding the API key.
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Model id, `model` or `provider/model`.
    #[arg(long)]
    pub model: Option<String>,
    /// Replace an existing config.toml.
    #[arg(long)]
    pub force: bool,
}

/// `squidbot gateway`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GatewayArgs {
    /// A gateway helper instead of running the server.
    #[command(subcommand)]
    pub action: Option<GatewayAction>,
    /// Address to listen on (default: gateway.bind).
    #[arg(long)]
    pub bind: Option<String>,
    /// Port to listen on, 0 for any free one (default: gateway.port).
    #[arg(long)]
    pub port: Option<u16>,
}

/// `squidbot gateway …` helpers.
#[derive(Debug, Subcommand)]
pub enum GatewayAction {
    /// Read a password from standard input (one line) and print its argon2id hash for
    /// gateway.auth.password_hash.
    HashPassword,
}

/// `squidbot agent`.
#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Send one message, print the reply, exit.
    #[arg(short, long)]
    pub message: Option<String>,
    /// The conversation to continue (its session key).
    #[arg(long, default_value = "cli:local")]
    pub session: String,
    /// Model to use instead of the configured one, `provider/model`.
    #[arg(long)]
    pub model: Option<String>,
}

/// `squidbot tui`.
#[cfg(feature = "tui")]
#[derive(Debug, Args)]
pub struct TuiArgs {
    /// The conversation to open (its session key).
    #[arg(long, default_value = "cli:local")]
    pub session: String,
    /// Colours: `dark` (the default) or `light`.
    #[arg(long, default_value = "dark", value_parser = ["dark", "light"])]
    pub theme: String,
    /// Run the assistant in this process even when a gateway is running.
    #[arg(long)]
    pub local: bool,
    /// Model to use in process instead of the configured one, `provider/model`.
    #[arg(long)]
    pub model: Option<String>,
}

/// `squidbot config …`.
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Print the effective configuration (secrets redacted).
    Show,
    /// Print the config file path.
    Path,
    /// Check the configuration and report every problem.
    Validate,
}

/// `squidbot sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsAction {
    /// List sessions, most recently active first.
    List(JsonFlag),
    /// Print a session's active branch.
    Show {
        /// Session key.
        key: String,
        /// Print the entries as JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's whole tree; `*` marks the active branch, `<- leaf` its leaf.
    Tree {
        /// Session key.
        key: String,
        /// Print the rows as JSON (id, parent, kind, role, text, timestamp, depth,
        /// children, active, leaf).
        #[arg(long)]
        json: bool,
    },
    /// Fork a session at an entry: the next message continues from that entry on a new
    /// branch (with `--as`, a new session holding a copy of the branch up to it).
    Fork {
        /// Session key.
        key: String,
        /// The entry to continue from (an id from `sessions tree`).
        #[arg(long)]
        at: String,
        /// Copy the branch into a new session with this key instead.
        #[arg(long = "as", value_name = "NEWKEY")]
        new_key: Option<String>,
    },
    /// Make another branch active: the newest leaf under the entry (any entry of a branch
    /// names it).
    Switch {
        /// Session key.
        key: String,
        /// An entry of the branch to switch to.
        #[arg(long)]
        to: String,
    },
    /// Export a session (the whole tree, branch points marked) as Markdown or as one
    /// self-contained HTML page.
    Export {
        /// Session key.
        key: String,
        /// `html` or `md`.
        #[arg(long)]
        format: String,
        /// Write to this file instead of standard output.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<std::path::PathBuf>,
        /// Only the active branch.
        #[arg(long)]
        active: bool,
    },
    /// Search every session's messages and tool results for all the words of QUERY.
    Search {
        /// The words to look for.
        query: String,
        /// Most matches to print.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON (key, context, entryId, timestamp, kind, snippet).
        #[arg(long)]
        json: bool,
        /// Rebuild the search index from the session files first.
        #[arg(long)]
        reindex: bool,
    },
    /// Extract memories from a session and archive it (it resumes when used again).
    Archive {
        /// Session key.
        key: String,
    },
}
